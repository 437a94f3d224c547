"""The local runner (the embedded default of ``estflow run``): the Plan's steps, in order, each
as a subprocess running the same entry point a Kubeflow task runs.

A subprocess per step keeps steps isolated the way containers are (a step that crashes at
interpreter exit, as Beam can, cannot take the runner down), streams each step's progress live,
and means the runner itself never imports TensorFlow or Beam.

Layout of a run: ``<workdir>/pipeline.json`` (the spec) and ``<workdir>/<step>/<artifact>/``.

How a step runs is an executor's job (:mod:`estflow.pipelines._executors`); this module picks
one per step (:func:`executor_for`): one process, or, for the train step of a multi-worker
:class:`Topology` (``estflow run --workers N``, or a declared ``RunConfig.cluster``), one
process per TF_CONFIG task on localhost ports.

Before any step, :func:`run_local` checks a local CSV source's header against the declaration
(:mod:`estflow.pipelines.data_check`). Ctrl-C stops the running step's process and raises
:class:`RunInterrupted`, which says what was kept (the workdir, the last checkpoint). Running
again with the same workdir continues: every step runs again (each replaces its outputs) and
training resumes from the last checkpoint in ``<workdir>/train/model/checkpoints``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from estflow.dsl.contracts import TFJOB
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.pipelines import data_check
from estflow.pipelines._executors import ClusterExecutor
from estflow.pipelines._executors import Executor
from estflow.pipelines._executors import ProcessExecutor
from estflow.pipelines._executors import StepFailed
from estflow.pipelines._executors import StepRun
from estflow.pipelines._executors import Topology
from estflow.pipelines._executors import topology_for
from estflow.pipelines.loader import LoadedPipeline
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan

__all__ = ["StepFailed", "RunInterrupted", "RunResult", "Topology", "topology_for",
           "executor_for", "run_local", "run_plan", "default_workdir", "last_checkpoint"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    workdir: Path
    artifacts: dict[str, Path]
    seconds: dict[str, float]

    def read(self, artifact: str, file: str) -> dict:
        return json.loads((self.artifacts[artifact] / file).read_text())

    @property
    def model_delivered(self) -> bool:
        """Whether the run did what it is for: the model was pushed (with a push target), or
        blessed (without one; no blessing file: blessed)."""
        if "pushed" in self.artifacts:
            return bool(self.read("pushed", Files.PUSH_RESULT).get("pushed", True))
        evaluation = self.artifacts.get("evaluation")
        if evaluation is None or not (evaluation / Files.BLESSING).is_file():
            return True
        return bool(self.read("evaluation", Files.BLESSING)["blessed"])


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run: ``step`` (the one running) was stopped; ``done`` lists the steps
    that had finished, whose outputs stay under ``workdir``."""

    def __init__(self, workdir: Path, step: str, done: tuple[str, ...]) -> None:
        super().__init__(f"interrupted during step {step!r}")
        self.workdir, self.step, self.done = workdir, step, done

    def last_checkpoint(self) -> Path | None:
        """The train step's newest checkpoint under ``workdir`` (None: none yet)."""
        (model,) = TFJOB.outputs
        return last_checkpoint(self.workdir / TFJOB.name / model / Files.CHECKPOINTS)


