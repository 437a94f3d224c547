"""The training job, steps 1-4 of the entry point's docstring: stage the data, submit the job
and follow it, copy the model back (:func:`run`); and who submits it, read from this pod
(:func:`read_submitter`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from estflow.components._runtime import entry as _runtime
from estflow.components.tfjob import follow
from estflow.components.tfjob import manifests
from estflow.components.tfjob.follow import JobError
from estflow.components.tfjob.staging import copytree
from estflow.components.tfjob.staging import write_text
from estflow.components.tfjob.submitter import Submitter
from estflow.components.tfjob.submitter import job_name
from estflow.components.tfjob.submitter import submitter_from_pod
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources
from estflow.dsl.specs import Cluster

__all__ = ["checked_cluster", "run", "read_submitter"]

_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def checked_cluster(pipeline: Pipeline) -> Cluster:
    """``run_config.cluster``, which must name a ``shared_dir``; JobError otherwise."""
    cluster = pipeline.run_config.cluster
    if cluster is None or not cluster.shared_dir:
        raise JobError("a training job needs run_config.cluster.shared_dir (gs://... or a PVC "
                       f"path mounted in the train step); received cluster={cluster!r}")
    return cluster


def run(pipeline: Pipeline, transformed: str, model: str, image: str,
           clients: follow.Clients, submitter: Submitter, *, name: str | None = None,
           poll_seconds: float = 10, timeout: float | None = None,
           ttl_seconds: int = manifests.DEFAULT_TTL_SECONDS,
           runtime: str = manifests.RUNTIME) -> dict[str, Any]:
    """Stage, run the job, copy the model back (steps 1-4 of :mod:`.__main__`'s docstring).

    Returns:
        The job's last observed object.

    Raises:
        JobError: the job could not be submitted, failed, or timed out.
    """
    started = time.monotonic()
    cluster = checked_cluster(pipeline)
    name = name or job_name(pipeline.name, submitter.run_key)
    shared = f"{cluster.shared_dir.rstrip('/')}/{name}"
    echo = _runtime.Progress("train")
    if submitter.run_key is None and not submitter.pod_uid:
        echo("not in a KFP task pod: the job has a random name and no owner")
    echo(f"staging the transformed data to {shared}/transformed")
    copytree(transformed, f"{shared}/transformed")
    write_text(f"{shared}/{Files.SPEC}", pipeline.to_json())
    resources = pipeline.resources.get("train", Resources())
    try:  # the job ends before the task does: the copy-back below gets its margin
        deadline = manifests.job_deadline(resources.timeout_seconds, time.monotonic() - started)
    except ValueError as err:
        raise JobError(str(err)) from None
    timeout = deadline if timeout is None else timeout  # Trainer 2.1's form has no deadline
    request = manifests.JobRequest(
        name=name, image=image, cluster=cluster, resources=resources,
        args=("--spec", f"{shared}/{Files.SPEC}", "--transformed", f"{shared}/transformed",
              "--model", f"{shared}/model"),
        submitter=submitter, ttl_seconds=ttl_seconds, runtime=runtime, deadline_seconds=deadline,
        labels=(("estflow/pipeline", re.sub(r"[^a-z0-9-]", "-", pipeline.name)[:63]
                 .strip("-") or "estflow"),))
    if cluster.job_kind == "tfjob":
        kind, forms, attempts = follow.TFJOB, (manifests.tfjob_manifest(request),), 1
    else:
        kind, forms = follow.TRAINJOB, manifests.trainjob_manifests(request)
        attempts = 1 + resources.retries
    for attempt in range(1, attempts + 1):
        try:
            job = follow.run_job(clients, kind, forms, poll_seconds=poll_seconds,
                                 timeout=timeout, echo=echo,
                                 owner=submitter.owner_reference())
            break
        except follow.JobFailed as err:
            if attempt == attempts:
                raise
            echo(f"{err}; submitting it again (attempt {attempt + 1} of {attempts})")
    copytree(f"{shared}/model", model)
    echo(f"copied the model from {shared}/model")
    return job


def read_submitter(core: k8s.CoreV1Api, env: Mapping[str, str], namespace: str | None,
                   echo: Callable[[str], None]) -> Submitter:
    """This pod, read through the API (``KFP_POD_NAME``, else ``HOSTNAME``), as the job's
    :class:`Submitter`; without it (not a pod, or no RBAC to read pods) only the namespace."""
    pod_namespace = env.get("NAMESPACE") or _pod_namespace()
    pod_name = env.get("KFP_POD_NAME") or env.get("HOSTNAME")
    if pod_name:
        try:
            pod = core.read_namespaced_pod(pod_name, pod_namespace)
            return submitter_from_pod(core.api_client.sanitize_for_serialization(pod),
                                      namespace)
        except ApiException as err:
            echo(f"cannot read this pod ({pod_namespace}/{pod_name}: HTTP {err.status}): the "
                 "job gets the namespace's default service account, no pull secrets, no "
                 "owner and a random name (the service account needs get on pods)")
    return Submitter(namespace=namespace or pod_namespace)


def _pod_namespace() -> str:
    """This pod's namespace (its service account's), else ``default``."""
    path = Path(_NAMESPACE_FILE)
    return path.read_text().strip() if path.is_file() else "default"
