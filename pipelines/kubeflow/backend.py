"""Which KFP backend (API server + driver) a compiled pipeline needs, and what older ones lack.

The IR the kfp 2.17 SDK writes runs on a recent open-source KFP backend; older backends reject,
ignore or misreport parts of it. What each feature needs, read from the backend's source
(github.com/kubeflow/pipelines at the release tags) and the pull request that added it
(:attr:`Feature.evidence`):

============================  ========  ========================================================
feature                       since     before that
============================  ========  ========================================================
retry policy                  2.4.1     2.4.0's Argo compiler has no retryStrategy: ignored
parameterised placement       2.5.0     no ``nodeSelectorJson``/``tolerationJson``/
                                        ``secretNameParameter``/``pvcNameParameter``: the driver
                                        fails the task
``PipelineTaskFinalStatus``   2.14.0    the compiler fails the run ("task final status not
                                        supported yet"; kubeflow/pipelines#11953)
optional ``secretAsEnv``      2.15.0    the field is unknown to the driver's proto, which drops
                                        it (kubeflow/pipelines#12216): the secret is required,
                                        a missing one keeps the pod from starting
PVC ``subPath``               2.16.0    the field is unknown to the driver's proto, which drops
                                        it (kubeflow/pipelines#12595): the whole volume is
                                        mounted, silently
exit handler's state          2.17.0    a group (``dsl.If``, ``dsl.ParallelFor``) inside the
                                        exit handler never passes its state up, so the exit
                                        handler's state stays RUNNING (kubeflow/pipelines#11979,
                                        fixed by #13322) and the exit task reads no final state
============================  ========  ========================================================

Even 2.17 leaves a false condition's exit handler RUNNING: the ``dsl.If`` group is created
CANCELED and no launcher updates the exit handler's DAG after it (2.17.0's driver and metadata
client), so the report reads UNKNOWN. So from 2.14 (the final status) on, on every backend,
gated steps (push, a user step's ``when``) never run in a ``dsl.If``: each sits in the exit
handler's DAG, takes its gate's result as an input and skips itself; only a mapped step's
``dsl.ParallelFor`` (fan-out) is a group there, hence needs 2.17. Before 2.14 (the report reads
no state) gated steps run in ``dsl.If`` groups.

The drivers of 2.4.1-2.16 read the kubernetes executor config with unknown fields allowed
(``backend/src/common/util/json.go``, ``UnmarshalString``), hence "drops it" above; 2.4.0's
(``jsonpb.UnmarshalString``) is strict.

Kubeflow platform releases ship (kubeflow/manifests README at the tags): 1.10.0 -> KFP 2.4.1,
1.10.1 and 1.10.2 -> 2.5.0, 1.11.0 -> 2.15.0, 26.03 -> 2.16.0.

``estflow compile --kfp-backend VERSION`` (:func:`estflow.pipelines.kubeflow.compiler.compile_pipeline`
``kfp_backend=``) leaves out what VERSION lacks; :func:`required` reads a compiled file back and
says which backend it needs (``estflow submit`` compares it with the server's version).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

__all__ = ["BackendVersion", "Feature", "FEATURES", "RETRIES", "PVC_SUB_PATH",
           "PARAMETERISED_PLACEMENT", "FINAL_STATUS", "SECRET_OPTIONAL", "EXIT_HANDLER_STATE",
           "OLDEST", "DEFAULT", "KUBEFLOW_RELEASES", "parse", "features_used", "required"]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


@dataclasses.dataclass(frozen=True, order=True)
class BackendVersion:
    """A KFP backend release, ``2.4`` meaning ``2.4.0``."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse(text: str) -> BackendVersion:
    """``"2.5"``, ``"2.5.0"``, ``"v2.14.3"``, ``"2.15.0-rc.1"`` -> a version.

    Raises:
        ValueError: not a version.
    """
    match = _VERSION.match(str(text).strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"Received an invalid KFP backend version, expected MAJOR.MINOR or "
                         f"MAJOR.MINOR.PATCH such as '2.5' or '2.14.3'. Received: {text!r}")
    major, minor, patch = match.groups()
    return BackendVersion(int(major), int(minor), int(patch or 0))


@dataclasses.dataclass(frozen=True)
class Feature:
    """Something in the IR that a backend older than ``since`` cannot run.

    Attributes:
        degrades: an older backend still runs the pipeline, without the feature (retries);
            else it fails the run or runs it wrongly.
        evidence: where the threshold comes from (a kubeflow/pipelines pull request or issue,
            or the release's source).
    """

    name: str
    since: BackendVersion
    what: str
    degrades: bool = False
    evidence: tuple[str, ...] = ()


# Each row's evidence: the kubeflow/pipelines pull request (or the release's source) that
# made the backend run the feature; docs/pages/kubeflow/compatibility.md shows the same rows
# (a test compares them).
RETRIES = Feature("retries", BackendVersion(2, 4, 1),
                  "task retry policies (KFP 2.4.0 ignores them)", degrades=True,
                  evidence=("2.4.1's backend/src/v2/compiler/argocompiler/container.go",))
PARAMETERISED_PLACEMENT = Feature(
    "parameterised placement", BackendVersion(2, 5, 0),
    "node selectors, tolerations, secrets or PVCs taken from run parameters or task outputs",
    evidence=("2.5.0's kubernetes_platform/proto/kubernetes_executor_config.proto",))
