"""One trial, run by the steps' own entry points: the train step
(``python -m estflow.components.train``) trains the trial's pipeline in a fresh model
directory, then the evaluate step (``python -m estflow.components.evaluate``) measures its
export on the eval split. The trial's value is the evaluate step's metric, by the evaluate
step's code: the number a final train and evaluate of the same pipeline give (one answer
everywhere), with no copy of either step here (steps are independent).

Each step runs in a process of its own (the search's process imports no TensorFlow), forked
from one process that imported both steps once for the whole search
(:mod:`estflow.components._runtime.step_forks`): a trial pays for its training and evaluation,
not for importing TensorFlow twice (about 10 s of CPU a trial here, more than a taxi trial's
training). A process that cannot be forked is started ahead of its turn instead
(:mod:`estflow.components._runtime.prestart`: the evaluate step's imports overlap the training,
the next trial's train step's imports overlap this trial's evaluation). Each process is killed
with SIGKILL if the search's process dies (Linux: ``PR_SET_PDEATHSIG``), so a killed search
leaves no training behind.

Early stopping: the train step evaluates every checkpoint on the eval split
(``MedianStop.every_steps`` apart, see :func:`trial_pipeline`) and writes each evaluation's
scalars for TensorBoard (``checkpoints/eval``); its progress line "evaluation at step N" is
the sign to read the objective at step N from those files and report it. When the search says
stop, the process is killed and the trial is pruned. tf.estimator's metric under the
objective's name is the evaluate step's for the same checkpoint and rows
(:mod:`estflow.components.evaluate.metrics` says why), so intermediate and final values are
one scale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Mapping
from math import gcd
from pathlib import Path
from typing import IO
from typing import Any

from estflow.components._runtime.step_forks import THREAD_ENV
from estflow.components._runtime.step_forks import StepForks
from estflow.components._runtime.step_forks import die_with_parent
from estflow.components.tune.events import read_scalars
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.tune import Tune
from estflow.dsl.tune import apply

__all__ = ["Pruned", "TrialError", "SearchError", "TrialRun", "Outcome", "StepProcesses",
           "trial_pipeline", "thread_env"]

TRAIN_MODULE = "estflow.components.train"
EVALUATE_MODULE = "estflow.components.evaluate"
_PRESTART = "estflow.components._runtime.prestart"
_EVALUATION = re.compile(r"\] evaluation at step (\d+):")


class Pruned(Exception):  # noqa: N818 - Optuna's TrialPruned, for a trial the search stopped
    """The search stopped the trial early: its objective at ``step`` was ``value``."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"pruned at step {step}")
        self.step, self.value = step, value


class TrialError(Exception):
    """The trial failed (its training or evaluation exited with an error)."""


class SearchError(Exception):
    """The search cannot go on: something every trial would meet (a bad input)."""


@dataclasses.dataclass
class TrialRun:
    """What a trial runner gets.

    Attributes:
        number: the trial's number in the study.
        assignment: path -> value, the trial's hyperparameters.
        pipeline: what the trial trains (:func:`trial_pipeline`).
        folder: the trial's own folder (empty when it starts).
        objective: the metric the search compares.
        report: called with (training step, objective value) for each intermediate value;
            returns True when the trial must stop (then raise :class:`Pruned`).
        cancelled: set when the search stops while the trial runs (raise anything).
        intermediate: whether intermediate values are wanted (early stopping).
        ahead: whether another trial is likely to follow this one on its worker (a runner
            may prepare for it).
    """

    number: int
    assignment: dict[str, Any]
    pipeline: Pipeline
    folder: Path
    objective: str
    report: Callable[[int, float], bool]
    cancelled: threading.Event
    intermediate: bool = False
    ahead: bool = False


@dataclasses.dataclass
class Outcome:
    """A finished trial: the objective's ``value``, every metric of the evaluation, and the
    seconds each part took."""

    value: float
    metrics: dict[str, Any]
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    model_dir: str | None = None


