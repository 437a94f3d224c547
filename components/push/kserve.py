"""The KServe ``InferenceService`` manifest a push writes next to ``push.json``
(``PushTarget.kserve_manifest``)."""

from __future__ import annotations

import json
import re

from estflow.dsl.specs import PushTarget

__all__ = ["kserve_manifest", "kserve_name"]


def kserve_name(model_name: str) -> str:
    """``model_name`` as a Kubernetes resource name (DNS-1035 label: ``chicago_taxi`` ->
    ``chicago-taxi``)."""
    name = re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")[:63].rstrip("-")
    return name if name[:1].isalpha() else f"m-{name}"[:63].rstrip("-")


def kserve_manifest(target: PushTarget, storage_uri: str, version: int) -> str:
    """A KServe ``InferenceService`` (``serving.kserve.io/v1beta1``) serving ``storage_uri``
    with KServe's TF Serving runtime, as YAML text.

    The predictor is the ``model`` form (``modelFormat: tensorflow``), with the TF Serving
    image tag always set: KServe's own default (2.6.2) cannot load a TF 2.21 export ("Op type
    not registered 'DisableCopyOnRead'"); the default here is
    ``PushTarget.serving_runtime_version``. The manifest is checked against KServe's
    InferenceService CRD schema in tests/pipelines/test_kserve_manifest.py.
    """
    name = kserve_name(target.model_name)
    metadata = {"name": name}
    if target.kserve_namespace:
        metadata["namespace"] = target.kserve_namespace
    metadata["annotations"] = {"estflow/model-version": str(version)}
    predictor = {}
    if target.kserve_service_account:
        predictor["serviceAccountName"] = target.kserve_service_account
    predictor["model"] = {"modelFormat": {"name": "tensorflow", "version": "2"},
                          "runtimeVersion": target.serving_runtime_version,
                          "storageUri": storage_uri}
    document = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": metadata, "spec": {"predictor": predictor}}
    header = (
        f"# KServe InferenceService for estflow model {target.model_name!r}, written when "
        f"version {version} was pushed.\n"
        f"# TF Serving {target.serving_runtime_version} (KServe's kserve-tensorflow-serving "
        "runtime) serves the highest\n"
        "# version under storageUri; KServe's storage initializer copies storageUri when a\n"
        "# predictor pod starts, so a later push is served by pods started after it (re-apply\n"
        "# this file: the version annotation changes, or restart the predictor). Clients call\n"
        f"# /v1/models/{name}:predict (TF Serving's model name is the service name).\n")
    return header + _yaml(document)


def _yaml(value: dict, indent: int = 0) -> str:
    """Block-style YAML for nested dicts of strings (each scalar JSON-quoted, valid YAML)."""
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{' ' * indent}{key}:\n{_yaml(item, indent + 2)}")
        else:
            lines.append(f"{' ' * indent}{key}: {json.dumps(item)}\n")
    return "".join(lines)
