"""``python -m estflow.pipelines``: the ``estflow`` command."""

import sys

from estflow.pipelines.cli import main

sys.exit(main())
