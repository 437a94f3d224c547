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
``pipelines/kubernetes/estflow-train-rbac.yaml`` (``estflow rbac`` writes it for another
namespace or service account). Kubernetes access is configured here, at the entry point:
in-cluster credentials, else the kubeconfig (``KUBECONFIG``, ``~/.kube/config``).
"""

from __future__ import annotations

import os
import signal
import sys

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from estflow.components._runtime import entry as _runtime
from estflow.components.tfjob import follow
from estflow.components.tfjob.follow import JobError
from estflow.components.tfjob.step import checked_cluster
from estflow.components.tfjob.step import read_submitter
from estflow.components.tfjob.step import run
from estflow.dsl.contracts import TFJOB

__all__ = ["JobError", "run", "read_submitter", "main"]


def _api_from_environment() -> follow.Clients:
    """Kubernetes credentials, read here at the edge: in-cluster, else the kubeconfig."""
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        # The client reads KUBECONFIG when it is imported; read it now, at the entry point.
        k8s_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    return follow.Clients(custom=k8s.CustomObjectsApi(), core=k8s.CoreV1Api())


def _stop_on_sigterm(signum, frame) -> None:
    # KFP stops a task's pod with SIGTERM: unwind, so run_job's `finally` deletes the job.
    raise SystemExit(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    parser = _runtime.step_parser(TFJOB, __doc__)
    args = parser.parse_args(argv)
    pipeline = _runtime.load_pipeline(args.spec)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        checked_cluster(pipeline)  # before touching the cluster
        clients = _api_from_environment()
        submitter = read_submitter(clients.core, os.environ, args.namespace,
                                   _runtime.Progress("train"))
        run(pipeline, args.transformed, args.model, args.image, clients, submitter,
               name=args.name, poll_seconds=args.poll_seconds, timeout=args.timeout_seconds,
               ttl_seconds=args.ttl_seconds, runtime=args.runtime)
    except (JobError, k8s_config.ConfigException) as err:
        print(f"[train] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
