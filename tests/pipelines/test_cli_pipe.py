"""``estflow ... | head``: a reader that leaves early ends the command quietly (status 141, as a
command killed by SIGPIPE), not with a BrokenPipeError traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ESTFLOW = str(Path(sys.executable).with_name("estflow"))


@pytest.mark.parametrize("argv", [["runs", "list"], ["migrate", "old.py"]])
def test_a_closed_pipe_is_no_traceback(argv, tmp_path):
    (tmp_path / "old.py").write_text("import tensorflow as tf\nc = tf.estimator.RunConfig()\n")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    try:
        done = subprocess.run([ESTFLOW, *argv], stdout=write, stderr=subprocess.PIPE,
                              cwd=tmp_path, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr
