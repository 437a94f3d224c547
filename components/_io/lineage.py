"""Lineage of pushed versions: each version carries ``assets.extra/estflow_lineage.json``
(:data:`~estflow.dsl.contracts.Files.LINEAGE`; TF Serving ignores ``assets.extra``), naming the
model's fingerprint (what made it: the train step's key over data, spec and code) and the run
that made it::

    {"fingerprint": "9f2c...", "run": "/home/me/estflow_runs/chicago-taxi/20261124-064512",
     "pipeline": "chicago-taxi", "model_name": "chicago_taxi", "version": 1795502820,
     "pushed_at": "2026-11-24T06:45:40Z", "estflow": "0.1.0", "metrics": {...},
     "evaluated_against": {"version": 1795416420, "fingerprint": "41ab..."} | null}

``evaluated_against`` is the version the model was blessed against (its evaluation's baseline;
null: there was none): while the model is the served version, a run of the same model keys its
evaluate step by it (:func:`estflow.dsl.fingerprints.step_keys`), so that evaluation is reused.

:func:`served` reads the lineage of the version a server serves (the highest complete one):
from a local directory, through google-cloud-storage for ``gs://`` (no TensorFlow, for the
fingerprint step), through boto3 for ``s3://`` when installed, else ``tf.io.gfile``.
:func:`served_in` does the same through a push destination (the push step has one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from estflow.components._io import model_repo
from estflow.dsl.contracts import Files

__all__ = ["served", "served_in", "staged_with_lineage", "lineage_record", "read_lineage"]

_SAVED_MODEL = "saved_model.pb"


def lineage_record(*, fingerprint: str | None, run: str | None, pipeline: str,
                   model_name: str, metrics: dict | None = None,
                   evaluated_against: dict | None = None) -> dict[str, Any]:
    """The lineage of a version about to be pushed (its number is added once known);
    ``evaluated_against``: ``{"version", "fingerprint"}`` of its evaluation's baseline."""
    try:
        from importlib import metadata
        version = metadata.version("estflow")
    except Exception:  # noqa: BLE001 (a source tree that is not installed)
        version = "unknown"
    return {"fingerprint": fingerprint, "run": run, "pipeline": pipeline,
            "model_name": model_name, "estflow": version, "metrics": metrics or {},
            "evaluated_against": evaluated_against,
            "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


@contextlib.contextmanager
def staged_with_lineage(export_dir: str | os.PathLike, lineage: dict,
                        extra: dict[str, Path] | None = None) -> Iterator[Path]:
    """A copy of the export with the lineage file added, and each existing ``extra`` file
    (its path in the copy -> the file); the export itself, a cached artifact, is left as it
    is. Removed on exit."""
    staging = Path(tempfile.mkdtemp(prefix="estflow-push-"))
    try:
        copy = staging / "export"
        shutil.copytree(export_dir, copy, symlinks=False)
        path = copy / Files.LINEAGE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(lineage, indent=2, sort_keys=True) + "\n")
        for name, source in (extra or {}).items():
            if Path(source).is_file():
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, copy / name)
        yield copy
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def served_in(destination: model_repo.PushDestination) -> dict | None:
    """``{"version", "path", "fingerprint", "lineage"}`` of the version ``destination``
    serves (None: none); fingerprint None for a version pushed without lineage."""
    version = model_repo.latest_servable(destination)
    if version is None:
        return None
    path = f"{destination.model_base}/{version}"
    lineage = read_lineage(path)
    return {"version": version, "path": path,
            "fingerprint": (lineage or {}).get("fingerprint"), "lineage": lineage}


def read_lineage(path: str) -> dict | None:
    """The lineage of the version at ``path`` (None: it has none, or it is unreadable)."""
    try:
        return json.loads(model_repo.read_file(f"{path}/{Files.LINEAGE}"))
    except (OSError, ValueError):
        return None


def _facts(version: int, path: str, lineage: dict | None) -> dict:
    """What :func:`served` says of a served version."""
    lineage = lineage or {}
    return {"version": version, "path": path, "fingerprint": lineage.get("fingerprint"),
            "evaluated_against": lineage.get("evaluated_against")}


def served(base_path: str, model_name: str, *, clients: dict | None = None) -> dict | None:
    """The version served at a push target and its lineage, read without TensorFlow where
    possible: ``{"version", "path", "fingerprint", "evaluated_against"}``, None when nothing
    is served.

    Args:
        clients: ``{"gs": storage client, "s3": boto3 client}`` (tests); default: made when
            needed.
    """
    clients = clients if clients is not None else {}
    scheme = base_path.partition("://")[0] if "://" in base_path else ""
    if scheme == "gs":
        return _served_gcs(base_path, model_name, clients)
    if scheme == "s3" and (clients.get("s3") is not None or _has("boto3")):
        return _served_s3(base_path, model_name, clients)
    # a local directory, or a filesystem only tf.io.gfile reads
    found = served_in(model_repo.destination_for(base_path, model_name))
    return None if found is None else _facts(found["version"], found["path"], found["lineage"])


def _has(module: str) -> bool:
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec(module) is not None


def _versions(names: list[str]) -> list[int]:
    return sorted(int(n) for n in names if n.isascii() and n.isdigit())


def _served_gcs(base_path: str, model_name: str, clients: dict) -> dict | None:
    client = clients.get("gs")
    if client is None:
        from google.cloud import storage  # noqa: PLC0415

        client = storage.Client()
    bucket_name, _, key = base_path[len("gs://"):].partition("/")
    prefix = "/".join(p for p in (key.strip("/"), model_name) if p) + "/"
    bucket = client.bucket(bucket_name)
    blobs = client.list_blobs(bucket_name, prefix=prefix, delimiter="/")
    list(blobs)  # the prefixes are filled in while iterating
    names = [p[len(prefix):].strip("/") for p in blobs.prefixes]
    for version in reversed(_versions(names)):
        if bucket.blob(f"{prefix}{version}/{_SAVED_MODEL}").exists():
            lineage = bucket.blob(f"{prefix}{version}/{Files.LINEAGE}")
            data = json.loads(lineage.download_as_text()) if lineage.exists() else {}
            return _facts(version, f"gs://{bucket_name}/{prefix}{version}", data)
    return None


def _served_s3(base_path: str, model_name: str, clients: dict) -> dict | None:
    client = clients.get("s3")
    if client is None:
        import boto3  # noqa: PLC0415

        client = boto3.client("s3")
    bucket, _, key = base_path[len("s3://"):].partition("/")
    prefix = "/".join(p for p in (key.strip("/"), model_name) if p) + "/"
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
    names = [p["Prefix"][len(prefix):].strip("/") for p in listing.get("CommonPrefixes", [])]
    for version in reversed(_versions(names)):
        try:
            client.head_object(Bucket=bucket, Key=f"{prefix}{version}/{_SAVED_MODEL}")
        except Exception:  # noqa: BLE001 (botocore's ClientError: not found)
            continue
        try:
            body = client.get_object(Bucket=bucket, Key=f"{prefix}{version}/{Files.LINEAGE}")
            data = json.loads(body["Body"].read())
        except Exception:  # noqa: BLE001
            data = {}
        return _facts(version, f"s3://{bucket}/{prefix}{version}", data)
    return None
