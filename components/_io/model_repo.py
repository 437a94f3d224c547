"""Push destinations: the model base path ``<base_path>/<model_name>/`` where a push publishes
integer-named versions (TF Serving's layout) and where the evaluate step finds the baseline.

Two implementations of :class:`PushDestination`:

* :class:`LocalDestination`, a local directory: a version is copied under a temporary
  dot-name, fsynced, then renamed into place with one ``os.rename``, which is atomic on one
  filesystem: the version appears whole or not at all.
* ``gs://`` and ``s3://``: :class:`~estflow.components._io.bucket_repo.BucketDestination`,
  through google-cloud-storage and boto3 (:mod:`estflow.components._io.storage`), without
  TensorFlow or tensorflow-io; the same staging scheme as below.
* :class:`GFileDestination`, any other ``tf.io.gfile`` URL (``hdfs://``, ``ram://`` in
  tests). Object stores have no atomic rename (TF renames a "directory" one
  object at a time), so a version is copied under ``.tmp-<version>-<uuid>/``, checked against
  the export's file list, then renamed file by file with ``saved_model.pb`` last. TF Serving
  (and ``estflow serve``) ignore non-integer names, so nothing is visible while the copy runs;
  during the renames the version directory exists without ``saved_model.pb``, which servers
  cannot load, so they keep serving the previous version until the push completes. The final
  listing is verified against the export.

Neither ever overwrites a version. A push that picks its version number (``take_next``) and
finds it taken by a concurrent push takes the next free one, without copying again (locally
the rename is the atomic claim; on object stores, which have no atomic claim, the push step
claims its number first, :mod:`estflow.components.push.guard`). Staging
directories left by a killed push are removed by a later push once nothing in them changed for
an hour (:data:`STALE_STAGING_SECONDS`).

A local version's files are created by this process, not copied with their modes: their
permissions follow the umask (and default ACLs) like any new file, so a server running as
another user can read a version when the umask lets it (the train step's export is private:
its temporary directory is 0700).
"""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import time
from pathlib import Path
from typing import Protocol

from estflow.components._io import storage
from estflow.components._io.staging import STAGING_PREFIX
from estflow.components._io.staging import check_listing
from estflow.components._io.staging import staging_name

__all__ = ["PushDestination", "LocalDestination", "GFileDestination", "destination_for",
           "latest_servable", "version_dirs", "served_checkpoint_dir", "STAGING_PREFIX",
           "STALE_STAGING_SECONDS", "SERVED_CHECKPOINT", "read_file", "staging_name"]

STALE_STAGING_SECONDS = 3600.0
_SAVED_MODEL = "saved_model.pb"
SERVED_CHECKPOINT = "assets.extra/estflow_checkpoint"
"""Where a version (and the export it was pushed from) carries the training checkpoint of its
model, when the pipeline declares ``TrainSpec.warm_start``: the next run's warm-start source,
with the Estimator's own variable names and optimizer state. TF Serving reads nothing under
``assets.extra`` but its warmup file, so servers ignore it."""
_MAX_CLAIMS = 1000  # versions tried after a taken one, with take_next


class PushDestination(Protocol):
    """Where versions of one model live (``model_base`` = ``<base_path>/<model_name>``)."""

    model_base: str

    def list_versions(self) -> list[int]:
        """Every integer-named version directory, ascending (complete or not)."""

    def is_complete(self, version: int) -> bool:
        """Whether the version holds a ``saved_model.pb`` (what a server can load)."""

    def publish(self, export_dir: str, version: int, *, take_next: bool = False) -> str:
        """Copy ``export_dir`` to version ``version``; return its path.

        With ``take_next``, a version that is taken (by a concurrent push) is not an error:
        the next free number is used (the returned path says which).

        Raises:
            FileExistsError: the version exists and not ``take_next`` (versions are never
                overwritten).
        """

    def remove_version(self, version: int) -> None:
        """Delete a version (keep_versions pruning)."""

    def clean_staging(self, older_than_seconds: float) -> list[str]:
        """Delete staging directories unchanged for longer than that; return their paths."""


def version_dirs(model_base: Path) -> dict[int, Path]:
    """The integer-named version directories of a local ``model_base`` (TF Serving ignores
    any other name: staging directories, files)."""
    if not model_base.is_dir():
        return {}
    return {int(p.name): p for p in model_base.iterdir()
            if p.name.isascii() and p.name.isdigit() and p.is_dir()}


def destination_for(base_path: str, model_name: str) -> PushDestination:
    """The destination for a :class:`~estflow.dsl.PushTarget`'s base path: a bucket
    (``gs://``, ``s3://``) goes through its store's client, another URL through
    ``tf.io.gfile``, anything else is a local directory, resolved against the current
    directory."""
    scheme, sep, _rest = base_path.partition("://")
    if storage.is_remote(base_path):
        from estflow.components._io.bucket_repo import BucketDestination  # noqa: PLC0415

        return BucketDestination(f"{base_path.rstrip('/')}/{model_name}")
    if sep and scheme != "file":
        return GFileDestination(f"{base_path.rstrip('/')}/{model_name}")
    local = base_path[len("file://"):] if sep else base_path
    return LocalDestination(Path(local).resolve() / model_name)


