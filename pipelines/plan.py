"""The runner-neutral plan: the DAG of steps a Pipeline runs, with their artifacts and options.

Both the local runner and the KFP compiler consume a :class:`Plan`, so a local run and a
Kubeflow run execute the same steps, in the same order, through the same entry points
(``python -m estflow.components.<step>``).
"""

from __future__ import annotations

import dataclasses

from estflow.dsl.contracts import steps_for
from estflow.dsl.pipeline import Pipeline

__all__ = ["PlannedStep", "Plan", "build_plan", "BEAM_STEPS"]

BEAM_STEPS = ("ingest", "transform")
"""The steps that run Beam jobs and take ``--beam-options``."""


@dataclasses.dataclass(frozen=True)
class PlannedStep:
    """One step: ``inputs`` maps an input artifact name to the step that produces it."""

    name: str
    module: str
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    description: str

    def argv(self, spec: str, paths: dict[str, str]) -> list[str]:
        """The entry point's arguments, given the spec (path or JSON) and artifact paths."""
        args = ["--spec", spec]
        for artifact, _producer in self.inputs:
            args += [f"--{artifact}", paths[artifact]]
        for artifact in self.outputs:
            args += [f"--{artifact}", paths[artifact]]
        for key, value in self.options:
            args += [f"--{key}", value]
        return args


@dataclasses.dataclass(frozen=True)
class Plan:
    pipeline: Pipeline
    steps: tuple[PlannedStep, ...]

    def step(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.name == name)


def build_plan(pipeline: Pipeline, *, source_root: str,
               beam_options: str | None = None) -> Plan:
    """Plan the steps of ``pipeline``.

    Args:
        pipeline: a validated Pipeline.
        source_root: where relative data paths resolve: a directory, or ``module:pkg.mod``
            (the directory of an installed module, used in containers).
        beam_options: Beam pipeline options, one string, for the :data:`BEAM_STEPS`
            (``--beam-options``); None: they run on the in-memory FnApiRunner.
    """
    producers: dict[str, str] = {}
    planned = []
    for step in steps_for(pipeline.push is not None):
        options = (("source-root", source_root),) if step.name == "ingest" else ()
        if beam_options is not None and step.name in BEAM_STEPS:
            options += (("beam-options", beam_options),)
        planned.append(PlannedStep(
            name=step.name,
            module=step.module,
            inputs=tuple((a, producers[a]) for a in step.inputs),
            outputs=step.outputs,
            options=options,
            description=step.description,
        ))
        producers.update({a: step.name for a in step.outputs})
    return Plan(pipeline=pipeline, steps=tuple(planned))
