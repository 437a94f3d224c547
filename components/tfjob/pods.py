"""The pod-level pieces of a training job's replicas, shared by the TFJob and TrainJob
manifests: container resources, secrets, volumes, placement, and the pod metadata every replica
carries.

Every replica's pod is annotated ``sidecar.istio.io/inject: "false"``: in a Kubeflow profile
namespace Istio injects a proxy sidecar that never exits, so the pod (and the job) would never
finish; it would also intercept the workers' gRPC traffic to each other.
"""

from __future__ import annotations

from typing import Any

from estflow.dsl.placement import Placement
from estflow.dsl.resources import Resources

__all__ = ["ISTIO_INJECT", "POD_ANNOTATIONS", "container_resources", "secret_env",
           "volume_mounts", "volumes", "scheduling"]

ISTIO_INJECT = "sidecar.istio.io/inject"
POD_ANNOTATIONS = {ISTIO_INJECT: "false"}


def container_resources(compute: Resources) -> dict[str, Any]:
    """``resources`` of a replica's container: cpu/memory requests and limits, and the
    accelerator as a limit (Kubernetes sets an extended resource's request from its limit)."""
    placement = Placement.for_resources(compute)
    requests = {k: v for k, v in (("cpu", compute.cpu_request),
                                  ("memory", compute.memory_request)) if v is not None}
    limits = {k: v for k, v in (("cpu", compute.cpu_limit),
                                ("memory", compute.memory_limit)) if v is not None}
    if placement.resource:
        limits[placement.resource] = str(placement.count)
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def secret_env(storage: Resources) -> list[dict[str, Any]]:
    """Environment variables from the step's Secrets (``secrets_as_env``)."""
    return [{"name": var, "valueFrom": {"secretKeyRef": {
        "name": s.secret, "key": key, "optional": s.optional}}}
        for s in storage.secrets_as_env for key, var in s.key_to_env.items()]


def volume_mounts(storage: Resources) -> list[dict[str, Any]]:
    """Mounts of the step's Secret volumes and PVCs (named as :func:`volumes` names them)."""
    mounts = [{"name": f"secret-{i}", "mountPath": s.mount_path, "readOnly": True}
              for i, s in enumerate(storage.secrets_as_volume)]
    mounts += [{"name": f"pvc-{i}", "mountPath": p.mount_path,
                **({"subPath": p.sub_path} if p.sub_path else {})}
               for i, p in enumerate(storage.pvcs)]
    return mounts


def volumes(storage: Resources) -> list[dict[str, Any]]:
    """The pod's volumes for :func:`volume_mounts`."""
    declared = [{"name": f"secret-{i}", "secret": {"secretName": s.secret,
                                                    "optional": s.optional}}
                for i, s in enumerate(storage.secrets_as_volume)]
    declared += [{"name": f"pvc-{i}", "persistentVolumeClaim": {"claimName": p.pvc_name}}
                 for i, p in enumerate(storage.pvcs)]
    return declared


def scheduling(compute: Resources) -> dict[str, Any]:
    """``nodeSelector`` and ``tolerations`` of a replica's pod (only those that are set): the
    accelerator's and node pool's (:class:`Placement`) and the declared ones."""
    placement = Placement.for_resources(compute)
    tolerations = [*placement.tolerations,
                   *(t for t in compute.tolerations if t not in placement.tolerations)]
    optional = (("nodeSelector", dict(placement.node_selector)),
                ("tolerations", [t.to_k8s() for t in tolerations]))
    return {k: v for k, v in optional if v}
