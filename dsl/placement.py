"""Where a step's pod runs, derived from its :class:`~estflow.dsl.resources.Accelerator` and node
pool: the extended resource it asks for, the GKE node labels it selects, the taints it tolerates.

The one place that knows GKE's labels and taints; a step declared with
``Resources(gke_node_labels=False)`` (EKS, AKS, on-premises) derives none of those labels and
selects nodes with its free-form ``node_selector`` alone (the accelerator's toleration stays:
tolerating a taint no node carries is harmless). The KFP compiler uses it for declared values;
the placement task of a step with ``Resources(placement_parameters=True)`` uses it at run time on
the run's parameters, so both derive the same placement. Stdlib only (it runs in that task).

Example:
    >>> import estflow.dsl as ef
    >>> Placement.of(ef.Accelerator("nvidia-tesla-t4"), "gpu-pool").node_selector
    (('cloud.google.com/gke-accelerator', 'nvidia-tesla-t4'), ('cloud.google.com/gke-nodepool', 'gpu-pool'))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from estflow.dsl.errors import DslError
from estflow.dsl.resources import Accelerator
from estflow.dsl.resources import Resources
from estflow.dsl.resources import Toleration
from estflow.dsl.resources import check_node_pool

__all__ = ["Placement", "node_selector", "tolerations"]

GKE_GPU = "cloud.google.com/gke-accelerator"
GKE_TPU = "cloud.google.com/gke-tpu-accelerator"
GKE_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
GKE_NODE_POOL = "cloud.google.com/gke-nodepool"

# Run parameter (without the step prefix) of each Accelerator field.
_PARAMETERS = {"type": "accelerator_type", "count": "accelerator_count",
               "tpu_topology": "tpu_topology", "node_pool": "node_pool"}


def node_selector(accelerator: Accelerator) -> dict[str, str]:
    """GKE node labels a pod needs to land on a node with ``accelerator``."""
    if accelerator.kind == "tpu":
        return {GKE_TPU: accelerator.type, GKE_TPU_TOPOLOGY: accelerator.tpu_topology}
    return {GKE_GPU: accelerator.type}


def tolerations(accelerator: Accelerator) -> tuple[Toleration, ...]:
    """GKE taints accelerator nodes with the resource name (NoSchedule): tolerate it."""
    return (Toleration(accelerator.resource_name, operator="Exists", effect="NoSchedule"),)


@dataclasses.dataclass(frozen=True)
class Placement:
    """The Kubernetes side of an accelerator and a node pool (derived, never serialised).

    Attributes:
        resource: the extended resource name (``"nvidia.com/gpu"``...), ``""`` without one.
        count: how many (0 without an accelerator).
        node_selector: node label -> value pairs, sorted by label.
        tolerations: the taints accelerator nodes carry.
    """

    resource: str
    count: int
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]

    @classmethod
    def of(cls, accelerator: Accelerator | None, node_pool: str | None, *,
           gke_node_labels: bool = True, extra_selector: Mapping[str, str] | None = None,
           ) -> Placement:
        """The placement of an accelerator and a node pool; ``gke_node_labels=False`` derives
        no GKE label, ``extra_selector`` (free-form labels) is added to the node selector."""
        selector = dict(extra_selector or {})
        if gke_node_labels:
            selector.update(node_selector(accelerator) if accelerator else {})
            if node_pool:
                selector[GKE_NODE_POOL] = node_pool
        return cls(resource=accelerator.resource_name if accelerator else "",
                   count=accelerator.count if accelerator else 0,
                   node_selector=tuple(sorted(selector.items())),
                   tolerations=tolerations(accelerator) if accelerator else ())

    @classmethod
    def for_resources(cls, resources: Resources) -> Placement:
        """The placement a step's declared :class:`Resources` imply (accelerator, node pool,
        ``gke_node_labels`` and the free-form ``node_selector``)."""
        return cls.of(resources.accelerator, resources.node_pool,
                      gke_node_labels=resources.gke_node_labels,
                      extra_selector=resources.node_selector)

    @classmethod
    def from_parameters(cls, accelerator_type: str, accelerator_count: str | int,
                        tpu_topology: str, node_pool: str, *, prefix: str = "",
                        gke_node_labels: bool = True,
                        extra_selector: Mapping[str, str] | None = None) -> Placement:
        """The placement a run chose through its parameters (``""``: none), validated like a
        declaration; errors name the run parameter (``prefix`` + its name). The count may be a
        string of digits (run parameters arrive as strings)."""
        if isinstance(accelerator_count, str) and accelerator_count.strip().isdigit():
            accelerator_count = int(accelerator_count)
        try:
            accelerator = Accelerator(accelerator_type, count=accelerator_count,
                                      tpu_topology=tpu_topology or None) \
                if accelerator_type else None
            if node_pool:
                check_node_pool(node_pool)
        except DslError as err:
            raise DslError(prefix + _PARAMETERS.get(err.path, err.path), err.expected,
                           err.received) from None
        if node_pool and not gke_node_labels:
            raise DslError(prefix + "node_pool", "'' (the step declares gke_node_labels=False: "
                           "no node carries GKE's node pool label)", node_pool)
        return cls.of(accelerator, node_pool or None, gke_node_labels=gke_node_labels,
                      extra_selector=extra_selector)

    def to_outputs(self) -> dict[str, Any]:
        """JSON-ready values, in the forms the KFP backend reads: the accelerator type and
        count as strings, the node selector as an object, the tolerations as a list."""
        return {"resource": self.resource, "count": str(self.count) if self.resource else "",
                "node_selector": dict(self.node_selector),
                "tolerations": [t.to_k8s() for t in self.tolerations]}
