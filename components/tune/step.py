"""The tune step: search the declared space (``Pipeline.tune``) for the hyperparameters with
the best objective on the eval split, on this machine, before the final train.

:func:`run` is what ``python -m estflow.components.tune`` calls, and tests call directly.

The search is an Optuna study (:mod:`.study`: on disk, resumable). Trials are drawn by the
declared ``algorithm``: ``"tpe"`` (Optuna's ``TPESampler``), ``"random"``
(``RandomSampler``), each seeded with ``seed`` and the trial's number (so a search continued
after a stop draws what an unstopped one would have), or ``"grid"``: every point of
:meth:`~estflow.dsl.Tune.grid` (conditional dimensions only where active) once, in an order
fixed by ``seed``, each queued as a trial's fixed values (Optuna's ``GridSampler`` takes the
product of every dimension's values, active or not, and cannot stop a search it is not
running itself). ``early_stopping`` is Optuna's pruner on the objective of the train step's
evaluations, every ``every_steps`` steps (:func:`pruner_of`): a :class:`~estflow.dsl.MedianStop`
its ``MedianPruner(n_startup_trials=warmup_trials, n_warmup_steps=warmup_steps)``, a
:class:`~estflow.dsl.HalvingStop` its ``SuccessiveHalvingPruner(min_resource=min_steps,
reduction_factor=factor)``.

``parallel`` trials run at once, each in processes of its own (:mod:`.trial`), TensorFlow's
thread pools sized to share the CPUs. Each trial's outcome is in the study as it ends, so a
search stopped at any moment (SIGKILL included) and started again keeps every finished trial
and trains again only those it stopped (with the same values); a search with a larger
``trials`` budget continues from the trials of a smaller one.

The budget counts the study's finished trials, earlier searches' included: COMPLETE, PRUNED
and FAIL, but not the interrupted ones (a trial its search was stopped in the middle of,
failed and queued again). A trial that raises is FAIL, its error kept and printed, and the
search goes on while at most ``max_failures`` trials have failed in this search (0: none may);
at the next failure the step fails, naming the count and the last error (the trials still running are stopped as
interrupted: a rerun trains them again). No trial starts once ``timeout_s`` seconds have passed
(those running finish). A search with no completed trial fails.

Outputs (the ``hyperparameters`` artifact)::

    best.json      {"assignment": {path: value}, "objective": name, "value": float,
                    "trial": n, "higher_is_better": bool, "metrics": {...}}
    trials.json    {"objective", "higher_is_better", "study", "trials": [{"number",
                    "assignment", "state" (COMPLETE, PRUNED, FAIL), "value",
                    "intermediate": [{"step", "value"}], "started", "finished",
                    "duration_s", "error", "interrupted", "retried_as", "retry_of",
                    "metrics", "seconds", "model_dir"}]}
    report.html    every trial in a table, the objective over the trials and against each
                   hyperparameter (inline SVG)
    metrics.json   {"objective", "higher_is_better", "best_trial", "complete", "pruned",
                    "failed", "metrics": {objective: best value}}
    study/<key>/   the study, when no other study folder is given (:mod:`.study`)

``trials.json`` and ``report.html`` are written again as each trial ends.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import entry
from estflow.components.tune import report as _report
from estflow.components.tune import space as _space
from estflow.components.tune import study as _study
from estflow.components.tune.trial import Outcome
from estflow.components.tune.trial import Pruned
from estflow.components.tune.trial import SearchError
from estflow.components.tune.trial import StepProcesses
from estflow.components.tune.trial import TrialRun
from estflow.components.tune.trial import thread_env
from estflow.components.tune.trial import trial_pipeline
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import TUNE_TRIALS
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.tune import HalvingStop
from estflow.dsl.tune import MedianStop
from estflow.dsl.tune import Tune

__all__ = ["run", "TuneError", "BEST_FILE", "TRIALS_FILE", "best_trial"]

BEST_FILE = TUNE_BEST  # what the final train reads
TRIALS_FILE = TUNE_TRIALS
STUDY_FOLDER = "study"


class TuneError(RuntimeError):
    """The search cannot run on its inputs, or gave up (failures, no completed trial)."""


TrialRunner = Callable[[TrialRun], Outcome]


def run(pipeline: Pipeline, examples_dir: str | os.PathLike,
        transformed_dir: str | os.PathLike, hyperparameters_dir: str | os.PathLike,
        progress: Callable[[str], None] | None = None, *,
        study_dir: str | os.PathLike | None = None, study_key: str | None = None,
        env: Mapping[str, str] | None = None, cpus: int | None = None,
        keep_models: bool = False, trial_runner: TrialRunner | None = None) -> dict:
    """Search ``pipeline.tune``'s space; write the outputs (module docstring) to
    ``hyperparameters_dir``.

    Args:
        examples_dir: the ingest step's output (the evaluate step reads its eval split).
        transformed_dir: the transform step's output (the train step reads it).
        study_dir: where studies are kept, one folder per key (default:
            ``hyperparameters_dir/study``): the runner's cache (``estflow run`` sets
            ``$ESTFLOW_TUNE_STUDY_DIR``, which the entry point passes), so that a rerun reuses
            the finished trials.
        study_key: the study's key (default: :func:`.study.study_key` of the pipeline and a
            digest of the input files).
        env: the trials' processes' environment (default: this process's).
        cpus: the CPUs the trials share (default: those this process may run on).
        keep_models: keep each trial's model directory (``trials.json``'s ``model_dir``).
        trial_runner: runs one trial (default: :class:`.trial.StepProcesses`, the train and
            evaluate steps' entry points).

    Returns:
        What ``best.json`` holds.

    Raises:
        TuneError: no search declared, inputs missing, the search gave up or completed no
            trial.
    """
    progress = progress or entry.Progress("tune")
    tune = pipeline.tune
    if tune is None:
        raise TuneError("the spec declares no search: Pipeline.tune is None")
    out = Path(hyperparameters_dir)
    if trial_runner is None:
        _check_inputs(Path(examples_dir), Path(transformed_dir))
    if study_key is None:
        study_key = _study.study_key(pipeline, _study.data_digest(
            [Path(transformed_dir), Path(examples_dir) / Files.EVAL_EXAMPLES]))
    folder = Path(study_dir if study_dir is not None else out / STUDY_FOLDER) / study_key
    out.mkdir(parents=True, exist_ok=True)
    runner = trial_runner or StepProcesses(
        examples_dir, transformed_dir, keep_models=keep_models,
        env=thread_env(os.environ if env is None else env, tune.parallel,
                       cpus or len(os.sched_getaffinity(0))))
    try:
        with _study.search_lock(folder, progress):
            search = _Search(pipeline, tune, folder, out, runner, progress, study_key)
            return search.run()
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()


def _check_inputs(examples: Path, transformed: Path) -> None:
    """The files the trials read, each named when it is missing."""
    missing = [str(transformed / name) for name in (Files.TRANSFORM_FN, Files.TRANSFORM_STATS)
               if not (transformed / name).exists()]
    for split in (Files.TRANSFORMED_TRAIN, Files.TRANSFORMED_EVAL):
        if not list((transformed / split).glob("*.tfrecord.gz")):
            missing.append(f"{transformed / split}/*.tfrecord.gz")
    eval_examples = examples / Files.EVAL_EXAMPLES
    if not eval_examples.is_dir() or not any(p.is_file() for p in eval_examples.iterdir()):
        missing.append(f"{eval_examples}/ (the raw eval split)")
    if missing:
        raise TuneError("the search needs the transform step's output (transformed) and the "
                        "ingest step's (examples): missing " + ", ".join(missing))


def pruner_of(stop: MedianStop | HalvingStop | None) -> optuna.pruners.BasePruner:
    """Optuna's pruner for ``Tune.early_stopping``: MedianPruner for a :class:`MedianStop`,
    SuccessiveHalvingPruner (asynchronous successive halving) for a :class:`HalvingStop`,
    none for None."""
    if isinstance(stop, MedianStop):
        return optuna.pruners.MedianPruner(n_startup_trials=stop.warmup_trials,
                                           n_warmup_steps=stop.warmup_steps)
    if isinstance(stop, HalvingStop):
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=stop.min_steps,
                                                      reduction_factor=stop.factor)
    return optuna.pruners.NopPruner()


def best_trial(trials: list[optuna.trial.FrozenTrial],
               higher_is_better: bool) -> optuna.trial.FrozenTrial | None:
    """The COMPLETE trial with the best value (ties: the lowest number), or None."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None
                and math.isfinite(t.value)]
    if not complete:
        return None
    sign = 1 if higher_is_better else -1
    return max(complete, key=lambda t: (sign * t.value, -t.number))


