"""The two small tasks estflow adds around the steps, both lightweight components on the
estflow image that import no TensorFlow:

* ``report``, the exit handler: it runs however the steps ended and logs the run's final state,
  one of :data:`REPORT_STATES`: ``SUCCEEDED``, ``FAILED``, ``CANCELLED``, or ``UNKNOWN``. The
  backends name states differently: the open-source KFP backend (2.14+) passes the MLMD
  execution state of the exit handler's DAG (``COMPLETE``, ``CACHED``, ``FAILED``,
  ``CANCELED``, ...: ``backend/src/v2/driver/resolve.go``) and no error code or message (a
  TODO there); ``kfp.local`` passes ``SUCCEEDED``/``FAILED``; Vertex AI ``SUCCEEDED``,
  ``FAILED``, ``CANCELLED``. The report maps them (:data:`STATE_NAMES`) and logs the
  backend's own value as ``backend_state``. For a backend older than 2.14 (``estflow compile
  --kfp-backend 2.5``) the report takes no final status and logs ``UNKNOWN``: see the run's
  page, or ``estflow submit --wait``;
* ``<step>_placement``, for a step declared with ``Resources(placement_parameters=True)``: it
  turns the run parameters ``<step>_accelerator_type``, ``<step>_accelerator_count``,
  ``<step>_tpu_topology`` and ``<step>_node_pool`` into the accelerator resource, node
  selector and tolerations of the step's pod, with
  :meth:`estflow.dsl.placement.Placement.from_parameters` (the derivation the compiler uses
  for declared values), so one compiled pipeline targets a GPU, a TPU or CPUs per run.

Why a task: KFP resolves an accelerator type, node selector or toleration from a parameter only
as a whole value (kfp-kubernetes 2.17: ``set_accelerator_type``/``set_accelerator_limit`` take a
string channel, ``add_node_selector_json``/``add_toleration_json`` a dict/list channel;
``add_node_selector`` takes constants only). GPU and TPU need different node labels, so no single
pipeline parameter can be wired into the pod directly; a task computes them from one.
"""

from __future__ import annotations

import dataclasses

from kfp import dsl
from kfp.dsl import python_component

from estflow.dsl.resources import Resources
from estflow.pipelines.kubeflow import components
from estflow.pipelines.plan import PlannedStep

__all__ = ["REPORT", "REPORT_STATES", "STATE_NAMES", "SKIPPED_FILE", "PlacementParameter",
           "placement_parameters", "build_report_component", "build_placement_component",
           "build_gated_component", "placement_task_name"]

REPORT = "report"

# What the report logs as ``state``; the backend's own name of it is logged as backend_state.
REPORT_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")
# Backend state name -> report state (anything else: UNKNOWN). COMPLETE, CACHED, CANCELED: the
# MLMD execution states the open-source backend passes; SUCCEEDED, CANCELLED: kfp.local and
# Vertex AI.
STATE_NAMES = {"SUCCEEDED": "SUCCEEDED", "COMPLETE": "SUCCEEDED", "CACHED": "SUCCEEDED",
               "FAILED": "FAILED", "CANCELED": "CANCELLED", "CANCELLED": "CANCELLED"}

# What a gated task (see build_gated_component) writes in each output when its gate is False.
SKIPPED_FILE = "skipped.json"

# Output name -> type of the placement task, in the forms the KFP backend reads.
_PLACEMENT_OUTPUTS = (("resource", "str"), ("count", "str"), ("node_selector", "dict"),
                      ("tolerations", "list"))


@dataclasses.dataclass(frozen=True)
class PlacementParameter:
    """A run parameter of a step's placement: its pipeline name, the placement task's input
    name, its type and its default (the declared value). All are strings, the count too:
    ``estflow submit --param k=v`` passes strings, and the placement task validates them."""

    name: str
    input: str
    type: type
    default: str


def placement_parameters(step: str, resources: Resources) -> tuple[PlacementParameter, ...]:
    """The run parameters of ``step``'s placement (empty unless ``placement_parameters``)."""
    if not resources.placement_parameters:
        return ()
    accelerator = resources.accelerator
    values = (("accelerator_type", str, accelerator.type if accelerator else ""),
              ("accelerator_count", str, str(accelerator.count if accelerator else 1)),
              ("tpu_topology", str, (accelerator.tpu_topology or "") if accelerator else ""),
              ("node_pool", str, resources.node_pool or ""))
    return tuple(PlacementParameter(f"{step}_{name}", name, kind, default)
                 for name, kind, default in values)


def placement_task_name(step: str) -> str:
    """The KFP task name of ``step``'s placement task (its component function's name)."""
    return f"{step}-placement"


def build_placement_component(step: str, image: str, resources: Resources | None = None,
                              ) -> python_component.PythonComponent:
    """The placement task of ``step``; the declared ``gke_node_labels`` and free-form
    ``node_selector`` of ``resources`` are constants of its code."""
    return dsl.component(components.define(f"{step}_placement",
                                           _placement_source(step, resources or Resources())),
                         base_image=image, install_kfp_package=False)


