"""Per-step resources: cpu/memory, accelerators and node pools, tolerations, secrets, volumes,
retries, timeout and caching. Declarations only; the KFP compiler translates them.

Example:
    >>> import estflow.dsl as ef
    >>> gpu = ef.Resources(cpu_request="4", memory_request="16Gi", node_pool="gpu-pool",
    ...                    accelerator=ef.Accelerator("nvidia-tesla-t4"))
    >>> gpu.accelerator.resource_name
    'nvidia.com/gpu'

The accelerator kind follows its GKE type: ``nvidia-*`` is a GPU (k8s resource
``nvidia.com/gpu``), ``tpu-*`` a TPU (``google.com/tpu``). The node labels and taints that
follow from an accelerator and a node pool are derived in :mod:`estflow.dsl.placement`; they
are GKE's. On other clusters (EKS, AKS, on-premises) declare ``gke_node_labels=False`` and
select nodes with the free-form ``node_selector`` and ``tolerations``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from estflow.dsl import _checks
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import STEPS
from estflow.dsl.errors import DslError
from estflow.dsl.serialization import serializable

__all__ = ["Accelerator", "Toleration", "SecretEnv", "SecretVolume", "PvcMount", "Resources",
           "check_step_resources", "check_node_pool", "duration_seconds", "GPU_RESOURCE",
           "TPU_RESOURCE"]

GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"

# Quantities both Kubernetes and KFP 2.17's validators accept (KFP wants integer memory and
# takes "K", which Kubernetes refuses; Kubernetes' "k" KFP refuses: neither kilo is allowed).
_CPU = re.compile(r"^(\d+(\.\d{1,3})?|\.\d{1,3}|\d+m)$")
_MEMORY = re.compile(r"^(\d+)(Ei|Pi|Ti|Gi|Mi|Ki|E|P|T|G|M)?$")
_MEMORY_UNITS = {None: 1, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                 "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DURATION = re.compile(r"^\d+[smh]$")  # what KFP's retry policy converts exactly
_SECONDS = {"s": 1, "m": 60, "h": 3600}
_LABEL_VALUE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_VALUE_ANY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # k8s label
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._A-Za-z0-9]{1,253}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOPOLOGY = re.compile(r"^[1-9]\d*(x[1-9]\d*){1,2}$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@serializable
@dataclasses.dataclass(frozen=True)
class Accelerator:
    """GPUs or TPUs for a step's pod, by GKE accelerator type.

    Args:
        type: ``nvidia-*`` for a GPU (``"nvidia-tesla-t4"``, ``"nvidia-l4"``,
            ``"nvidia-tesla-a100"``...) or ``tpu-*`` for a TPU (``"tpu-v5-lite-podslice"``,
            ``"tpu-v6e-slice"``...).
        count: accelerators the pod asks for (for a TPU: chips on its node, at most the chips of
            the topology; a multi-host slice needs one pod per host, which one task is not).
        tpu_topology: the TPU slice topology, e.g. ``"2x2"`` or ``"2x2x1"``: required for a TPU
            (GKE schedules TPU pods by it), None for a GPU.

    Example:
        >>> import estflow.dsl as ef
        >>> tpu = ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2")
        >>> tpu.kind, tpu.resource_name
        ('tpu', 'google.com/tpu')
    """

    type: str
    count: int = 1
    tpu_topology: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not _LABEL_VALUE.match(self.type) or \
                not self.type.startswith(("nvidia-", "tpu-")):
            raise DslError("type", "a GKE accelerator type: 'nvidia-...' for a GPU (e.g. "
                           "'nvidia-tesla-t4', 'nvidia-l4') or 'tpu-...' for a TPU (e.g. "
                           "'tpu-v5-lite-podslice')", self.type)
        _checks.positive_int(self.count, "count")
        if self.kind == "gpu":
            if self.tpu_topology is not None:
                raise DslError("tpu_topology", f"None for a GPU ({self.type})",
                               self.tpu_topology)
            return
        if not isinstance(self.tpu_topology, str) or not _TOPOLOGY.match(self.tpu_topology):
            raise DslError("tpu_topology", f"the slice topology of TPU {self.type}, such as "
                           "'2x2' or '2x2x1' (required for a TPU)", self.tpu_topology)
        chips = _chips(self.tpu_topology)
        if self.count > chips:
            raise DslError("count", f"at most the {chips} chips of topology "
                           f"{self.tpu_topology}", self.count)

    @property
    def kind(self) -> str:
        """``"gpu"`` or ``"tpu"``."""
        return "tpu" if self.type.startswith("tpu-") else "gpu"

    @property
    def resource_name(self) -> str:
        """The Kubernetes extended resource the pod's limit names."""
        return TPU_RESOURCE if self.kind == "tpu" else GPU_RESOURCE


