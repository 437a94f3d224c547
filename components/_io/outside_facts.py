"""The facts a step's cache key needs from outside the spec (:mod:`estflow.dsl.fingerprints`).

* :func:`source_fingerprint`: the source data, without downloading it, as its kind's reader
  row gives it (:data:`estflow.components._sources.registry.READERS`). Every file source shares
  :func:`files_fingerprint`: the content hash (SHA-256) of each local file; for ``gs://``
  objects their generation, etag and size (the object's metadata, through
  google-cloud-storage); for ``s3://`` objects their etag, size and modification time (boto3,
  with the endpoint of a MinIO-style store from the environment:
  :mod:`estflow.components._io.storage`); other URLs ``tf.io.gfile``'s size and mtime. KFP's local paths for buckets (``/gcs/b/...``,
  ``/s3/b/...``) are read as the bucket URLs they stand for. A kind that is not files has its
  own (a BigQuery table's etag; a query is *volatile*: a fresh value each time, so ingest
  always runs).
* the user functions the spec names: :mod:`estflow.components._io.user_code` (their source,
  not where they are).
* :func:`estflow_fingerprint`: estflow's version and a digest of the step code (``dsl`` and
  ``components``), so a new estflow, or an edited checkout, reruns the steps.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import importlib.util
import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from estflow.components._io import storage
from estflow.components._sources.registry import reader_for
from estflow.dsl.checks import source_patterns
from estflow.dsl.fingerprints import digest

__all__ = ["source_fingerprint", "files_fingerprint", "estflow_fingerprint", "bucket_url",
           "file_sha256", "find_module"]

_CHUNK = 1 << 20
# KFP mounts buckets at these local paths (the artifact's local path for gs://, s3://).
_BUCKET_MOUNTS = {"/gcs/": "gs://", "/s3/": "s3://"}


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a local file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def bucket_url(path: str) -> str:
    """``path`` as a bucket URL when it is KFP's local path of one (``/gcs/b/k`` ->
    ``gs://b/k``), else unchanged."""
    for mount, scheme in _BUCKET_MOUNTS.items():
        if path.startswith(mount):
            return scheme + path[len(mount):]
    return path


def source_fingerprint(source: Any, root: str | os.PathLike, *, clients: dict | None = None,
                       ) -> dict:
    """The fingerprint of a pipeline's source: ``{"digest", "kind", ...what it covers}``, as its
    kind's reader row gives it (:mod:`estflow.components._sources.registry`: a file source's is
    :func:`files_fingerprint`).

    Args:
        source: a :mod:`estflow.dsl.sources` declaration.
        root: the directory relative paths resolve against (the source root).
        clients: ``{"gs": storage client, "s3": boto3 client}`` to use (tests); default:
            made when needed.
    """
    clients = clients if clients is not None else {}
    return reader_for(source).fingerprint(source, str(root), clients)


def files_fingerprint(source: Any, root: str, clients: dict) -> dict:
    """The fingerprint of the files ``source.path`` matches, shared by every file source:
    their content for local files, their objects' metadata in a bucket; ``"by_content":
    True`` for local files (their content is hashed, so the step keys leave their path out: a
    moved checkout with the same data reuses ingest)."""
    objects, patterns = [], []
    for pattern in source_patterns(source):  # one, or one per span of a rolling window
        if "://" not in pattern and not os.path.isabs(pattern):
            pattern = os.path.join(root, pattern)
        pattern = bucket_url(pattern)
        patterns.append(pattern)
        scheme = pattern.partition("://")[0] if "://" in pattern else ""
        if scheme == "gs":
            objects += _gcs_objects(pattern, clients)
        elif scheme == "s3":
            objects += _s3_objects(pattern, clients)
        elif scheme:
            objects += _gfile_objects(pattern)
        else:
            objects += [{"path": p, "size": os.path.getsize(p), "sha256": file_sha256(p)}
                        for p in sorted(glob.glob(pattern)) if os.path.isfile(p)]
    pattern = patterns[0] if len(patterns) == 1 else patterns
    # What the data is, not where: a copy of the same files elsewhere has the same digest.
    identity = [{k: v for k, v in o.items() if k != "path"} for o in objects]
    found = {"kind": type(source).__name__, "pattern": pattern, "objects": objects,
             "digest": digest({"kind": type(source).__name__, "objects": identity})}
    if not scheme:  # local files, hashed: where they are plays no part in a key
        found["by_content"] = True
    return found


def _split_url(url: str) -> tuple[str, str]:
    bucket, _, key = url.partition("://")[2].partition("/")
    return bucket, key


def _glob_prefix(key: str) -> str:
    """The part of an object-key pattern before its first wildcard (the listing prefix)."""
    cut = min((i for i, c in enumerate(key) if c in "*?["), default=len(key))
    return key[:cut]