def _counted(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether ``trial`` uses the budget: finished, and not interrupted."""
    return trial.state.is_finished() and _study.INTERRUPTED not in trial.system_attrs


def _shown(assignment: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{path}: {_value(value)}" for path, value in assignment.items()) \
        + "}"


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(_space.as_json(value))


class _Search:
    """One search of a study: the workers' shared state (under ``lock``)."""

    def __init__(self, pipeline: Pipeline, tune: Tune, folder: Path, out: Path,
                 runner: TrialRunner, progress: Callable[[str], None], key: str) -> None:
        self.pipeline, self.tune, self.folder, self.out = pipeline, tune, folder, out
        self.runner, self.progress, self.key = runner, progress, key
        self.higher = bool(tune.higher_is_better)
        self.objective = tune.objective
        self.study = _study.open_study(folder, direction="maximize" if self.higher
                                       else "minimize", sampler=self._sampler(0),
                                       pruner=pruner_of(tune.early_stopping))
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.started = time.monotonic()
        self.in_flight: dict[int, optuna.Trial] = {}
        self.failures = 0
        self.last_error: str | None = None
        self.fatal: str | None = None
        self.timed_out = False
        self._grid = list(_space.grid_order(tune)) if tune.algorithm == "grid" else None
        for old, new in _study.recover(self.study):
            shutil.rmtree(self.folder / "trials" / str(old) / "model", ignore_errors=True)
            progress(f"trial {old} was interrupted (its search stopped while it ran): trial "
                     f"{new} trains its values again")
        self._say_reused()

    # --- drawing trials ----------------------------------------------------------------------

    def _sampler(self, number: int) -> optuna.samplers.BaseSampler:
        """The sampler of trial ``number``: seeded with the search's seed and the number."""
        seed = (self.tune.seed * 1_000_003 + number) % 2**32
        if self.tune.algorithm == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)

    def _trials(self) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def _say_reused(self) -> None:
        done = [t for t in self._trials() if _counted(t)]
        if not done:
            return
        counts = _counts(done)
        best = best_trial(done, self.higher)
        so_far = f"; best so far: trial {best.number}, {self.objective}={best.value:.4f}" \
            if best is not None else ""
        self.progress(f"reusing {len(done)} finished trial(s) of this search ({counts})"
                      f"{so_far}")

    def _next(self) -> tuple[optuna.Trial, dict[str, Any], bool] | None:
        """The next trial to run and its assignment (and whether more may follow), or None:
        the search starts no more trials."""
        with self.lock:
            if self.fatal is not None or self._gave_up():
                return None
            if self.tune.timeout_s is not None and \
                    time.monotonic() - self.started >= self.tune.timeout_s:
                if not self.timed_out:
                    self.timed_out = True
                    self.progress(f"timeout_s={self.tune.timeout_s:g} reached: no new trial "
                                  "starts")
                return None
            trials = self._trials()
            used = sum(map(_counted, trials)) + len(self.in_flight)
            if used >= self.tune.trials:
                return None
            waiting = any(t.state == TrialState.WAITING for t in trials)
            if self._grid is not None and not waiting:
                taken = {_space.key_of(_space.decoded(self.tune, t.params)) for t in trials}
                point = next((p for p in self._grid if _space.key_of(p) not in taken), None)
                if point is None:
                    return None
                self.study.enqueue_trial(_space.encoded(self.tune, point))
            self.study.sampler = self._sampler(len(trials))
            trial = self.study.ask()
            assignment = _space.suggest(trial, self.tune)
            self.in_flight[trial.number] = trial
            return trial, assignment, used + 1 < self.tune.trials

    def _gave_up(self) -> bool:
        return self.failures > self.tune.max_failures  # as on Katib and in a fan-out

    # --- running them ------------------------------------------------------------------------

    def run(self) -> dict:
        workers = [threading.Thread(target=self._work, name=f"estflow-tune-{i}", daemon=True)
                   for i in range(self.tune.parallel)]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.5)
        except BaseException:  # Ctrl-C: stop the trials (their processes die with this one)
            self.cancel.set()
            raise
        self._write_trials()
        return self._finish()

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                self._run_one(*job)
            except BaseException as e:  # noqa: BLE001 - the search's own error: stop it
                with self.lock:
                    self.fatal = self.fatal or f"{type(e).__name__}: {e}"
                    self.in_flight.pop(job[0].number, None)
                self.cancel.set()
                return

    def _run_one(self, trial: optuna.Trial, assignment: dict[str, Any], ahead: bool) -> None:
        number = trial.number
        retry = trial.user_attrs.get(_study.RETRY_OF)
        again = f" (the values of interrupted trial {retry})" if retry is not None else ""
        self.progress(f"trial {number} started{again}: {_shown(assignment)}")
        folder = self.folder / "trials" / str(number)
        shutil.rmtree(folder, ignore_errors=True)
        started = time.monotonic()
        reported: set[int] = set()

        def report(step: int, value: float) -> bool:
            if step in reported or not math.isfinite(value):
                return False
            reported.add(step)
            trial.report(float(value), step)
            return trial.should_prune()

        try:
            run = TrialRun(number, assignment, trial_pipeline(self.pipeline, self.tune,
                                                              assignment),
                           folder, self.objective, report, self.cancel,
                           intermediate=self.tune.early_stopping is not None, ahead=ahead)
            outcome = self.runner(run)
        except Pruned as pruned:
            trial.set_user_attr("seconds", {"total": round(time.monotonic() - started, 3)})
            self._tell(trial, state=TrialState.PRUNED)
            self.progress(f"trial {number} pruned at step {pruned.step}: {self.objective}="
                          f"{pruned.value:.4f} ({time.monotonic() - started:.1f}s)")
        except SearchError as e:
            self._interrupted(trial)
            with self.lock:
                self.fatal = self.fatal or str(e)
            self.cancel.set()
        except Exception as e:  # noqa: BLE001 - the trial's failure, recorded
            if self.cancel.is_set():  # stopped by the search, not its own failure
                self._interrupted(trial)
                return
            error = _one_line(e)
            trial.set_user_attr("error", error)
            trial.set_user_attr("seconds", {"total": round(time.monotonic() - started, 3)})
            with self.lock:
                self.failures += 1
                self.last_error = f"trial {number}: {error}"
                gave_up = self._gave_up()
            self._tell(trial, state=TrialState.FAIL)
            self.progress(f"trial {number} failed: {error}")
            if gave_up:
                self.cancel.set()
        else:
            trial.set_user_attr("metrics", _json_safe(outcome.metrics))
            trial.set_user_attr("seconds", {**outcome.seconds,
                                            "total": round(time.monotonic() - started, 3)})
            if outcome.model_dir is not None:
                trial.set_user_attr("model_dir", outcome.model_dir)
            self._tell(trial, values=outcome.value)
            best = best_trial(self._trials(), self.higher)
            mark = " (best so far)" if best is not None and best.number == number else ""
            self.progress(f"trial {number} finished: {self.objective}={outcome.value:.4f} "
                          f"({time.monotonic() - started:.1f}s){mark}")

    def _tell(self, trial: optuna.Trial, **how) -> None:
        self.study.tell(trial, **how)
        with self.lock:
            self.in_flight.pop(trial.number, None)
        self._write_trials()

    def _interrupted(self, trial: optuna.Trial) -> None:
        """A trial the search stopped: failed as interrupted, its values queued again."""
        retry = _study.interrupt(self.study, trial)
        with self.lock:
            self.in_flight.pop(trial.number, None)
        self.progress(f"trial {trial.number} stopped: the search stops (trial {retry} will "
                      "train its values again)")
        self._write_trials()

    # --- the outputs -------------------------------------------------------------------------

    def _write_trials(self) -> None:
        with self.lock:
            rows = _report.rows(self._trials(), self.tune)
            header = {"objective": self.objective, "higher_is_better": self.higher,
                      "study": self.key, "trials": rows}
            _write(self.out / TRIALS_FILE, header)
            _report.write(self.out / Files.REPORT, header, self.tune)

    def _finish(self) -> dict:
        trials = self._trials()
        if self.fatal is not None:
            raise TuneError(self.fatal)
        if self._gave_up():
            raise TuneError(f"{self.failures} trial(s) failed in this search, max_failures="
                            f"{self.tune.max_failures}: the search gave up; the last error: "
                            f"{self.last_error}")
        best = best_trial(trials, self.higher)
        counted = [t for t in trials if _counted(t)]
        if best is None:
            failed = [t for t in counted if t.state == TrialState.FAIL]
            last = failed[-1].user_attrs.get("error") if failed else None
            raise TuneError(f"no trial completed ({_counts(counted) or 'no trial ran'})"
                            + (f"; the last error: trial {failed[-1].number}: {last}"
                               if last else ""))
        assignment = _space.decoded(self.tune, best.params)
        result = {"assignment": {k: _space.as_json(v) for k, v in assignment.items()},
                  "objective": self.objective, "value": best.value, "trial": best.number,
                  "higher_is_better": self.higher,
                  "metrics": best.user_attrs.get("metrics", {})}
        _write(self.out / BEST_FILE, result)
        states = {s: sum(t.state == s for t in counted)
                  for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        _write(self.out / Files.METRICS, {
            "objective": self.objective, "higher_is_better": self.higher,
            "best_trial": best.number, "complete": states[TrialState.COMPLETE],
            "pruned": states[TrialState.PRUNED], "failed": states[TrialState.FAIL],
            "metrics": {self.objective: best.value}})
        self.progress(f"{len(counted)} trial(s): {_counts(counted)}")
        self.progress(f"best trial {best.number}: {self.objective}={best.value:.4f} "
                      f"{_shown(assignment)}")
        self.progress(f"report: {self.out / Files.REPORT}")
        return result


def _counts(trials: list[optuna.trial.FrozenTrial]) -> str:
    parts = [(sum(t.state == s for t in trials), name) for s, name in (
        (TrialState.COMPLETE, "complete"), (TrialState.PRUNED, "pruned"),
        (TrialState.FAIL, "failed"))]
    return ", ".join(f"{n} {name}" for n, name in parts if n)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    name = type(error).__name__
    return (first if name in ("TrialError",) else f"{name}: {first}")[:500]


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _write(path: Path, value: Any) -> None:
    """``value`` as JSON at ``path``, replacing the file at once (never half written)."""
    write_json(path, value)

