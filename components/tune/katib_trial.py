"""One trial of a search on Katib: the command each trial's pod runs (the Experiment that
``estflow compile --tune-on katib`` builds, ``estflow.pipelines.kubeflow.katib``).

``python -m estflow.components.tune.katib_trial --spec S --examples URI --transformed URI
--assignment JSON [--scratch DIR]``

1. copy what the trial reads from the buckets into a local scratch folder (``--scratch``,
   default a temporary one, removed at the end): the transform step's output
   (``--transformed``, all of it) and the ingest step's eval split with its summary
   (``--examples``: ``eval/``, ``ingest.json``); ``gs://`` and ``s3://`` URIs, or local
   paths (used where they are);
2. keep of ``--assignment`` (a JSON object, estflow path -> value, every path of the space:
   Katib has no conditional parameters) the dimensions that are active for it
   (:func:`estflow.components._runtime.katib.active`), and build the trial's pipeline from the
   spec as the search in the task does (:func:`.trial.trial_pipeline`);
3. train and evaluate it by the train and evaluate steps' entry points
   (:class:`.trial.StepProcesses`), and print to stdout, flushed, one line
   ``<objective>=<value>`` (a float as Python's ``repr`` writes it) per evaluation the train
   step makes while it trains when ``early_stopping`` is declared, then the evaluate step's
   value last: the lines Katib's metrics collector takes (its filter is
   ``estflow.pipelines.kubeflow.katib.metrics_filter``; the last line is the trial's value).
   Katib's early stopping stops the pod; the steps' processes die with this one.

Everything else (progress, the steps' logs when one fails) goes to stderr. Exit status: 0 with
the value printed; 1 when the trial failed (its inputs unreadable, training or evaluation
failed, the objective not a number), said in a ``[tune-trial] error:`` line; 2 for arguments
that are wrong.

With ``--result DIR`` (a task of ``estflow compile --tune-on parallel-for``'s loop, numbered
``--trial N``) the trial's outcome, its value or why it failed (wrong arguments included), is
also written to ``DIR/trial.json`` (:func:`estflow.components.tune.on_parallel_for.write_result`)
and the exit status is 0 either way, so that one failed trial does not stop the loop: the tune
task that collects the trials counts the failures against ``Tune.max_failures``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO
from typing import Any
from typing import NamedTuple

from estflow.components._io import storage
from estflow.components._runtime import entry
from estflow.components._runtime import katib
from estflow.components.tune.on_parallel_for import write_result
from estflow.components.tune.trial import Outcome
from estflow.components.tune.trial import SearchError
from estflow.components.tune.trial import StepProcesses
from estflow.components.tune.trial import TrialError
from estflow.components.tune.trial import TrialRun
from estflow.components.tune.trial import thread_env
from estflow.components.tune.trial import trial_pipeline
from estflow.dsl.contracts import Files
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors

__all__ = ["main", "metric_line"]

_PREFIX = "[tune-trial]"
_LOG_TAIL = 40  # lines of a failed step's log shown


class _ArgumentError(Exception):
    """The trial's arguments are wrong (exit status 2)."""


def metric_line(objective: str, value: float) -> str:
    """The line Katib's metrics collector takes: ``<objective>=<value>``."""
    return f"{objective}={float(value)!r}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m estflow.components.tune.katib_trial",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, help="the pipeline: JSON text or a file")
    parser.add_argument("--examples", required=True, metavar="URI",
                        help="the ingest step's output (gs://, s3:// or a local path)")
    parser.add_argument("--transformed", required=True, metavar="URI",
                        help="the transform step's output (gs://, s3:// or a local path)")
    parser.add_argument("--assignment", required=True, metavar="JSON",
                        help="the trial's values: a JSON object, estflow path -> value")
    parser.add_argument("--scratch", default=None, metavar="DIR",
                        help="where the inputs are copied and the trial trains (default: a "
                             "temporary folder, removed at the end; this one is kept)")
    parser.add_argument("--result", default=None, metavar="DIR",
                        help="also write the trial's outcome (its value, or why it failed) "
                             "to DIR/trial.json, and exit 0 either way (--tune-on "
                             "parallel-for: a failed trial does not stop the loop)")
    parser.add_argument("--trial", type=int, default=0, metavar="N",
                        help="the trial's number in the search (with --result; default: 0)")
    return parser