def _chips(topology: str) -> int:
    chips = 1
    for size in topology.split("x"):
        chips *= int(size)
    return chips


@serializable
@dataclasses.dataclass(frozen=True)
class Toleration:
    """A Kubernetes toleration of a node taint.

    Args:
        key: the taint key; None (with ``operator="Exists"``) tolerates every taint.
        operator: ``"Exists"`` (any value) or ``"Equal"`` (``value`` must match).
        value: the taint value, for ``"Equal"`` only.
        effect: ``"NoSchedule"``, ``"PreferNoSchedule"``, ``"NoExecute"`` or None (all).
        toleration_seconds: how long a ``NoExecute`` taint is tolerated (None: forever).

    Example:
        >>> import estflow.dsl as ef
        >>> toleration = ef.Toleration("dedicated", operator="Equal", value="ml")
        >>> toleration.to_k8s()
        {'key': 'dedicated', 'operator': 'Equal', 'value': 'ml', 'effect': 'NoSchedule'}
    """

    key: str | None
    operator: str = "Exists"
    value: str | None = None
    effect: str | None = "NoSchedule"
    toleration_seconds: int | None = None

    def __post_init__(self) -> None:
        _checks.one_of(self.operator, ("Exists", "Equal"), "operator")
        if self.key is None:
            if self.operator != "Exists":
                raise DslError("key", "a taint key (only operator 'Exists' may omit it)", None)
        elif not isinstance(self.key, str) or not _LABEL_KEY.match(self.key):
            raise DslError("key", "a taint key such as 'nvidia.com/gpu'", self.key)
        if self.operator == "Exists" and self.value is not None:
            raise DslError("value", "None with operator 'Exists'", self.value)
        if self.operator == "Equal" and not isinstance(self.value, str):
            raise DslError("value", "a string with operator 'Equal'", self.value)
        if self.effect is not None:
            _checks.one_of(self.effect, _EFFECTS, "effect")
        _checks.positive_int(self.toleration_seconds, "toleration_seconds", allow_none=True,
                             minimum=0)
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise DslError("toleration_seconds", "None unless effect is 'NoExecute'",
                           self.toleration_seconds)

    def to_k8s(self) -> dict[str, Any]:
        """The Kubernetes JSON form (camelCase, unset fields left out)."""
        fields = {"key": self.key, "operator": self.operator, "value": self.value,
                  "effect": self.effect, "tolerationSeconds": self.toleration_seconds}
        return {k: v for k, v in fields.items() if v is not None}


