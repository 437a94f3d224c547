"""Train as a Kubeflow Training Operator TFJob: the KFP train task of a pipeline whose
``RunConfig.cluster`` asks for several processes.

``python -m estflow.components.tfjob --spec S --transformed IN --model OUT --image IMAGE``

KFP v2 has no resource op, so the task submits the job itself, through the Kubernetes API:

1. stage: copy the transformed data to ``<cluster.shared_dir>/<job>/transformed`` and write
   the spec there (the task's artifact directories are local to its pod; the replicas read and
   write ``shared_dir``: a ``gs://`` URL or a PVC that ``resources["train"].pvcs`` mounts in
   the task and, by the same declaration, in every replica);
2. submit a ``kubeflow.org/v1`` TFJob (:func:`tfjob_manifest`): ``Worker`` replicas (worker 0
   is the chief) under multi_worker_mirrored; ``Chief`` + ``Worker`` + ``PS`` under
   parameter_server; an ``Evaluator`` when asked. Every replica runs the image's
   ``python -m estflow.components.train`` in the container named ``tensorflow`` (the one the
   operator sets TF_CONFIG in), with the train step's resources, node pool, accelerator,
   tolerations, secrets and PVCs;
3. follow it (:func:`run_tfjob`): poll its status conditions (Created, Running, Restarting,
   Succeeded, Failed), print a line per change, fail with the failing condition's message;
   delete it at the end, also on failure, timeout, or when the task is stopped (SIGTERM);
4. copy ``<shared_dir>/<job>/model`` (written by the chief) to the task's model artifact.

The pipeline's service account needs RBAC to create/get/delete ``tfjobs.kubeflow.org`` in the
namespace (default: the task pod's own). Kubernetes access is configured here, at the entry
point: in-cluster credentials, else the kubeconfig (``KUBECONFIG``, ``~/.kube/config``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from estflow.components._runtime import entry as _runtime
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.placement import Placement
from estflow.dsl.resources import Resources
from estflow.dsl.specs import Cluster

__all__ = ["GROUP", "VERSION", "PLURAL", "CONTAINER", "TFJobError", "tfjob_manifest",
           "run_tfjob", "job_state", "job_name", "submit", "main"]

GROUP, VERSION, PLURAL, KIND = "kubeflow.org", "v1", "tfjobs", "TFJob"
CONTAINER = "tensorflow"  # the container the Training Operator sets TF_CONFIG in
PORT = 2222  # the operator's default tfjob-port
TRAIN_MODULE = "estflow.components.train"
_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_TERMINAL = ("Succeeded", "Failed")


class TFJobError(RuntimeError):
    """The TFJob could not be submitted, failed, or did not finish in time."""


# -- the manifest ------------------------------------------------------------------------------
def tfjob_manifest(name: str, namespace: str, image: str, cluster: Cluster,
                   resources: Resources, args: list[str],
                   labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A ``kubeflow.org/v1`` TFJob running ``python -m estflow.components.train ARGS`` in
    every replica of ``cluster``.

    Args:
        resources: the train step's resources: compute, placement and storage of Chief and
            Worker pods (and the Evaluator's unless ``cluster.evaluator_resources``); its
            secrets and PVCs are mounted in every pod, PS included (every process reads the
            spec from shared storage). ``retries`` -> ``runPolicy.backoffLimit``,
            ``timeout_seconds`` -> ``runPolicy.activeDeadlineSeconds``.
    """
    pod_labels = {"app.kubernetes.io/part-of": "estflow", "app.kubernetes.io/component": "train",
                  "estflow/tfjob": name, **(labels or {})}
    compute = {"Chief": resources, "Worker": resources,
               "PS": cluster.ps_resources or Resources(),
               "Evaluator": cluster.evaluator_resources or resources}
    replica_specs = {
        replica: {"replicas": count, "restartPolicy": "OnFailure",
                  "template": _pod_template(image, args, compute[replica], resources, pod_labels)}
        for replica, count in cluster.replicas().items()}
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": resources.retries}
    if resources.timeout_seconds is not None:
        run_policy["activeDeadlineSeconds"] = resources.timeout_seconds
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
            "spec": {"runPolicy": run_policy, "tfReplicaSpecs": replica_specs}}


