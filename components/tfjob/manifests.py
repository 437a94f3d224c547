"""The training-job manifests the multi-worker train task submits, and the runtime it needs.

* :func:`tfjob_manifest`: a Kubeflow Training Operator ``kubeflow.org/v1`` TFJob (the operator
  sets TF_CONFIG in the container named ``tensorflow``);
* :func:`trainjob_manifests`: a Kubeflow Trainer v2 ``trainer.kubeflow.org/v1alpha1`` TrainJob
  on estflow's ClusterTrainingRuntime (:func:`cluster_training_runtime`), whose pods compute
  TF_CONFIG themselves (:mod:`.tf_config`, :mod:`.node`). Trainer 2.1 (what Kubeflow 1.11 and
  26.03 install) takes per-job pod settings in ``spec.podTemplateOverrides``, Trainer 2.2 and
  later in ``spec.runtimePatches`` (same API version, the older field removed): both forms are
  built, newest first, and the submitter sends the one the server's schema accepts.

Every replica gets the train step's resources, placement, secrets and PVCs, the submitter's
service account and image pull secrets, and ``sidecar.istio.io/inject: "false"``; every job is
owned by the submitting pod (:class:`.submitter.Submitter`) and cleaned up after
``ttl_seconds`` once finished.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from estflow.components.tfjob import pods
from estflow.components.tfjob import tf_config as tfc
from estflow.components.tfjob.submitter import Submitter
from estflow.dsl.resources import Resources
from estflow.dsl.specs import Cluster

__all__ = ["JobRequest", "TFJOB_CONTAINER", "TRAINJOB_CONTAINER", "RUNTIME", "NODE_MODULE",
           "TRAIN_MODULE", "DEFAULT_TTL_SECONDS", "CHIEF_INDEX", "COPY_BACK_MARGIN_SECONDS",
           "job_deadline", "tfjob_manifest", "trainjob_manifests",
           "cluster_training_runtime", "runtime_yaml", "trainjob_replicas"]

TFJOB_CONTAINER = "tensorflow"  # the container the Training Operator sets TF_CONFIG in
TRAINJOB_CONTAINER = "node"  # the trainer container Trainer v2 applies `spec.trainer` to
TRAINER_JOB = "node"  # the trainer's replicated job in estflow's runtime
RUNTIME = "estflow-tensorflow"
TRAIN_MODULE = "estflow.components.train"
NODE_MODULE = "estflow.components.tfjob.node"
DEFAULT_TTL_SECONDS = 86400  # a day to read a failed job's pods and logs
CHIEF_INDEX = 0  # tf_config.roles lays the chief (or worker 0) out first
# What the train task keeps of its timeout after the job's deadline, to copy the model back
# and clean up: 10 minutes (a SavedModel and checkpoints of a few GB from a bucket), or a
# quarter of a short timeout.
COPY_BACK_MARGIN_SECONDS = 600
PATCH_MANAGER = "estflow.dev/train-task"
_TRAINER_GROUP = "trainer.kubeflow.org"


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What a training job runs and how.

    Args:
        name: the job's name (see :func:`.submitter.job_name`).
        image: the image every replica runs (estflow's, with the user's code).
        cluster: the processes (:class:`~estflow.dsl.specs.Cluster`).
        resources: the train step's resources (compute, placement, storage of the replicas).
        args: the train step's arguments (``--spec ... --transformed ... --model ...``).
        submitter: the submitting pod (namespace, owner, service account, pull secrets).
        labels: extra labels of the job and its pods.
        ttl_seconds: how long a finished job (and its pods' logs) is kept.
        runtime: the ClusterTrainingRuntime of a TrainJob.
        deadline_seconds: the job's ``activeDeadlineSeconds`` (None: none), shorter than the
            train task's timeout (:func:`job_deadline`).
    """

    name: str
    image: str
    cluster: Cluster
    resources: Resources
    args: tuple[str, ...]
    submitter: Submitter
    labels: tuple[tuple[str, str], ...] = ()
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    runtime: str = RUNTIME
    deadline_seconds: int | None = None

    def pod_labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/part-of": "estflow", "app.kubernetes.io/component": "train",
                "estflow/job": self.name, **dict(self.labels)}

    def metadata(self) -> dict[str, Any]:
        owner = self.submitter.owner_reference()
        return {"name": self.name, "namespace": self.submitter.namespace,
                "labels": self.pod_labels(), **({"ownerReferences": [owner]} if owner else {})}


