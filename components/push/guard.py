"""One guard between "what is served?" and publishing, so that pushes racing each other (two
runs of a schedule, a retry beside the original) publish a model once and never take the same
version number.

:func:`guard_for` picks the :class:`PushGuard` for a destination's URL scheme:

* a local path (a PVC's mount too): :class:`LocalLock`, an exclusive ``fcntl.flock`` on
  ``<model_base>/.estflow-push.lock``, held while the served version is read, the next number
  chosen and the version renamed into place. TF Serving and ``estflow serve`` load integer
  directories only, so the file is never taken for a version.
* ``gs://``: :class:`GcsClaims`, ``s3://``: :class:`S3Claims`. Object stores have no lock, but
  both create an object only if it does not exist yet (google-cloud-storage's
  ``if_generation_match=0``, S3's ``PutObject`` with ``IfNoneMatch="*"``), which is enough for a
  chain of claims under ``<model_base>/.estflow-push/``: ``after-<N>.json`` names the one push
  that follows version ``N``, with the number it publishes and its model's fingerprint. A
  push starts from the served version and walks the chain to its end: the first free
  ``after-<N>`` it creates is its claim; one it finds taken tells it which model is (being)
  published next. When the newest model on the chain is this model, nothing is pushed. A
  claim whose push failed (``failed-<version>``, written on the way out) or that is older
  than :data:`~estflow.components._io.model_repo.STALE_STAGING_SECONDS` without its version
  complete (a killed push) no longer stands for its model.
* other filesystems (``hdfs://``, TensorFlow's ``ram://`` in tests): :class:`NoHold`, the same
  check without a hold.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Protocol

from estflow.components._io import lineage
from estflow.components._io import model_repo
from estflow.components._io import storage
from estflow.components._io.storage import StorageError

__all__ = ["Claim", "PushGuard", "LocalLock", "GcsClaims", "S3Claims", "NoHold", "guard_for",
           "LOCK_FILE", "CLAIMS_DIR"]

LOCK_FILE = ".estflow-push.lock"
CLAIMS_DIR = ".estflow-push"
_MAX_WALK = 10_000  # claims followed from the served version before giving up


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a guard found: the newest model is already this one (``served``: its version,
    path, fingerprint and whether it is still being published, ``pending``), or the number
    to publish at (``version``; None: the destination picks the next one)."""

    served: dict | None = None
    version: int | None = None


class PushGuard(Protocol):
    """Holds from reading what is served to publishing (one per destination)."""

    def claim(self, fingerprint: str | None) -> contextlib.AbstractContextManager[Claim]:
        """A context in which the caller publishes unless ``Claim.served`` says the model is
        already there; an exception inside it releases (or gives up) the claim."""


def _same_model(served: dict | None, fingerprint: str | None) -> dict | None:
    if served is None or not fingerprint or served.get("fingerprint") != fingerprint:
        return None
    return {"version": served["version"], "path": served["path"],
            "fingerprint": fingerprint, "pending": served.get("pending", False)}


class LocalLock:
    """An exclusive ``flock`` on ``<model_base>/.estflow-push.lock`` (a local or mounted
    filesystem; on NFS, Linux maps ``flock`` to a lock the server holds)."""

    def __init__(self, destination: model_repo.LocalDestination,
                 progress: Callable[[str], None] | None = None) -> None:
        self.destination = destination
        self.path = destination.path / LOCK_FILE
        self._progress = progress or (lambda message: None)

    @contextlib.contextmanager
    def claim(self, fingerprint: str | None) -> Iterator[Claim]:
        self.destination.path.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as lock:  # "a": created if missing, never truncated
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._progress(f"waiting for another push to {self.destination.model_base} "
                               f"to finish (it holds {self.path})")
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                served = lineage.served_in(self.destination) if fingerprint else None
                yield Claim(served=_same_model(served, fingerprint))
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


class NoHold:
    """Filesystems with neither a lock nor a conditional create: the check, no hold."""

    def __init__(self, destination: model_repo.PushDestination) -> None:
        self.destination = destination

    @contextlib.contextmanager
    def claim(self, fingerprint: str | None) -> Iterator[Claim]:
        served = lineage.served_in(self.destination) if fingerprint else None
        yield Claim(served=_same_model(served, fingerprint))


