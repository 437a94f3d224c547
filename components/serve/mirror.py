"""A model base in a bucket (``gs://``, ``s3://``) served from a local copy: ``estflow serve``
loads SavedModels from local directories, and TensorFlow has no filesystem for either scheme
without tensorflow-io (which has no build for the TensorFlow estflow runs on).

:meth:`Mirror.sync` copies, for each model under the URI, its newest complete version (one
whose ``saved_model.pb`` is stored: a push copies it last) into a cache directory with the
same layout, ``<cache>/<model_name>/<version>/``, which the server then scans like a local
base path. Only the newest version is copied because only the newest is served; older ones
are removed from the cache once a newer one is there, and a model or version deleted from the
bucket is deleted from the cache (so it stops being served, as under a local base path).
A version is downloaded under a hidden name and renamed into place, so a scan never sees
half of one; pushed versions are never overwritten, so a copied version is never fetched
again. The poll calls :meth:`sync` before each scan: one listing of the base, one per model.

The cache is ``$XDG_CACHE_HOME/estflow/serve/<hash of the URI>`` (``~/.cache`` without it),
or ``ESTFLOW_SERVE_CACHE`` when set (a pod's emptyDir).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from pathlib import Path

from estflow.components._io import storage

__all__ = ["Mirror", "cache_dir", "CACHE_ENV"]

log = logging.getLogger("estflow.serve")

CACHE_ENV = "ESTFLOW_SERVE_CACHE"
_SAVED_MODEL = "saved_model.pb"
_PARTIAL = ".download-"


def cache_dir(uri: str) -> Path:
    """The local directory that mirrors ``uri`` (see the module docstring)."""
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"),
        "estflow", "serve")
    return Path(root) / hashlib.sha256(uri.encode("utf-8")).hexdigest()[:16]


class Mirror:
    """The newest complete version of each model under ``uri``, copied to ``local``.

    Args:
        uri: the model base in a bucket, ``gs://bucket/models`` or ``s3://bucket/models``.
        local: the cache directory (default: :func:`cache_dir`).

    Raises:
        ValueError: ``uri`` is not a ``gs://``/``s3://`` URI naming a bucket.
    """

    def __init__(self, uri: str, local: Path | None = None) -> None:
        scheme, bucket, _key = storage.split(uri) if storage.is_remote(uri) else ("", "", "")
        if not scheme or not bucket:
            raise ValueError(f"Received an invalid value for the model base path, expected "
                             f"gs://BUCKET/PATH or s3://BUCKET/PATH. Received: {uri!r}")
        self.uri = uri.rstrip("/")
        self.local = (local or cache_dir(self.uri)).resolve()

    def __str__(self) -> str:
        return self.uri

    def sync(self) -> dict[str, int]:
        """Copy what is new under the URI; returns model name -> the version now cached.

        Raises:
            StorageError: the bucket cannot be listed or read (the message says why: no
                credentials, no bucket, the endpoint unreachable, access denied).
        """
        self.local.mkdir(parents=True, exist_ok=True)
        names = [n for n in storage.list_dir(self.uri) if not n.startswith(".")]
        cached = {}
        for name in names:
            version = self._newest_complete(name)
            if version is not None:
                self._fetch(name, version)
                cached[name] = version
        for stale in sorted(self.local.iterdir()):
            if stale.is_dir() and not stale.name.startswith(".") and stale.name not in cached:
                log.info("model %s is no longer under %s; removing its cached copy",
                         stale.name, self.uri)
                shutil.rmtree(stale, ignore_errors=True)
        return cached

    def _newest_complete(self, name: str) -> int | None:
        """The highest version of model ``name`` with its ``saved_model.pb`` stored."""
        versions = sorted((int(v) for v in storage.list_dir(f"{self.uri}/{name}")
                           if v.isascii() and v.isdigit()), reverse=True)
        for version in versions:
            if (self.local / name / str(version)).is_dir() or storage.exists(
                    f"{self.uri}/{name}/{version}/{_SAVED_MODEL}"):
                return version
        return None

    def _fetch(self, name: str, version: int) -> None:
        """Download ``name``/``version`` unless cached; drop the model's other versions."""
        model = self.local / name
        target = model / str(version)
        if not target.is_dir():
            model.mkdir(parents=True, exist_ok=True)
            partial = model / f"{_PARTIAL}{version}-{uuid.uuid4().hex[:8]}"
            try:
                storage.download_tree(f"{self.uri}/{name}/{version}", partial)
                os.rename(partial, target)
            except OSError:
                if not target.is_dir():  # another server on this cache may have won the race
                    raise
            finally:
                shutil.rmtree(partial, ignore_errors=True)
            log.info("copied model %s version %s from %s to %s", name, version, self.uri,
                     target)
        for other in model.iterdir():  # only the newest is served (partials: another server's)
            if other != target and other.name.isdigit() and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
