"""Small JSON files: step results, statistics, run records.

One way to write them (:func:`write_json`: ``path`` first, atomic where the filesystem allows)
and to read them back. Local paths are written under a temporary name and renamed into place,
so a reader never sees half a file. ``gs://`` and ``s3://`` go through estflow's storage module
(google-cloud-storage, boto3: an object's put is atomic), which honours the endpoint variables
a pod sets (``STORAGE_EMULATOR_HOST``; ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL`` and KFP's
MinIO-style ``S3_ENDPOINT``) and needs no Beam pipeline options: Beam's S3 filesystem refuses
to work before a pipeline has set them, and never reads ``S3_ENDPOINT``. Other URLs
(``hdfs://``, ...) go through Beam's filesystems.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from estflow.components._io import storage

__all__ = ["write_json", "read_json", "take_json"]


def _is_url(path: str | os.PathLike) -> bool:
    return "://" in str(path)


def write_json(path: str | os.PathLike, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` (sorted keys; anything else as its ``str``)."""
    data = (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")
    if storage.is_remote(path):
        storage.write_bytes(str(path), data)
        return
    if _is_url(path):
        # Only other URLs need Beam's filesystems; steps that never write one (train, push)
        # do not pay for importing Beam.
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.create(str(path)) as handle:
            handle.write(data)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> Any:
    """Read the JSON file at ``path`` (a local path or a URL)."""
    if storage.is_remote(path):
        return json.loads(storage.read_bytes(str(path)).decode("utf-8"))
    if _is_url(path):
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.open(str(path)) as handle:
            return json.loads(handle.read().decode("utf-8"))
    return json.loads(Path(path).read_text())


def take_json(path: str | os.PathLike) -> Any:
    """Read, then delete, a JSON file a finished job left for its driver (statistics)."""
    value = read_json(path)
    if storage.is_remote(path):
        storage.delete(str(path))
    elif _is_url(path):
        from apache_beam.io.filesystems import FileSystems
        FileSystems.delete([str(path)])
    else:
        os.remove(path)
    return value
