"""Compile a declared Pipeline into a Kubeflow Pipelines v2 IR YAML file.

The translation is Plan -> KFP, never Pipeline -> KFP: the same
:class:`~estflow.pipelines.plan.Plan` drives the local runner, so both run the same steps through the same entry points.

* one KFP task per planned step (ingest -> transform -> train -> evaluate -> push), named and
  displayed as the step, running a lightweight Python component generated from the step
  (:mod:`estflow.pipelines._kfp_components`) in the configured image;
* artifacts flow between tasks under their contract names (``examples``, ``transformed``,
  ``model``, ``evaluation``, ``pushed``); the data dependencies are the DAG's edges;
* pipeline parameters: ``spec`` (the Pipeline as JSON; override it per run) and
  ``source_root`` (where the ingest step resolves relative data paths);
* per-task settings are small functions in :data:`TASK_SETTINGS`, one per concern (display
  name, caching; resources, accelerators and node pools go here next).

Compiling imports kfp but never TensorFlow, Beam or ``estflow.components``, and the output is
byte-for-byte deterministic: same pipeline, image and options -> same file.

Example:
    >>> from estflow.pipelines import kfp_compiler, loader
    >>> loaded = loader.load("estflow.pipelines.examples.taxi")
    >>> kfp_compiler.compile_pipeline(loaded, "taxi.yaml").tasks  # doctest: +SKIP
    ('ingest', 'transform', 'train', 'evaluate', 'push')
"""

# No `from __future__ import annotations` here: KFP reads the pipeline function's annotations
# as types, and string annotations fail its type check.
import dataclasses
import json
import os
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path

from estflow.dsl.pipeline import Pipeline
from estflow.pipelines import _kfp_components
from estflow.pipelines.loader import LoadedPipeline
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from kfp import compiler
from kfp import dsl
from kfp.dsl import graph_component
from kfp.dsl import pipeline_task

__all__ = ["DEFAULT_IMAGE", "DEFAULT_CACHING", "TASK_SETTINGS", "CompileError",
           "CompiledPipeline", "compile_pipeline", "build_pipeline"]

# The one place the image's version is written; tests check it matches the package version.
DEFAULT_IMAGE = "ghcr.io/estflow/estflow:0.1.0"

# Caching per step, set at compile time (a KFP client's `enable_caching=False` reaches only
# root-level tasks). Push has an effect outside its artifacts (a new serving version), so it
# always runs. The others are functions of their inputs, ingest included as long as the data
# behind its path does not change; when it does, compile with caching={"ingest": False}.
DEFAULT_CACHING: Mapping[str, bool] = {
    "ingest": True, "transform": True, "train": True, "evaluate": True, "push": False,
}


class CompileError(ValueError):
    """An option of the compilation (not the declaration) is invalid."""


@dataclasses.dataclass(frozen=True)
class CompiledPipeline:
    """What :func:`compile_pipeline` wrote: the file and its task names, in plan order."""

    path: Path
    tasks: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class _TaskContext:
    """Everything a task setting may read, so adding a setting never changes signatures."""

    step: PlannedStep
    pipeline: Pipeline
    caching: Mapping[str, bool]


TaskSetting = Callable[[pipeline_task.PipelineTask, _TaskContext], None]


def _display_name(task: pipeline_task.PipelineTask, ctx: _TaskContext) -> None:
    task.set_display_name(ctx.step.name)


def _caching(task: pipeline_task.PipelineTask, ctx: _TaskContext) -> None:
    task.set_caching_options(enable_caching=ctx.caching.get(ctx.step.name, True))


# Applied to every task, in order. Resources (cpu/memory, accelerators) and kfp-kubernetes
# settings (node selectors, tolerations, mounts) are further entries of this tuple.
TASK_SETTINGS: tuple[TaskSetting, ...] = (_display_name, _caching)