class _Ended(NamedTuple):
    """How a trial ended: its exit status, objective, active assignment, and its outcome or
    the one line saying why it failed."""

    code: int
    objective: str = ""
    assignment: dict[str, Any] | None = None
    outcome: Outcome | None = None
    error: str | None = None


def main(argv: list[str] | None = None, *, out: IO[str] | None = None,
         clients: dict | None = None) -> int:
    """Run one trial (module docstring); returns the exit status. ``out``: where the metric
    lines go (default: stdout); ``clients``: object store clients (tests)."""
    args = _parser().parse_args(argv)
    ended = _run(args, out if out is not None else sys.stdout, clients)
    if args.result is None:
        return ended.code
    outcome = ended.outcome
    try:
        write_result(args.result, trial=args.trial, assignment=ended.assignment or {},
                     objective=ended.objective,
                     value=None if outcome is None else outcome.value, error=ended.error,
                     metrics=None if outcome is None else outcome.metrics,
                     seconds=None if outcome is None else outcome.seconds)
    except OSError as err:
        _say(f"error: cannot write the trial's result to {args.result}: {_one_line(err)}")
        return 1
    return 0


def _run(args, out: IO[str], clients: dict | None) -> _Ended:
    """Run the trial of the parsed arguments ``args``."""
    try:
        pipeline, tune, assignment = _trial_of(args)
    except (_ArgumentError, DslError, DslErrors, ValueError, OSError) as err:
        _say(f"error: {_one_line(err)}")
        return _Ended(2, error=_one_line(err))
    try:
        trial = trial_pipeline(pipeline, tune, assignment)
    except (DslError, DslErrors, ValueError) as err:  # a value the declaration refuses
        _say(f"error: {_one_line(err)}")
        return _Ended(2, tune.objective, assignment, error=_one_line(err))
    scratch = Path(args.scratch) if args.scratch else Path(
        tempfile.mkdtemp(prefix="estflow-trial-"))
    folder = scratch / "trial"
    try:
        examples = _local(args.examples, scratch / "examples", clients,
                          trees=(Files.EVAL_EXAMPLES,), files=(Files.INGEST_STATS,))
        transformed = _local(args.transformed, scratch / "transformed", clients)
        _check_inputs(examples, transformed, args)
        shown = ", ".join(f"{k}={json.dumps(_jsonable(v))}" for k, v in assignment.items())
        _say(f"training {trial.name} with {shown or 'the declared values'}")

        def report(step: int, value: float) -> bool:
            if math.isfinite(value):
                _emit(out, metric_line(tune.objective, value))
                _say(f"evaluation at step {step}: {metric_line(tune.objective, value)}")
            return False  # Katib's early stopping stops the pod, not this trial

        runner = StepProcesses(examples, transformed, keep_models=False,
                               env=thread_env(os.environ, 1, len(os.sched_getaffinity(0))))
        run = TrialRun(number=args.trial, assignment=dict(assignment), pipeline=trial,
                       folder=folder, objective=tune.objective, report=report,
                       cancelled=threading.Event(),
                       intermediate=tune.early_stopping is not None)
        try:
            outcome = runner(run)
        finally:
            runner.close()
    except (TrialError, SearchError, storage.StorageError, OSError) as err:
        for log in ("train.log", "evaluate.log"):
            _tail(folder / log)
        _say(f"error: {_one_line(err)}")
        return _Ended(1, tune.objective, assignment, error=_one_line(err))
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    _emit(out, metric_line(tune.objective, outcome.value))
    _say(f"{tune.objective}={outcome.value!r} (train {outcome.seconds.get('train')}s, "
         f"evaluate {outcome.seconds.get('evaluate')}s)")
    return _Ended(0, tune.objective, assignment, outcome)


