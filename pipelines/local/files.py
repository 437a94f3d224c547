"""Writing the local runner's own files (run records, cache entries, specs, logs) so that a
failed write (a full disk, a quota) leaves no half-written file behind and names its path.

A write's ENOSPC carries no file name (``write(2)`` knows only a descriptor); the runner's
failure message must say which file it could not write, so :func:`naming` adds it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["naming", "write_atomically"]


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """Within this block, an OSError that names no file names ``path``."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise type(err)(err.errno, err.strerror, str(path)) from err


def write_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` afterwards, or, when writing fails, what it held before: the
    text goes to ``<path>.<pid>.tmp`` first (deleted on failure), then replaces ``path``."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with naming(path):
            tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