def _pod_template(image: str, args: list[str], compute: Resources, storage: Resources,
                  labels: dict[str, str]) -> dict[str, Any]:
    placement = Placement.of(compute.accelerator, compute.node_pool)
    container: dict[str, Any] = {
        "name": CONTAINER, "image": image, "command": ["python", "-m", TRAIN_MODULE],
        "args": list(args), "ports": [{"name": "tfjob-port", "containerPort": PORT}],
        "resources": _container_resources(compute, placement)}
    env = [{"name": var, "valueFrom": {"secretKeyRef": {
        "name": s.secret, "key": key, "optional": s.optional}}}
        for s in storage.secrets_as_env for key, var in s.key_to_env.items()]
    mounts = [{"name": f"secret-{i}", "mountPath": s.mount_path, "readOnly": True}
              for i, s in enumerate(storage.secrets_as_volume)]
    mounts += [{"name": f"pvc-{i}", "mountPath": p.mount_path,
                **({"subPath": p.sub_path} if p.sub_path else {})}
               for i, p in enumerate(storage.pvcs)]
    volumes = [{"name": f"secret-{i}", "secret": {"secretName": s.secret,
                                                   "optional": s.optional}}
               for i, s in enumerate(storage.secrets_as_volume)]
    volumes += [{"name": f"pvc-{i}", "persistentVolumeClaim": {"claimName": p.pvc_name}}
                for i, p in enumerate(storage.pvcs)]
    container.update({k: v for k, v in (("env", env), ("volumeMounts", mounts)) if v})
    tolerations = [*placement.tolerations,
                   *(t for t in compute.tolerations if t not in placement.tolerations)]
    spec: dict[str, Any] = {"containers": [container]}
    optional = (("nodeSelector", dict(placement.node_selector)),
                ("tolerations", [t.to_k8s() for t in tolerations]), ("volumes", volumes))
    spec.update({k: v for k, v in optional if v})
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _container_resources(compute: Resources, placement: Placement) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", compute.cpu_request),
                                  ("memory", compute.memory_request)) if v is not None}
    limits = {k: v for k, v in (("cpu", compute.cpu_limit),
                                ("memory", compute.memory_limit)) if v is not None}
    if placement.resource:  # extended resources are set as limits (requests follow them)
        limits[placement.resource] = str(placement.count)
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


# -- following a job ---------------------------------------------------------------------------
def job_state(job: dict[str, Any]) -> tuple[str, str]:
    """(state, message) of a TFJob: its latest condition whose status is True
    (``"Pending"`` before the operator has set any)."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or ()
                  if str(c.get("status")) == "True"]
    if not conditions:
        return "Pending", ""
    last = conditions[-1]
    return str(last.get("type")), str(last.get("message") or last.get("reason") or "")


def _replicas_line(job: dict[str, Any]) -> str:
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    parts = [f"{replica} " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if n)
             for replica, counts in sorted(statuses.items()) if any((counts or {}).values())]
    return f" [{'; '.join(parts)}]" if parts else ""


def run_tfjob(api: k8s.CustomObjectsApi, manifest: dict[str, Any], poll_seconds: float = 10,
              timeout: float | None = None, echo: Callable[[str], None] = print, *,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Create the TFJob ``manifest``, follow it to the end, delete it (whatever happened).

    Returns:
        The job's last observed object (state Succeeded).

    Raises:
        TFJobError: creating it failed, it failed (with its condition's message), or it did
            not finish within ``timeout`` seconds.
    """
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    where = f"TFJob {namespace}/{name}"
    try:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
    except ApiException as err:
        raise TFJobError(f"could not create {where}: {_api_error(err, namespace)}") from None
    replicas = manifest["spec"]["tfReplicaSpecs"]
    echo(f"{where}: submitted (" + ", ".join(f"{replica} x{spec['replicas']}"
                                              for replica, spec in replicas.items()) + ")")
    try:
        return _follow(api, name, namespace, poll_seconds, timeout, echo, sleep, clock)
    finally:
        _delete(api, name, namespace, echo)


def _follow(api, name, namespace, poll_seconds, timeout, echo, sleep, clock) -> dict:
    where = f"TFJob {namespace}/{name}"
    deadline = None if timeout is None else clock() + timeout
    last = None
    while True:
        try:
            job = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as err:
            raise TFJobError(f"could not read {where}: {_api_error(err, namespace)}") from None
        state, message = job_state(job)
        line = f"{where}: {state}{_replicas_line(job)}" + (f": {message}" if message else "")
        if line != last:
            echo(line)
            last = line
        if state == "Succeeded":
            return job
        if state == "Failed":
            raise TFJobError(f"{where} failed: {message or 'no message in its Failed condition'}")
        if deadline is not None and clock() >= deadline:
            raise TFJobError(f"{where} did not finish within {timeout}s (last state {state})")
        sleep(poll_seconds)


def _delete(api, name: str, namespace: str, echo: Callable[[str], None]) -> None:
    try:
        api.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name,
            body=k8s.V1DeleteOptions(propagation_policy="Foreground"))
        echo(f"TFJob {namespace}/{name}: deleted")
    except ApiException as err:
        if err.status != 404:
            echo(f"TFJob {namespace}/{name}: could not delete it: {_api_error(err, namespace)}")