def last_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint in a model directory: what its ``checkpoint`` state file names,
    else the ``ckpt-N.index`` with the highest N (None: none)."""
    state = directory / "checkpoint"
    if state.is_file():
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"', state.read_text(), re.M)
        if match:
            path = Path(match.group(1))
            return path if path.is_absolute() else directory / path
    steps = [(int(m.group(1)), p) for p in directory.glob("*.index")
             if (m := re.search(r"-(\d+)\.index$", p.name))]
    return max(steps)[1].with_suffix("") if steps else None


_ONE_PROCESS = Topology()


def default_workdir(pipeline: Pipeline) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("estflow_runs") / pipeline.name / stamp


def executor_for(step: PlannedStep, topology: Topology) -> Executor:
    """How ``step`` runs: the train step (the one a TFJob runs on Kubeflow) as the processes
    of a distributed ``topology``; every other step, and train in one process, as one."""
    if step.name == TFJOB.name and topology.distributed:
        return ClusterExecutor(topology)
    return ProcessExecutor()


def run_plan(plan: Plan, workdir: Path, *, echo: Callable[[str], None] = print,
             env: dict[str, str] | None = None, topology: Topology = _ONE_PROCESS) -> RunResult:
    """Run every step of ``plan`` under ``workdir``; raise :class:`StepFailed` on the first
    failure (its output stays in ``<workdir>/<step>/log.txt``), :class:`RunInterrupted` on
    Ctrl-C (the running step's process stopped first). The train step runs as the processes
    of ``topology``."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / Files.SPEC
    spec.write_text(plan.pipeline.to_json())
    paths: dict[str, str] = {}
    seconds: dict[str, float] = {}
    step = plan.steps[0] if plan.steps else None
    try:
        for index, step in enumerate(plan.steps, start=1):
            for artifact in step.outputs:
                paths[artifact] = str(workdir / step.name / artifact)
                Path(paths[artifact]).mkdir(parents=True, exist_ok=True)
            echo(f"==> step {index}/{len(plan.steps)}: {step.name} ({step.description})")
            start = time.monotonic()
            command = (sys.executable, "-m", step.module, *step.argv(str(spec), paths))
            executor_for(step, topology).execute(
                StepRun(step.name, command, workdir / step.name, echo, env or {}))
            seconds[step.name] = time.monotonic() - start
            echo(f"<== {step.name} done in {seconds[step.name]:.1f}s")
    except KeyboardInterrupt:
        raise RunInterrupted(workdir, step.name if step else "", tuple(seconds)) from None
    return RunResult(workdir, {k: Path(v) for k, v in paths.items()}, seconds)


def run_local(loaded: LoadedPipeline, workdir: str | None = None, *,
              echo: Callable[[str], None] = print, workers: int | None = None) -> RunResult:
    """Run a loaded pipeline end to end on this machine and print a summary.

    Args:
        workers: train with this many worker processes (default: the declared
            ``run_config.cluster``, else one process).

    Raises:
        ValueError: ``workers`` does not fit the pipeline's strategy.
        DslErrors: the header of the local CSV data does not match the declaration (checked
            before any step runs).
        StepFailed: a step failed.
        RunInterrupted: Ctrl-C.
    """
    pipeline = loaded.pipeline
    topology = topology_for(pipeline, workers)
    data_check.check_local_source(pipeline, loaded.local_source_root)
    root = Path(workdir) if workdir else default_workdir(pipeline)
    plan = build_plan(pipeline, source_root=loaded.local_source_root)
    echo(f"estflow run: pipeline {pipeline.name!r}, {len(plan.steps)} steps, workdir {root}")
    start = time.monotonic()
    result = run_plan(plan, root.resolve(), echo=echo, topology=topology)
    _summary(result, time.monotonic() - start, echo)
    return result


def _summary(result: RunResult, seconds: float, echo: Callable[[str], None]) -> None:
    evaluation = result.read("evaluation", Files.METRICS)
    trained = result.read("model", Files.TRAIN_RESULT)
    echo("")
    echo(f"Pipeline finished in {seconds:.1f}s "
         f"({', '.join(f'{k} {v:.1f}s' for k, v in result.seconds.items())})")
    metrics = evaluation["metrics"]
    echo("Eval metrics (" + evaluation["head"] + " head, through the exported model): " +
         ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in metrics.items()))
    echo(f"Evaluation report: {result.artifacts['evaluation'] / Files.REPORT}")
    echo(f"Trained to step {trained.get('global_step')}; TensorBoard: "
         f"tensorboard --logdir {result.artifacts['model'] / Files.CHECKPOINTS}")
    if "pushed" in result.artifacts:
        pushed = result.read("pushed", Files.PUSH_RESULT)
        if pushed.get("pushed", True):
            echo(f"Pushed {pushed['model_name']} version {pushed['version']} to "
                 f"{pushed['path']}")
        else:
            echo(f"Model NOT pushed (not blessed): {'; '.join(pushed['reasons'])}")
    elif (result.artifacts["evaluation"] / Files.BLESSING).is_file():
        blessing = result.read("evaluation", Files.BLESSING)
        echo(("Blessed" if blessing["blessed"] else "NOT blessed") + " (no push target): "
             + "; ".join(blessing["reasons"]))
    echo(f"Run directory: {result.workdir}")