@serializable
@dataclasses.dataclass(frozen=True)
class SecretEnv:
    """Environment variables from a Kubernetes Secret.

    Args:
        secret: the Secret's name.
        key_to_env: Secret data key -> environment variable name,
            e.g. ``{"token": "SERVING_TOKEN"}``.
        optional: start the pod even when the Secret or a key is missing.

    Example:
        >>> import estflow.dsl as ef
        >>> env = ef.SecretEnv("serving-credentials", {"token": "SERVING_TOKEN"})
        >>> env.key_to_env
        {'token': 'SERVING_TOKEN'}
    """

    secret: str
    key_to_env: Mapping[str, str]
    optional: bool = False

    def __post_init__(self) -> None:
        _dns_name(self.secret, "secret", "a Secret name")
        if not isinstance(self.key_to_env, Mapping) or not self.key_to_env:
            raise DslError("key_to_env", "a non-empty mapping of Secret key -> environment "
                           "variable name", self.key_to_env)
        for key, env in self.key_to_env.items():
            if not isinstance(key, str) or not _SECRET_KEY.match(key):
                raise DslError("key_to_env", "Secret data keys (letters, digits, '-', '_', "
                               "'.')", key)
            if not isinstance(env, str) or not _ENV_NAME.match(env):
                raise DslError(f"key_to_env[{key!r}]", "an environment variable name", env)
        # Sorted, so a declaration and its JSON round trip compile to the same bytes.
        _checks.freeze(self, "key_to_env", dict(sorted(self.key_to_env.items())))
        _bool(self.optional, "optional")


@serializable
@dataclasses.dataclass(frozen=True)
class SecretVolume:
    """A Kubernetes Secret mounted as files (one per data key) at ``mount_path``.

    Args:
        secret: the Secret's name.
        mount_path: an absolute directory in the container (not ``/``, no ``..``).
        optional: start the pod even when the Secret is missing.

    Example:
        >>> import estflow.dsl as ef
        >>> volume = ef.SecretVolume("gcp-sa-key", mount_path="/var/secrets/google")
        >>> volume.optional
        False
    """

    secret: str
    mount_path: str
    optional: bool = False

    def __post_init__(self) -> None:
        _dns_name(self.secret, "secret", "a Secret name")
        _mount_path(self.mount_path)
        _bool(self.optional, "optional")


@serializable
@dataclasses.dataclass(frozen=True)
class PvcMount:
    """An existing PersistentVolumeClaim mounted at ``mount_path``.

    Args:
        pvc_name: the PersistentVolumeClaim's name (in the pipeline run's namespace).
        mount_path: an absolute directory in the container (not ``/``, no ``..``).
        sub_path: a relative directory inside the volume to mount (``""``: its root).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.PvcMount("shared-data", mount_path="/mnt/shared", sub_path="estflow")
        PvcMount(pvc_name='shared-data', mount_path='/mnt/shared', sub_path='estflow')
    """

    pvc_name: str
    mount_path: str
    sub_path: str = ""

    def __post_init__(self) -> None:
        _dns_name(self.pvc_name, "pvc_name", "a PersistentVolumeClaim name")
        _mount_path(self.mount_path)
        if not isinstance(self.sub_path, str) or self.sub_path.startswith("/") or \
                ".." in self.sub_path.split("/"):
            raise DslError("sub_path", "a relative path inside the volume without '..' "
                           "(\"\" for its root)", self.sub_path)


