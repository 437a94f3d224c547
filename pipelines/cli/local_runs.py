"""``estflow run`` and ``estflow preprocess``: a pipeline, or only its preprocessing, on this
machine through the local runner (:mod:`estflow.pipelines.local.runner`).

Both check a local CSV source's header before any step runs. ``estflow run`` exits 0 when the
model was pushed or the served version already is this model (without a push target: blessed),
3 when every step ran but it was not blessed, 4 when the data broke a blocking check
(``Pipeline.checks``, or a missing span), 1 when a step failed, 2 for a usage error, 130 on
Ctrl-C (after saying what was kept and the command that continues: ``--resume RUN``).
``--no-cache [STEP]`` runs steps again that the step cache would reuse.

The last line of a failed run says what helps (:func:`_failure_advice`). ``--resume``
continues a run as it was declared (its ``pipeline.json``), so it is offered only where that
can help: after Ctrl-C, and after a failure outside the pipeline file (a full disk, a lost
connection, a crash). After a failure the file caused (data that does not fit its declaration,
exit 4; a traceback through its code) the advice is to fix the file and start a new run,
which reuses every step whose inputs did not change; when the runner cannot tell, it says
both. ``--resume`` after the file changed is refused (exit 2), naming the fields, with the
command that starts a new run.
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
import time
from pathlib import Path

from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Files
from estflow.dsl.errors import DslErrors
from estflow.dsl.models import Candidates
from estflow.pipelines import beam_options
from estflow.pipelines.cli import backfill
from estflow.pipelines.cli import colour as _colour
from estflow.pipelines.cli.usage import EXIT_FAILED
from estflow.pipelines.cli.usage import EXIT_INTERRUPTED
from estflow.pipelines.cli.usage import EXIT_NOT_PUSHED
from estflow.pipelines.cli.usage import EXIT_USAGE
from estflow.pipelines.cli.usage import PIPELINE_HELP
from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import check_local_data
from estflow.pipelines.cli.usage import data_mismatch
from estflow.pipelines.cli.usage import load_target
from estflow.pipelines.cli.usage import positive_int
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local import runs
from estflow.pipelines.local.preprocess_run import run_preprocess
from estflow.pipelines.local.schedule import parse_memory
from estflow.pipelines.local.stopping import DECLARATION
from estflow.pipelines.local.stopping import OUTSIDE
from estflow.pipelines.local.stopping import Stops
from estflow.pipelines.local.stopping import failure_cause
from estflow.pipelines.local.stopping import stop_like_ctrl_c
from estflow.pipelines.local.warm import warm_seconds
from estflow.pipelines.plan import build_preprocess_plan
from estflow.pipelines.plan import with_candidates

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``run`` and ``preprocess``."""
    _add_run(commands)
    _add_preprocess(commands)


# --- estflow run -------------------------------------------------------------------------------