def _api_error(err: ApiException, namespace: str) -> str:
    hints = {404: "is the Kubeflow Training Operator (CRD tfjobs.kubeflow.org) installed?",
             403: f"the pod's service account needs RBAC to create/get/delete "
                  f"tfjobs.kubeflow.org in namespace {namespace}"}
    detail = err.reason or ""
    try:
        detail = json.loads(err.body or "{}").get("message") or detail
    except (ValueError, AttributeError):
        pass
    return f"HTTP {err.status} {detail}".strip() + (f" ({hints[err.status]})"
                                                     if err.status in hints else "")


# -- staging on shared storage -----------------------------------------------------------------
def _is_url(path: str) -> bool:
    return "://" in path


def _copytree(src: str, dst: str) -> None:
    """Copy a directory tree, locally or to/from a URL (gs://...)."""
    if not _is_url(src) and not _is_url(dst):
        shutil.copytree(src, dst, dirs_exist_ok=True)
        return
    # TensorFlow's filesystems only when a URL is involved: a PVC run never imports it.
    import tensorflow as tf

    for root, _dirs, files in tf.io.gfile.walk(src):
        target = dst + root[len(src):]
        tf.io.gfile.makedirs(target)
        for file in files:
            tf.io.gfile.copy(f"{root}/{file}", f"{target}/{file}", overwrite=True)


def _write_text(path: str, text: str) -> None:
    if _is_url(path):
        import tensorflow as tf  # see _copytree

        tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(text)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


def job_name(pipeline_name: str) -> str:
    """A unique DNS-1123 name: ``<pipeline>-train-<8 hex>``."""
    slug = re.sub(r"[^a-z0-9-]+", "-", pipeline_name.lower()).strip("-")[:30].strip("-")
    return f"{slug or 'estflow'}-train-{uuid.uuid4().hex[:8]}"


def _checked_cluster(pipeline: Pipeline) -> Cluster:
    cluster = pipeline.run_config.cluster
    if cluster is None or not cluster.shared_dir:
        raise TFJobError("a TFJob needs run_config.cluster.shared_dir (gs://... or a PVC path "
                         f"mounted in the train step); received cluster={cluster!r}")
    return cluster


def submit(pipeline: Pipeline, transformed: str, model: str, image: str, api, namespace: str,
           *, name: str | None = None, poll_seconds: float = 10,
           timeout: float | None = None) -> dict[str, Any]:
    """Stage, run the TFJob, copy the model back (steps 1-4 of the module docstring)."""
    cluster = _checked_cluster(pipeline)
    name = name or job_name(pipeline.name)
    shared = f"{cluster.shared_dir.rstrip('/')}/{name}"
    echo = _runtime.Progress("train")
    echo(f"staging the transformed data to {shared}/transformed")
    _copytree(transformed, f"{shared}/transformed")
    _write_text(f"{shared}/{Files.SPEC}", pipeline.to_json())
    args = ["--spec", f"{shared}/{Files.SPEC}", "--transformed", f"{shared}/transformed",
            "--model", f"{shared}/model"]
    manifest = tfjob_manifest(name, namespace, image, cluster,
                              pipeline.resources.get("train", Resources()), args,
                              labels={"estflow/pipeline": re.sub(r"[^a-z0-9-]", "-",
                                                                 pipeline.name)[:63]})
    job = run_tfjob(api, manifest, poll_seconds, timeout, echo)
    _copytree(f"{shared}/model", model)
    echo(f"copied the model from {shared}/model")
    return job


def _api_from_environment() -> k8s.CustomObjectsApi:
    """Kubernetes credentials, read here at the edge: in-cluster, else the kubeconfig."""
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        # The client reads KUBECONFIG when it is imported; read it now, at the entry point.
        k8s_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    return k8s.CustomObjectsApi()


def _pod_namespace() -> str:
    path = Path(_NAMESPACE_FILE)
    return path.read_text().strip() if path.is_file() else "default"


def _stop_on_sigterm(signum, frame) -> None:
    # KFP stops a task's pod with SIGTERM: unwind, so run_tfjob's `finally` deletes the job.
    raise SystemExit(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = _runtime.step_parser(TFJOB, __doc__)
    args = parser.parse_args(argv)
    pipeline = _runtime.load_pipeline(args.spec)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        _checked_cluster(pipeline)  # before touching the cluster
        submit(pipeline, args.transformed, args.model, args.image, _api_from_environment(),
               args.namespace or _pod_namespace(), name=args.name,
               poll_seconds=args.poll_seconds, timeout=args.timeout_seconds)
    except (TFJobError, k8s_config.ConfigException) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
