"""``estflow run`` and ``estflow preprocess``: a pipeline, or only its preprocessing, on this
machine through the local runner (:mod:`estflow.pipelines.local_runner`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from estflow.pipelines import beam_options
from estflow.pipelines import local_runner
from estflow.pipelines._cli.usage import PIPELINE_HELP
from estflow.pipelines._cli.usage import UsageError
from estflow.pipelines._cli.usage import load_target
from estflow.pipelines.plan import build_preprocess_plan

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``run`` and ``preprocess``."""
    _add_run(commands)
    _add_preprocess(commands)


# --- estflow run -------------------------------------------------------------------------------

def _add_run(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "run", help="run a pipeline end to end on this machine",
        description="Run every step of a pipeline on this machine, each in its own process "
        "(the same entry points a Kubeflow task runs).")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=PIPELINE_HELP)
    cmd.add_argument("--workdir", default=None, metavar="DIR",
                     help="where artifacts go (default: estflow_runs/<pipeline>/<timestamp>)")
    cmd.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                     help="train with N worker processes on localhost ports (TF_CONFIG as a "
                     "Kubeflow TFJob sets it; MultiWorkerMirroredStrategy, worker 0 writes the "
                     "model); default: the pipeline's run_config.cluster, else 1")
    cmd.set_defaults(handler=_run)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {text!r}")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    loaded = load_target(args.pipeline)
    try:
        local_runner.topology_for(loaded.pipeline, args.workers)
    except ValueError as err:  # --workers does not fit the declared strategy
        raise UsageError(str(err)) from None
    try:
        local_runner.run_local(loaded, args.workdir, workers=args.workers)
    except local_runner.StepFailed as err:
        print(f"estflow run: {err}", file=sys.stderr)
        return 1
    return 0


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
    own, rest = _PREPROCESS_OWN.parse_known_args(args.beam_options)
    args = argparse.Namespace(**{**vars(args), **vars(own)})  # given after PIPELINE: they win
    try:
        beam = beam_options.build_options(args.runner, rest)
    except beam_options.BeamOptionsError as err:
        raise UsageError(str(err)) from None
    workdir = Path(args.output) if args.output else local_runner.default_workdir(loaded.pipeline)
    plan = build_preprocess_plan(loaded.pipeline, source_root=loaded.local_source_root,
                                 gzip_level=args.gzip_level, num_shards=args.num_shards,
                                 beam_options=shlex.join(beam) if beam else None)
    print(f"estflow preprocess: pipeline {loaded.pipeline.name!r} on "
          f"{args.runner or 'the local in-memory runner'}, output {workdir}")
    try:
        result = local_runner.run_plan(plan, workdir.resolve())
    except local_runner.StepFailed as err:
        print(f"estflow preprocess: {err}", file=sys.stderr)
        return 1
    for artifact, path in result.artifacts.items():
        print(f"{artifact}: {path}")
    return 0
