"""The train step as several processes (multi-worker): :class:`ClusterExecutor` runs it once
per task of a :class:`Topology` on localhost ports, each with the TF_CONFIG a Kubeflow TFJob
would set (``worker`` tasks under MultiWorkerMirroredStrategy, worker 0 the chief that writes
the model artifact; ``chief`` + ``worker`` + ``ps`` tasks under a parameter-server cluster).
The chief's progress is streamed; every task logs to the step's directory.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

from estflow.dsl.pipeline import Pipeline
from estflow.pipelines.local.processes import StepRun
from estflow.pipelines.local.processes import full_env
from estflow.pipelines.local.processes import run_process
from estflow.pipelines.local.stopping import StepFailed

__all__ = ["Topology", "topology_for", "ClusterExecutor"]


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


@dataclasses.dataclass(frozen=True)
class ClusterExecutor:
    """The step once per task of ``topology``: the chief streamed (``log.txt``), the others
    logged (``log-<type>-<index>.txt``). A task that fails stops them all."""

    topology: Topology

    def execute(self, run: StepRun) -> None:
        configs, kinds = self.topology.tf_configs(), self.topology.tasks()
        run.echo(f"    {run.name}: {len(kinds)} processes on localhost ("
                 + ", ".join(f"{k} {i}" for k, i in kinds) + f"); chief = {kinds[0][0]} 0")
        base = full_env(run.env)
        others: list[_Task] = []
        failed: list[_Task] = []
        try:
            for (kind, index), config in zip(kinds[1:], configs[1:], strict=True):
                log = run.directory / f"log-{kind}-{index}.txt"
                with open(log, "w") as out:  # the child keeps its own handle
                    proc = subprocess.Popen(run.command, stdout=out, stderr=subprocess.STDOUT,
                                            env={**base, "TF_CONFIG": config})
                others.append(_Task(kind, index, proc, log))
            watch = threading.Thread  # a failed task leaves the chief waiting in a collective
            run_process(run, run.directory / "log.txt", {**run.env, "TF_CONFIG": configs[0]},
                         on_start=lambda chief: watch(target=_watch, args=(chief, others, failed),
                                                      daemon=True).start())
            _finish(others, self.topology, failed)
        except StepFailed:
            if failed:
                task = failed[0]
                raise StepFailed(f"step {run.name!r} failed: task {task.label} exited with code "
                                 f"{task.proc.returncode}; its log: {task.log}") from None
            raise
        finally:
            for task in others:
                if task.proc.poll() is None:
                    task.proc.kill()
                    task.proc.wait()



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