def latest_servable(destination: PushDestination) -> int | None:
    """The version a server serves: the highest one that holds a SavedModel (None if none)."""
    for version in reversed(destination.list_versions()):
        if destination.is_complete(version):
            return version
    return None


def served_checkpoint_dir(destination: PushDestination, version: int) -> str:
    """The directory of ``version``'s training checkpoint (:data:`SERVED_CHECKPOINT`)."""
    return f"{destination.model_base}/{version}/{SERVED_CHECKPOINT}"


class LocalDestination:
    """A local model base path; publishes with an atomic ``os.rename``."""

    def __init__(self, model_base: str | Path) -> None:
        self.path = Path(model_base)
        self.model_base = str(self.path)

    def list_versions(self) -> list[int]:
        return sorted(version_dirs(self.path))

    def is_complete(self, version: int) -> bool:
        return (self.path / str(version) / _SAVED_MODEL).is_file()

    def publish(self, export_dir: str, version: int, *, take_next: bool = False) -> str:
        if not (Path(export_dir) / _SAVED_MODEL).is_file():
            raise FileNotFoundError(f"no SavedModel to push: {export_dir}/{_SAVED_MODEL} is "
                                    "missing")
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / str(version)).exists() and not take_next:
            raise FileExistsError(f"version {version} already exists at "
                                  f"{self.path / str(version)}; versions are never overwritten")
        staging = self.path / staging_name(version)
        try:
            _copy_tree(Path(export_dir), staging)
            _fsync_tree(staging)
            final = self._claim(staging, version, take_next)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(self.path)
        return str(final)

    def _claim(self, staging: Path, version: int, take_next: bool) -> Path:
        """Rename ``staging`` to the version (the next free one with ``take_next``)."""
        for _ in range(_MAX_CLAIMS):
            final = self.path / str(version)
            try:
                os.rename(staging, final)  # atomic; fails if `final` exists (and is not empty)
                return final
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
                if not take_next:
                    raise FileExistsError(f"version {version} appeared at {final} during the "
                                          "push; versions are never overwritten") from e
            version += 1
        raise FileExistsError(f"no free version in {_MAX_CLAIMS} tries after {version} under "
                              f"{self.path}")

    def remove_version(self, version: int) -> None:
        try:
            shutil.rmtree(self.path / str(version))
        except FileNotFoundError:  # a concurrent push pruned it first
            pass

    def clean_staging(self, older_than_seconds: float) -> list[str]:
        if not self.path.is_dir():
            return []
        removed = []
        now = time.time()
        for child in sorted(self.path.iterdir()):
            if child.name.startswith(STAGING_PREFIX) and child.is_dir():
                if now - _newest_mtime(child) > older_than_seconds:
                    shutil.rmtree(child, ignore_errors=True)
                    removed.append(str(child))
        return removed


def _newest_mtime(root: Path) -> float:
    newest = root.stat().st_mtime
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime)
            except OSError:
                continue
    return newest


def _copy_tree(source: Path, target: Path) -> None:
    """Copy a directory's files (contents, not modes: new files and directories get the
    permissions the umask gives them); symlinks are copied as what they point to."""
    os.mkdir(target)
    for folder, dirs, files in os.walk(source, followlinks=True):
        here = target / os.path.relpath(folder, source)
        for name in dirs:
            os.mkdir(here / name)
        for name in files:
            shutil.copyfile(os.path.join(folder, name), here / name)


