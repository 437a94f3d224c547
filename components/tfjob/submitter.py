"""Who submits a training job: the KFP task's own pod, read once at the entry point.

The job inherits from it what the task was given (its namespace, service account and image
pull secrets: a namespace's ``default`` service account has neither the pipeline's cloud
credentials nor its registry secrets), is owned by it (Kubernetes garbage-collects the job
when the pod is deleted, so a killed submitter does not leave GPUs running), and is named
after the KFP run and task the pod executes (a retry of the task, or a retried run, finds
the job the previous attempt submitted instead of starting a second one).

KFP v2 sets ``KFP_POD_NAME`` and ``KFP_POD_UID`` (downward API) in every executor pod, whose
labels hold the run (``pipeline/runid``) and whose Argo annotation
``workflows.argoproj.io/node-name`` the task (``<workflow>.<dag>.<task>(<retry>)``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["Submitter", "submitter_from_pod", "job_name", "RUN_ID_LABEL", "NODE_ANNOTATION"]

RUN_ID_LABEL = "pipeline/runid"
NODE_ANNOTATION = "workflows.argoproj.io/node-name"
_RETRY_SUFFIX = re.compile(r"(\(\d+\))+$")


@dataclasses.dataclass(frozen=True)
class Submitter:
    """The submitting pod, as far as it is known (all None outside a pod).

    Args:
        namespace: where the job is created.
        pod_name, pod_uid: the pod that owns the job (same namespace only).
        service_account: the pod's service account (None: the namespace's default).
        image_pull_secrets: the pod's pull secrets, by name.
        run_key: what identifies the KFP run and task across retries (None: no KFP run).
    """

    namespace: str
    pod_name: str | None = None
    pod_uid: str | None = None
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    run_key: str | None = None

    def owner_reference(self) -> dict[str, Any] | None:
        """The ownerReference to the submitting pod (None when unknown). Not
        ``blockOwnerDeletion``: that needs RBAC on the pod's finalizers, and the pod's deletion
        should not wait for the job's."""
        if not (self.pod_name and self.pod_uid):
            return None
        return {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.pod_uid}

    def pod_settings(self) -> dict[str, Any]:
        """``serviceAccountName`` and ``imagePullSecrets`` of the job's pods (known ones only)."""
        settings: dict[str, Any] = {}
        if self.service_account:
            settings["serviceAccountName"] = self.service_account
        if self.image_pull_secrets:
            settings["imagePullSecrets"] = [{"name": n} for n in self.image_pull_secrets]
        return settings


def submitter_from_pod(pod: Mapping[str, Any], namespace: str | None = None) -> Submitter:
    """The :class:`Submitter` a pod object (as the API returns it, JSON) describes.

    ``namespace``: where the job goes (default: the pod's); the pod owns the job only in its
    own namespace (owner references cannot cross namespaces).
    """
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    own = metadata.get("namespace") or "default"
    target = namespace or own
    run_id = (metadata.get("labels") or {}).get(RUN_ID_LABEL)
    node = _RETRY_SUFFIX.sub("", (metadata.get("annotations") or {}).get(NODE_ANNOTATION, ""))
    same = target == own
    return Submitter(
        namespace=target,
        pod_name=metadata.get("name") if same else None,
        pod_uid=metadata.get("uid") if same else None,
        service_account=spec.get("serviceAccountName") if same else None,
        image_pull_secrets=tuple(s["name"] for s in spec.get("imagePullSecrets") or ()
                                 if s.get("name")) if same else (),
        run_key=f"{run_id}/{node}" if run_id else None)


def job_name(pipeline_name: str, run_key: str | None) -> str:
    """A DNS-1035 label for the job: ``<pipeline>-train-<8 hex>``, the hex derived from
    ``run_key`` (the same on every retry of the task), random without one.

    The JobSet, its headless service and its pods' hostnames
    (``<name>-node-0-<i>``) are named after it, so it is kept under 46 characters."""
    slug = re.sub(r"[^a-z0-9-]+", "-", pipeline_name.lower()).strip("-")[:30].strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"e{slug}"[:30].strip("-")
    digest = (hashlib.sha256(run_key.encode()).hexdigest() if run_key else uuid.uuid4().hex)
    return f"{slug}-train-{digest[:8]}"
