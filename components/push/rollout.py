"""Rolling a pushed version out on KServe (``PushTarget.kserve_rollout``): apply the
``InferenceService`` through the Kubernetes API, then wait for its new revision to be Ready.

The apply is server-side apply (``PATCH`` with ``application/apply-patch+yaml``, field manager
``estflow``, ``force``, strict field validation): it creates the InferenceService the first
time and updates it afterwards, so the task's service account needs get, create and patch on
``inferenceservices.serving.kserve.io``. Credentials are the pod's service account
(``/var/run/secrets/kubernetes.io/serviceaccount``, ``KUBERNETES_SERVICE_HOST``/``PORT``),
else the kubeconfig (``KUBECONFIG``, ``~/.kube/config``) for a push run outside a cluster.

Each push names a new ``storageUri``, so the apply makes KServe start a new revision whose
pods download that version. The wait reads the InferenceService until the predictor's
``latestCreatedRevision`` is a revision created after the apply (KServe's
``status.observedGeneration`` is the Knative Service's, not the InferenceService's, so it
cannot say whether the applied spec was seen), then either

* the ``Ready`` condition is true and the predictor's ``latestReadyRevision`` is its
  ``latestCreatedRevision`` (the new revision serves; with ``canaryTrafficPercent`` it takes
  that share of traffic and the previous rolled-out revision the rest), or
* the new revision failed: ``PredictorConfigurationReady``/``LatestDeploymentReady`` false, or
  ``status.modelStatus.transitionStatus`` ``BlockedByFailedLoad``/``InvalidSpec``: a
  :class:`RolloutError` with KServe's reason and message. KServe routes no traffic to a
  revision that never became Ready, so the previous one keeps serving.

Not Ready within the timeout is a :class:`RolloutError` too, with the last conditions seen.
Applying the ``storageUri`` already applied (a retried push) starts no revision: the current
one's state is the answer. In KServe's raw deployment mode (no revisions) the new version is
taken as served once ``Ready`` is true and ``modelStatus.transitionStatus`` (when KServe sets
it) is ``UpToDate``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["RolloutError", "connect", "task_namespace", "roll_out", "GROUP", "VERSION",
           "PLURAL", "SERVICE_ACCOUNT_DIR"]

GROUP, VERSION, PLURAL = "serving.kserve.io", "v1beta1", "inferenceservices"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
FIELD_MANAGER = "estflow"
POLL_SECONDS = 5.0
_FAILED_CONDITIONS = ("PredictorConfigurationReady", "LatestDeploymentReady")
_FAILED_TRANSITIONS = ("BlockedByFailedLoad", "InvalidSpec")


class RolloutError(RuntimeError):
    """The InferenceService could not be applied, or its new revision is not serving."""


def connect(service_account_dir: str | None = None):
    """A ``kubernetes`` ``CustomObjectsApi``: the pod's service account, else the kubeconfig.

    Raises:
        RolloutError: neither gives credentials (saying what each lacked).
    """
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    service_account_dir = service_account_dir or SERVICE_ACCOUNT_DIR
    configuration = k8s.Configuration()
    try:
        InClusterConfigLoader(f"{service_account_dir}/token",
                              f"{service_account_dir}/ca.crt").load_and_set(configuration)
    except k8s_config.ConfigException as in_cluster:
        try:
            k8s_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"),
                                        client_configuration=configuration)
        except (k8s_config.ConfigException, OSError) as kubeconfig:
            raise RolloutError(
                "PushTarget(kserve_rollout=True) needs Kubernetes credentials to apply the "
                "InferenceService: expected the task's service account (token and ca.crt in "
                f"{service_account_dir}, KUBERNETES_SERVICE_HOST/PORT set) or a kubeconfig "
                f"(KUBECONFIG or ~/.kube/config). Received: in-cluster: {in_cluster}; "
                f"kubeconfig: {kubeconfig}. Without kserve_rollout the push only writes the "
                "manifest") from None
    return k8s.CustomObjectsApi(k8s.ApiClient(configuration))


def task_namespace(declared: str | None, service_account_dir: str | None = None) -> str:
    """The declared namespace, else the pod's own (its service account's), else the
    kubeconfig context's, else ``default``."""
    if declared:
        return declared
    path = Path(service_account_dir or SERVICE_ACCOUNT_DIR) / "namespace"
    if path.is_file():
        return path.read_text().strip()
    try:
        from kubernetes import config as k8s_config

        _contexts, active = k8s_config.list_kube_config_contexts(
            os.environ.get("KUBECONFIG"))
        return (active or {}).get("context", {}).get("namespace") or "default"
    except Exception:  # no kubeconfig: connect() has said so already
        return "default"