def job_deadline(task_timeout: int | None, elapsed: float = 0) -> int | None:
    """The job's deadline when the train task has ``task_timeout`` seconds in all and has used
    ``elapsed`` (staging): what is left, less :data:`COPY_BACK_MARGIN_SECONDS` (at most a
    quarter of the timeout), so the copy-back still runs when the job uses its whole window.

    Raises:
        ValueError: nothing is left for the job.
    """
    if task_timeout is None:
        return None
    margin = min(COPY_BACK_MARGIN_SECONDS, task_timeout // 4)
    deadline = int(task_timeout - elapsed - margin)
    if deadline < 1:
        raise ValueError(f"Received resources['train'].timeout_seconds={task_timeout}, "
                         f"expected more than the {elapsed:.0f}s staging took plus the "
                         f"{margin}s kept to copy the model back")
    return deadline


# -- TFJob ---------------------------------------------------------------------------------------
def tfjob_manifest(request: JobRequest) -> dict[str, Any]:
    """A ``kubeflow.org/v1`` TFJob running ``python -m estflow.components.train ARGS`` in every
    replica of ``request.cluster``: ``Worker`` replicas (worker 0 is the chief) under
    multi_worker_mirrored; ``Chief`` + ``Worker`` + ``PS`` under parameter_server; an
    ``Evaluator`` when asked. ``resources.retries`` -> ``runPolicy.backoffLimit``,
    ``deadline_seconds`` -> ``activeDeadlineSeconds``; ps and evaluator pods take
    ``cluster.ps_resources``/``evaluator_resources`` when declared."""
    cluster, resources = request.cluster, request.resources
    compute = {"Chief": resources, "Worker": resources,
               "PS": cluster.ps_resources or Resources(),
               "Evaluator": cluster.evaluator_resources or resources}
    replica_specs = {
        replica: {"replicas": count, "restartPolicy": "OnFailure",
                  "template": _tfjob_pod(request, compute[replica])}
        for replica, count in cluster.replicas().items()}
    # cleanPodPolicy Running: when the job ends, pods still running are deleted (their GPUs
    # freed); finished pods stay, with their logs, until the TTL deletes the job.
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": resources.retries,
                                  "ttlSecondsAfterFinished": request.ttl_seconds}
    if request.deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = request.deadline_seconds
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": request.metadata(),
            "spec": {"runPolicy": run_policy, "tfReplicaSpecs": replica_specs}}


def _tfjob_pod(request: JobRequest, compute: Resources) -> dict[str, Any]:
    storage = request.resources
    container: dict[str, Any] = {
        "name": TFJOB_CONTAINER, "image": request.image,
        "command": ["python", "-m", TRAIN_MODULE], "args": list(request.args),
        "ports": [{"name": "tfjob-port", "containerPort": tfc.PORT}],
        "resources": pods.container_resources(compute)}
    env, mounts = pods.secret_env(storage), pods.volume_mounts(storage)
    container.update({k: v for k, v in (("env", env), ("volumeMounts", mounts)) if v})
    spec: dict[str, Any] = {**request.submitter.pod_settings(), "containers": [container],
                            **pods.scheduling(compute)}
    if volumes := pods.volumes(storage):
        spec["volumes"] = volumes
    return {"metadata": {"labels": request.pod_labels(),
                         "annotations": dict(pods.POD_ANNOTATIONS)}, "spec": spec}


# -- TrainJob ------------------------------------------------------------------------------------
def trainjob_replicas(cluster: Cluster) -> int:
    """Pods of a TrainJob for ``cluster`` (``numNodes``): one per TF_CONFIG task."""
    return sum(count for _, count in _roles(cluster))


def trainjob_manifests(request: JobRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TrainJob for ``request`` in Trainer 2.2's form (``runtimePatches``,
    ``activeDeadlineSeconds``), then in Trainer 2.1's (``podTemplateOverrides``; the submitter
    enforces the timeout itself). Pods take their TF_CONFIG roles in the order of
    :func:`.tf_config.roles`; all have the train step's resources."""
    storage = request.resources
    env = [{"name": tfc.ROLES_ENV, "value": tfc.format_roles(_roles(request.cluster))},
           {"name": "ESTFLOW_JOBSET_NAME", "value": request.name},
           {"name": "ESTFLOW_TF_PORT", "value": str(tfc.PORT)}, *pods.secret_env(storage)]
    trainer = {"image": request.image, "command": ["python", "-m", NODE_MODULE],
               "args": list(request.args), "numNodes": trainjob_replicas(request.cluster),
               "env": env}
    if resources := pods.container_resources(storage):
        trainer["resourcesPerNode"] = resources
    pod_metadata = {"labels": request.pod_labels(), "annotations": dict(pods.POD_ANNOTATIONS)}
    pod_spec: dict[str, Any] = {**request.submitter.pod_settings(), **pods.scheduling(storage)}
    if volumes := pods.volumes(storage):
        pod_spec["volumes"] = volumes
    if mounts := pods.volume_mounts(storage):
        pod_spec["containers"] = [{"name": TRAINJOB_CONTAINER, "volumeMounts": mounts}]
    base = {"apiVersion": f"{_TRAINER_GROUP}/v1alpha1", "kind": "TrainJob",
            "metadata": request.metadata()}
    runtime_ref = {"name": request.runtime, "apiGroup": _TRAINER_GROUP,
                   "kind": "ClusterTrainingRuntime"}
    replicated_job = {"name": TRAINER_JOB, "template": {"spec": {"template": {
        "metadata": pod_metadata, "spec": pod_spec}}}}
    v22: dict[str, Any] = {"runtimeRef": runtime_ref, "trainer": trainer, "runtimePatches": [{
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated_job]}}}}]}
    if request.deadline_seconds is not None:
        v22["activeDeadlineSeconds"] = request.deadline_seconds
    v21 = {"runtimeRef": runtime_ref, "trainer": trainer, "podTemplateOverrides": [{
        "targetJobs": [{"name": TRAINER_JOB}], "metadata": pod_metadata, "spec": pod_spec}]}
    return {**base, "spec": v22}, {**base, "spec": v21}