def _gcs_objects(pattern: str, clients: dict) -> list[dict]:
    bucket, key = _split_url(pattern)
    found = []
    with storage.errors(pattern, "fingerprint the source"):
        store = storage.store_for(pattern, clients)  # bounded retries, the emulator honoured
        for blob in store.client.list_blobs(bucket, prefix=_glob_prefix(key), **store.kw):
            if blob.name == key or fnmatch.fnmatchcase(blob.name, key):
                found.append({"path": f"gs://{bucket}/{blob.name}",
                              "generation": blob.generation, "etag": blob.etag,
                              "size": blob.size})
    return sorted(found, key=lambda o: o["path"])


def _s3_objects(pattern: str, clients: dict) -> list[dict]:
    bucket, key = _split_url(pattern)
    found = []
    with storage.errors(pattern, "fingerprint the source"):
        client = storage.store_for(pattern, clients).client  # the environment's endpoint
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=_glob_prefix(key)):
            for item in page.get("Contents", []):
                if item["Key"] == key or fnmatch.fnmatchcase(item["Key"], key):
                    found.append({"path": f"s3://{bucket}/{item['Key']}",
                                  "etag": item["ETag"], "size": item["Size"],
                                  "modified": str(item["LastModified"])})
    return sorted(found, key=lambda o: o["path"])


def _gfile_objects(pattern: str) -> list[dict]:
    """Any other filesystem TensorFlow reads: size and modification time of each match."""
    import tensorflow as tf  # noqa: PLC0415 (only for schemes without a metadata client)

    found = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        stat = tf.io.gfile.stat(path)
        found.append({"path": path, "size": stat.length, "mtime_ns": stat.mtime_nsec})
    return found


# -- estflow itself ----------------------------------------------------------------------------

def estflow_fingerprint(modules: list[str]) -> dict:
    """estflow's version, and for each step module a digest of the code it runs: its file and
    every estflow module it imports, transitively (imports read from the text, nothing
    imported), so editing one step's code reruns that step and the steps after it only."""
    try:
        version = metadata.version("estflow")
    except metadata.PackageNotFoundError:
        version = "unknown"
    files: dict[str, tuple[str, list[str]] | None] = {}
    return {"version": version,
            "code": {module: _closure_digest(module, files) for module in modules}}


def _closure_digest(module: str, files: dict[str, tuple[str, list[str]] | None]) -> str:
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in files:
            files[name] = _read_module(name)
        found = files[name]
        seen[name] = found[0] if found else ""
        todo += found[1] if found else []
    return digest(seen)


def _read_module(name: str) -> tuple[str, list[str]] | None:
    path = find_module(name)
    if path is None:
        return None
    text = Path(path).read_bytes()
    imports = _estflow_imports(name, text.decode("utf-8", "replace"),
                               path.endswith("__init__.py"))
    return hashlib.sha256(text).hexdigest(), imports


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
                     r"|import[ \t]+([^\n]*))", re.M)
# A reader row names its reader's module, imported when first read
# (estflow.components._sources.registry.late): code the step runs, as much as an import.
_LATE = re.compile(r"\blate\(\s*[\"'](estflow\.[\w.]+)[\"']")


def _estflow_imports(module: str, text: str, package: bool) -> list[str]:
    """The estflow modules ``module`` imports, anywhere in it (steps import lazily too)."""
    base = module if package else module.rpartition(".")[0]
    found = []
    for parent, names, plain in _IMPORT.findall(text):
        if plain:
            found += [n.split(" as ")[0].strip() for n in plain.split("#")[0].split(",")]
            continue
        if parent.startswith("."):
            level = len(parent) - len(parent.lstrip("."))
            anchor = base.rsplit(".", level - 1)[0] if level > 1 else base
            parent = f"{anchor}.{parent[level:]}" if parent[level:] else anchor
        found.append(parent)
        for item in re.sub(r"#[^\n]*", "", names).strip("()").split(","):
            item = item.split(" as ")[0].strip()
            if item.isidentifier():
                found.append(f"{parent}.{item}")  # a submodule imported by name
    found += _LATE.findall(text)
    return [name for name in found if name.startswith("estflow.")]


def find_module(module: str) -> str | None:
    """The file of ``module``, found without importing it (an estflow package's
    ``__init__`` may import TensorFlow); other modules through their parent packages."""
    parts = module.split(".")
    if parts[0] == "estflow" and len(parts) > 1:
        spec = importlib.util.find_spec(".".join(parts[:2]))  # estflow.dsl, .components, ...
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts[2:])
        for candidate in (folder / "__init__.py", folder.with_suffix(".py")):
            if candidate.is_file():
                return str(candidate)
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") \
        else None