@serializable
@dataclasses.dataclass(frozen=True)
class Resources:
    """What one step's pod asks for and where it runs (Kubeflow only: local runs ignore it).

    Args:
        cpu_request: the cores the pod is guaranteed: ``"2"``, ``"0.5"`` or millicores
            ``"500m"``.
        cpu_limit: the most cores the pod may use (same forms; at least ``cpu_request``).
        memory_request: the memory the pod is guaranteed: bytes with an optional suffix,
            ``"8Gi"``, ``"512Mi"``, ``"2G"`` (Ki Mi Gi Ti Pi Ei, M G T P E).
        memory_limit: the most memory the pod may use (same forms; at least
            ``memory_request``).
        accelerator: GPUs or TPUs (adds the node selectors and the toleration GKE needs).
        node_pool: a GKE node pool name (node label ``cloud.google.com/gke-nodepool``).
        node_selector: further node labels the pod requires, free-form (label -> value), e.g.
            ``{"eks.amazonaws.com/nodegroup": "gpu"}`` or ``{"agentpool": "gpupool"}``.
        gke_node_labels: derive GKE's node labels from ``accelerator`` and ``node_pool``
            (``cloud.google.com/gke-*``). False on any other cluster, where no node carries
            them (the pod would stay Pending): the accelerator then only sets the resource
            limit and its toleration, and ``node_selector`` picks the nodes (``node_pool`` must
            be None).
        tolerations: extra taints the pod tolerates.
        secrets_as_env: Kubernetes Secrets whose keys become environment variables.
        secrets_as_volume: Kubernetes Secrets mounted as files.
        pvcs: PersistentVolumeClaims to mount.
        ephemeral_storage: scratch space of the pod: an ``emptyDir`` of at most this size
            (memory forms, ``"50Gi"``) mounted at ``/tmp``, where Beam and TensorFlow write
            their temporary files. A limit, not a scheduling request (KFP's IR has no
            ephemeral-storage request): the kubelet evicts a pod writing more. None: no limit.
        retries: how many times KFP retries a failed attempt (0: none).
        retry_backoff: wait before the first retry (``"30s"``, ``"5m"``, ``"1h"``).
        retry_backoff_factor: each further wait is multiplied by this (a whole number: the
            KFP backend and Argo read it as an integer, 1.5 would become 1).
        retry_backoff_max: the retry *window*, not a longest wait: KFP (Argo's
            ``backoff.maxDuration``) starts no retry once this long has passed since the
            first attempt began, so it must cover every attempt: at least
            ``timeout_seconds * (retries + 1)``. None: that product plus the waits when
            ``timeout_seconds`` is set, else 24 hours.
        timeout_seconds: a pod running longer is stopped (each attempt; None: no limit).
        caching: whether KFP may reuse a cached result (None: the compiler's default;
            a compile option such as ``estflow compile --no-cache`` overrides both).
        placement_parameters: expose the accelerator and the node pool as run parameters
            ``<step>_accelerator_type``, ``<step>_accelerator_count``, ``<step>_tpu_topology``
            and ``<step>_node_pool`` (defaults: the declared values), so one compiled pipeline
            runs the step on a GPU, a TPU or CPUs as a run chooses.

    The node selectors and tolerations an accelerator and a node pool imply are derived (in
    :mod:`estflow.dsl.placement`), not declared: ``nvidia-*`` selects
    ``cloud.google.com/gke-accelerator``, ``tpu-*`` ``cloud.google.com/gke-tpu-accelerator``
    and ``cloud.google.com/gke-tpu-topology``, a node pool ``cloud.google.com/gke-nodepool``;
    the pod tolerates the accelerator's ``NoSchedule`` taint.

    Example:
        >>> import estflow.dsl as ef
        >>> train = ef.Resources(
        ...     cpu_request="4", memory_request="16Gi", memory_limit="32Gi",
        ...     accelerator=ef.Accelerator("nvidia-l4", count=2), node_pool="gpu-pool",
        ...     pvcs=(ef.PvcMount("shared-data", mount_path="/mnt/shared"),),
        ...     retries=2, timeout_seconds=6 * 3600)
        >>> train.accelerator.resource_name, train.retry_backoff
        ('nvidia.com/gpu', '30s')
        >>> eks = ef.Resources(accelerator=ef.Accelerator("nvidia-tesla-t4"),
        ...                    gke_node_labels=False,
        ...                    node_selector={"eks.amazonaws.com/nodegroup": "gpu"})
        >>> eks.node_selector
        {'eks.amazonaws.com/nodegroup': 'gpu'}
    """

    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None
    accelerator: Accelerator | None = None
    node_pool: str | None = None
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gke_node_labels: bool = True
    tolerations: tuple[Toleration, ...] = ()
    secrets_as_env: tuple[SecretEnv, ...] = ()
    secrets_as_volume: tuple[SecretVolume, ...] = ()
    pvcs: tuple[PvcMount, ...] = ()
    ephemeral_storage: str | None = None
    retries: int = 0
    retry_backoff: str = "30s"
    retry_backoff_factor: int = 2
    retry_backoff_max: str | None = None
    timeout_seconds: int | None = None
    caching: bool | None = None
    placement_parameters: bool = False

    def __post_init__(self) -> None:
        self._check_quantities()
        if self.accelerator is not None and not isinstance(self.accelerator, Accelerator):
            raise DslError("accelerator", "an Accelerator or None", self.accelerator)
        if self.node_pool is not None:
            check_node_pool(self.node_pool)
        self._check_node_selector()
        for field, cls in (("tolerations", Toleration), ("secrets_as_env", SecretEnv),
                           ("secrets_as_volume", SecretVolume), ("pvcs", PvcMount)):
            _checks.freeze(self, field, _checks.tuple_of(getattr(self, field), field, cls,
                                                         what=f"{cls.__name__} declarations"))
        self._check_unique_mounts()
        _bytes(self.ephemeral_storage, "ephemeral_storage")
        _checks.positive_int(self.retries, "retries", minimum=0)
        self._check_retries()
        _checks.positive_int(self.timeout_seconds, "timeout_seconds", allow_none=True)
        self._check_retry_window()
        if self.caching is not None:
            _bool(self.caching, "caching")
        _bool(self.placement_parameters, "placement_parameters")

    def _check_node_selector(self) -> None:
        if not isinstance(self.node_selector, Mapping):
            raise DslError("node_selector", "a mapping of node label -> value", self.node_selector)
        for key, value in self.node_selector.items():
            if not isinstance(key, str) or not _LABEL_KEY.match(key):
                raise DslError("node_selector", "node label keys such as "
                               "'eks.amazonaws.com/nodegroup'", key)
            if not isinstance(value, str) or (value and not _LABEL_VALUE_ANY.match(value)):
                raise DslError(f"node_selector[{key!r}]", "a label value (letters, digits, "
                               "'-', '_', '.', at most 63)", value)
        # Sorted, so a declaration and its JSON round trip compile to the same bytes.
        _checks.freeze(self, "node_selector", dict(sorted(self.node_selector.items())))
        _bool(self.gke_node_labels, "gke_node_labels")
        if not self.gke_node_labels and self.node_pool is not None:
            raise DslError("node_pool", "None with gke_node_labels=False (a node pool is the GKE "
                           "label cloud.google.com/gke-nodepool; select nodes with "
                           "node_selector instead)", self.node_pool)

    def _check_retries(self) -> None:
        fields = ("retry_backoff", "retry_backoff_max")
        for field in fields:
            value = getattr(self, field)
            if (value is not None or field == "retry_backoff") and (
                    not isinstance(value, str) or not _DURATION.match(value)):
                raise DslError(field, "a duration in whole seconds, minutes or hours, such as "
                               "'30s', '5m' or '1h'" + (" (or None)" if field != fields[0]
                                                          else ""), value)
        factor = self.retry_backoff_factor
        if isinstance(factor, float) and factor.is_integer():
            _checks.freeze(self, "retry_backoff_factor", int(factor))  # 2.0 from old specs
        _checks.positive_int(self.retry_backoff_factor, "retry_backoff_factor")

    def _check_retry_window(self) -> None:
        if not self.retries or self.retry_backoff_max is None or self.timeout_seconds is None:
            return
        needed = self.timeout_seconds * (self.retries + 1)
        if duration_seconds(self.retry_backoff_max) < needed:
            raise DslError("retry_backoff_max", f"a retry window of at least timeout_seconds * "
                           f"(retries + 1) = {needed}s: KFP starts no retry once the window "
                           "since the first attempt has passed, so a shorter one never "
                           "retries a task that ran into its timeout", self.retry_backoff_max)

    def retry_window_seconds(self) -> int:
        """The retry window KFP gets (``retry_backoff_max``, or its default: every attempt's
        timeout plus the waits between them, else 24 hours without a timeout)."""
        if self.retry_backoff_max is not None:
            return duration_seconds(self.retry_backoff_max)
        if self.timeout_seconds is None:
            return 24 * 3600
        waits = sum(duration_seconds(self.retry_backoff) * self.retry_backoff_factor ** i
                    for i in range(self.retries))
        return self.timeout_seconds * (self.retries + 1) + waits

    def _check_quantities(self) -> None:
        for kind, parse in (("cpu", _millicores), ("memory", _bytes)):
            request = parse(getattr(self, f"{kind}_request"), f"{kind}_request")
            limit = parse(getattr(self, f"{kind}_limit"), f"{kind}_limit")
            if request is not None and limit is not None and request > limit:
                raise DslError(f"{kind}_request", f"at most {kind}_limit "
                               f"({getattr(self, f'{kind}_limit')})",
                               getattr(self, f"{kind}_request"))

    def _check_unique_mounts(self) -> None:
        mounts = [(f"secrets_as_volume[{i}].mount_path", s.mount_path)
                  for i, s in enumerate(self.secrets_as_volume)]
        mounts += [(f"pvcs[{i}].mount_path", p.mount_path) for i, p in enumerate(self.pvcs)]
        _unique(mounts, "a mount path used once")
        envs = [(f"secrets_as_env[{i}].key_to_env", env) for i, s in
                enumerate(self.secrets_as_env) for env in s.key_to_env.values()]
        _unique(envs, "an environment variable set once")


