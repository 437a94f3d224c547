"""``python -m tests.pipelines.new_step``: the step's entry point."""

import sys

from tests.pipelines.new_step import main

sys.exit(main())
