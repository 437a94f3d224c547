"""TF_CONFIG of a TrainJob pod, computed from the pod's JobSet identity (pure functions).

Kubeflow Trainer v2 has no TensorFlow policy (kubeflow/trainer#2699): estflow's
ClusterTrainingRuntime declares none, so nothing sets TF_CONFIG; each pod computes it. Trainer
runs the TrainJob as a JobSet of the same name whose ``node`` replicated job is one Indexed Job
of ``numNodes`` pods. Pod ``i`` of it has the stable DNS name
``<jobset>-<replicatedjob>-<jobindex>-<i>.<subdomain>`` on the JobSet's headless service
(subdomain: the JobSet's name unless its network declares one) and the environment variable
``JOB_COMPLETION_INDEX=i``. The processes the train step asks for (chief, workers, ps,
evaluator; :func:`roles`) are laid out over the pod indices in that order, so every pod derives
the same cluster and finds its own task in it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

__all__ = ["PORT", "ROLES_ENV", "JobSetIdentity", "TFConfigError", "roles", "format_roles",
           "parse_roles", "identity_from_env", "tf_config"]

PORT = 2222
"""The port every TensorFlow server of a TrainJob listens on (the Training Operator's too)."""

ROLES_ENV = "ESTFLOW_TF_ROLES"
"""Environment variable with the roles of the pods, ``chief:1,worker:2,ps:1``, in index order."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ROLE_TYPES = ("chief", "worker", "ps", "evaluator")


class TFConfigError(ValueError):
    """The pod's environment does not identify it as a pod of a TrainJob's JobSet."""


@dataclasses.dataclass(frozen=True)
class JobSetIdentity:
    """Which pod of which JobSet this is, and where its peers are.

    Args:
        jobset: the JobSet's name (the TrainJob's).
        replicated_job: the replicated job the pod belongs to (``node`` for the trainer).
        job_index: the index of its Job within the replicated job (0: Trainer makes one).
        pod_index: its completion index in that Indexed Job (``JOB_COMPLETION_INDEX``).
        subdomain: the headless service's name (the JobSet's name by default).
    """

    jobset: str
    replicated_job: str
    job_index: int
    pod_index: int
    subdomain: str

    def hostname(self, pod_index: int) -> str:
        """The DNS name of pod ``pod_index`` of the same Job."""
        return (f"{self.jobset}-{self.replicated_job}-{self.job_index}-{pod_index}"
                f".{self.subdomain}")


def roles(workers: int, parameter_servers: int = 0, evaluator: bool = False,
          ) -> tuple[tuple[str, int], ...]:
    """The TF_CONFIG task types of a cluster and their counts, in pod-index order: a chief
    only with parameter servers (under multi-worker mirrored, worker 0 is the chief)."""
    laid_out = [("chief", 1)] if parameter_servers else []
    laid_out += [("worker", workers)]
    laid_out += [("ps", parameter_servers)] if parameter_servers else []
    laid_out += [("evaluator", 1)] if evaluator else []
    return tuple(laid_out)


def format_roles(laid_out: Sequence[tuple[str, int]]) -> str:
    """``(("worker", 2),)`` -> ``"worker:2"`` (the value of :data:`ROLES_ENV`)."""
    return ",".join(f"{kind}:{count}" for kind, count in laid_out)


def parse_roles(text: str) -> tuple[tuple[str, int], ...]:
    """Inverse of :func:`format_roles`.

    Raises:
        TFConfigError: an unknown task type, a count that is not a positive integer, or a type
            given twice.
    """
    parsed: list[tuple[str, int]] = []
    for part in (p.strip() for p in (text or "").split(",") if p.strip()):
        kind, _, count = part.partition(":")
        if kind not in _ROLE_TYPES or not count.isdigit() or int(count) < 1:
            raise TFConfigError(f"Received an invalid value for `{ROLES_ENV}`, expected "
                                f"comma-separated TYPE:COUNT with TYPE in {_ROLE_TYPES} and "
                                f"COUNT >= 1. Received: {ROLES_ENV}={text!r}")
        parsed.append((kind, int(count)))
    kinds = [kind for kind, _ in parsed]
    if not parsed or len(set(kinds)) != len(kinds):
        raise TFConfigError(f"Received an invalid value for `{ROLES_ENV}`, expected each task "
                            f"type once. Received: {ROLES_ENV}={text!r}")
    return tuple(parsed)


def identity_from_env(env: Mapping[str, str]) -> JobSetIdentity:
    """The pod's identity from its environment.

    Reads ``JOB_COMPLETION_INDEX`` (set by Kubernetes in an Indexed Job's pods), the JobSet's
    name from ``JOBSET_NAME`` (estflow's runtime maps the pod label
    ``jobset.sigs.k8s.io/jobset-name`` to it) or ``ESTFLOW_JOBSET_NAME`` (the TrainJob's
    name, set by the submitter), ``REPLICATED_JOB_NAME`` (default ``node``), ``JOB_INDEX``
    (default 0) and ``ESTFLOW_SUBDOMAIN`` (default: the JobSet's name). When ``HOSTNAME`` is
    set it must be the pod's JobSet hostname: a pod whose peers would be guessed wrong fails
    here, before TensorFlow waits for them forever.

    Raises:
        TFConfigError: naming the missing or inconsistent variable.
    """
    jobset = env.get("JOBSET_NAME") or env.get("ESTFLOW_JOBSET_NAME") or ""
    replicated_job = env.get("REPLICATED_JOB_NAME") or "node"
    subdomain = env.get("ESTFLOW_SUBDOMAIN") or jobset
    for name, value in (("JOBSET_NAME", jobset), ("REPLICATED_JOB_NAME", replicated_job),
                        ("ESTFLOW_SUBDOMAIN", subdomain)):
        if not _DNS_LABEL.match(value) or len(value) > 63:
            raise TFConfigError(f"Received an invalid value for `{name}`, expected a DNS label "
                                "(is this a pod of a TrainJob on estflow's runtime?). "
                                f"Received: {name}={value!r}")
    identity = JobSetIdentity(jobset, replicated_job, _index(env, "JOB_INDEX", "0"),
                              _index(env, "JOB_COMPLETION_INDEX", None), subdomain)
    hostname = env.get("HOSTNAME")
    expected = identity.hostname(identity.pod_index).split(".", 1)[0]
    if hostname and hostname != expected:
        raise TFConfigError(f"Received HOSTNAME={hostname!r}, expected {expected!r} for pod "
                            f"{identity.pod_index} of JobSet {jobset!r}: the peers' addresses "
                            "would be wrong (does the JobSet set enableDNSHostnames?)")
    return identity


def tf_config(identity: JobSetIdentity, laid_out: Sequence[tuple[str, int]],
              port: int = PORT) -> dict[str, Any]:
    """TF_CONFIG for the pod ``identity`` of a JobSet whose pods take the roles ``laid_out``
    (see :func:`roles`), in pod-index order.

    Example:
        >>> pod = JobSetIdentity("taxi-train-1a2b", "node", 0, 1, "taxi-train-1a2b")
        >>> tf_config(pod, (("worker", 2),))["task"]
        {'type': 'worker', 'index': 1}

    Raises:
        TFConfigError: the pod's index is outside the cluster.
    """
    cluster: dict[str, list[str]] = {}
    task: dict[str, Any] | None = None
    index = 0
    for kind, count in laid_out:
        cluster[kind] = [f"{identity.hostname(i)}:{port}" for i in range(index, index + count)]
        if index <= identity.pod_index < index + count:
            task = {"type": kind, "index": identity.pod_index - index}
        index += count
    if task is None:
        raise TFConfigError(f"Received JOB_COMPLETION_INDEX={identity.pod_index}, expected "
                            f"0 <= index < {index}: the TrainJob's numNodes and "
                            f"{ROLES_ENV}={format_roles(laid_out)!r} disagree")
    return {"cluster": cluster, "task": task}


def _index(env: Mapping[str, str], name: str, default: str | None) -> int:
    value = env.get(name, default)
    if value is None or not str(value).isdigit():
        raise TFConfigError(f"Received an invalid value for `{name}`, expected a non-negative "
                            "integer (set by Kubernetes in the pods of an Indexed Job). "
                            f"Received: {name}={value!r}")
    return int(value)