def _add_run(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "run", help="run a pipeline end to end on this machine",
        usage="estflow run [-h] PIPELINE [--workdir DIR] [--no-cache [STEP[,STEP]]] "
              "[--resume [RUN]] [--workers N] [--span SPAN]",
        description="Run every step of a pipeline on this machine, each in its own process "
        "(the same entry points a Kubeflow task runs). A step whose inputs (the part of the "
        "spec it reads, its input artifacts, the source data, the code) are those of an "
        "earlier run is reused from the step cache; a model that is already the served "
        "version is not pushed again. Every run is recorded (estflow runs list|show|diff). Exit "
        "status: 0 the model was pushed or is already served (without a push target: "
        "blessed), 3 it was not blessed (every step ran), 4 the data broke a blocking check "
        "(DataChecks, or a missing span: stopped before training, nothing pushed), 1 a step "
        "failed, 2 a usage error, "
        "130 interrupted (Ctrl-C; SIGTERM: 143, SIGHUP: 129, after stopping the step as "
        "Ctrl-C does). After a failure the last line says what helps: a cause in the "
        "pipeline file (its code, a declaration the data does not fit) is fixed, then a new "
        "run reuses every step that did not change; an interruption or a failure outside it "
        "(a full disk, a crash) is continued with --resume RUN, which runs the declaration "
        "recorded with the run and refuses one the file has changed since.")
    # Optional here only so that _pipeline_taken_by_an_option can give it back; required.
    cmd.add_argument("pipeline", metavar="PIPELINE", nargs="?", help=PIPELINE_HELP)
    cmd.add_argument("--workdir", default=None, metavar="DIR",
                     help="the run's directory: its record, logs and links to its artifacts "
                     "(default: $ESTFLOW_HOME/<pipeline>/<run id>, ESTFLOW_HOME defaulting to "
                     "./estflow_runs); the step cache is $ESTFLOW_HOME/.cache")
    cmd.add_argument("--no-cache", nargs="?", const=_ALL, default=None, metavar="STEP[,STEP]",
                     help="run every step even when an identical earlier run's outputs are "
                     "cached; with STEP, run those steps (and the steps reading their "
                     "outputs) again")
    cmd.add_argument("--resume", nargs="?", const="", default=None, metavar="RUN",
                     help="continue the last failed or interrupted run of the pipeline (or "
                     "RUN: a run id or directory) as it was declared: finished steps are "
                     "reused, training continues from its last checkpoint")
    cmd.add_argument("--workers", type=positive_int, default=None, metavar="N",
                     help="train with N worker processes on localhost ports (TF_CONFIG as a "
                     "Kubeflow TFJob sets it; MultiWorkerMirroredStrategy, worker 0 writes the "
                     "model); default: the pipeline's run_config.cluster, else 1")
    cmd.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                     help="steps that do not wait for each other (your own steps beside the "
                     "built-in ones) run at once within N cores, by the cpu each step "
                     "requests (default: this machine's cores); 1: one step at a time")
    cmd.add_argument("--memory", type=_memory, default=None, metavar="SIZE",
                     help="and within SIZE of memory (512Mi, 8Gi), by the memory each step "
                     "requests (default: this machine's)")
    backfill.add_span_option(cmd)
    cmd.set_defaults(handler=_run)