def _fsync_dir(folder: str | Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(folder)


class GFileDestination:
    """A model base path behind ``tf.io.gfile`` (object stores: ``gs://``, ``s3://``)."""

    def __init__(self, model_base: str) -> None:
        self.model_base = model_base.rstrip("/")
        self._gfile = _gfile_for(self.model_base)

    def _join(self, *parts: str | int) -> str:
        return "/".join([self.model_base, *(str(p) for p in parts)])

    def list_versions(self) -> list[int]:
        if not self._gfile.isdir(self.model_base):
            return []
        names = (name.rstrip("/") for name in self._gfile.listdir(self.model_base))
        return sorted(int(n) for n in names if n.isascii() and n.isdigit())

    def is_complete(self, version: int) -> bool:
        return self._gfile.exists(self._join(version, _SAVED_MODEL))

    def publish(self, export_dir: str, version: int, *, take_next: bool = False) -> str:
        final = self._join(version)
        if self._gfile.exists(final) and not take_next:
            raise FileExistsError(f"version {version} already exists at {final}; versions are "
                                  "never overwritten")
        manifest = _manifest(self._gfile, export_dir)
        staging = self._join(staging_name(version))
        try:
            for relative in manifest:
                self._gfile.makedirs(os.path.dirname(f"{staging}/{relative}"))
                self._gfile.copy(f"{export_dir}/{relative}", f"{staging}/{relative}")
            _verify(self._gfile, staging, manifest, "the staged copy")
        except Exception:
            if self._gfile.exists(staging):  # best effort; else a later push cleans it
                self._gfile.rmtree(staging)
            raise
        for _ in range(_MAX_CLAIMS):
            final = self._join(version)
            if not self._gfile.exists(final):
                break
            if not take_next:
                self._gfile.rmtree(staging)
                raise FileExistsError(f"version {version} appeared at {final} during the push")
            version += 1
        else:
            self._gfile.rmtree(staging)
            raise FileExistsError(f"no free version in {_MAX_CLAIMS} tries under "
                                  f"{self.model_base}")
        # saved_model.pb last: until it lands, servers cannot load the version
        for relative in sorted(manifest, key=lambda r: (r == _SAVED_MODEL, r)):
            self._gfile.makedirs(os.path.dirname(f"{final}/{relative}"))
            self._gfile.rename(f"{staging}/{relative}", f"{final}/{relative}")
        if self._gfile.exists(staging):
            self._gfile.rmtree(staging)  # the emptied directory markers
        _verify(self._gfile, final, manifest, f"published version {version}")
        return final

    def remove_version(self, version: int) -> None:
        self._gfile.rmtree(self._join(version))

    def clean_staging(self, older_than_seconds: float) -> list[str]:
        if not self._gfile.isdir(self.model_base):
            return []
        removed = []
        now_ns = time.time_ns()
        for name in sorted(n.rstrip("/") for n in self._gfile.listdir(self.model_base)):
            if not name.startswith(STAGING_PREFIX):
                continue
            path = self._join(name)
            newest = _newest_mtime_ns(self._gfile, path)
            # 0: the filesystem keeps no times (ram://): unknown age, never delete
            if newest and now_ns - newest > older_than_seconds * 1e9:
                self._gfile.rmtree(path)
                removed.append(path)
        return removed


def read_file(path: str) -> bytes:
    """The bytes of a file in a version (a local path; a bucket through its client; another
    URL through ``tf.io.gfile``).

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: no filesystem for the URL's scheme.
    """
    if "://" not in path or storage.is_remote(path):
        return storage.read_bytes(path)
    gfile = _gfile_for(path)
    if not gfile.exists(path):
        raise FileNotFoundError(path)
    with gfile.GFile(path, "rb") as f:
        return f.read()


def _gfile_for(url: str):
    """``tf.io.gfile``, checked to have a filesystem for ``url``'s scheme (TensorFlow is
    imported only here, so local pushes never pay for it; nothing is read yet)."""
    import tensorflow as tf

    scheme = url.partition("://")[0] if "://" in url else ""  # "": a local path
    if scheme == "hdfs":  # moved out of TensorFlow into tensorflow-io (TF >= 2.6)
        try:
            importlib.import_module("tensorflow_io")  # registers the filesystems on import
        except ImportError:
            pass
    registered = tf.io.gfile.get_registered_schemes()
    if scheme not in registered:
        hint = " (hdfs:// needs: pip install tensorflow-io)" if scheme == "hdfs" else ""
        raise ValueError(f"Received an invalid value for `base_path`, expected a local path "
                         f"or a URL whose scheme tf.io.gfile supports, one of "
                         f"{sorted(s for s in registered if s)}. Received: {url!r}; no "
                         f"filesystem is registered for {scheme}://{hint}")
    return tf.io.gfile


def _manifest(gfile, root: str) -> dict[str, int]:
    """Relative file path -> size, for every file under ``root``."""
    if not gfile.exists(f"{root}/{_SAVED_MODEL}"):
        raise FileNotFoundError(f"no SavedModel to push: {root}/{_SAVED_MODEL} is missing")
    files = {}
    for folder, _dirs, names in gfile.walk(root):
        for name in names:
            path = f"{folder.rstrip('/')}/{name}"
            files[path[len(root.rstrip('/')) + 1:]] = gfile.stat(path).length
    return files


def _verify(gfile, root: str, expected: dict[str, int], what: str) -> None:
    found = {}
    for folder, _dirs, names in gfile.walk(root):
        for name in names:
            path = f"{folder.rstrip('/')}/{name}"
            found[path[len(root) + 1:]] = gfile.stat(path).length
    check_listing(found, expected, root, what)


def _newest_mtime_ns(gfile, root: str) -> int:
    newest = 0
    for folder, _dirs, names in gfile.walk(root):
        for name in names:
            newest = max(newest, gfile.stat(f"{folder.rstrip('/')}/{name}").mtime_nsec)
    return newest
