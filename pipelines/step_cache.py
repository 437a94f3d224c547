"""The local step cache: completed step outputs, content-addressed by the step's cache key
(:mod:`estflow.dsl.fingerprints`).

Layout, under ``<ESTFLOW_HOME>/.cache/`` (default ``estflow_runs/.cache/``)::

    <step>/<key>/<artifact>/...      a completed entry: the step's output artifacts
    <step>/<key>/entry.json          written before the entry is renamed into place
    <step>/<key>.partial/<artifact>/ the step running, or stopped (failed, Ctrl-C, killed):
                                     ``estflow run --resume`` continues there (training from
                                     its last checkpoint); a new run starts it afresh
    <step>/<key>.lock                held while the step runs (a second run with the same key
                                     waits, then reuses what the first one made)

An entry appears whole or not at all: the step writes into ``<key>.partial``, then
``entry.json`` is written there and the directory renamed to ``<key>``. Entries are plain
directories: delete any of them (or the whole cache) at any time to make their steps run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

__all__ = ["StepCache", "Entry", "ENTRY_FILE", "PARTIAL_SUFFIX"]

ENTRY_FILE = "entry.json"
PARTIAL_SUFFIX = ".partial"


@dataclasses.dataclass(frozen=True)
class Entry:
    """A completed cache entry: where its artifacts are and what its ``entry.json`` says
    (``run``: the run that made it, ``seconds``: how long that took, ``outputs``: artifact ->
    fingerprint)."""

    path: Path
    info: dict

    def artifact(self, name: str) -> Path:
        return self.path / name


class StepCache:
    """The cache under ``root`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def _dir(self, step: str, key: str) -> Path:
        return self.root / step / key

    def lookup(self, step: str, key: str) -> Entry | None:
        """The completed entry of ``step`` keyed ``key`` (None: none)."""
        path = self._dir(step, key)
        try:
            info = json.loads((path / ENTRY_FILE).read_text())
        except (OSError, ValueError):
            return None
        return Entry(path, info)

    def partial(self, step: str, key: str, *, fresh: bool) -> Path:
        """The directory ``step`` writes into while it runs; ``fresh``: emptied first (else
        what a stopped run left is kept, for ``--resume``)."""
        path = self._dir(step, key).with_name(key + PARTIAL_SUFFIX)
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.contextmanager
    def lock(self, step: str, key: str,
             waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the lock of ``step``/``key`` (``waiting`` is called once if another run holds
        it, before this one blocks)."""
        path = self._dir(step, key).with_name(key + ".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if waiting is not None:
                    waiting()
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def commit(self, step: str, key: str, info: dict) -> Entry:
        """Make the partial directory of ``step``/``key`` its completed entry (replacing an
        older one: ``--no-cache`` ran the step again)."""
        partial = self._dir(step, key).with_name(key + PARTIAL_SUFFIX)
        info = {**info, "step": step, "key": key,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = partial / (ENTRY_FILE + ".tmp")
        tmp.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, partial / ENTRY_FILE)
        final = self._dir(step, key)
        if final.exists():
            retired = final.with_name(f"{key}.old-{os.getpid()}")
            os.replace(final, retired)
            shutil.rmtree(retired, ignore_errors=True)
        os.replace(partial, final)
        return Entry(final, info)