def _memory(text: str) -> int:
    try:
        return parse_memory(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


_ALL = "all"


def _forced_steps(text: str | None, pipeline=None) -> set[str] | bool:
    """``--no-cache``'s value: True (every step), or the named steps (built-in ones, or the
    ``pipeline``'s own)."""
    if text is None:
        return set()
    if text == _ALL:
        return True
    names = {n.strip() for n in text.split(",") if n.strip()}
    rows = list(STEPS)
    if isinstance(getattr(pipeline, "model", None), Candidates):  # train_<name>, ..., select
        rows = list(with_candidates(pipeline, rows))
    known = [s.name for s in rows] + [s.name for s in getattr(pipeline, "steps", ())]
    # "train" (or "evaluate") with Candidates: every candidate's
    names = {m for n in names for m in ([r.name for r in rows if r.of == n] or [n])}
    unknown = sorted(names - set(known))
    if unknown:
        raise UsageError(f"Received --no-cache {text}, expected step names, some of {known} "
                         f"(or --no-cache alone for every step). Unknown: {unknown}")
    return names


_RUN_ID = re.compile(r"\d{8}-\d{6}(-\d+)?")


def _pipeline_taken_by_an_option(args: argparse.Namespace) -> None:
    """Give PIPELINE back when an option with an optional value took it.

    argparse gives ``--resume [RUN]`` and ``--no-cache [STEP]`` the word after them, so
    ``estflow run --resume taxi.py`` reads ``taxi.py`` as RUN and then misses PIPELINE. With
    PIPELINE missing, a value that is no run (a run id or a directory holding a run record)
    for ``--resume``, or no step names for ``--no-cache``, is the pipeline, and the option
    means what it means alone.

    Raises:
        UsageError: PIPELINE is missing and no option took it.
    """
    if args.pipeline is not None:
        return
    steps = {s.name for s in STEPS}
    resume, no_cache = args.resume, args.no_cache
    if resume and not _RUN_ID.fullmatch(resume) and not (Path(resume) / Files.RUN_RECORD
                                                           ).is_file():
        args.pipeline, args.resume = resume, ""
    elif no_cache not in (None, _ALL) and not {
            n.strip() for n in no_cache.split(",") if n.strip()} <= steps:
        args.pipeline, args.no_cache = no_cache, _ALL
    else:
        raise UsageError(f"estflow run needs a PIPELINE ({PIPELINE_HELP}): estflow run "
                         "PIPELINE [--resume [RUN]] [--no-cache [STEP]] ...")


def _again(args: argparse.Namespace, run_id: str | None, workdir) -> list[str]:
    """The command that continues a stopped run: ``--resume RUN_ID`` for a run in the runs'
    home, else ``--resume DIR``."""
    at_home = (run_id and workdir is not None
               and Path(workdir).resolve().parent.parent == runs.home().resolve())
    again = ["estflow", "run", args.pipeline, "--resume", run_id if at_home else str(workdir)]
    if args.workers is not None:
        again += ["--workers", str(args.workers)]
    return again


def _new_run(args: argparse.Namespace) -> list[str]:
    """The command that starts a new run of the same pipeline (the same span and workers):
    every step whose inputs did not change is reused from the cache."""
    again = ["estflow", "run", args.pipeline]
    if args.span is not None:
        again += ["--span", args.span]
    if args.workers is not None:
        again += ["--workers", str(args.workers)]
    return again


_REUSED = "steps whose inputs did not change are reused from the cache"


def _failure_advice(args: argparse.Namespace, file, err: local_runner.StepFailed,
                    run_id: str) -> list[str]:
    """What helps after a failed run, as its last lines: a new run once the pipeline file is
    fixed (its code or declaration caused it: ``--resume`` would run the old declaration
    again), ``--resume`` (a cause outside the file: the run continues where it stopped), or,
    when the runner cannot tell, both, each with its condition."""
    cause = failure_cause(err, file)
    new = shlex.join(_new_run(args))
    resume = shlex.join(_again(args, run_id, getattr(err, "workdir", None)))
    if cause.kind == DECLARATION:
        where = (f"in the pipeline's own code at {cause.detail}" if cause.frame else
                 f"({cause.detail})")
        return [f"estflow run: run {run_id} failed {where}: fix it, then start a new run "
                f"({_REUSED}, so nothing finished is lost): {new}"]
    if cause.kind == OUTSIDE:
        return [f"estflow run: run {run_id} failed outside the pipeline file ({cause.detail}); "
                f"once that is fixed, continue it (finished steps are reused): {resume}"]
    seen = f" ({cause.detail})" if cause.detail else ""
    return [f"estflow run: run {run_id} failed{seen}. If the cause is in {args.pipeline} (its "
            f"declaration or its code), fix it and start a new run ({_REUSED}): {new}",
            "estflow run: if it was outside it (out of disk or memory, a crash, a lost "
            f"connection), continue the run instead (finished steps are reused): {resume}"]


def _run(args: argparse.Namespace) -> int:
    _pipeline_taken_by_an_option(args)
    try:
        warm_seconds({})  # ESTFLOW_WARM: refused before any work
    except ValueError as err:
        raise UsageError(str(err)) from None
    loaded = load_target(args.pipeline)
    if args.resume is None:  # a resumed run reads the span its spec recorded
        try:
            loaded = backfill.select(loaded, args.span)
        except backfill.SpanMissing as err:
            return backfill.checks_stopped(err)
    try:
        local_runner.topology_for(loaded.pipeline, args.workers)
    except ValueError as err:  # --workers does not fit the declared strategy
        raise UsageError(str(err)) from None
    forced = _forced_steps(args.no_cache, loaded.pipeline)
    resume = None
    if args.resume is not None:
        if args.workdir:
            raise UsageError("--resume continues a run in its own directory: leave out "
                             "--workdir")
        try:
            resume = runs.resumable_run(loaded.pipeline.name, args.resume or None)
        except runs.RunNotFound as err:
            raise UsageError(str(err)) from None
    elif args.workdir and (Path(args.workdir) / Files.RUN_RECORD).is_file():
        raise UsageError(f"{args.workdir} already holds a run: continue it with --resume "
                         f"{args.workdir}, or give another --workdir")
    try:
        with stop_like_ctrl_c() as stops:
            result = local_runner.run_local(loaded, args.workdir, workers=args.workers,
                                            no_cache=forced, resume=resume, jobs=args.jobs,
                                            memory=args.memory,
                                            echo=_colour.survive_closed_output(
                                                _colour.terminal_echo(), "estflow run"))
    except local_runner.DeclarationChanged as err:  # --resume would rerun the old one
        print(f"estflow run: {err}", file=sys.stderr)
        print(f"estflow run: to continue run {err.record.run_id} as it was declared, put "
              f"{args.pipeline} back as it was; for the changes, start a new run ({_REUSED}): "
              f"{shlex.join(_new_run(args))}", file=sys.stderr)
        return EXIT_USAGE
    except DslErrors as err:  # the local data's header does not match the declaration
        raise data_mismatch(args.pipeline, err) from None
    except local_runner.StepFailed as err:
        print(f"estflow run: {err}", file=sys.stderr)
        stopped = backfill.checks_stopped(err)
        if stopped is not None:  # the data, or its declaration: a resume reads the same
            print(f"estflow run: after fixing the pipeline file (or the data), start a new "
                  f"run ({_REUSED}): {shlex.join(_new_run(args))}", file=sys.stderr)
            return stopped
        run_id = getattr(err, "run_id", None)
        if run_id:
            for line in _failure_advice(args, loaded.file, err, run_id):
                print(line, file=sys.stderr)
        return EXIT_FAILED
    except local_runner.RunInterrupted as stop:
        again = _again(args, stop.run_id, stop.workdir)
        checkpoint = stop.last_checkpoint()
        return _interrupted("run", stop, stops, [
            f"last checkpoint: {checkpoint or 'none yet'}",
            (f"to continue (training resumes from the last checkpoint): {shlex.join(again)}"
             if checkpoint else
             f"to continue (finished steps are reused): {shlex.join(again)}")])
    if not result.model_delivered:
        print(f"estflow run: exit status {EXIT_NOT_PUSHED}: every step ran, but the model was "
              "not blessed, so it was not pushed (see the reasons above)", file=sys.stderr)
        return EXIT_NOT_PUSHED
    return 0


def _interrupted(command: str, stop: local_runner.RunInterrupted, stops: Stops,
                 lines: list[str]) -> int:
    """Say what an interrupted run kept and how to go on; its exit status: 130 after Ctrl-C,
    128 + the signal's number after SIGTERM (143) or SIGHUP (129)."""
    done = f" (steps done: {', '.join(stop.done)})" if stop.done else ""
    how = (f"stopped by {signal.Signals(stops.signum).name}" if stops.signum else
           "interrupted")
    print(f"estflow {command}: {how} during step {stop.step!r}{done}\n"
          f"  kept: {stop.workdir}\n" + "".join(f"  {line}\n" for line in lines),
          end="", file=sys.stderr)
    return 128 + stops.signum if stops.signum else EXIT_INTERRUPTED


# --- estflow preprocess: ingest + transform only, one Beam job (contracts.PREPROCESS) ----------

def _preprocess_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="where artifacts go (default: estflow_runs/<pipeline>/<timestamp>); "
                        "they land in DIR/preprocess/{examples,transformed}")
    parser.add_argument("--runner", default=None,
                        help="local (default: in-memory, offline), dataflow, flink, spark or "
                        "portable")
    parser.add_argument("--gzip-level", type=int, default=1, choices=range(1, 10),
                        help="GZIP level of the written TFRecords (1 fastest: default; 9 "
                        "smallest)")
    parser.add_argument("--num-shards", type=int, default=0,
                        help="shards per split (default 0: the runner decides)")
    return parser


