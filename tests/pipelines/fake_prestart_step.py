""":mod:`tests.pipelines.fake_step`, also recording how its process was started: it writes its
process's command line (``/proc/self/cmdline``, NUL-separated), its ``sys.argv``, pid and parent's pid to
``$FAKE_CMDLINE_DIR/<name>.json`` before doing what fake_step does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.pipelines import fake_step

if __name__ == "__main__":
    argv = sys.argv[1:]
    name = argv[argv.index("--name") + 1]
    folder = Path(os.environ["FAKE_CMDLINE_DIR"])
    (folder / f"{name}.json").write_text(json.dumps({
        "cmdline": Path("/proc/self/cmdline").read_bytes().decode().split("\0"),
        "argv": sys.argv, "pid": os.getpid(), "ppid": os.getppid(),
        "main": sys.modules["__main__"].__name__}))
    sys.exit(fake_step.main(argv))
