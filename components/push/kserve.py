"""What KServe serves a push from: the ``InferenceService`` (``PushTarget.kserve_manifest``),
written next to ``push.json`` and applied by :mod:`.rollout` with ``kserve_rollout``, and the
folder its ``storageUri`` names, holding just the pushed version.

KServe's TF Serving runtime runs ``tensorflow_model_server --model_name={{.Name}}
--model_base_path=/mnt/models``, and its storage initializer copies all of ``storageUri`` to
``/mnt/models`` when a predictor pod starts: TF Serving wants a base folder of numbered
versions, so ``storageUri`` is ``<model_base>/kserve/<version>-only``, which holds the
version's SavedModel as ``<version>/`` and nothing else (the model base's other versions, the
eval outputs and warm-start checkpoint under ``assets.extra`` are never downloaded). The
``-only`` suffix keeps one folder name from being a prefix of another (``7-only`` vs
``70-only``): KServe lists S3 objects by plain prefix.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from estflow.components._io.model_repo import destination_for
from estflow.dsl.contracts import Files
from estflow.dsl.specs import PushTarget

__all__ = ["kserve_manifest", "inference_service", "kserve_name", "serving_uri",
           "publish_for_kserve", "remove_serving_copy", "SERVING_FOLDER"]

SERVING_FOLDER = "kserve"
# TF Serving reads only its warmup file under assets.extra; estflow's files there (lineage,
# eval outputs, the warm-start checkpoint, raw feature types) stay out of the serving copy.
_WARMUP = Files.SERVED_WARMUP


def kserve_name(model_name: str) -> str:
    """The InferenceService name for ``model_name`` (``chicago_taxi`` -> ``chicago-taxi``);
    ``PushTarget`` refuses a model name whose form KServe would not accept."""
    return model_name.lower().replace("_", "-")


def serving_uri(model_base: str, version: int) -> str:
    """The ``storageUri`` of ``version``: the folder that holds only ``<version>/``."""
    return f"{model_base.rstrip('/')}/{SERVING_FOLDER}/{version}-only"


def _serving_destination(model_base: str, version: int):
    return destination_for(f"{model_base.rstrip('/')}/{SERVING_FOLDER}", f"{version}-only")


def publish_for_kserve(export_dir: str | Path, model_base: str, version: int, *,
                       warmup: Path | None = None) -> str:
    """Copy the SavedModel of ``export_dir`` (no ``assets.extra`` but TF Serving's warmup
    file: ``warmup`` when given, else the export's own) to :func:`serving_uri` as
    ``<version>/``, unless a retried push already did; return the ``storageUri``."""
    destination = _serving_destination(model_base, version)
    if destination.is_complete(version):
        return serving_uri(model_base, version)
    if version in destination.list_versions():  # a copy cut short: never served, redo it
        destination.remove_version(version)
    with tempfile.TemporaryDirectory(prefix="estflow-kserve-") as tmp:
        served = Path(tmp) / "model"
        for source in sorted(p for p in Path(export_dir).rglob("*") if p.is_file()):
            relative = source.relative_to(export_dir).as_posix()
            if relative.startswith("assets.extra/") and relative != _WARMUP:
                continue
            (served / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, served / relative)
        if warmup is not None:
            (served / _WARMUP).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(warmup, served / _WARMUP)
        destination.publish(str(served), version)
    return serving_uri(model_base, version)


def remove_serving_copy(model_base: str, version: int) -> None:
    """Delete a pruned version's serving copy (nothing if there is none)."""
    destination = _serving_destination(model_base, version)
    if version in destination.list_versions():
        destination.remove_version(version)
    if "://" not in model_base and os.path.isdir(destination.model_base):
        os.rmdir(destination.model_base)  # the emptied <version>-only folder


def inference_service(target: PushTarget, storage_uri: str, version: int) -> dict:
    """The ``InferenceService`` (``serving.kserve.io/v1beta1``) serving ``storage_uri``.

    The predictor is the ``model`` form (``modelFormat: tensorflow``, KServe's TF Serving
    runtime) with ``runtimeVersion`` = ``PushTarget.serving_runtime_version`` (KServe's own
    default, 2.6.2, cannot load a TF 2.21 export) and ``--model_name=<model_name>``: KServe
    appends a predictor's args to the runtime's and TF Serving keeps the last value of a flag,
    so clients call ``/v1/models/<model_name>`` on KServe as on ``estflow serve``.
    """
    metadata: dict = {"name": target.kserve_name}
    if target.kserve_namespace:
        metadata["namespace"] = target.kserve_namespace
    metadata["annotations"] = {"estflow/model-version": str(version)}
    predictor: dict = {}
    if target.kserve_service_account:
        predictor["serviceAccountName"] = target.kserve_service_account
    if target.kserve_canary_percent is not None:
        predictor["canaryTrafficPercent"] = target.kserve_canary_percent
    model: dict = {"modelFormat": {"name": "tensorflow", "version": "2"},
                   "runtimeVersion": target.serving_runtime_version,
                   "storageUri": storage_uri,
                   "args": [f"--model_name={target.model_name}"]}
    if target.kserve_gpus:
        gpus = {"nvidia.com/gpu": str(target.kserve_gpus)}
        model["resources"] = {"limits": gpus, "requests": dict(gpus)}
    predictor["model"] = model
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": metadata, "spec": {"predictor": predictor}}


def kserve_manifest(target: PushTarget, storage_uri: str, version: int) -> str:
    """:func:`inference_service` as YAML text, with a header saying how it is served."""
    document = inference_service(target, storage_uri, version)
    applied = ("the push step applies it (kserve_rollout)" if target.kserve_rollout
               else "apply it with kubectl apply -f")
    header = (
        f"# KServe InferenceService {target.kserve_name!r} for estflow model "
        f"{target.model_name!r}, version {version}; {applied}.\n"
        f"# TF Serving {target.serving_runtime_version} (KServe's kserve-tensorflow-serving "
        "runtime) serves the one version\n"
        "# under storageUri; each push names a new storageUri, so applying this file starts a\n"
        f"# new revision. Clients call /v1/models/{target.model_name}:predict.\n")
    return header + _yaml(document)


def _yaml(value: dict, indent: int = 0) -> str:
    """Block-style YAML for nested dicts of scalars and lists of scalars (each scalar
    JSON-encoded, which is valid YAML)."""
    pad = " " * indent
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{pad}{key}:\n{_yaml(item, indent + 2)}")
        elif isinstance(item, list):
            lines.append(f"{pad}{key}:\n" + "".join(f"{pad}  - {json.dumps(v)}\n" for v in item))
        else:
            lines.append(f"{pad}{key}: {json.dumps(item)}\n")
    return "".join(lines)
