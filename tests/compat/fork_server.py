"""A process that imports TensorFlow and estflow's engine once, then runs each corpus program in a
fork of itself: ``harness.main`` in a child whose output goes to files, as
``python harness.py ...`` would run it, without paying TensorFlow's import (about 7 s of CPU on
this machine) per program.

    python fork_server.py          # started by test_corpus.py, one per seed (PYTHONHASHSEED)

Requests on stdin, one JSON object per line: ``{"argv": [...], "log": PATH}``. For each, one
line on stdout: ``{"pid": N}`` as the child starts, then ``{"pid": N, "status": S}`` when it
ends (S: the exit status, or minus the signal that ended it). Nothing TensorFlow computes runs
before the fork (importing builds no eager context and starts no TensorFlow thread), so a child
starts as a fresh interpreter would after its imports. A child that does not finish is killed by
the test, which then runs the program in a fresh interpreter instead (test_corpus.py).
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _warm() -> None:
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import tensorflow  # noqa: F401

    import estflow.estimator  # noqa: F401


def _child(argv: list[str], log: str) -> int:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    sys.path.insert(0, HERE)
    import harness

    return harness.main(argv)


def main() -> int:
    sys.path.insert(0, HERE)
    _warm()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request["argv"], request["log"])
            finally:
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"pid": pid, "status": code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
