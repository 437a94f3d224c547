"""The local runner (the embedded default of ``estflow run``): the Plan's steps, in order, each
as a subprocess running the same entry point a Kubeflow task runs.

A subprocess per step keeps steps isolated the way containers are (a step that crashes at
interpreter exit, as Beam can, cannot take the runner down), streams each step's progress live,
and means the runner itself never imports TensorFlow or Beam.

Layout of a run: ``<workdir>/pipeline.json`` (the spec) and ``<workdir>/<step>/<artifact>/``.

Multi-worker training (``estflow run --workers N``, or a declared ``RunConfig.cluster``): the
train step runs as one process per task on localhost ports, each with the TF_CONFIG a Kubeflow
TFJob would set (``worker`` tasks under MultiWorkerMirroredStrategy, worker 0 the chief that
writes the model artifact; ``chief`` + ``worker`` + ``ps`` tasks under a parameter-server
cluster). The chief's progress is streamed; every task logs to ``<workdir>/train/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.pipelines.loader import LoadedPipeline
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import build_plan

__all__ = ["StepFailed", "RunResult", "Topology", "topology_for", "run_local", "run_plan"]


class StepFailed(RuntimeError):
    """A step's process exited with an error; the message names the step and its log."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    workdir: Path
    artifacts: dict[str, Path]
    seconds: dict[str, float]

    def read(self, artifact: str, file: str) -> dict:
        return json.loads((self.artifacts[artifact] / file).read_text())


def default_workdir(pipeline: Pipeline) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("estflow_runs") / pipeline.name / stamp


@dataclasses.dataclass(frozen=True)
class Topology:
    """The processes the train step runs as: ``workers`` (MultiWorkerMirroredStrategy, or the
    workers of a parameter-server cluster when ``parameter_servers`` > 0, plus a chief)."""

    workers: int = 1
    parameter_servers: int = 0

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.parameter_servers > 0

    def tasks(self) -> list[tuple[str, int]]:
        """(TF_CONFIG task type, index), the chief first."""
        if not self.parameter_servers:
            return [("worker", i) for i in range(self.workers)]
        return ([("chief", 0)] + [("worker", i) for i in range(self.workers)]
                + [("ps", i) for i in range(self.parameter_servers)])

    def tf_configs(self) -> list[str]:
        """One TF_CONFIG per task (in :meth:`tasks` order), on free localhost ports."""
        tasks = self.tasks()
        ports = _free_ports(len(tasks))
        cluster: dict[str, list[str]] = {}
        for (kind, _), port in zip(tasks, ports, strict=True):
            cluster.setdefault(kind, []).append(f"localhost:{port}")
        return [json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})
                for kind, index in tasks]


def topology_for(pipeline: Pipeline, workers: int | None = None) -> Topology:
    """The declared ``run_config.cluster`` (without its evaluator: locally, evaluate is a step),
    with ``workers`` overriding its worker count.

    Raises:
        ValueError: several workers with a single-process strategy (mirrored, tpu).
    """
    cluster = pipeline.run_config.cluster
    topology = Topology(workers or (cluster.workers if cluster else 1),
                        cluster.parameter_servers if cluster else 0)
    strategy = pipeline.run_config.train_distribute
    if topology.workers > 1 and strategy in ("mirrored", "tpu"):
        raise ValueError(f"Received workers={topology.workers} for a pipeline with "
                         f"run_config.train_distribute={strategy!r}, expected 1 worker "
                         "(that strategy runs in one process) or train_distribute None or "
                         "'multi_worker_mirrored'")
    return topology


