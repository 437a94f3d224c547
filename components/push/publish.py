"""Publishing a version: a new integer-named version of a push destination, never
overwriting one, pruning the oldest beyond ``keep_versions``; :func:`publish_once` does it
under the destination's guard (:mod:`estflow.components.push.guard`), so that a model racing
itself is published once."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from estflow.components._io.model_repo import LocalDestination
from estflow.components._io.model_repo import PushDestination
from estflow.components.push.guard import PushGuard
from estflow.components.push.guard import guard_for

__all__ = ["Published", "push_to", "push_directory", "list_versions", "publish_once"]


@dataclasses.dataclass(frozen=True)
class Published:
    """A pushed version: its number, its path, and the old versions deleted to make room."""

    version: int
    path: str
    removed: tuple[int, ...] = ()


def list_versions(model_base: Path) -> list[int]:
    """The published (integer-named) versions under a local ``model_base``, ascending."""
    return LocalDestination(model_base).list_versions()


def push_to(destination: PushDestination, export_dir: str | Path, *, version: int | None = None,
            keep_versions: int | None = None) -> Published:
    """Publish ``export_dir`` as a new version of ``destination``.

    Args:
        version: the version number; default: the current Unix time, or one more than the
            newest existing version if that is larger (versions only grow). A default version
            taken meanwhile by a concurrent push (two pushes in the same second) is not an
            error: the next free number is used.
        keep_versions: delete all but the newest N versions after a successful push.

    Raises:
        FileExistsError: an explicit ``version`` is already published.
        FileNotFoundError: ``export_dir`` holds no ``saved_model.pb``.
    """
    existing = destination.list_versions()
    take_next = version is None
    if version is None:
        version = max(int(time.time()), existing[-1] + 1 if existing else 0)
    elif version in existing:
        raise FileExistsError(f"version {version} already exists at "
                              f"{destination.model_base}/{version}; versions are never "
                              "overwritten")
    path = destination.publish(str(export_dir), version, take_next=take_next)
    version = int(path.rstrip("/").rsplit("/", 1)[-1])
    removed = []
    if keep_versions:
        for old in destination.list_versions()[:-keep_versions]:
            if old != version:
                destination.remove_version(old)
                removed.append(old)
    return Published(version, path, tuple(removed))


def push_directory(export_dir: Path, model_base: Path, *, version: int | None = None,
                   keep_versions: int | None = None) -> Path:
    """Push to a local ``model_base`` (see :func:`push_to`); return the new version's path."""
    published = push_to(LocalDestination(model_base), export_dir, version=version,
                        keep_versions=keep_versions)
    return Path(published.path)


def publish_once(destination: PushDestination, export_dir: str | Path, *,
                 fingerprint: str | None, keep_versions: int | None = None,
                 guard: PushGuard | None = None,
                 progress: Callable[[str], None] | None = None) -> Published | dict:
    """Publish ``export_dir`` unless the newest model at ``destination`` already has
    ``fingerprint``, deciding and publishing under ``guard`` (default: the destination's).

    Returns:
        The :class:`Published` version, or the served one's ``{"version", "path",
        "fingerprint", "pending"}`` (``pending``: another push is still publishing it).
    """
    guard = guard or guard_for(destination, progress)
    with guard.claim(fingerprint) as claim:
        if claim.served is not None:
            return claim.served
        return push_to(destination, export_dir, version=claim.version,
                       keep_versions=keep_versions)