def check_step_resources(value: Any, field: str = "resources") -> dict[str, Resources]:
    """Validate a step name -> Resources mapping; returns it as a dict in step order."""
    if not isinstance(value, Mapping):
        raise DslError(field, "a mapping of step name -> Resources", value)
    names = [s.name for s in STEPS] + [BATCH_PREDICT.name]
    for key, resources in value.items():
        if key not in names:
            raise DslError(f"{field}[{key!r}]", f"a step name, one of {names}", key)
        if not isinstance(resources, Resources):
            raise DslError(f"{field}[{key!r}]", "a Resources declaration", resources)
    return {name: value[name] for name in names if name in value}


def _millicores(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _CPU.match(value) or _cpu_value(value) <= 0:
        raise DslError(field, "a positive CPU quantity: cores ('2', '0.5') or millicores "
                       "('500m')", value)
    return _cpu_value(value)


def _cpu_value(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(Decimal(value) * 1000)


def _bytes(value: Any, field: str) -> int | None:
    if value is None:
        return None
    match = _MEMORY.match(value) if isinstance(value, str) else None
    if not match or int(match.group(1)) == 0:
        raise DslError(field, "a positive memory quantity: an integer with an optional suffix "
                       "Ki, Mi, Gi, Ti, Pi, Ei or M, G, T, P, E (e.g. '8Gi', '512Mi')", value)
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2)]


