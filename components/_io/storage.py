"""Object stores for the artifacts estflow reads and writes itself (pushed versions, their
lineage and claims, the evaluation baseline, fingerprints), without TensorFlow or
tensorflow-io: local paths, ``gs://`` through google-cloud-storage and ``s3://`` through
boto3, each imported only when a URI of its scheme is used.

* ``gs://``: ``google.cloud.storage.Client()``, which honours ``STORAGE_EMULATOR_HOST`` (an
  emulator, no credentials) and Application Default Credentials otherwise.
* ``s3://``: boto3, with the endpoint of a MinIO-style store from ``AWS_ENDPOINT_URL_S3``,
  ``AWS_ENDPOINT_URL``, or ``S3_ENDPOINT`` (``host:port``, as TensorFlow's S3 filesystem and
  KFP's MinIO setups give it, with ``S3_USE_HTTPS`` and ``S3_VERIFY_SSL``); a custom endpoint
  is addressed path-style (``http://host:9000/bucket/key``), which MinIO needs. The region is
  ``AWS_REGION`` or ``AWS_DEFAULT_REGION`` (default ``us-east-1``).

Every call is bounded: a few retries within :data:`RETRY_SECONDS`, then a
:class:`StorageError` naming the URI, the operation and the cause (no credentials, no
bucket, the endpoint unreachable, access denied). An absent object is ``None`` or
``FileNotFoundError``, never a StorageError.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SCHEMES", "RETRY_SECONDS", "StorageError", "ObjectInfo", "is_remote", "split",
           "store_for", "exists", "read_bytes", "write_bytes", "list_dir", "list_files",
           "delete", "delete_tree", "upload_tree", "download_tree", "local_copy", "materialize",
           "downloads_folder", "DOWNLOADS_ENV", "s3_endpoint", "s3_client", "gcs_client",
           "errors"]

SCHEMES = ("gs", "s3")
RETRY_SECONDS = 20.0
"""How long one call may retry a failing store (connection refused, 5xx) before it fails."""
_CONNECT_SECONDS = 5
_READ_SECONDS = 60


class StorageError(OSError):
    """An object store call failed: ``uri``, ``operation`` and ``cause`` say which and why."""

    def __init__(self, uri: str, operation: str, cause: str) -> None:
        super().__init__(f"cannot {operation} {uri}: {cause}")
        self.uri, self.operation, self.cause = uri, operation, cause


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """An object below a listed prefix: its key relative to the prefix, size, mtime."""

    name: str
    size: int
    mtime_ns: int


def is_remote(uri: str | os.PathLike) -> bool:
    """Whether ``uri`` names an object store this module reads (``gs://``, ``s3://``)."""
    return str(uri).partition("://")[0] in SCHEMES and "://" in str(uri)


def split(uri: str) -> tuple[str, str, str]:
    """``(scheme, bucket, key)`` of ``gs://bucket/key``."""
    scheme, _, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    return scheme, bucket, key


def _prefix(key: str) -> str:
    """A key as a "directory" prefix: ``a/b`` -> ``a/b/``, ``""`` -> ``""``."""
    key = key.strip("/")
    return f"{key}/" if key else ""


# -- clients -----------------------------------------------------------------------------------

def s3_endpoint() -> str | None:
    """The S3 endpoint the environment names (None: AWS's own)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return os.environ[name]
    host = os.environ.get("S3_ENDPOINT")
    if not host:
        return None
    if "://" in host:
        return host
    https = os.environ.get("S3_USE_HTTPS", "1").strip().lower() not in ("0", "false", "no")
    return f"{'https' if https else 'http'}://{host}"


def s3_client():
    """A boto3 S3 client for the environment's endpoint, region and credentials."""
    verify = os.environ.get("S3_VERIFY_SSL", "1").strip().lower() not in ("0", "false", "no")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return _s3_client(s3_endpoint(), region, verify, os.environ.get("AWS_ACCESS_KEY_ID"),
                      os.environ.get("AWS_PROFILE"))


@functools.lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, region: str, verify: bool, _key_id, _profile):
    try:
        import boto3  # noqa: PLC0415 (only for s3:// URIs)
        from botocore.config import Config  # noqa: PLC0415
    except ImportError:
        raise ImportError("s3:// needs boto3, which is not installed: pip install "
                          "'estflow[s3]' (or boto3)") from None
    config = Config(connect_timeout=_CONNECT_SECONDS, read_timeout=_READ_SECONDS,
                    retries={"max_attempts": 3, "mode": "standard"},
                    s3={"addressing_style": "path" if endpoint else "auto"})
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region,
                                          verify=verify, config=config)