def run_plan(plan: Plan, workdir: Path, *, echo: Callable[[str], None] = print,
             env: dict[str, str] | None = None, topology: Topology = Topology()) -> RunResult:
    """Run every step of ``plan`` under ``workdir``; raise :class:`StepFailed` on the first
    failure (its output stays in ``<workdir>/<step>/log.txt``). The train step runs as the
    processes of ``topology``."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / Files.SPEC
    spec.write_text(plan.pipeline.to_json())
    paths: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for index, step in enumerate(plan.steps, start=1):
        for artifact in step.outputs:
            paths[artifact] = str(workdir / step.name / artifact)
            Path(paths[artifact]).mkdir(parents=True, exist_ok=True)
        echo(f"==> step {index}/{len(plan.steps)}: {step.name} ({step.description})")
        start = time.monotonic()
        cmd = [sys.executable, "-m", step.module, *step.argv(str(spec), paths)]
        if step.name == "train" and topology.distributed:
            _run_cluster_step(cmd, workdir / step.name, step.name, echo, env, topology)
        else:
            _run_step(cmd, workdir / step.name / "log.txt", step.name, echo, env)
        seconds[step.name] = time.monotonic() - start
        echo(f"<== {step.name} done in {seconds[step.name]:.1f}s")
    return RunResult(workdir, {k: Path(v) for k, v in paths.items()}, seconds)


def _run_step(cmd: list[str], log_path: Path, name: str, echo: Callable[[str], None],
              env: dict[str, str] | None, on_start: Callable | None = None) -> None:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    with open(log_path, "w") as log, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=full_env) as proc:
        if on_start is not None:
            on_start(proc)
        tail: list[str] = []
        for line in proc.stdout:
            log.write(line)
            line = line.rstrip("\n")
            tail = (tail + [line])[-30:]
            if line.startswith(f"[{name} "):  # the step's own progress lines; the rest is logged
                echo("    " + line)
        code = proc.wait()
    if code != 0:
        shown = "\n".join("    " + t for t in tail)
        raise StepFailed(f"step {name!r} failed (exit code {code}); last lines:\n{shown}\n"
                         f"full log: {log_path}")


# -- the train step as several processes (multi-worker) ---------------------------------------
def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclasses.dataclass
class _Task:
    kind: str
    index: int
    proc: subprocess.Popen
    log: Path

    @property
    def label(self) -> str:
        return f"{self.kind} {self.index}"

    def serves(self, topology: Topology) -> bool:
        """A parameter-server cluster's workers and ps serve until stopped."""
        return topology.parameter_servers > 0 and self.kind in ("worker", "ps")


def _run_cluster_step(cmd: list[str], step_dir: Path, name: str, echo: Callable[[str], None],
                      env: dict[str, str] | None, topology: Topology) -> None:
    """Run ``cmd`` once per task of ``topology``: the chief streamed (``log.txt``), the
    others logged (``log-<type>-<index>.txt``). A task that fails stops them all."""
    configs, kinds = topology.tf_configs(), topology.tasks()
    echo(f"    {name}: {len(kinds)} processes on localhost ("
         + ", ".join(f"{k} {i}" for k, i in kinds) + f"); chief = {kinds[0][0]} 0")
    base = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    others: list[_Task] = []
    failed: list[_Task] = []
    try:
        for (kind, index), config in zip(kinds[1:], configs[1:], strict=True):
            log = step_dir / f"log-{kind}-{index}.txt"
            with open(log, "w") as out:  # the child keeps its own handle
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                        env={**base, "TF_CONFIG": config})
            others.append(_Task(kind, index, proc, log))
        watch = threading.Thread  # a failed task leaves the chief waiting in a collective
        _run_step(cmd, step_dir / "log.txt", name, echo, {**(env or {}), "TF_CONFIG": configs[0]},
                  on_start=lambda chief: watch(target=_watch, args=(chief, others, failed),
                                               daemon=True).start())
        _finish(others, topology, failed)
    except StepFailed:
        if failed:
            task = failed[0]
            raise StepFailed(f"step {name!r} failed: task {task.label} exited with code "
                             f"{task.proc.returncode}; its log: {task.log}") from None
        raise
    finally:
        for task in others:
            if task.proc.poll() is None:
                task.proc.kill()
                task.proc.wait()


def _watch(chief: subprocess.Popen, others: list[_Task], failed: list[_Task]) -> None:
    while chief.poll() is None:
        for task in others:
            if task.proc.poll() not in (None, 0):
                failed.append(task)
                chief.kill()
                return
        time.sleep(0.2)


def _finish(others: list[_Task], topology: Topology, failed: list[_Task]) -> None:
    """After the chief succeeded: training workers end with it (servers are stopped)."""
    for task in others:
        if task.serves(topology):
            continue
        try:
            code = task.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            failed.append(task)
            raise StepFailed(f"task {task.label} did not finish with the chief")


def run_local(loaded: LoadedPipeline, workdir: str | None = None, *,
              echo: Callable[[str], None] = print, workers: int | None = None) -> RunResult:
    """Run a loaded pipeline end to end on this machine and print a summary.

    Args:
        workers: train with this many worker processes (default: the declared
            ``run_config.cluster``, else one process).

    Raises:
        ValueError: ``workers`` does not fit the pipeline's strategy.
        StepFailed: a step failed.
    """
    pipeline = loaded.pipeline
    topology = topology_for(pipeline, workers)
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