class _ObjectClaims:
    """The chain of create-only claim objects (see the module's docstring); subclasses say
    how to create an object only if it is absent, and how to read one."""

    def __init__(self, destination: model_repo.PushDestination, claims_url: str) -> None:
        self.destination = destination
        bucket, _, key = claims_url.partition("://")[2].partition("/")
        self.bucket = bucket
        self.prefix = "/".join(p for p in (key.strip("/"), CLAIMS_DIR) if p) + "/"

    def _create(self, key: str, data: bytes) -> bool:
        """Create object ``key`` holding ``data`` unless it exists; whether it was created."""
        raise NotImplementedError

    def _read(self, key: str) -> bytes | None:
        """The bytes of object ``key`` (None: there is none)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def claim(self, fingerprint: str | None) -> Iterator[Claim]:
        found = self._walk(fingerprint)
        try:
            yield found
        except BaseException:
            if found.version is not None:  # the model no longer stands behind its claim
                with contextlib.suppress(Exception):
                    self._create(f"{self.prefix}failed-{found.version}", b"")
            raise

    def _walk(self, fingerprint: str | None) -> Claim:
        head = lineage.served_in(self.destination)
        slot = head["version"] if head else 0
        for _ in range(_MAX_WALK):
            key = f"{self.prefix}after-{slot}.json"
            taken = self._read(key)
            if taken is None:
                if _same_model(head, fingerprint) and self._stands(head):
                    return Claim(served=_same_model(head, fingerprint))
                version = self._next_number(slot)
                record = {"version": version, "fingerprint": fingerprint, "after": slot,
                          "claimed_at": time.time()}
                if self._create(key, json.dumps(record).encode()):
                    return Claim(version=version)
                taken = self._read(key)  # another push took this slot meanwhile
            record = json.loads(taken)
            head = {"version": record["version"], "fingerprint": record.get("fingerprint"),
                    "path": f"{self.destination.model_base}/{record['version']}",
                    "claimed_at": record.get("claimed_at", 0.0), "pending": True}
            slot = record["version"]
        raise RuntimeError(f"expected the claims under {self.prefix} to end within "
                           f"{_MAX_WALK} steps; they do not")

    def _next_number(self, slot: int) -> int:
        existing = self.destination.list_versions()
        return max(int(time.time()), slot + 1, existing[-1] + 1 if existing else 0)

    def _stands(self, head: dict | None) -> bool:
        """Whether ``head`` is (or still becomes) a served version of its model."""
        if head is None or not head.get("pending"):
            return head is not None
        if self.destination.is_complete(head["version"]):
            head["pending"] = False
            return True
        if self._read(f"{self.prefix}failed-{head['version']}") is not None:
            return False
        return time.time() - head["claimed_at"] < model_repo.STALE_STAGING_SECONDS


class GcsClaims(_ObjectClaims):
    """Claims in Cloud Storage: an upload with ``if_generation_match=0`` creates, or fails
    with 412 Precondition Failed when the object exists."""

    def __init__(self, destination: model_repo.PushDestination, claims_url: str | None = None,
                 client=None) -> None:
        super().__init__(destination, claims_url or destination.model_base)
        self._store = storage.store_for(f"gs://{self.bucket}", {"gs": client})
        self._bucket = self._store.client.bucket(self.bucket)

    def _create(self, key: str, data: bytes) -> bool:
        from google.api_core import exceptions  # noqa: PLC0415

        try:
            with storage.errors(f"gs://{self.bucket}/{key}", "claim a version with"):
                self._bucket.blob(key).upload_from_string(
                    data, content_type="application/json", if_generation_match=0,
                    **self._store.kw)
        except StorageError as e:
            if isinstance(e.__cause__, exceptions.PreconditionFailed):
                return False
            raise
        return True

    def _read(self, key: str) -> bytes | None:
        with storage.errors(f"gs://{self.bucket}/{key}", "read the push claim"):
            return self._store.get(self.bucket, key)


class S3Claims(_ObjectClaims):
    """Claims in S3: ``PutObject`` with ``IfNoneMatch="*"`` creates, or fails with 412
    PreconditionFailed when the object exists (409 ConditionalRequestConflict while another
    conditional write of it is in flight: asked again)."""

    def __init__(self, destination: model_repo.PushDestination, claims_url: str | None = None,
                 client=None) -> None:
        super().__init__(destination, claims_url or destination.model_base)
        # boto3 with the environment's endpoint (a MinIO-style store too)
        self._store = storage.store_for(f"s3://{self.bucket}", {"s3": client})
        self._client = self._store.client

    def _create(self, key: str, data: bytes) -> bool:
        for _ in range(20):
            try:
                with storage.errors(f"s3://{self.bucket}/{key}", "claim a version with"):
                    self._client.put_object(Bucket=self.bucket, Key=key, Body=data,
                                            IfNoneMatch="*")
                return True
            except StorageError as e:
                code = getattr(e.__cause__, "response", {}).get("Error", {}).get("Code")
                if code == "PreconditionFailed":
                    return False
                if code != "ConditionalRequestConflict":
                    raise
            time.sleep(0.05)
        raise TimeoutError(f"s3://{self.bucket}/{key}: expected a conditional PutObject to "
                           "succeed or find the object; it conflicted 20 times")

    def _read(self, key: str) -> bytes | None:
        with storage.errors(f"s3://{self.bucket}/{key}", "read the push claim"):
            return self._store.get(self.bucket, key)


def guard_for(destination: model_repo.PushDestination,
              progress: Callable[[str], None] | None = None) -> PushGuard:
    """The guard for ``destination``'s scheme (see the module's docstring)."""
    if isinstance(destination, model_repo.LocalDestination):
        return LocalLock(destination, progress)
    scheme = destination.model_base.partition("://")[0]
    clients = getattr(destination, "clients", None) or {}  # a bucket destination's (tests)
    if scheme == "gs":
        return GcsClaims(destination, client=clients.get("gs"))
    if scheme == "s3":
        return S3Claims(destination, client=clients.get("s3"))
    return NoHold(destination)
