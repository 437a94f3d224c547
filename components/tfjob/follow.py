"""Submit a training job, follow it to its end, copy its pods' logs, clean up.

The lifecycle, for a TFJob or a TrainJob alike (:data:`TFJOB`, :data:`TRAINJOB`):

1. create it (``fieldValidation=Strict``: a field the server's CRD does not declare is refused,
   not silently dropped; of several forms of the manifest, the first the server accepts is
   used). If a job of that name exists, it was submitted by an earlier attempt of the same KFP
   task (names derive from the run and task): a running or finished one is *adopted* (followed,
   and owned by this pod too, so it outlives the earlier pod); a failed one is deleted and
   submitted again;
2. poll its status, printing a line per change, until it succeeds, fails, or times out;
3. copy the logs of its pods into the task's log (``[pod] line``), while they still exist;
4. delete it when it succeeded, timed out, or the task was stopped (SIGTERM, interrupt). A
   failed job is kept, with its pods and their logs, for inspection: its TTL and its owner
   reference to this pod delete it later.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

__all__ = ["JobKind", "TFJOB", "TRAINJOB", "JobError", "JobFailed", "Clients", "run_job",
           "copy_logs", "tfjob_state", "trainjob_state"]


class JobError(RuntimeError):
    """The job could not be submitted, failed, or did not finish in time."""


class JobFailed(JobError):
    """The job failed (it is kept for inspection)."""


def tfjob_state(job: dict[str, Any]) -> tuple[str, str]:
    """(state, message) of a TFJob: its latest condition whose status is True
    (``Created``, ``Running``, ``Restarting``, ``Succeeded``, ``Failed``; ``Pending`` before
    the operator has set any)."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or ()
                  if str(c.get("status")) == "True"]
    if not conditions:
        return "Pending", ""
    last = conditions[-1]
    return str(last.get("type")), str(last.get("message") or last.get("reason") or "")


def trainjob_state(job: dict[str, Any]) -> tuple[str, str]:
    """(state, message) of a TrainJob: ``Succeeded`` (condition ``Complete``), ``Failed``,
    ``Suspended``, else ``Running`` once a pod is active, else ``Pending``."""
    status = job.get("status") or {}
    true = {c.get("type"): c for c in status.get("conditions") or ()
            if str(c.get("status")) == "True"}
    for condition, state in (("Failed", "Failed"), ("Complete", "Succeeded"),
                             ("Suspended", "Suspended")):
        if condition in true:
            c = true[condition]
            return state, str(c.get("message") or c.get("reason") or "")
    active = sum(int(j.get("active") or 0) for j in status.get("jobsStatus") or ())
    return ("Running" if active else "Pending"), ""


def _tfjob_replicas(job: dict[str, Any]) -> str:
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    parts = [f"{replica} " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())
                                       if isinstance(n, int) and n)
             for replica, counts in sorted(statuses.items())
             if any(isinstance(v, int) and v for v in (counts or {}).values())]
    return "; ".join(parts)


def _trainjob_replicas(job: dict[str, Any]) -> str:
    parts = []
    for jobs in (job.get("status") or {}).get("jobsStatus") or ():
        counts = [f"{jobs[k]} {k}" for k in ("active", "ready", "succeeded", "failed")
                  if jobs.get(k)]
        if counts:
            parts.append(f"{jobs.get('name')} " + ", ".join(counts))
    return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class JobKind:
    """A custom resource kind estflow submits: its REST coordinates, how to read its state,
    and how to find its pods."""

    kind: str
    group: str
    version: str
    plural: str
    container: str
    state: Callable[[dict[str, Any]], tuple[str, str]]
    replicas: Callable[[dict[str, Any]], str]
    pod_selector: Callable[[str], str]
    install_hint: str

    def describe(self, manifest: dict[str, Any]) -> str:
        spec = manifest["spec"]
        if "tfReplicaSpecs" in spec:
            return ", ".join(f"{r} x{s['replicas']}" for r, s in spec["tfReplicaSpecs"].items())
        return f"{spec['trainer']['numNodes']} nodes on runtime {spec['runtimeRef']['name']}"


TFJOB = JobKind("TFJob", "kubeflow.org", "v1", "tfjobs", "tensorflow", tfjob_state,
                _tfjob_replicas, lambda name: f"estflow/job={name}",
                "is the Kubeflow Training Operator (CRD tfjobs.kubeflow.org) installed? "
                "Kubeflow 1.11 and later install Trainer v2: declare Cluster(job_kind="
                "'trainjob')")
