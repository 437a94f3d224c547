"""The ways the local runner runs one step, behind one small interface (:class:`Executor`).

* :class:`ProcessExecutor`: the step's entry point in one subprocess, its progress streamed;
* :class:`ClusterExecutor`: the train step as one process per task of a :class:`Topology` on
  localhost ports, each with the TF_CONFIG a Kubeflow TFJob would set (``worker`` tasks under
  MultiWorkerMirroredStrategy, worker 0 the chief that writes the model artifact; ``chief`` +
  ``worker`` + ``ps`` tasks under a parameter-server cluster). The chief's progress is
  streamed; every task logs to the step's directory.

The runner (:mod:`estflow.pipelines.local_runner`) picks one per step; an executor knows
nothing of plans or pipelines, only the :class:`StepRun` it is given (as kfp.local's task
handlers get one task).

Ctrl-C: a terminal sends SIGINT to the runner and its step processes alike; SIGINT may also
reach the runner alone (a CI job cancelled, ``kill -INT``). Either way the executor stops the
step's process cleanly (it waits for it to exit, then sends SIGINT, then SIGTERM, then
SIGKILL, each after a grace period), keeps its last output in the log, and raises
:class:`StepInterrupted`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from estflow.dsl.pipeline import Pipeline

__all__ = ["StepFailed", "StepInterrupted", "StepRun", "Executor", "ProcessExecutor",
           "ClusterExecutor", "Topology", "topology_for"]

# How many of a failed step's last output lines its error quotes (the log has them all).
_TAIL_LINES = 30
# Added to the runner's environment: unbuffered output, so progress streams as it happens, and
# TensorFlow's C++ logging kept to errors.
_QUIET_ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


# After Ctrl-C, the seconds a step's process gets to exit on its own (a terminal sent it SIGINT
# too), then after SIGINT from the runner, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = (2.0, 10.0, 5.0)


class StepFailed(RuntimeError):
    """A step's process exited with an error; the message names the step and its log
    (``returncode``: its exit status, when known)."""

    returncode: int | None = None


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a step: its process has exited (``step``: the step's name)."""

    def __init__(self, step: str) -> None:
        super().__init__(f"step {step!r} was interrupted")
        self.step = step


@dataclasses.dataclass(frozen=True)
class StepRun:
    """One step to run: its name, its command line, the directory its logs go to (it exists),
    where its progress lines go, and the environment variables it gets beyond the runner's."""

    name: str
    command: tuple[str, ...]
    directory: Path
    echo: Callable[[str], None] = print
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)


class Executor(Protocol):
    """Runs one step to its end."""

    def execute(self, run: StepRun) -> None:
        """Run ``run.command``; return when it succeeded.

        Raises:
            StepFailed: the step failed; the message names it and its log.
        """


class ProcessExecutor:
    """The step as one subprocess; output in ``<directory>/log.txt``, its own progress lines
    (``[<step> ...``) echoed."""

    def execute(self, run: StepRun) -> None:
        _run_process(run, run.directory / "log.txt", run.env)


# -- the train step as several processes (multi-worker) ---------------------------------------

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
        base = {**os.environ, **_QUIET_ENV, **run.env}
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
            _run_process(run, run.directory / "log.txt", {**run.env, "TF_CONFIG": configs[0]},
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


def _run_process(run: StepRun, log_path: Path, env: Mapping[str, str],
                 on_start: Callable[[subprocess.Popen], None] | None = None) -> None:
    """Run ``run.command`` with ``env``, writing its output to ``log_path`` and echoing its
    progress lines; raise :class:`StepFailed` with its last lines when it exits non-zero."""
    full_env = {**os.environ, **_QUIET_ENV, **env}
    with open(log_path, "w") as log, subprocess.Popen(
            run.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=full_env) as proc:
        tail: list[str] = []
        try:
            if on_start is not None:
                on_start(proc)
            for line in proc.stdout:
                log.write(line)
                line = line.rstrip("\n")
                tail = (tail + [line])[-_TAIL_LINES:]
                if line.startswith(f"[{run.name} "):  # the step's own progress, echoed
                    run.echo("    " + line)
            code = proc.wait()
        except KeyboardInterrupt:
            _stop(proc, log)
            raise StepInterrupted(run.name) from None
    if code != 0:
        shown = "\n".join("    " + t for t in tail)
        failed = StepFailed(f"step {run.name!r} failed (exit code {code}); last lines:\n"
                            f"{shown}\nfull log: {log_path}")
        failed.returncode = code
        raise failed


def _stop(proc: subprocess.Popen, log) -> None:
    """Stop ``proc`` after Ctrl-C (see the module docstring), its remaining output still
    going to ``log``; a second Ctrl-C kills it at once."""
    drain = threading.Thread(target=_drain, args=(proc, log), daemon=True)
    drain.start()
    try:
        for send, grace in zip((None, signal.SIGINT, signal.SIGTERM), STOP_GRACE_S,
                               strict=True):
            if send is not None and proc.poll() is None:
                proc.send_signal(send)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            proc.kill()
            proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
    drain.join(timeout=2.0)
    log.write(f"[estflow] interrupted (Ctrl-C): the step's process was stopped "
              f"(exit code {proc.returncode})\n")
    log.flush()


def _drain(proc: subprocess.Popen, log) -> None:
    try:
        for line in proc.stdout:
            log.write(line)
    except (OSError, ValueError):  # closed under us: the runner is leaving
        pass


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
