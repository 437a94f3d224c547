"""``python -m estflow.pipelines.cli``: the ``estflow`` command (as ``python -m estflow.pipelines``)."""

import sys

from estflow.pipelines.cli import main

sys.exit(main())