def cluster_training_runtime(image: str, name: str = RUNTIME,
                             ttl_seconds: int = DEFAULT_TTL_SECONDS) -> dict[str, Any]:
    """estflow's ClusterTrainingRuntime: one Indexed Job (``node``) of ``numNodes`` pods, no
    framework policy (Trainer v2 has no TensorFlow one), DNS hostnames on a headless service
    that publishes pods before they are ready (workers must reach each other to start), the
    JobSet identity in the environment (downward API), no Istio sidecar, and the finished
    JobSet deleted after ``ttl_seconds``. A failed pod fails the job (no in-place restart: a
    multi-worker cluster cannot take a restarted member back mid-step); retries resubmit the
    whole job, which resumes from its last checkpoint.

    The Job succeeds when pod 0 (the chief: :data:`CHIEF_INDEX`) succeeds, as a TFJob does, and
    its other pods are then stopped (Job ``successPolicy``, Kubernetes 1.31+): the parameter
    servers and a parameter-server strategy's workers serve until killed (``server.join()``),
    so a Job waiting for every pod would never complete. TrainJobs cannot set Job fields per
    job (Trainer 2.1-2.3: ``podTemplateOverrides``/``runtimePatches`` reach pods and replicated
    jobs' pod templates only), hence the runtime."""
    labels = "metadata.labels['jobset.sigs.k8s.io/{}']"
    env = [{"name": var, "valueFrom": {"fieldRef": {"fieldPath": labels.format(label)}}}
           for var, label in (("JOBSET_NAME", "jobset-name"),
                              ("REPLICATED_JOB_NAME", "replicatedjob-name"),
                              ("JOB_INDEX", "job-index"))]
    container = {"name": TRAINJOB_CONTAINER, "image": image,
                 "command": ["python", "-m", NODE_MODULE],
                 "ports": [{"name": "tf", "containerPort": tfc.PORT}], "env": env}
    job = {"name": TRAINER_JOB, "replicas": 1, "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"completionMode": "Indexed", "backoffLimit": 0,
                 "successPolicy": {"rules": [{"succeededIndexes": str(CHIEF_INDEX)}]},
                 "template": {
            "metadata": {"annotations": dict(pods.POD_ANNOTATIONS)},
            "spec": {"restartPolicy": "Never", "containers": [container]}}}}}
    return {"apiVersion": f"{_TRAINER_GROUP}/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name, "labels": {
                "trainer.kubeflow.org/framework": "tensorflow",
                "app.kubernetes.io/part-of": "estflow"}},
            "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {
                "ttlSecondsAfterFinished": ttl_seconds,
                "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                "failurePolicy": {"maxRestarts": 0},
                "replicatedJobs": [job]}}}}


def runtime_yaml(image: str) -> str:
    """:func:`cluster_training_runtime` as the file ``pipelines/kubernetes/trainer-runtime.yaml``
    (a test keeps that file equal to this)."""
    header = (
        "# estflow's ClusterTrainingRuntime for Kubeflow Trainer v2 (2.1 to 2.3): what a\n"
        "# multi-worker train step's TrainJob runs on (Cluster(job_kind=\"trainjob\"), the\n"
        "# default). Install it once per cluster, as a cluster admin:\n"
        "#   kubectl apply -f pipelines/kubernetes/trainer-runtime.yaml\n"
        "# No framework policy (Trainer has no TensorFlow one, kubeflow/trainer#2699): each pod\n"
        "# computes its TF_CONFIG from its JobSet identity (estflow.components.tfjob.node). The\n"
        "# Job succeeds when its pod 0 (the chief) does: successPolicy, Kubernetes 1.31+. The\n"
        "# image is a default only: every TrainJob sets its own (the pipeline's). Generated by\n"
        "# estflow.components.tfjob.manifests.runtime_yaml; a test keeps them equal.\n")
    return header + yaml.safe_dump(cluster_training_runtime(image), sort_keys=False)


def _roles(cluster: Cluster) -> tuple[tuple[str, int], ...]:
    return tfc.roles(cluster.workers, cluster.parameter_servers, cluster.evaluator)