def build_report_component(pipeline_name: str, image: str, *, final_status: bool = True,
                           ) -> python_component.PythonComponent:
    """The exit handler's task; ``final_status=False`` for a backend older than 2.14, which
    cannot pass ``PipelineTaskFinalStatus``."""
    source = _report_source(pipeline_name) if final_status else \
        _plain_report_source(pipeline_name)
    return dsl.component(components.define(REPORT, source), base_image=image,
                         install_kfp_package=False)


def build_gated_component(step: PlannedStep, gate: str, image: str, *, keyed: bool = False,
                          ) -> python_component.PythonComponent:
    """``step``'s component taking its gate's result as the bool input ``gate`` (``blessed``):
    when False it runs no step, logs why and writes :data:`SKIPPED_FILE` in each output (a KFP
    launcher uploads every output). For a KFP backend from 2.14 on (2.17 included), where a
    ``dsl.If`` group inside the exit handler leaves the exit handler's state RUNNING (before
    2.17: kubeflow/pipelines#11979; on 2.17 a false condition is created CANCELED and nothing
    updates the exit handler's DAG after it): the task then sits in the exit handler's DAG
    itself, and the report reads the run's real final state.

    Raises:
        ValueError: ``step`` returns a result (a skipped task would have none to return).
    """
    if step.result is not None:
        raise ValueError(f"Received a gated step with a result, expected none: {step.name} "
                         f"returns {step.result.key}")
    lines = components.render_source(step, keyed=keyed).split("\n")
    body = next(i for i, line in enumerate(lines) if line.startswith(")")) + 2  # after doc
    outputs = [*step.outputs, *(name for name, _ in components.ui_outputs(step))]
    message = f"estflow step {step.name}: skipped: {gate} is False"
    guard = [f"    if not {gate}:",
             "        import json",
             "        import os",
             f"        print({message!r})",
             f"        for skipped in ({''.join(o + ', ' for o in outputs)}):",
             "            os.makedirs(skipped.path, exist_ok=True)",
             f"            with open(os.path.join(skipped.path, {SKIPPED_FILE!r}), 'w') as f:",
             f"                json.dump({{'skipped': True, {gate!r}: False}}, f)",
             "        return"]
    source = "\n".join([lines[0], f"    {gate}: bool,", *lines[1:body], *guard, *lines[body:]])
    return dsl.component(components.define(step.name, source), base_image=image,
                         install_kfp_package=False)


def _placement_source(step: str, resources: Resources) -> str:
    outputs = ", ".join(f"({name!r}, {kind})" for name, kind in _PLACEMENT_OUTPUTS)
    doc = f"estflow: the {step} task's accelerator and node pool, chosen by run parameters."
    lines = [f"def {step}_placement(",
             "    accelerator_type: str,",
             "    accelerator_count: str,",
             "    tpu_topology: str,",
             "    node_pool: str,",
             f") -> NamedTuple('Outputs', [{outputs}]):",
             f"    {doc!r}",
             "    import json",
             "    from estflow.dsl.placement import Placement",
             "    placement = Placement.from_parameters(",
             "        accelerator_type, accelerator_count, tpu_topology, node_pool,",
             f"        prefix={step + '_'!r}, gke_node_labels={resources.gke_node_labels!r},",
             f"        extra_selector={dict(resources.node_selector)!r})",
             "    outputs = placement.to_outputs()",
             f"    print('estflow {step} placement: ' + json.dumps(outputs, sort_keys=True))",
             "    return tuple(outputs[name] for name in "
             f"{tuple(name for name, _ in _PLACEMENT_OUTPUTS)!r})",
             ""]
    return "\n".join(lines)


def _report_source(pipeline_name: str) -> str:
    doc = f"estflow: log how the run of pipeline {pipeline_name} ended (the exit handler)."
    headline = f"estflow pipeline {pipeline_name} finished: %s%s"
    lines = [f"def {REPORT}(status: PipelineTaskFinalStatus):",
             f"    {doc!r}",
             "    import json",
             f"    state = {STATE_NAMES!r}.get(str(status.state).upper(), 'UNKNOWN')",
             f"    summary = {{'pipeline': {pipeline_name!r}, 'state': state,",
             "               'backend_state': status.state,",
             "               'pipeline_job': status.pipeline_job_resource_name,",
             "               'task': status.pipeline_task_name,",
             "               'error_code': status.error_code,",
             "               'error_message': status.error_message}",
             f"    print({headline!r} % (",
             "        state, ' (%s)' % status.error_message if status.error_message else ''))",
             "    print(json.dumps(summary, sort_keys=True))",
             ""]
    return "\n".join(lines)


def _plain_report_source(pipeline_name: str) -> str:
    doc = (f"estflow: log that the run of pipeline {pipeline_name} ended (the exit handler; "
           "this KFP backend passes no final state).")
    headline = (f"estflow pipeline {pipeline_name} finished: UNKNOWN (a KFP backend older than "
                "2.14 passes exit tasks no final state: see the run's page)")
    lines = [f"def {REPORT}():",
             f"    {doc!r}",
             "    import json",
             f"    print({headline!r})",
             f"    print(json.dumps({{'pipeline': {pipeline_name!r}, 'state': 'UNKNOWN'}}, "
             "sort_keys=True))",
             ""]
    return "\n".join(lines)
