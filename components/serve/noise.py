"""TensorFlow's start-up noise: the C++ logging that importing TensorFlow and loading models
writes to the process's stderr, left out of the command line's output (:func:`filtered`)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import TextIO

from estflow.components._runtime.quiet import is_noise

__all__ = ["filtered", "is_noise"]


@contextlib.contextmanager
def filtered(out: TextIO) -> Iterator[None]:
    """Send the process's stderr (file descriptor 2, where TensorFlow's C++ code writes) to a
    temporary file while TensorFlow is imported and the models load, then write what is not
    :func:`is_noise` to ``out`` (a copy of the real stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            kept = [line for line in text.splitlines() if line.strip() and not is_noise(line)]
            if kept:
                out.write("\n".join(kept) + "\n")
                out.flush()