TRAINJOB = JobKind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", "node",
                   trainjob_state, _trainjob_replicas,
                   lambda name: f"jobset.sigs.k8s.io/jobset-name={name}",
                   "is Kubeflow Trainer v2 (CRD trainjobs.trainer.kubeflow.org) installed, "
                   "with estflow's ClusterTrainingRuntime (pipelines/kubernetes/"
                   "trainer-runtime.yaml)? For the Training Operator declare "
                   "Cluster(job_kind='tfjob')")


@dataclasses.dataclass(frozen=True)
class Clients:
    """The Kubernetes API clients a submission uses, and its clock (tests inject both)."""

    custom: k8s.CustomObjectsApi
    core: k8s.CoreV1Api
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


@dataclasses.dataclass(frozen=True)
class _Job:
    kind: JobKind
    name: str
    namespace: str

    def __str__(self) -> str:
        return f"{self.kind.kind} {self.namespace}/{self.name}"


def run_job(clients: Clients, kind: JobKind, manifests: Sequence[dict[str, Any]], *,
            poll_seconds: float = 10, timeout: float | None = None,
            echo: Callable[[str], None] = print, owner: dict[str, Any] | None = None,
            log_lines: int = 2000) -> dict[str, Any]:
    """Steps 1-4 of the module docstring for the job ``manifests`` describe (alternative forms
    of one job, preferred first). ``owner``: this pod's owner reference, added to an adopted
    job. Returns the job's last observed object (succeeded).

    Raises:
        JobError: it could not be created, it failed (with its condition's message; kept), or
            it did not finish within ``timeout`` seconds (deleted).
    """
    metadata = manifests[0]["metadata"]
    job = _Job(kind, metadata["name"], metadata["namespace"])
    _submit(clients, job, manifests, echo, owner)
    kept = False
    try:
        try:
            return _follow(clients, job, poll_seconds, timeout, echo)
        finally:  # whatever happened, while the pods still exist
            copy_logs(clients.core, kind, job.name, job.namespace, echo, log_lines)
    except JobFailed:
        kept = True
        raise
    finally:  # success, timeout, interrupt, SIGTERM: the job goes; a failed one stays
        if not kept:
            _delete(clients, job, echo, wait=False)


def _submit(clients: Clients, job: _Job, manifests: Sequence[dict[str, Any]],
            echo: Callable[[str], None], owner: dict[str, Any] | None) -> None:
    for attempt in range(2):  # the second after deleting a failed job of the same name
        try:
            manifest = _create(clients.custom, job, manifests)
        except ApiException as err:
            if err.status != 409:
                raise JobError(f"could not create {job}: {_api_error(err, job)}") from None
            existing = _get(clients.custom, job)
            state, message = job.kind.state(existing)
            if state == "Failed" and attempt == 0:
                echo(f"{job}: a failed job of this name exists (an earlier attempt of this "
                     f"task: {message or 'no message'}); deleting it and submitting again")
                _delete(clients, job, echo, wait=True)
                continue
            echo(f"{job}: submitted by an earlier attempt of this task ({state}); "
                 "following it")
            _add_owner(clients.custom, job, existing, owner, echo)
            return
        echo(f"{job}: submitted ({job.kind.describe(manifest)})")
        return


