"""The two small tasks estflow adds around the steps, both lightweight components on the
estflow image that import no TensorFlow:

* ``report``, the exit handler: it runs however the steps ended and logs the run's final state
  (``SUCCEEDED``, ``FAILED`` or ``CANCELLED``), the pipeline job's resource name and the error;
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
from estflow.pipelines._kfp import components

__all__ = ["REPORT", "PlacementParameter", "placement_parameters", "build_report_component",
           "build_placement_component", "placement_task_name"]

REPORT = "report"

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


def build_placement_component(step: str, image: str) -> python_component.PythonComponent:
    return dsl.component(components.define(f"{step}_placement", _placement_source(step)),
                         base_image=image, install_kfp_package=False)


def build_report_component(pipeline_name: str, image: str) -> python_component.PythonComponent:
    return dsl.component(components.define(REPORT, _report_source(pipeline_name)),
                         base_image=image, install_kfp_package=False)


def _placement_source(step: str) -> str:
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
             f"        prefix={step + '_'!r})",
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
             f"    summary = {{'pipeline': {pipeline_name!r}, 'state': status.state,",
             "               'pipeline_job': status.pipeline_job_resource_name,",
             "               'task': status.pipeline_task_name,",
             "               'error_code': status.error_code,",
             "               'error_message': status.error_message}",
             f"    print({headline!r} % (",
             "        status.state, ' (%s)' % status.error_message if status.error_message "
             "else ''))",
             "    print(json.dumps(summary, sort_keys=True))",
             ""]
    return "\n".join(lines)