FINAL_STATUS = Feature(
    "final status", BackendVersion(2, 14, 0),
    "an exit task taking PipelineTaskFinalStatus", evidence=("kubeflow/pipelines#11953",))
SECRET_OPTIONAL = Feature(
    "optional secret env", BackendVersion(2, 15, 0),
    "a secret as environment variables with optional=True (older drivers require the secret)",
    evidence=("kubeflow/pipelines#12216",))
PVC_SUB_PATH = Feature("pvc sub_path", BackendVersion(2, 16, 0),
                       "a PVC mount's subPath (older drivers mount the whole volume)",
                       evidence=("kubeflow/pipelines#12595",))
EXIT_HANDLER_STATE = Feature(
    "exit handler state", BackendVersion(2, 17, 0),
    "a group inside the exit handler (a mapped step's loop) whose final state the exit task "
    "reads (older backends leave that state RUNNING)",
    evidence=("kubeflow/pipelines#11979", "kubeflow/pipelines#13322"))
FEATURES = (RETRIES, PARAMETERISED_PLACEMENT, FINAL_STATUS, SECRET_OPTIONAL, PVC_SUB_PATH,
            EXIT_HANDLER_STATE)

OLDEST = BackendVersion(2, 4, 0)
DEFAULT = BackendVersion(2, 16, 0)
"""What ``estflow compile`` targets unless told: the KFP backend of the current Kubeflow
platform release (26.03 installs KFP 2.16.0), so a PVC ``sub_path`` or an optional secret
compiles as declared. ``--kfp-backend`` targets an older one (1.11.0: 2.15, 1.10.x: 2.4.1-2.5)
or a newer one (2.17: fan-out); ``estflow submit`` refuses a server older than a package
needs."""

# Kubeflow platform release -> the KFP backend it installs (kubeflow/manifests).
KUBEFLOW_RELEASES = {"1.10.0": BackendVersion(2, 4, 1), "1.10.1": BackendVersion(2, 5, 0),
                     "1.10.2": BackendVersion(2, 5, 0), "1.11.0": BackendVersion(2, 15, 0),
                     "26.03": BackendVersion(2, 16, 0)}


def features_used(documents: Sequence[dict[str, Any]]) -> set[Feature]:
    """The :data:`FEATURES` a compiled pipeline (its YAML documents: PipelineSpec, then the
    PlatformSpec if any) uses."""
    spec = documents[0]
    used: set[Feature] = set()
    for task in _tasks(spec):
        if task.get("retryPolicy"):
            used.add(RETRIES)
        for parameter in (task.get("inputs") or {}).get("parameters", {}).values():
            if "taskFinalStatus" in parameter:
                used.add(FINAL_STATUS)
                if _has_sub_dag(spec, parameter["taskFinalStatus"].get("producerTask")):
                    used.add(EXIT_HANDLER_STATE)
    platform = documents[1] if len(documents) > 1 and documents[1] else {}
    executors = (((platform.get("platforms") or {}).get("kubernetes") or {})
                 .get("deploymentSpec") or {}).get("executors") or {}
    for config in executors.values():
        if (config.get("nodeSelector") or {}).get("nodeSelectorJson"):
            used.add(PARAMETERISED_PLACEMENT)
        if any("tolerationJson" in t for t in config.get("tolerations") or ()):
            used.add(PARAMETERISED_PLACEMENT)
        for secret in [*config.get("secretAsEnv", ()), *config.get("secretAsVolume", ())]:
            if not secret.get("secretName"):  # only the parameter form: 2.5+
                used.add(PARAMETERISED_PLACEMENT)
        if any(secret.get("optional") for secret in config.get("secretAsEnv", ())):
            used.add(SECRET_OPTIONAL)
        for pvc in config.get("pvcMount") or ():
            if not pvc.get("constant"):
                used.add(PARAMETERISED_PLACEMENT)
            if pvc.get("subPath"):
                used.add(PVC_SUB_PATH)
    return used


def required(documents: Sequence[dict[str, Any]]) -> BackendVersion:
    """The oldest backend that runs the compiled pipeline as written (features that only
    degrade on older backends, retries, are not counted)."""
    return max([OLDEST, *(f.since for f in features_used(documents) if not f.degrades)])


def _has_sub_dag(spec: dict[str, Any], group: str | None) -> bool:
    """Whether the DAG run by root task ``group`` (the exit handler's) holds a DAG task (a
    condition, loop or nested pipeline group), whose state KFP before 2.17 never passes up."""
    task = (((spec.get("root") or {}).get("dag") or {}).get("tasks") or {}).get(group or "")
    components = spec.get("components") or {}
    dag = (components.get(((task or {}).get("componentRef") or {}).get("name", "")) or {})
    return any("dag" in (components.get((t.get("componentRef") or {}).get("name", "")) or {})
               for t in ((dag.get("dag") or {}).get("tasks") or {}).values())


def _tasks(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from ((spec.get("root") or {}).get("dag") or {}).get("tasks", {}).values()
    for component in (spec.get("components") or {}).values():
        yield from (component.get("dag") or {}).get("tasks", {}).values()