def _create(api: k8s.CustomObjectsApi, job: _Job,
            manifests: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Create the first of ``manifests`` the server's schema accepts; returns it."""
    for i, manifest in enumerate(manifests):
        try:
            api.create_namespaced_custom_object(job.kind.group, job.kind.version, job.namespace,
                                                job.kind.plural, manifest,
                                                field_validation="Strict")
            return manifest
        except ApiException as err:
            if i + 1 < len(manifests) and err.status == 400 and _unknown_field(err):
                continue  # an older release of the CRD: try the next form
            raise
    raise AssertionError("unreachable: no manifest")


def _unknown_field(err: ApiException) -> bool:
    text = (err.body or "") if isinstance(err.body, str) else ""
    return "unknown field" in text or "field not declared in schema" in text


def _follow(clients: Clients, job: _Job, poll_seconds: float, timeout: float | None,
            echo: Callable[[str], None]) -> dict[str, Any]:
    deadline = None if timeout is None else clients.clock() + timeout
    last_line = None
    while True:
        current = _get(clients.custom, job)
        state, message = job.kind.state(current)
        replicas = job.kind.replicas(current)
        line = (f"{job}: {state}" + (f" [{replicas}]" if replicas else "")
                + (f": {message}" if message else ""))
        if line != last_line:
            echo(line)
            last_line = line
        if state == "Succeeded":
            return current
        if state == "Failed":
            raise JobFailed(f"{job} failed: {message or 'no message in its Failed condition'} "
                           "(kept, with its pods, for inspection)")
        if deadline is not None and clients.clock() >= deadline:
            raise JobError(f"{job} did not finish within {timeout}s (last state {state})")
        clients.sleep(poll_seconds)


def copy_logs(core: k8s.CoreV1Api, kind: JobKind, name: str, namespace: str,
              echo: Callable[[str], None], tail_lines: int = 2000) -> None:
    """Echo the last ``tail_lines`` of every pod of the job, each line prefixed with the pod's
    name. Best effort: a pod or log that cannot be read is reported, not raised."""
    try:
        listed = core.list_namespaced_pod(namespace, label_selector=kind.pod_selector(name))
    except ApiException as err:
        echo(f"{kind.kind} {namespace}/{name}: cannot list its pods for their logs: HTTP "
             f"{err.status} (the service account needs get/list on pods and get on pods/log)")
        return
    for pod in sorted(listed.items, key=lambda p: p.metadata.name):
        pod_name = pod.metadata.name
        try:
            text = core.read_namespaced_pod_log(pod_name, namespace, container=kind.container,
                                                tail_lines=tail_lines)
        except ApiException as err:
            echo(f"[{pod_name}] (no log: HTTP {err.status} {err.reason or ''})".rstrip())
            continue
        echo(f"----- logs of pod {pod_name} ({pod.status.phase if pod.status else '?'}) -----")
        for line in (text or "").splitlines():
            echo(f"[{pod_name}] {line}")


def _get(api: k8s.CustomObjectsApi, job: _Job) -> dict[str, Any]:
    try:
        return api.get_namespaced_custom_object(job.kind.group, job.kind.version, job.namespace,
                                                job.kind.plural, job.name)
    except ApiException as err:
        raise JobError(f"could not read {job}: {_api_error(err, job)}") from None


def _add_owner(api: k8s.CustomObjectsApi, job: _Job, existing: dict[str, Any],
               owner: dict[str, Any] | None, echo: Callable[[str], None]) -> None:
    """Make this pod an owner of an adopted job too: the job then lives while either pod does
    (garbage collection waits for all owners), and no longer than both."""
    owners = (existing.get("metadata") or {}).get("ownerReferences") or []
    if owner is None or any(o.get("uid") == owner["uid"] for o in owners):
        return
    # The client sends custom-object patches as JSON merge patches, which replace lists whole.
    patch = {"metadata": {"ownerReferences": [*owners, owner]}}
    try:
        api.patch_namespaced_custom_object(job.kind.group, job.kind.version, job.namespace,
                                           job.kind.plural, job.name, patch)
    except ApiException as err:
        echo(f"{job}: could not add this pod as its owner: {_api_error(err, job)}")


def _delete(clients: Clients, job: _Job, echo: Callable[[str], None], *, wait: bool,
            wait_seconds: float = 300) -> None:
    try:
        clients.custom.delete_namespaced_custom_object(
            job.kind.group, job.kind.version, job.namespace, job.kind.plural, job.name,
            body=k8s.V1DeleteOptions(propagation_policy="Foreground"))
    except ApiException as err:
        if err.status != 404:
            echo(f"{job}: could not delete it: {_api_error(err, job)}")
        return
    echo(f"{job}: deleted")
    deadline = clients.clock() + wait_seconds
    while wait and clients.clock() < deadline:  # foreground deletion finishes with the pods
        try:
            _get(clients.custom, job)
        except JobError:
            return
        clients.sleep(2)


def _api_error(err: ApiException, job: _Job) -> str:
    hints = {404: job.kind.install_hint,
             403: f"the pod's service account needs RBAC to create/get/patch/delete "
                  f"{job.kind.plural}.{job.kind.group} in namespace {job.namespace} "
                  "(estflow rbac --namespace NS --service-account SA)"}
    detail = err.reason or ""
    try:
        detail = json.loads(err.body or "{}").get("message") or detail
    except (ValueError, AttributeError, TypeError):
        pass
    return f"HTTP {err.status} {detail}".strip() + (f" ({hints[err.status]})"
                                                     if err.status in hints else "")