# Re-reads the estflow options among the pass-through arguments (they may follow PIPELINE).
_PREPROCESS_OWN = _preprocess_options(argparse.ArgumentParser(
    add_help=False, argument_default=argparse.SUPPRESS))


def _add_preprocess(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "preprocess", help="run only a pipeline's preprocessing (ingest + transform)",
        description="Read, validate and split the pipeline's data and analyze and transform it "
        "with tf.Transform, in one Beam job, writing what the ingest and transform steps "
        "write. Other options are Beam pipeline options, checked for the runner and passed "
        "through, e.g. --runner dataflow --project P --region R --temp_location gs://B/tmp.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=PIPELINE_HELP)
    _preprocess_options(cmd)
    cmd.add_argument("beam_options", nargs=argparse.REMAINDER, metavar="BEAM_OPTION",
                     help="Beam pipeline options (--name=value)")
    cmd.set_defaults(handler=_preprocess)


def _preprocess(args: argparse.Namespace) -> int:
    loaded = load_target(args.pipeline)
    check_local_data(loaded, args.pipeline)
    own, rest = _PREPROCESS_OWN.parse_known_args(args.beam_options)
    args = argparse.Namespace(**{**vars(args), **vars(own)})  # given after PIPELINE: they win
    try:
        beam = beam_options.build_options(args.runner, rest)
    except beam_options.BeamOptionsError as err:
        raise UsageError(str(err)) from None
    workdir = (Path(args.output) if args.output else
               runs.home() / loaded.pipeline.name / f"preprocess-{time.strftime('%Y%m%d-%H%M%S')}")
    plan = build_preprocess_plan(loaded.pipeline, source_root=loaded.local_source_root,
                                 gzip_level=args.gzip_level, num_shards=args.num_shards,
                                 beam_options=shlex.join(beam) if beam else None)
    # With estflow run's options, the outputs are the ingest and transform steps' cache
    # entries: reused when there, and reused by estflow run (pipelines/local/preprocess_run.py).
    cached = not beam and args.gzip_level == 1 and not args.num_shards
    print(f"estflow preprocess: pipeline {loaded.pipeline.name!r} on "
          f"{args.runner or 'the local in-memory runner'}, output {workdir}"
          + ("" if cached else " (not cached: estflow run's steps use the local runner, "
             "GZIP level 1 and the runner's shards)"))
    try:
        with stop_like_ctrl_c() as stops:
            if cached:
                result = run_preprocess(loaded.pipeline, loaded.local_source_root,
                                        workdir.resolve())
            else:
                result = local_runner.run_plan(plan, workdir.resolve())
    except local_runner.StepFailed as err:
        print(f"estflow preprocess: {err}", file=sys.stderr)
        return EXIT_FAILED
    except local_runner.RunInterrupted as stop:
        again = ["estflow", "preprocess", args.pipeline, "--output", str(stop.workdir)]
        if args.runner:
            again += ["--runner", args.runner]
        if args.gzip_level != 1:
            again += ["--gzip-level", str(args.gzip_level)]
        if args.num_shards:
            again += ["--num-shards", str(args.num_shards)]
        return _interrupted("preprocess", stop, stops,
                            [f"to run it again: {shlex.join(again + rest)}"])
    for artifact, path in result.artifacts.items():
        print(f"{artifact}: {path}")
    return 0