def roll_out(api, service: dict, namespace: str, *, timeout: float,
             poll_seconds: float | None = None,
             progress: Callable[[str], None] = print) -> dict:
    """Apply ``service`` in ``namespace`` and wait (at most ``timeout`` seconds) for its new
    revision; return what serves: ``{"name", "namespace", "generation", "revision",
    "previous_revision", "traffic", "url"}``.

    Raises:
        RolloutError: the apply was refused, the revision failed, or the wait timed out.
    """
    name = service["metadata"]["name"]
    before = _get(api, name, namespace, missing_ok=True)
    # a retried push applies what is already there: no new revision will come
    again = before is not None and _storage_uri(before) == _storage_uri(service)
    old = None if again else _created_revision(before)
    applied = _apply(api, {**service, "metadata": {**service["metadata"],
                                                   "namespace": namespace}}, namespace)
    progress(f"{'created' if before is None else 'updated'} InferenceService {namespace}/{name}"
             f"; waiting up to {timeout:g} s for its new revision to be Ready")
    deadline = time.monotonic() + timeout
    current = applied
    while True:
        verdict = _verdict(current, old, again)
        if verdict == "ready":
            return _serving(current, namespace)
        if verdict != "waiting":
            raise RolloutError(f"InferenceService {namespace}/{name}: the new revision failed: "
                               f"{verdict}. KServe keeps serving the previous revision")
        if time.monotonic() >= deadline:
            raise RolloutError(f"InferenceService {namespace}/{name}: the new revision is not "
                               f"Ready after {timeout:g} s (PushTarget.kserve_rollout_timeout); "
                               f"last status: {_conditions(current)}. KServe keeps serving the "
                               "previous revision until it is")
        time.sleep(poll_seconds or POLL_SECONDS)
        current = _get(api, name, namespace)


def _apply(api, service: dict, namespace: str) -> dict:
    from kubernetes.client.exceptions import ApiException

    name = service["metadata"]["name"]
    try:
        # the generated patch_namespaced_custom_object offers no apply content type
        return api.api_client.call_api(
            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}", "PATCH",
            query_params=[("fieldManager", FIELD_MANAGER), ("force", "true"),
                          ("fieldValidation", "Strict")],
            header_params={"Content-Type": "application/apply-patch+yaml",
                           "Accept": "application/json"},
            body=service, auth_settings=["BearerToken"], response_type="object",
            _return_http_data_only=True)
    except ApiException as err:
        raise RolloutError(f"applying InferenceService {namespace}/{name} failed: "
                           f"{_api_message(err)}{_hint(err)}") from None


def _get(api, name: str, namespace: str, *, missing_ok: bool = False) -> dict | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as err:
        if missing_ok and err.status == 404 and "not found" in str(err.body):
            return None
        raise RolloutError(f"reading InferenceService {namespace}/{name} failed: "
                           f"{_api_message(err)}{_hint(err)}") from None


def _api_message(err) -> str:
    try:
        return f"HTTP {err.status}: {json.loads(err.body)['message']}"
    except (TypeError, ValueError, KeyError):
        return f"HTTP {err.status}: {err.reason}"


def _hint(err) -> str:
    if err.status == 403:
        return (" (the task's service account needs get, create and patch on "
                "inferenceservices.serving.kserve.io in this namespace)")
    if err.status == 404:
        return " (is KServe installed? the InferenceService CRD is not served)"
    return ""


def _storage_uri(service: dict | None) -> str | None:
    model = ((service or {}).get("spec") or {}).get("predictor", {}).get("model") or {}
    return model.get("storageUri")


def _created_revision(service: dict | None) -> str | None:
    status = (service or {}).get("status") or {}
    return ((status.get("components") or {}).get("predictor") or {}).get(
        "latestCreatedRevision")


def _verdict(service: dict, old: str | None, again: bool) -> str:
    """``"ready"``, ``"waiting"``, or why the new revision failed; ``old``: the revision
    before the apply, ``again``: the apply changed nothing."""
    status = service.get("status") or {}
    created = _created_revision(service)
    revisions = created is not None or old is not None
    if revisions and not again and created in (None, old):
        return "waiting"  # no new revision yet: what status says is the previous one's
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    model = status.get("modelStatus") or {}
    if model.get("transitionStatus") in _FAILED_TRANSITIONS:
        info = model.get("lastFailureInfo") or {}
        return (f"{model['transitionStatus']}: {info.get('reason', '')}: "
                f"{info.get('message', '')}")
    for kind in _FAILED_CONDITIONS:
        condition = conditions.get(kind)
        if condition and condition.get("status") == "False":
            return f"{kind} {condition.get('reason', '')}: {condition.get('message', '')}"
    predictor = (status.get("components") or {}).get("predictor") or {}
    if conditions.get("Ready", {}).get("status") != "True":
        return "waiting"
    if revisions:
        return "ready" if predictor.get("latestReadyRevision") == created else "waiting"
    return "ready" if model.get("transitionStatus") in (None, "UpToDate") else "waiting"


def _conditions(service: dict) -> str:
    conditions = (service.get("status") or {}).get("conditions") or []
    return "; ".join(f"{c.get('type')}={c.get('status')}"
                     + (f" ({c.get('reason')}: {c.get('message')})" if c.get("reason") else "")
                     for c in conditions) or "no conditions yet"


def _serving(service: dict, namespace: str) -> dict:
    status = service.get("status") or {}
    predictor = (status.get("components") or {}).get("predictor") or {}
    return {"name": service["metadata"]["name"], "namespace": namespace,
            "generation": service["metadata"].get("generation"),
            "revision": predictor.get("latestReadyRevision"),
            "previous_revision": predictor.get("previousRolledoutRevision"),
            "traffic": [{k: t[k] for k in ("revisionName", "percent", "tag") if k in t}
                        for t in predictor.get("traffic") or []],
            "url": status.get("url")}
