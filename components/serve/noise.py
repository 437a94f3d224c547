"""TensorFlow's start-up noise: the C++ logging that importing TensorFlow and loading models
writes to the process's stderr, left out of the command line's output (:func:`filtered`)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import TextIO

__all__ = ["filtered", "is_noise"]

_LOG_RECORD = re.compile(r"([IWEF])\d{4} [\d:.]+\s+\d+ (\S+?)\.cc:\d+\] ")
_NOISE_LINES = ("WARNING: All log messages before absl::InitializeLog() is called are written "
                "to STDERR", "To enable the following instructions: ")


def is_noise(line: str) -> bool:
    """TensorFlow's C++ start-up logging (absl format): INFO and WARNING records, and the
    errors of probing CUDA on a machine without a usable GPU. Errors otherwise are kept."""
    if line.startswith(_NOISE_LINES):
        return True
    record = _LOG_RECORD.match(line)
    if record is None:
        return False
    level, source = record.groups()
    return level in "IW" or (level == "E" and source.startswith(("cuda_", "cudart_", "gpu_")))


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
