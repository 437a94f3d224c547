"""Train as a Kubeflow training job: the KFP train task of a pipeline whose
``RunConfig.cluster`` asks for several processes.

``python -m estflow.components.tfjob --spec S --transformed IN --model OUT --image IMAGE``

KFP v2 has no resource op, so the task submits the job itself, through the Kubernetes API:

1. stage: copy the transformed data to ``<cluster.shared_dir>/<job>/transformed`` and write
   the spec there (the task's artifact directories are local to its pod; the replicas read and
   write ``shared_dir``: a ``gs://`` URL or a PVC that ``resources["train"].pvcs`` mounts in
   the task and, by the same declaration, in every replica);
2. submit the job ``cluster.job_kind`` names (:mod:`.manifests`): a Kubeflow
   Trainer v2 TrainJob on estflow's ClusterTrainingRuntime (``"trainjob"``, the default: what
   Kubeflow 1.11 and later install), or a Training Operator TFJob (``"tfjob"``). Its pods run
   the image's train step with the train step's resources, placement, secrets and PVCs, this
   pod's service account and image pull secrets, no Istio sidecar; the job is owned by this
   pod and named after the KFP run and task (:mod:`.submitter`);
3. follow it, copy its pods' logs into this task's log, delete it unless it failed
   (:mod:`.follow`); a TrainJob that fails is submitted again up to
   ``resources["train"].retries`` times (a TFJob restarts its replicas itself, up to its
   ``backoffLimit``);
4. copy ``<shared_dir>/<job>/model`` (written by the chief) to the task's model artifact.

The pipeline's service account needs RBAC to create/get/patch/delete the job's kind, and to
get/list pods and get pods/log in the namespace (default: the task pod's own):
``pipelines/docker/train-rbac.yaml``. Kubernetes access is configured here, at the entry point:
in-cluster credentials, else the kubeconfig (``KUBECONFIG``, ``~/.kube/config``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from estflow.components._runtime import entry as _runtime
from estflow.components.tfjob import follow
from estflow.components.tfjob import manifests
from estflow.components.tfjob.follow import JobError
from estflow.components.tfjob.submitter import Submitter
from estflow.components.tfjob.submitter import job_name
from estflow.components.tfjob.submitter import submitter_from_pod
from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources
from estflow.dsl.specs import Cluster

__all__ = ["JobError", "submit", "read_submitter", "main"]

_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


# -- staging on shared storage -------------------------------------------------------------------
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


def _checked_cluster(pipeline: Pipeline) -> Cluster:
    cluster = pipeline.run_config.cluster
    if cluster is None or not cluster.shared_dir:
        raise JobError("a training job needs run_config.cluster.shared_dir (gs://... or a PVC "
                       f"path mounted in the train step); received cluster={cluster!r}")
    return cluster


# -- the submission ------------------------------------------------------------------------------
def submit(pipeline: Pipeline, transformed: str, model: str, image: str,
           clients: follow.Clients, submitter: Submitter, *, name: str | None = None,
           poll_seconds: float = 10, timeout: float | None = None,
           ttl_seconds: int = manifests.DEFAULT_TTL_SECONDS,
           runtime: str = manifests.RUNTIME) -> dict[str, Any]:
    """Stage, run the job, copy the model back (steps 1-4 of the module docstring).

    Returns:
        The job's last observed object.

    Raises:
        JobError: the job could not be submitted, failed, or timed out.
    """
    cluster = _checked_cluster(pipeline)
    name = name or job_name(pipeline.name, submitter.run_key)
    shared = f"{cluster.shared_dir.rstrip('/')}/{name}"
    echo = _runtime.Progress("train")
    if submitter.run_key is None and not submitter.pod_uid:
        echo("not in a KFP task pod: the job has a random name and no owner")
    echo(f"staging the transformed data to {shared}/transformed")
    _copytree(transformed, f"{shared}/transformed")
    _write_text(f"{shared}/{Files.SPEC}", pipeline.to_json())
    resources = pipeline.resources.get("train", Resources())
    request = manifests.JobRequest(
        name=name, image=image, cluster=cluster, resources=resources,
        args=("--spec", f"{shared}/{Files.SPEC}", "--transformed", f"{shared}/transformed",
              "--model", f"{shared}/model"),
        submitter=submitter, ttl_seconds=ttl_seconds, runtime=runtime,
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
    _copytree(f"{shared}/model", model)
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


def _api_from_environment() -> follow.Clients:
    """Kubernetes credentials, read here at the edge: in-cluster, else the kubeconfig."""
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        # The client reads KUBECONFIG when it is imported; read it now, at the entry point.
        k8s_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    return follow.Clients(custom=k8s.CustomObjectsApi(), core=k8s.CoreV1Api())


def _pod_namespace() -> str:
    path = Path(_NAMESPACE_FILE)
    return path.read_text().strip() if path.is_file() else "default"


def _stop_on_sigterm(signum, frame) -> None:
    # KFP stops a task's pod with SIGTERM: unwind, so run_job's `finally` deletes the job.
    raise SystemExit(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = _runtime.step_parser(TFJOB, __doc__)
    args = parser.parse_args(argv)
    pipeline = _runtime.load_pipeline(args.spec)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        _checked_cluster(pipeline)  # before touching the cluster
        clients = _api_from_environment()
        submitter = read_submitter(clients.core, os.environ, args.namespace,
                                   _runtime.Progress("train"))
        submit(pipeline, args.transformed, args.model, args.image, clients, submitter,
               name=args.name, poll_seconds=args.poll_seconds, timeout=args.timeout_seconds,
               ttl_seconds=args.ttl_seconds, runtime=args.runtime)
    except (JobError, k8s_config.ConfigException) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