def gcs_client():
    """A google-cloud-storage client (``STORAGE_EMULATOR_HOST`` honoured by the client)."""
    return _gcs_client(os.environ.get("STORAGE_EMULATOR_HOST"),
                       os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"))


@functools.lru_cache(maxsize=4)
def _gcs_client(_emulator, _credentials):
    from google.cloud import storage  # noqa: PLC0415 (only for gs:// URIs)

    return storage.Client()


# -- errors ------------------------------------------------------------------------------------

def _explain(error: BaseException, uri: str) -> str:
    """Why a call failed, in words a user acts on."""
    name = type(error).__name__
    text = f"{name}: {error}".splitlines()[0][:300]
    response = getattr(error, "response", None)  # botocore's dict (requests' Response: GCS)
    code = str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
    bucket = split(uri)[1]
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return ("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile, "
                f"or the pod's role) ({text})")
    if name == "DefaultCredentialsError":
        return ("no credentials: set GOOGLE_APPLICATION_CREDENTIALS (or run where Application "
                f"Default Credentials exist; STORAGE_EMULATOR_HOST for an emulator) ({text})")
    # a missing object is None or FileNotFoundError before this: NotFound here is the bucket
    if code == "NoSuchBucket" or name == "NotFound":
        return f"no bucket {bucket!r} ({text})"
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403") or \
            name in ("Forbidden", "Unauthorized"):
        return f"access denied ({text})"
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionError",
                "RetryError", "ReadTimeoutError", "ConnectionClosedError"):
        where = s3_endpoint() or "AWS S3" if uri.startswith("s3://") else \
            os.environ.get("STORAGE_EMULATOR_HOST") or "Cloud Storage"
        return f"the endpoint {where} is unreachable after retrying for at most " \
               f"{RETRY_SECONDS:.0f}s ({text})"
    return text


@contextlib.contextmanager
def errors(uri: str, operation: str) -> Iterator[None]:
    """Turn a client's failure inside the block into a :class:`StorageError` for ``uri``."""
    try:
        yield
    except (StorageError, FileNotFoundError, FileExistsError, ImportError):
        raise
    except Exception as e:  # noqa: BLE001 (each client has its own exception tree)
        raise StorageError(uri, operation, _explain(e, uri)) from e


# -- the two stores ----------------------------------------------------------------------------

class _S3:
    def __init__(self, client=None) -> None:
        self.client = client if client is not None else s3_client()

    def get(self, bucket: str, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as e:  # noqa: BLE001 (botocore's ClientError, checked below)
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def upload(self, bucket: str, key: str, path: str) -> None:
        self.client.upload_file(path, bucket, key)

    def download(self, bucket: str, key: str, path: str) -> None:
        self.client.download_file(bucket, key, path)

    def list(self, bucket: str, prefix: str, delimiter: str | None):
        """(objects as (key, size, mtime_ns), common prefixes) under ``prefix``."""
        objects, prefixes = [], []
        extra = {"Delimiter": delimiter} if delimiter else {}
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, **extra)
        for page in pages:
            objects += [(o["Key"], o["Size"], int(o["LastModified"].timestamp() * 1e9))
                        for o in page.get("Contents", [])]
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        return objects, prefixes

    def copy(self, bucket: str, source: str, target: str) -> None:
        self.client.copy_object(Bucket=bucket, Key=target,
                                CopySource={"Bucket": bucket, "Key": source})

    def delete(self, bucket: str, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1000 at most
            chunk = [{"Key": k} for k in keys[start:start + 1000]]
            self.client.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})


