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
    <step>/<key>.claim               held (shared) by every run that uses or will reuse the
                                     entry, from its fingerprint step to its end

The protocol a run follows for a step, :meth:`StepCache.reuse_or_run`: a whole entry is
reused; else, holding the key's lock, the step runs into ``<key>.partial`` and its entry is
committed. An entry appears whole or not at all: the step writes into ``<key>.partial``, then
``entry.json`` is written there and the directory renamed to ``<key>``. Entries are plain
directories: delete any of them (or the whole cache) at any time to make their steps run again.

A run that reuses an entry touches its ``entry.json`` (its modification time is when the entry
was last used). :meth:`StepCache.remove` removes what ``estflow runs prune`` finds unused,
unless a run holds its lock or claims it (:meth:`StepCache.claim`: a run starting claims every
entry it may reuse before it decides what to reuse, so prune cannot delete one from under it).
Locks and claims are ``flock`` locks: the kernel drops them when their process ends, so those
of a run that was killed are stale by themselves and hold nothing.

``entry.json`` lists every file of the entry with its size (``files``). An entry whose files
are no longer all there with those sizes (a shard deleted, a file truncated by a full disk) is
damaged: :meth:`StepCache.lookup` says what is wrong (:attr:`Entry.damage`) and the runner runs
the step again rather than give later steps part of their input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

from estflow.pipelines.local.files import write_atomically

__all__ = ["StepCache", "Entry", "Claim", "ENTRY_FILE", "PARTIAL_SUFFIX"]

ENTRY_FILE = "entry.json"
PARTIAL_SUFFIX = ".partial"


_DAMAGE_SHOWN = 3


@dataclasses.dataclass(frozen=True)
class Entry:
    """A completed cache entry: where its artifacts are and what its ``entry.json`` says
    (``run``: the run that made it, ``seconds``: how long that took, ``outputs``: artifact ->
    fingerprint, ``files``: relative path -> size). ``damage``: what differs from ``files``
    (empty: the entry is whole)."""

    path: Path
    info: dict
    damage: tuple[str, ...] = ()

    def describe_damage(self) -> str:
        """The damage in one line (the first few files, then how many more)."""
        shown = "; ".join(self.damage[:_DAMAGE_SHOWN])
        more = len(self.damage) - _DAMAGE_SHOWN
        return shown + (f"; and {more} more" if more > 0 else "")

    def artifact(self, name: str) -> Path:
        return self.path / name