def trial_pipeline(pipeline: Pipeline, tune: Tune, assignment: Mapping[str, Any]) -> Pipeline:
    """The pipeline a trial trains: ``assignment`` applied (:func:`estflow.dsl.tune.apply`),
    ``tune.trial_steps`` training steps (None: ``train.max_steps``), in one local process
    (no distribution strategy, cluster or per-step resources), with nothing after the
    evaluation (no push: no baseline; no batch prediction, data checks or user steps) and no
    slices (they change no metric). With early stopping, a checkpoint every
    ``every_steps`` (the training loop's ``steps_per_loop`` divides it) and each one
    evaluated at once."""
    trial = apply(pipeline, dict(assignment))
    train = dataclasses.replace(trial.train, max_steps=tune.trial_steps or trial.train.max_steps,
                                warm_start=None)
    config = dataclasses.replace(trial.run_config, train_distribute=None, eval_distribute=None,
                                 cluster=None)
    evaluation = dataclasses.replace(trial.eval, slices=())
    if tune.early_stopping is not None:
        every = tune.early_stopping.every_steps
        config = dataclasses.replace(config, save_checkpoints_steps=every,
                                     steps_per_loop=gcd(config.steps_per_loop, every))
        evaluation = dataclasses.replace(evaluation, start_delay_secs=0, throttle_secs=0)
    return dataclasses.replace(trial, train=train, run_config=config, eval=evaluation,
                               push=None, predict=None, checks=None, steps=(), resources={},
                               tune=None)