class _Gcs:
    def __init__(self, client=None) -> None:
        from google.cloud.storage.retry import DEFAULT_RETRY  # noqa: PLC0415

        self.client = client if client is not None else gcs_client()
        self.kw = {"retry": DEFAULT_RETRY.with_timeout(RETRY_SECONDS),
                   "timeout": (_CONNECT_SECONDS, _READ_SECONDS)}

    def get(self, bucket: str, key: str) -> bytes | None:
        from google.api_core import exceptions  # noqa: PLC0415

        try:
            return self.client.bucket(bucket).blob(key).download_as_bytes(**self.kw)
        except exceptions.NotFound:
            return None

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.bucket(bucket).blob(key).upload_from_string(data, **self.kw)

    def upload(self, bucket: str, key: str, path: str) -> None:
        self.client.bucket(bucket).blob(key).upload_from_filename(path, **self.kw)

    def download(self, bucket: str, key: str, path: str) -> None:
        self.client.bucket(bucket).blob(key).download_to_filename(path, **self.kw)

    def list(self, bucket: str, prefix: str, delimiter: str | None):
        blobs = self.client.list_blobs(bucket, prefix=prefix or None, delimiter=delimiter,
                                       **self.kw)
        objects = [(b.name, b.size or 0, int(b.updated.timestamp() * 1e9) if b.updated else 0)
                   for b in blobs]  # the prefixes are filled in while iterating
        return objects, sorted(blobs.prefixes)

    def copy(self, bucket: str, source: str, target: str) -> None:
        handle = self.client.bucket(bucket)
        handle.copy_blob(handle.blob(source), handle, target, **self.kw)

    def delete(self, bucket: str, keys: list[str]) -> None:
        from google.api_core import exceptions  # noqa: PLC0415

        handle = self.client.bucket(bucket)
        for key in keys:
            with contextlib.suppress(exceptions.NotFound):  # deleted meanwhile
                handle.blob(key).delete(**self.kw)


def store_for(uri: str, clients: dict | None = None):
    """The store of ``uri``'s scheme (``clients``: ``{"gs": client, "s3": client}``, tests)."""
    scheme = split(uri)[0]
    client = (clients or {}).get(scheme)
    with errors(uri, "connect to the store of"):
        if scheme == "s3":
            return _S3(client)
        if scheme == "gs":
            return _Gcs(client)
    raise ValueError(f"Received an invalid value for a URI, expected gs:// or s3://. "
                     f"Received: {uri!r}")


# -- operations on URIs (and local paths) ------------------------------------------------------

def read_bytes(uri: str, *, clients: dict | None = None) -> bytes:
    """The bytes of the file or object at ``uri``; FileNotFoundError when there is none."""
    if not is_remote(uri):
        return Path(uri).read_bytes()
    _, bucket, key = split(uri)
    with errors(uri, "read"):
        data = store_for(uri, clients).get(bucket, key)
    if data is None:
        raise FileNotFoundError(f"{uri}: no such object")
    return data


def exists(uri: str, *, clients: dict | None = None) -> bool:
    """Whether a file or object is at ``uri`` (an object, not a prefix)."""
    if not is_remote(uri):
        return Path(uri).is_file()
    _, bucket, key = split(uri)
    with errors(uri, "look for"):
        objects, _ = store_for(uri, clients).list(bucket, key, None)
    return any(name == key for name, _size, _mtime in objects)


def write_bytes(uri: str, data: bytes, *, clients: dict | None = None) -> None:
    """Write ``data`` whole to ``uri``: an object store's put is atomic; a local file is
    written under a temporary name and renamed into place."""
    if not is_remote(uri):
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return
    _, bucket, key = split(uri)
    with errors(uri, "write"):
        store_for(uri, clients).put(bucket, key, data)


def list_dir(uri: str, *, clients: dict | None = None) -> list[str]:
    """The names directly under ``uri`` ("directories" and objects), sorted; [] if none."""
    _, bucket, key = split(uri)
    prefix = _prefix(key)
    with errors(uri, "list"):
        objects, prefixes = store_for(uri, clients).list(bucket, prefix, "/")
    names = {p[len(prefix):].strip("/") for p in prefixes}
    names |= {name[len(prefix):] for name, _size, _mtime in objects}
    return sorted(n for n in names if n)


def list_files(uri: str, *, clients: dict | None = None) -> list[ObjectInfo]:
    """Every object below ``uri`` (recursively), named relative to it; directory markers
    (keys ending in ``/``) left out."""
    _, bucket, key = split(uri)
    prefix = _prefix(key)
    with errors(uri, "list"):
        objects, _ = store_for(uri, clients).list(bucket, prefix, None)
    return sorted((ObjectInfo(name[len(prefix):], size, mtime) for name, size, mtime in objects
                   if not name.endswith("/")), key=lambda o: o.name)