class StepCache:
    """The cache under ``root`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike) -> None:
        # Absolute: the paths it hands out are given to step processes, kept in run records
        # and printed, and must not depend on the directory they are read from.
        self.root = Path(os.path.abspath(root))

    def _dir(self, step: str, key: str) -> Path:
        return self.root / step / key

    def lookup(self, step: str, key: str) -> Entry | None:
        """The completed entry of ``step`` keyed ``key`` (None: none), its files checked
        against its ``entry.json`` (:attr:`Entry.damage`)."""
        path = self._dir(step, key)
        try:
            info = json.loads((path / ENTRY_FILE).read_text())
        except (OSError, ValueError):
            return None
        return Entry(path, info, _damage(path, info.get("files")))

    def reusable(self, step: str, key: str) -> bool:
        """Whether ``step``/``key`` has a whole entry (one :meth:`reuse_or_run` would reuse)."""
        entry = self.lookup(step, key)
        return entry is not None and not entry.damage

    def reuse_or_run(self, step: str, key: str, run: Callable[[Path], dict], *,
                     force: bool = False, fresh: bool = True,
                     say: Callable[[str], None] = print) -> tuple[Entry, bool]:
        """The entry of ``step``/``key``, and whether it was reused.

        A whole entry is reused (and marked used). Else, holding the key's lock (a run
        computing the same key meanwhile is waited for, then its entry reused),
        ``run(partial)`` writes the step's outputs into the partial directory it is given and
        returns what ``entry.json`` records of how they were made (``run``, ``seconds``,
        ``outputs``...); the entry is committed from it.

        Args:
            force: run even when there is a whole entry (``--no-cache``).
            fresh: start the partial directory empty; else continue what a stopped run left
                there (``--resume``: training from its last checkpoint).
            say: told of a damaged entry (which is run again) and of waiting for another run.
        """
        entry = None if force else self._whole(step, key, say)
        if entry is None:
            with self.lock(step, key, waiting=lambda: say(
                    f"    {step}: another run is computing the same step; waiting")):
                entry = None if force else self._whole(step, key, say)
                if entry is None:
                    made = run(self.partial(step, key, fresh=fresh))
                    return self.commit(step, key, made), False
        self.touch(entry)
        return entry, True

    def _whole(self, step: str, key: str, say: Callable[[str], None]) -> Entry | None:
        """The entry of ``step``/``key`` when it is whole; a damaged one is named (what is
        wrong with it) and counts as none: the step runs again and replaces it."""
        entry = self.lookup(step, key)
        if entry is None or not entry.damage:
            return entry
        say(f"    {step}: the cached outputs of key {key[:12]} (made by run "
            f"{entry.info.get('run') or 'an earlier run'}) are damaged: "
            f"{entry.describe_damage()}. Running the step again")
        return None

    def touch(self, entry: Entry) -> None:
        """Mark ``entry`` as used now (``estflow runs prune`` keeps recently used entries)."""
        with contextlib.suppress(OSError):
            os.utime(entry.path / ENTRY_FILE)

    def entries(self) -> Iterator[tuple[str, str, Path]]:
        """Every entry, completed or partial: (step, key, directory)."""
        if not self.root.is_dir():
            return
        for step_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for path in sorted(p for p in step_dir.iterdir() if p.is_dir()):
                key = path.name.removesuffix(PARTIAL_SUFFIX)
                if ".old-" not in key:  # a replaced entry being deleted
                    yield step_dir.name, key, path

    def last_used(self, path: Path) -> float:
        """When the entry at ``path`` was last used or written (epoch seconds)."""
        try:
            return (path / ENTRY_FILE).stat().st_mtime
        except OSError:
            with contextlib.suppress(OSError):
                return max((p.stat().st_mtime for p in path.rglob("*")),
                           default=path.stat().st_mtime)
            return time.time()

    def remove(self, step: str, key: str, path: Path) -> bool:
        """Delete the entry at ``path`` unless a run holds its lock (computing the step) or
        claims it (using or about to reuse it); returns whether it was deleted."""
        base = self._dir(step, key)
        held = []
        try:
            for suffix in (".lock", ".claim"):
                fd = _flock(base.with_name(key + suffix), fcntl.LOCK_EX | fcntl.LOCK_NB)
                if fd is None:
                    return False
                held.append((fd, base.with_name(key + suffix)))
            shutil.rmtree(path, ignore_errors=True)
            if not any(p.exists() for p in (base, base.with_name(key + PARTIAL_SUFFIX))):
                for _, lock in held:  # unlinked while held: a waiter sees and opens anew
                    with contextlib.suppress(OSError):
                        lock.unlink()
        finally:
            for fd, _ in held:
                os.close(fd)
        return not path.exists()

    def claim(self, keys: Iterable[tuple[str, str]]) -> Claim:
        """Claim the entries of ``keys`` ((step, key) pairs; there or not yet) for this
        process until :meth:`Claim.release` (or its end): :meth:`remove` leaves them. Waits
        while a prune is removing one of them (it is gone afterwards)."""
        fds = []
        try:
            for step, key in sorted(set(keys)):
                path = self._dir(step, key).with_name(key + ".claim")
                path.parent.mkdir(parents=True, exist_ok=True)
                fds.append(_flock(path, fcntl.LOCK_SH))
        except BaseException:
            Claim(fds).release()
            raise
        return Claim(fds)

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
        fd = _flock(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if fd is None:
            if waiting is not None:
                waiting()
            fd = _flock(path, fcntl.LOCK_EX)
        try:
            yield
        finally:
            os.close(fd)

    def commit(self, step: str, key: str, info: dict) -> Entry:
        """Make the partial directory of ``step``/``key`` its completed entry (replacing an
        older one: ``--no-cache`` ran the step again)."""
        partial = self._dir(step, key).with_name(key + PARTIAL_SUFFIX)
        info = {**info, "step": step, "key": key,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": _files(partial)}
        write_atomically(partial / ENTRY_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")
        final = self._dir(step, key)
        if final.exists():
            retired = final.with_name(f"{key}.old-{os.getpid()}")
            os.replace(final, retired)
            shutil.rmtree(retired, ignore_errors=True)
        os.replace(partial, final)
        return Entry(final, info)


class Claim:
    """Entries claimed by :meth:`StepCache.claim`, until :meth:`release` (a context manager
    too)."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _flock(path: Path, operation: int) -> int | None:
    """A descriptor of ``path`` (created if missing) holding the ``flock`` ``operation``;
    None when it has ``LOCK_NB`` and another process holds a conflicting lock. A file deleted
    or replaced meanwhile (:meth:`StepCache.remove` deletes the locks of what it removed) is
    opened anew: a lock on a deleted file would hold nothing."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, operation)
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except OSError as err:
            os.close(fd)
            if isinstance(err, FileNotFoundError):
                continue
            if err.errno in (errno.EAGAIN, errno.EACCES):
                return None
            raise
        if same:
            return fd
        os.close(fd)


def _files(folder: Path) -> dict[str, int]:
    """Every regular file under ``folder`` (``entry.json`` aside): relative path -> size."""
    found = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent, name)
            relative = path.relative_to(folder).as_posix()
            if relative.startswith(ENTRY_FILE):  # entry.json, or the one being written
                continue
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found[relative] = info.st_size
    return found


def _damage(folder: Path, files: dict[str, int] | None) -> tuple[str, ...]:
    """What under ``folder`` differs from ``files`` (None: an entry written before entries
    listed their files; nothing to check)."""
    if not isinstance(files, dict):
        return ()
    damage = []
    for relative, size in sorted(files.items()):
        try:
            now = (folder / relative).stat().st_size
        except OSError:
            damage.append(f"{relative} is missing ({size} bytes when cached)")
            continue
        if now != size:
            damage.append(f"{relative} has {now} bytes ({size} when cached)")
    return tuple(damage)