def duration_seconds(value: str) -> int:
    """Seconds of a validated duration such as ``"30s"``, ``"5m"`` or ``"1h"``."""
    return int(value[:-1]) * _SECONDS[value[-1]]


def _dns_name(value: Any, field: str, what: str) -> None:
    if not isinstance(value, str) or not _DNS_SUBDOMAIN.match(value):
        raise DslError(field, f"{what} (lowercase letters, digits, '-' and '.')", value)


def check_node_pool(value: Any, field: str = "node_pool") -> None:
    """A GKE node pool name (a node label value)."""
    if not isinstance(value, str) or not _LABEL_VALUE.match(value):
        raise DslError(field, "a GKE node pool name (lowercase letters, digits and '-', at "
                       "most 63)", value)


def _mount_path(value: Any) -> None:
    if not isinstance(value, str) or not value.startswith("/") or value == "/" or \
            ".." in value.split("/"):
        raise DslError("mount_path", "an absolute directory path other than '/', without '..'",
                       value)


def _bool(value: Any, field: str) -> None:
    if not isinstance(value, bool):
        raise DslError(field, "True or False", value)


def _unique(items: list[tuple[str, str]], what: str) -> None:
    seen: set[str] = set()
    for path, value in items:
        if value in seen:
            raise DslError(path, what, value)
        seen.add(value)
