"""A read-only view over compiled KFP IR, parsed strictly, for tests that assert on structure.

estflow's steps sit in nested DAGs (the exit handler's; push inside the ``blessed`` condition),
so "the train task" or "where push's model comes from" means walking the DAGs: :class:`Ir` does
that once, for the tests. Every document is parsed with ``ignore_unknown_fields=False``, the
kubernetes executor configs included, so a misspelled field fails the test that reads it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from estflow.pipelines.kubeflow import goldens

ROOT = "root"


def parse_strict(document: dict, message):
    return json_format.ParseDict(document, message, ignore_unknown_fields=False)


@dataclasses.dataclass(frozen=True)
class Placed:
    """A task and the DAG it sits in (``root`` or a DAG component's name)."""

    dag: str
    spec: pipeline_spec_pb2.PipelineTaskSpec


class Ir:
    """The compiled pipeline at ``path``: its PipelineSpec and PlatformSpec, parsed strictly."""

    def __init__(self, path: Path) -> None:
        self.documents = list(yaml.safe_load_all(Path(path).read_text()))
        self.spec = parse_strict(self.documents[0], pipeline_spec_pb2.PipelineSpec())
        self.platform = (parse_strict(self.documents[1], pipeline_spec_pb2.PlatformSpec())
                         if len(self.documents) > 1 else None)
        self._placed: dict[str, Placed] = {}
        self._parents: dict[str, str] = {}  # DAG component -> the group task running it
        for dag, tasks in self._dags():
            for name, task in tasks.items():
                assert name not in self._placed, f"task name {name} used twice"
                self._placed[name] = Placed(dag, task)
                if self._is_group(task):
                    self._parents[task.component_ref.name] = name

    def _dags(self):
        yield ROOT, self.spec.root.dag.tasks
        for name, component in self.spec.components.items():
            if component.WhichOneof("implementation") == "dag":
                yield name, component.dag.tasks

    def _is_group(self, task) -> bool:
        component = self.spec.components[task.component_ref.name]
        return component.WhichOneof("implementation") == "dag"

    # --- tasks ----------------------------------------------------------------------------

    def tasks(self) -> dict[str, pipeline_spec_pb2.PipelineTaskSpec]:
        """Container tasks (not groups), by name, from every DAG."""
        return {n: p.spec for n, p in self._placed.items() if not self._is_group(p.spec)}

    def groups(self) -> dict[str, pipeline_spec_pb2.PipelineTaskSpec]:
        return {n: p.spec for n, p in self._placed.items() if self._is_group(p.spec)}

    def task(self, name: str) -> pipeline_spec_pb2.PipelineTaskSpec:
        return self._placed[name].spec

    def dag_of(self, name: str) -> str:
        return self._placed[name].dag

    def enclosing_groups(self, name: str) -> list[str]:
        """The group tasks around task ``name``, innermost first."""
        out, dag = [], self.dag_of(name)
        while dag != ROOT:
            out.append(self._parents[dag])
            dag = self.dag_of(self._parents[dag])
        return out

    def container(self, name: str) -> dict:
        """The executor's container of task ``name``, as a dict."""
        label = self.spec.components[self.task(name).component_ref.name].executor_label
        return json_format.MessageToDict(self.spec.deployment_spec)["executors"][label][
            "container"]

    def executor_label(self, name: str) -> str:
        return self.spec.components[self.task(name).component_ref.name].executor_label

    def k8s(self, name: str) -> k8s_pb2.KubernetesExecutorConfig:
        """Task ``name``'s kubernetes executor config, parsed strictly (empty if it has none)."""
        executors = json_format.MessageToDict(
            self.platform.platforms["kubernetes"].deployment_spec)["executors"]
        return parse_strict(executors.get(self.executor_label(name), {}),
                            k8s_pb2.KubernetesExecutorConfig())

    # --- where inputs come from -----------------------------------------------------------

    def artifact_source(self, name: str, artifact: str) -> tuple[str, str]:
        """(producer task, output key) of task ``name``'s input ``artifact``, through groups."""
        dag, spec = self.dag_of(name), self.task(name).inputs.artifacts[artifact]
        while spec.WhichOneof("kind") == "component_input_artifact":
            group = self._parents[dag]
            dag, spec = self.dag_of(group), \
                self.task(group).inputs.artifacts[spec.component_input_artifact]
        return (spec.task_output_artifact.producer_task,
                spec.task_output_artifact.output_artifact_key)

    def parameter_source(self, name: str, parameter: str) -> tuple[str, str]:
        """("pipeline", root parameter), (producer task, output key) or ("constant", value) of
        an input parameter."""
        dag, spec = self.dag_of(name), self.task(name).inputs.parameters[parameter]
        if spec.WhichOneof("kind") == "runtime_value":
            return "constant", spec.runtime_value.constant.string_value
        while spec.WhichOneof("kind") == "component_input_parameter":
            if dag == ROOT:
                return "pipeline", spec.component_input_parameter
            group = self._parents[dag]
            dag, spec = self.dag_of(group), \
                self.task(group).inputs.parameters[spec.component_input_parameter]
        return (spec.task_output_parameter.producer_task,
                spec.task_output_parameter.output_parameter_key)

    @staticmethod
    def k8s_parameter_source(spec) -> tuple[str, str]:
        """(producer task, output key) of a k8s config's parameter from a task output."""
        assert spec.WhichOneof("kind") == "task_output_parameter", spec
        return (spec.task_output_parameter.producer_task,
                spec.task_output_parameter.output_parameter_key)


# Goldens compare as `python -m estflow.pipelines.kubeflow.goldens --check` compares them.
as_golden = goldens.comparable