def delete(uri: str, *, clients: dict | None = None) -> None:
    """Delete the object at ``uri`` (absent: nothing to do)."""
    _, bucket, key = split(uri)
    with errors(uri, "delete"):
        store_for(uri, clients).delete(bucket, [key])


def delete_tree(uri: str, *, clients: dict | None = None) -> None:
    """Delete every object below ``uri`` (absent: nothing to do)."""
    _, bucket, key = split(uri)
    prefix = _prefix(key)
    with errors(uri, "delete"):
        store = store_for(uri, clients)
        objects, _ = store.list(bucket, prefix, None)
        store.delete(bucket, [name for name, _size, _mtime in objects])


def upload_tree(local: str | os.PathLike, uri: str, *, clients: dict | None = None,
                last: str | None = None) -> dict[str, int]:
    """Upload every file under the local directory ``local`` below ``uri``; ``last``: a
    relative name uploaded after all others. Returns relative name -> size."""
    root = Path(local)
    files = {str(p.relative_to(root)): p.stat().st_size
             for p in sorted(root.rglob("*")) if p.is_file()}
    _, bucket, key = split(uri)
    prefix = _prefix(key)
    with errors(uri, "upload to"):
        store = store_for(uri, clients)
        for name in sorted(files, key=lambda n: (n == last, n)):
            store.upload(bucket, prefix + name, str(root / name))
    return files


def download_tree(uri: str, local: str | os.PathLike, *, clients: dict | None = None) -> Path:
    """Download every object below ``uri`` into the local directory ``local``.

    Raises:
        FileNotFoundError: nothing is stored below ``uri``.
    """
    target = Path(local)
    files = list_files(uri, clients=clients)
    if not files:
        raise FileNotFoundError(f"{uri}: no objects below it")
    _, bucket, key = split(uri)
    prefix = _prefix(key)
    with errors(uri, "download"):
        store = store_for(uri, clients)
        for info in files:
            path = (target / info.name).resolve()
            if not path.is_relative_to(target.resolve()):  # a key like "../x": never outside
                raise StorageError(uri, "download", f"object {info.name!r} would land outside "
                                   f"{target}")
            path.parent.mkdir(parents=True, exist_ok=True)
            store.download(bucket, prefix + info.name, str(path))
    return target


@contextlib.contextmanager
def local_copy(uri: str, *, clients: dict | None = None) -> Iterator[Path]:
    """A local directory holding the tree at ``uri`` (a local path: itself), removed on exit."""
    if not is_remote(uri):
        yield Path(uri)
        return
    folder = tempfile.mkdtemp(prefix="estflow-download-")
    try:
        yield download_tree(uri, folder, clients=clients)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


DOWNLOADS_ENV = "ESTFLOW_DOWNLOADS"
"""The folder :func:`downloads_folder` made for the downloads of the processes started within
it (set in their environment)."""


def materialize(uri: str, *, clients: dict | None = None) -> str:
    """A local path of the tree at ``uri`` for TensorFlow to load (a SavedModel): ``uri``
    itself when local, else a download removed when the process exits (a loaded model may
    still read its asset files), and with the :func:`downloads_folder` it was made in, if
    any (a process that is killed, as Beam ends its workers, runs no exit handler)."""
    if not is_remote(uri):
        return uri
    within = os.environ.get(DOWNLOADS_ENV)
    folder = tempfile.mkdtemp(prefix="estflow-download-",
                              dir=within if within and os.path.isdir(within) else None)
    atexit.register(shutil.rmtree, folder, True)
    return str(download_tree(uri, folder, clients=clients))


@contextlib.contextmanager
def downloads_folder() -> Iterator[Path]:
    """A folder removed at the end of the block, where :func:`materialize` in this process
    and in the processes started within the block (through :data:`DOWNLOADS_ENV` in their
    environment: a Beam job's workers on this machine) puts its downloads: a worker ended
    without its exit handlers leaves no model copy behind."""
    folder = tempfile.mkdtemp(prefix="estflow-downloads-")
    previous = os.environ.get(DOWNLOADS_ENV)
    os.environ[DOWNLOADS_ENV] = folder
    try:
        yield Path(folder)
    finally:
        if previous is None:
            os.environ.pop(DOWNLOADS_ENV, None)
        else:
            os.environ[DOWNLOADS_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)