def compile_pipeline(loaded_or_pipeline: LoadedPipeline | Pipeline,
                     output_path: str | os.PathLike, *, image: str = DEFAULT_IMAGE,
                     source_root: str | None = None,
                     caching: Mapping[str, bool] | None = None) -> CompiledPipeline:
    """Compile a pipeline to KFP v2 IR YAML at ``output_path`` (written atomically).

    Args:
        loaded_or_pipeline: what :func:`estflow.pipelines.loader.load` returned, or a Pipeline.
        output_path: a ``.yaml`` or ``.yml`` file; its directory must exist.
        image: the container image every task runs in (must have estflow installed).
        source_root: default of the ``source_root`` pipeline parameter: where relative data
            paths resolve inside the task, a directory or ``module:pkg.mod``. Default: the
            loaded pipeline's portable source root, or ``""`` (the task's working directory)
            for a bare Pipeline.
        caching: step name -> whether KFP may reuse the step's cached result; steps not named
            use :data:`DEFAULT_CACHING`.

    Returns:
        The written path and the task names.

    Raises:
        CompileError: the image, output path or caching option is invalid.
    """
    pipeline, root = _unpack(loaded_or_pipeline, source_root)
    path = _check_output_path(output_path)
    _check_image(image)
    _check_caching(caching or {})
    plan = build_plan(pipeline, source_root=_kfp_components.param_placeholder("source_root"))
    graph = build_pipeline(plan, image=image, source_root=root,
                           caching={**DEFAULT_CACHING, **(caching or {})})
    _write(graph, path)
    return CompiledPipeline(path=path, tasks=tuple(s.name for s in plan.steps))


def build_pipeline(plan: Plan, *, image: str, source_root: str,
                   caching: Mapping[str, bool]) -> graph_component.GraphComponent:
    """The KFP pipeline (a graph component) for ``plan``, whose argv must use the
    ``source_root`` parameter placeholder (see :func:`compile_pipeline`)."""
    components = {s.name: _kfp_components.build_component(s, image) for s in plan.steps}
    spec_json = _compact_json(plan.pipeline.to_json())

    def pipeline_func(spec: str = spec_json, source_root: str = source_root):
        available: dict = {"spec": spec, "source_root": source_root}
        for step in plan.steps:
            component = components[step.name]
            inputs = component.component_spec.inputs
            task = component(**{name: available[name] for name in inputs})
            ctx = _TaskContext(step=step, pipeline=plan.pipeline, caching=caching)
            for setting in TASK_SETTINGS:
                setting(task, ctx)
            available.update({a: task.outputs[a] for a in step.outputs})

    return dsl.pipeline(pipeline_func, name=plan.pipeline.name,
                        description=_description(plan))


def _unpack(value: LoadedPipeline | Pipeline, source_root: str | None) -> tuple[Pipeline, str]:
    if isinstance(value, LoadedPipeline):
        return value.pipeline, value.portable_source_root if source_root is None else source_root
    if isinstance(value, Pipeline):
        return value, "" if source_root is None else source_root
    raise CompileError("Received an invalid value for `loaded_or_pipeline`, expected a "
                       "LoadedPipeline or a Pipeline. Received: "
                       f"loaded_or_pipeline={type(value).__name__}")


def _check_output_path(output_path: str | os.PathLike) -> Path:
    path = Path(output_path)
    if path.suffix not in (".yaml", ".yml"):
        raise CompileError("Received an invalid value for `output_path`, expected a file "
                           f"ending in .yaml or .yml. Received: output_path={str(path)!r}")
    if not path.parent.is_dir():
        raise CompileError("Received an invalid value for `output_path`, expected a file in "
                           f"an existing directory. Received: output_path={str(path)!r}")
    return path


def _check_image(image: str) -> None:
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise CompileError("Received an invalid value for `image`, expected a container image "
                           f"reference such as {DEFAULT_IMAGE!r}. Received: image={image!r}")


def _check_caching(caching: Mapping[str, bool]) -> None:
    unknown = sorted(set(caching) - set(DEFAULT_CACHING))
    if unknown:
        raise CompileError("Received an invalid value for `caching`, expected step names, "
                           f"some of {sorted(DEFAULT_CACHING)}. Received: {unknown}")


def _compact_json(text: str) -> str:
    # One line: readable as a parameter default in the KFP UI, and small in the YAML.
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def _description(plan: Plan) -> str:
    return (f"estflow pipeline {plan.pipeline.name}: "
            + " -> ".join(s.name for s in plan.steps) + ".")


def _write(graph: graph_component.GraphComponent, path: Path) -> None:
    """Compile next to ``path`` and rename, so a failed compile leaves no partial file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.yaml")  # kfp wants a .yaml name
    try:
        compiler.Compiler().compile(graph, str(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
