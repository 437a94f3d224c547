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
from a local directory, or a bucket through google-cloud-storage (``gs://``) or boto3
(``s3://``) without TensorFlow (:mod:`estflow.components._io.storage`), for the fingerprint
step; other URLs through ``tf.io.gfile``.
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
from estflow.components._io import storage
from estflow.dsl.contracts import Files

__all__ = ["served", "served_in", "staged_with_lineage", "lineage_record", "read_lineage",
           "skew_thresholds"]

_SAVED_MODEL = "saved_model.pb"


def lineage_record(*, fingerprint: str | None, run: str | None, pipeline: str,
                   model_name: str, metrics: dict | None = None,
                   evaluated_against: dict | None = None,
                   checks: dict | None = None) -> dict[str, Any]:
    """The lineage of a version about to be pushed (its number is added once known);
    ``evaluated_against``: ``{"version", "fingerprint"}`` of its evaluation's baseline;
    ``checks``: the drift thresholds its training data was checked with (:func:`skew_thresholds`),
    which batch scoring with this version applies to the rows it scores."""
    try:
        from importlib import metadata
        version = metadata.version("estflow")
    except Exception:  # noqa: BLE001 (a source tree that is not installed)
        version = "unknown"
    return {"fingerprint": fingerprint, "run": run, "pipeline": pipeline,
            "model_name": model_name, "estflow": version, "metrics": metrics or {},
            "evaluated_against": evaluated_against, "checks": checks,
            "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def skew_thresholds(checks) -> dict | None:
    """The drift thresholds of a ``DataChecks`` (None: no checks declared), as recorded in a
    pushed version's lineage: ``{"drift": {column: limit}, "drift_linf", "drift_js"}``."""
    if checks is None:
        return None
    return {"drift": dict(checks.drift or {}), "drift_linf": checks.drift_linf,
            "drift_js": checks.drift_js}


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


def served_in(destination: model_repo.PushDestination, *,
              clients: dict | None = None) -> dict | None:
    """``{"version", "path", "fingerprint", "lineage"}`` of the version ``destination``
    serves (None: none); fingerprint None for a version pushed without lineage."""
    version = model_repo.latest_servable(destination)
    if version is None:
        return None
    path = f"{destination.model_base}/{version}"
    lineage = read_lineage(path, clients=clients)
    return {"version": version, "path": path,
            "fingerprint": (lineage or {}).get("fingerprint"), "lineage": lineage}


def read_lineage(path: str, *, clients: dict | None = None) -> dict | None:
    """The lineage of the version at ``path`` (None: it has none, or it is not JSON; a store
    that cannot be read is an error, not a version without lineage)."""
    file = f"{path}/{Files.LINEAGE}"
    try:
        data = (storage.read_bytes(file, clients=clients) if storage.is_remote(file)
                else model_repo.read_file(file))
        return json.loads(data)
    except storage.StorageError:
        raise
    except (OSError, ValueError):
        return None


def _facts(version: int, path: str, lineage: dict | None) -> dict:
    """What :func:`served` says of a served version."""
    lineage = lineage or {}
    return {"version": version, "path": path, "fingerprint": lineage.get("fingerprint"),
            "evaluated_against": lineage.get("evaluated_against")}


def served(base_path: str, model_name: str, *, clients: dict | None = None) -> dict | None:
    """The version served at a push target and its lineage, read without TensorFlow for local
    paths and buckets: ``{"version", "path", "fingerprint", "evaluated_against"}``, None when
    nothing is served.

    Args:
        clients: ``{"gs": storage client, "s3": boto3 client}`` (tests); default: made from
            the environment (:mod:`estflow.components._io.storage`).
    """
    if storage.is_remote(base_path):
        from estflow.components._io.bucket_repo import BucketDestination  # noqa: PLC0415

        destination = BucketDestination(f"{base_path.rstrip('/')}/{model_name}",
                                        clients=clients)
        found = served_in(destination, clients=clients)
    else:  # a local directory, or a filesystem only tf.io.gfile reads
        found = served_in(model_repo.destination_for(base_path, model_name))
    return None if found is None else _facts(found["version"], found["path"], found["lineage"])
