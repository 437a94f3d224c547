"""A push destination in a bucket (``gs://``, ``s3://``) through
:mod:`estflow.components._io.storage`: google-cloud-storage or boto3, no TensorFlow, no
tensorflow-io (which has no build for the TensorFlow estflow runs on).

Object stores have no atomic rename, so a version is uploaded under
``.tmp-<version>-<uuid>/``, checked against the export's file list, then copied object by
object (a server-side copy) to ``<version>/`` with ``saved_model.pb`` last and the staging
objects deleted. TF Serving, KServe and ``estflow serve`` ignore non-integer names and cannot
load a version without ``saved_model.pb``, so they keep serving the previous version until the
push completes; the published version is verified against the export.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from estflow.components._io import storage
from estflow.components._io.staging import STAGING_PREFIX
from estflow.components._io.staging import check_listing
from estflow.components._io.staging import staging_name

__all__ = ["BucketDestination"]

_SAVED_MODEL = "saved_model.pb"
_MAX_CLAIMS = 1000  # versions tried after a taken one, with take_next


class BucketDestination:
    """A model base path in a bucket: ``gs://bucket/models/<model_name>``."""

    def __init__(self, model_base: str, *, clients: dict | None = None) -> None:
        if not storage.is_remote(model_base):
            raise ValueError(f"Received an invalid value for `model_base`, expected a gs:// or "
                             f"s3:// URI. Received: {model_base!r}")
        self.model_base = model_base.rstrip("/")
        self.clients = clients

    def _join(self, *parts: str | int) -> str:
        return "/".join([self.model_base, *(str(p) for p in parts)])

    def list_versions(self) -> list[int]:
        names = storage.list_dir(self.model_base, clients=self.clients)
        return sorted(int(n) for n in names if n.isascii() and n.isdigit())

    def is_complete(self, version: int) -> bool:
        return storage.exists(self._join(version, _SAVED_MODEL), clients=self.clients)

    def publish(self, export_dir: str, version: int, *, take_next: bool = False) -> str:
        export = Path(export_dir)
        if storage.is_remote(export_dir) or not (export / _SAVED_MODEL).is_file():
            raise FileNotFoundError(f"no SavedModel to push: {export_dir}/{_SAVED_MODEL} is "
                                    "missing (a local export directory is expected)")
        if self.is_complete(version) and not take_next:
            raise FileExistsError(f"version {version} already exists at {self._join(version)}; "
                                  "versions are never overwritten")
        staging = self._join(staging_name(version))
        try:
            manifest = storage.upload_tree(export, staging, clients=self.clients)
            self._verify(staging, manifest, "the staged copy")
            version = self._free_version(version, take_next)
            final = self._join(version)
            self._copy(staging, final, manifest)
        except BaseException:
            with contextlib.suppress(Exception):  # best effort; else a later push cleans it
                storage.delete_tree(staging, clients=self.clients)
            raise
        storage.delete_tree(staging, clients=self.clients)
        self._verify(final, manifest, f"published version {version}")
        return final

    def _free_version(self, version: int, take_next: bool) -> int:
        taken = set(self.list_versions())
        for _ in range(_MAX_CLAIMS):
            if version not in taken:
                return version
            if not take_next:
                raise FileExistsError(f"version {version} appeared at {self._join(version)} "
                                      "during the push; versions are never overwritten")
            version += 1
        raise FileExistsError(f"no free version in {_MAX_CLAIMS} tries under {self.model_base}")

    def _copy(self, staging: str, final: str, manifest: dict[str, int]) -> None:
        """Server-side copies, ``saved_model.pb`` last: until it lands, no server loads it."""
        _scheme, bucket, source = storage.split(staging)
        target = storage.split(final)[2]
        store = storage.store_for(staging, self.clients)
        with storage.errors(final, "publish"):
            for relative in sorted(manifest, key=lambda r: (r == _SAVED_MODEL, r)):
                store.copy(bucket, f"{source}/{relative}", f"{target}/{relative}")

    def _verify(self, root: str, expected: dict[str, int], what: str) -> None:
        found = {o.name: o.size for o in storage.list_files(root, clients=self.clients)}
        check_listing(found, expected, root, what)

    def remove_version(self, version: int) -> None:
        storage.delete_tree(self._join(version), clients=self.clients)

    def clean_staging(self, older_than_seconds: float) -> list[str]:
        removed = []
        now_ns = time.time_ns()
        for name in storage.list_dir(self.model_base, clients=self.clients):
            if not name.startswith(STAGING_PREFIX):
                continue
            path = self._join(name)
            files = storage.list_files(path, clients=self.clients)
            newest = max((o.mtime_ns for o in files), default=0)
            if newest and now_ns - newest > older_than_seconds * 1e9:
                storage.delete_tree(path, clients=self.clients)
                removed.append(path)
        return removed