def _trial_of(args) -> tuple[Any, Any, dict[str, Any]]:
    """(pipeline, its search, the active part of the assignment)."""
    pipeline = entry.load_pipeline(args.spec)
    tune = pipeline.tune
    if tune is None:
        raise _ArgumentError("the spec declares no search (Pipeline.tune is None)")
    try:
        given = json.loads(args.assignment)
    except ValueError as err:
        raise _ArgumentError(f"--assignment is not JSON: {err}") from None
    if not isinstance(given, dict):
        raise _ArgumentError(f"--assignment is not a JSON object: {args.assignment[:200]!r}")
    paths = [path for path, _ in tune.dimensions()]
    unknown = sorted(set(given) - set(paths))
    if unknown:
        raise _ArgumentError(f"--assignment names {unknown}, which the search does not "
                             f"declare (its paths: {paths})")
    return pipeline, tune, katib.active(given, tune)


def _local(uri: str, target: Path, clients: dict | None, *, trees: tuple[str, ...] = (),
           files: tuple[str, ...] = ()) -> Path:
    """A local folder with the artifact at ``uri``: ``uri`` itself when local, else a copy in
    ``target`` of ``trees`` (sub-folders, each required) and ``files`` (each if present), or of
    everything when neither is named."""
    if not storage.is_remote(uri):
        path = Path(uri)
        if not path.is_dir():
            raise FileNotFoundError(f"{uri}: no such folder")
        return path
    base = uri.rstrip("/")
    _say(f"copying {base} to {target}")
    if not trees and not files:
        storage.download_tree(base, target, clients=clients)
        return target
    for tree in trees:
        storage.download_tree(f"{base}/{tree}", target / tree, clients=clients)
    for name in files:
        try:
            data = storage.read_bytes(f"{base}/{name}", clients=clients)
        except FileNotFoundError:
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(data)
    return target


def _check_inputs(examples: Path, transformed: Path, args) -> None:
    """The files the train and evaluate steps read, each named when it is missing (before
    TensorFlow starts)."""
    missing = [name for name in (Files.TRANSFORM_FN, Files.TRANSFORM_STATS)
               if not (transformed / name).exists()]
    missing += [f"{split}/*.tfrecord.gz" for split in (Files.TRANSFORMED_TRAIN,
                                                       Files.TRANSFORMED_EVAL)
                if not list((transformed / split).glob("*.tfrecord.gz"))]
    eval_split = examples / Files.EVAL_EXAMPLES
    found = [f"--transformed {args.transformed}: {', '.join(missing)}"] if missing else []
    if not eval_split.is_dir() or not any(p.is_file() for p in eval_split.iterdir()):
        found.append(f"--examples {args.examples}: {Files.EVAL_EXAMPLES}/ (the raw eval split)")
    if found:
        raise FileNotFoundError("the trial needs the transform step's output and the ingest "
                                "step's eval split; missing: " + "; ".join(found))


def _emit(out: IO[str], line: str) -> None:
    print(line, file=out, flush=True)


def _say(message: str) -> None:
    print(f"{_PREFIX} {message}", file=sys.stderr, flush=True)


def _tail(log: Path) -> None:
    """The end of a step's log, to stderr (the scratch folder goes with the pod)."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
    except OSError:
        return
    print(f"{_PREFIX} --- the last {len(lines)} lines of {log.name} ---", file=sys.stderr)
    for line in lines:
        print(line, file=sys.stderr)
    sys.stderr.flush()


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, (list, tuple)) else value


if __name__ == "__main__":
    entry.exit_after(main)
