"""Per-task KFP settings, one small function per concern, applied in :data:`TASK_SETTINGS` order.

Each reads a :class:`TaskContext` and sets one thing on a ``PipelineTask``: the display name,
caching, pod labels, cpu/memory, the accelerator, node selectors, tolerations, secrets, PVC
mounts, scratch space (``ephemeral_storage``), retries, the timeout.

Every task gets cpu and memory requests: the declared ones, else its default ones (a step's:
its contract row's ``requests``; estflow's small tasks: :data:`SMALL_REQUESTS`), since a pod
without requests is BestEffort: first evicted, scheduled anywhere. A declared limit without a
request leaves the request to Kubernetes (which sets it to the limit). kfp-kubernetes writes its
part (node selectors, tolerations, secrets, PVCs, timeout, labels) into the task's platform
config, which the compiler emits as the second YAML document (the PlatformSpec).

A step with ``Resources(placement_parameters=True)`` gets its accelerator, node selector and
accelerator tolerations from its placement task's outputs (see :mod:`.tasks`); every other
value is a constant of the compiled YAML.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kfp import kubernetes
from kfp.dsl import pipeline_task

from estflow.dsl.placement import Placement
from estflow.dsl.resources import Resources
from estflow.pipelines.kubeflow import lean

# The task setters below name themselves in kfp's error without inspect.stack() (lean.py).
lean.install()

__all__ = ["TaskContext", "TaskSetting", "TASK_SETTINGS", "POD_LABELS", "SMALL_REQUESTS",
           "SCRATCH_VOLUME", "SCRATCH_PATH"]

SMALL_REQUESTS = ("100m", "256Mi")  # report and placement tasks: a few lines of Python

# Resources.ephemeral_storage: an emptyDir of that size limit, where temporary files go.
SCRATCH_VOLUME = "estflow-scratch"
SCRATCH_PATH = "/tmp"

# Every pod estflow starts carries these (Kubernetes' recommended label keys), plus
# app.kubernetes.io/component=<task>: `kubectl get pods -l app.kubernetes.io/component=train`.
POD_LABELS = {"app.kubernetes.io/part-of": "estflow"}


@dataclasses.dataclass(frozen=True)
class TaskContext:
    """Everything a task setting may read, so adding a setting never changes signatures.

    Attributes:
        name: the task's display name and pod label (a step name, ``report``, ...).
        caching: whether KFP may reuse the task's cached result.
        resources: the task's declared resources (empty: the cluster's defaults).
        placement: the task computing the accelerator and node pool at run time, if any.
        default_requests: the (cpu, memory) requests when ``resources`` declares none.
    """

    name: str
    caching: bool
    resources: Resources = Resources()
    placement: pipeline_task.PipelineTask | None = None
    default_requests: tuple[str, str] = SMALL_REQUESTS


TaskSetting = Callable[[pipeline_task.PipelineTask, TaskContext], None]


def _display_name(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    task.set_display_name(ctx.name)


def _caching(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    task.set_caching_options(enable_caching=ctx.caching)


def _pod_labels(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    for key, value in {**POD_LABELS, "app.kubernetes.io/component": ctx.name}.items():
        kubernetes.add_pod_label(task, key, value)


def _cpu_memory(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    r = ctx.resources
    cpu, memory = ctx.default_requests
    cpu_request = r.cpu_request or (None if r.cpu_limit else cpu)
    memory_request = r.memory_request or (None if r.memory_limit else memory)
    setters = ((cpu_request, task.set_cpu_request), (r.cpu_limit, task.set_cpu_limit),
               (memory_request, task.set_memory_request),
               (r.memory_limit, task.set_memory_limit))
    for value, setter in setters:
        if value is not None:
            setter(value)


def _static_placement(ctx: TaskContext) -> Placement:
    """The placement of declared values (for a task without a placement task)."""
    return Placement.for_resources(ctx.resources)


def _accelerator(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    if ctx.placement is not None:
        task.set_accelerator_type(ctx.placement.outputs["resource"])
        task.set_accelerator_limit(ctx.placement.outputs["count"])
        return
    placement = _static_placement(ctx)
    if placement.resource:
        task.set_accelerator_type(placement.resource)
        task.set_accelerator_limit(placement.count)


def _node_selector(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    if ctx.placement is not None:
        # One JSON selector per task, replacing label constants: the placement task's output
        # holds all of them (accelerator labels and node pool).
        kubernetes.add_node_selector_json(task, ctx.placement.outputs["node_selector"])
        return
    for key, value in _static_placement(ctx).node_selector:
        kubernetes.add_node_selector(task, key, value)


def _tolerations(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    if ctx.placement is not None:
        kubernetes.add_toleration_json(task, ctx.placement.outputs["tolerations"])
        derived = ()
    else:
        derived = _static_placement(ctx).tolerations
    declared = [t for t in ctx.resources.tolerations if t not in derived]
    for t in (*derived, *declared):
        kubernetes.add_toleration(task, key=t.key, operator=t.operator, value=t.value,
                                  effect=t.effect, toleration_seconds=t.toleration_seconds)


def _secrets(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    for env in ctx.resources.secrets_as_env:
        kubernetes.use_secret_as_env(task, env.secret, dict(env.key_to_env),
                                     optional=env.optional)
    for volume in ctx.resources.secrets_as_volume:
        kubernetes.use_secret_as_volume(task, volume.secret, volume.mount_path,
                                        optional=volume.optional)


def _pvcs(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    for pvc in ctx.resources.pvcs:
        kubernetes.mount_pvc(task, pvc.pvc_name, pvc.mount_path, sub_path=pvc.sub_path)


def _scratch(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    # KFP's IR has no ephemeral-storage request: a sized emptyDir bounds what the pod writes.
    if ctx.resources.ephemeral_storage:
        kubernetes.empty_dir_mount(task, SCRATCH_VOLUME, SCRATCH_PATH,
                                   size_limit=ctx.resources.ephemeral_storage)


def _retries(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    r = ctx.resources
    if r.retries:
        # backoff_max_duration is Argo's backoff.maxDuration: the window since the first
        # attempt began in which a retry may start (Resources validates it covers the attempts)
        task.set_retry(r.retries, backoff_duration=r.retry_backoff,
                       backoff_factor=float(r.retry_backoff_factor),
                       backoff_max_duration=f"{r.retry_window_seconds()}s")


def _timeout(task: pipeline_task.PipelineTask, ctx: TaskContext) -> None:
    if ctx.resources.timeout_seconds is not None:
        kubernetes.set_timeout(task, ctx.resources.timeout_seconds)


# Applied to every task, in this order (the order only shows in the YAML's list fields).
TASK_SETTINGS: tuple[TaskSetting, ...] = (
    _display_name, _caching, _pod_labels, _cpu_memory, _accelerator, _node_selector,
    _tolerations, _secrets, _pvcs, _scratch, _retries, _timeout,
)