def thread_env(env: Mapping[str, str], parallel: int, cpus: int) -> dict[str, str]:
    """``env`` with TensorFlow's thread pools sized for ``parallel`` trials on ``cpus``
    CPUs: ``max(1, cpus // parallel)`` threads each (TF_NUM_INTRAOP_THREADS,
    TF_NUM_INTEROP_THREADS)."""
    threads = str(max(1, cpus // max(1, parallel)))
    return {**env, **dict.fromkeys(THREAD_ENV, threads)}


class _Prestarted:
    """A step's process started ahead of its turn: its imports done, waiting for its
    arguments (:mod:`estflow.components._runtime.prestart`)."""

    def __init__(self, python: str, module: str, env: Mapping[str, str], output: IO | int,
                 cwd: str | None) -> None:
        self.module = module
        self.process = subprocess.Popen(
            [python, "-m", _PRESTART, module], stdin=subprocess.PIPE, stdout=output,
            stderr=subprocess.STDOUT, env=dict(env), cwd=cwd, preexec_fn=die_with_parent,
            text=True, bufsize=1)

    def start(self, args: list[str]) -> subprocess.Popen:
        """Hand the process its arguments: it runs the step now."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(args) + "\n")
        self.process.stdin.close()
        return self.process

    def give_up(self) -> None:
        """The process is not needed: it leaves without running anything."""
        with contextlib.suppress(OSError, ValueError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class StepProcesses:
    """The trial runner: each trial is the train step, then the evaluate step, by their
    entry points (module docstring). ``examples_dir`` and ``transformed_dir`` are the
    search's inputs (what the evaluate and train steps read); ``env`` the processes'
    environment; ``keep_models``: keep each trial's model directory (else deleted once the
    trial is evaluated: the final train step trains the chosen pipeline again); ``fork``:
    fork the steps' processes from one process that imported them, once for the search
    (:class:`~estflow.components._runtime.step_forks.StepForks`; a process it cannot fork is
    started ahead of its turn instead, as with ``fork=False``)."""

    def __init__(self, examples_dir: str | os.PathLike, transformed_dir: str | os.PathLike, *,
                 env: Mapping[str, str], python: str = sys.executable,
                 keep_models: bool = False, cwd: str | None = None, fork: bool = True) -> None:
        self.examples = str(Path(examples_dir).resolve())
        self.transformed = str(Path(transformed_dir).resolve())
        self.env, self.python, self.keep_models, self.cwd = dict(env), python, keep_models, cwd
        self._forks = (StepForks((TRAIN_MODULE, EVALUATE_MODULE), self.env)
                       if fork and python == sys.executable else None)
        if self._forks is not None:  # now: with the environment self.env was taken from
            self._forks.prepare()
        self._next_train = threading.local()  # each worker thread's train process, ahead
        self._idle: list[_Prestarted] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Let go of the processes started ahead that no trial took."""
        with self._lock:
            idle, self._idle = self._idle, []
        for process in idle:
            process.give_up()

    def _prestart(self, module: str, output: IO | int) -> _Prestarted:
        process = _Prestarted(self.python, module, self.env, output, self.cwd)
        with self._lock:
            self._idle.append(process)
        return process

    def _take(self, process: _Prestarted) -> None:
        with self._lock:
            with contextlib.suppress(ValueError):
                self._idle.remove(process)

    def _forked(self, module: str, args: list[str], output: IO | int):
        """``module``'s process with ``args``, forked; None when it is not."""
        if self._forks is None:
            return None
        return self._forks.start(module, args, self.env, output, self.cwd)

    def __call__(self, run: TrialRun) -> Outcome:
        folder = run.folder = run.folder.resolve()
        folder.mkdir(parents=True, exist_ok=True)
        spec = folder / Files.SPEC
        spec.write_text(run.pipeline.to_json())
        model, evaluation = folder / "model", folder / "evaluation"
        evaluate_args = ["--spec", str(spec), "--examples", self.examples, "--model",
                         str(model), "--evaluation", str(evaluation)]
        with open(folder / "evaluate.log", "w") as evaluate_log:
            if self._forks is not None:  # each process forked when its turn comes
                started = time.monotonic()
                self._train(run, spec, model)
                trained = time.monotonic()
                process = self._forked(EVALUATE_MODULE, evaluate_args, evaluate_log) or \
                    _Prestarted(self.python, EVALUATE_MODULE, self.env, evaluate_log,
                                self.cwd).start(evaluate_args)
                code = _wait(process, run.cancelled)
            else:
                started, trained, code = self._started_ahead(run, spec, model, evaluate_log,
                                                             evaluate_args)
        if code != 0:
            raise TrialError(_error_of(folder / "evaluate.log", "evaluate", code))
        metrics = json.loads((evaluation / Files.METRICS).read_text())["metrics"]
        value = metrics.get(run.objective)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TrialError(f"the evaluation's {run.objective} is {value!r}, not a number to "
                             "compare (e.g. an AUC on an eval split of one class)")
        kept = str(model) if self.keep_models else None
        if not self.keep_models:  # what only a pushed model needs; the model itself
            for name in (Files.EVAL_OUTPUTS, Files.WARMUP_EXAMPLES, Files.STATISTICS):
                (evaluation / name).unlink(missing_ok=True)
            shutil.rmtree(model, ignore_errors=True)
        return Outcome(float(value), metrics, {
            "train": round(trained - started, 3),
            "evaluate": round(time.monotonic() - trained, 3)}, kept)

    def _started_ahead(self, run: TrialRun, spec: Path, model: Path, evaluate_log: IO,
                       evaluate_args: list[str]) -> tuple[float, float, int]:
        """Train, then evaluate, each process started ahead of its turn (without forks):
        (when training started, when it ended, the evaluation's exit status)."""
        evaluator = self._prestart(EVALUATE_MODULE, evaluate_log)
        try:
            started = time.monotonic()
            self._train(run, spec, model)
            trained = time.monotonic()
            if run.ahead:  # the next trial's train step imports while this one is evaluated
                self._next_train.process = self._prestart(TRAIN_MODULE, subprocess.PIPE)
            self._take(evaluator)
            return started, trained, _wait(evaluator.start(evaluate_args), run.cancelled)
        finally:
            if evaluator.process.poll() is None and evaluator.process.stdin is not None \
                    and not evaluator.process.stdin.closed:
                self._take(evaluator)
                evaluator.give_up()

    def _train(self, run: TrialRun, spec: Path, model: Path) -> None:
        """The train step on the trial's pipeline; reports each evaluation's objective while
        it trains (early stopping), killed when the search prunes the trial."""
        args = ["--spec", str(spec), "--transformed", self.transformed, "--model", str(model)]
        process = self._forked(TRAIN_MODULE, args, subprocess.PIPE)
        if process is None:
            ahead = getattr(self._next_train, "process", None)
            self._next_train.process = None
            if ahead is not None and ahead.process.poll() is not None:  # it died waiting
                self._take(ahead)
                ahead.give_up()
                ahead = None
            if ahead is None:
                ahead = self._prestart(TRAIN_MODULE, subprocess.PIPE)
            self._take(ahead)
            process = ahead.start(args)
        eval_dir = model / Files.CHECKPOINTS / (
            "eval" if run.pipeline.eval.name == "eval" else f"eval_{run.pipeline.eval.name}")
        stop = threading.Event()
        watcher = threading.Thread(target=_kill_when, args=(process, run.cancelled, stop),
                                   daemon=True)
        watcher.start()
        pruned: Pruned | None = None
        try:
            with open(run.folder / "train.log", "w", buffering=1) as log:
                assert process.stdout is not None
                for line in process.stdout:
                    log.write(line)
                    found = _EVALUATION.search(line) if run.intermediate else None
                    if found is None or pruned is not None:
                        continue
                    log.flush()
                    step = int(found.group(1))
                    scalars = _scalars_at(eval_dir, step)
                    if run.objective not in scalars:
                        process.kill()
                        raise SearchError(
                            f"early stopping compares the trials' {run.objective} while they "
                            f"train, but the train step's evaluations do not report it "
                            f"(they report {sorted(scalars)}): choose one of those as the "
                            "objective, or drop early_stopping")
                    if run.report(step, scalars[run.objective]):
                        pruned = Pruned(step, scalars[run.objective])
                        process.kill()
            code = process.wait()
        finally:
            stop.set()
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if pruned is not None:
            shutil.rmtree(model, ignore_errors=True)
            raise pruned
        if run.cancelled.is_set():
            raise TrialError("cancelled: the search stopped")
        if code != 0:
            raise TrialError(_error_of(run.folder / "train.log", "train", code))


def _scalars_at(folder: Path, step: int, tries: int = 5) -> dict[str, float]:
    """The evaluation's scalars at ``step`` (written before its progress line; read again
    a few times should a file system show them late)."""
    for attempt in range(tries):
        scalars = read_scalars(folder).get(step)
        if scalars:
            return scalars
        if attempt + 1 < tries:
            time.sleep(0.2)
    return {}


def _kill_when(process: subprocess.Popen, cancelled: threading.Event,
               done: threading.Event) -> None:
    """Kill ``process`` once ``cancelled`` is set (until ``done`` is)."""
    while not done.is_set():
        if cancelled.wait(0.2):
            with contextlib.suppress(OSError):
                process.kill()
            return


def _wait(process: subprocess.Popen, cancelled: threading.Event) -> int:
    while True:
        try:
            return process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if cancelled.is_set():
                process.kill()
                process.wait()
                raise TrialError("cancelled: the search stopped") from None


def _error_of(log: Path, step: str, code: int) -> str:
    """One line that says why a step failed: its ``[step] error:`` line, else the last line
    of its traceback, else its exit status."""
    try:
        lines = [line.rstrip() for line in log.read_text(errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        lines = []
    said = [line for line in lines if line.startswith(f"[{step}] error:")]
    if said:
        return said[-1][len(f"[{step}] error:"):].strip()
    tail = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b", line)]
    if tail:
        return tail[-1][:500]
    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return f"the {step} step ended with {how} (log: {log})"
