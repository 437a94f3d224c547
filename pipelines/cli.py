"""The ``estflow`` command.

::

    estflow compile PIPELINE -o OUT.yaml [--image IMAGE] [--source-root ROOT] [--no-cache]
    estflow run PIPELINE [--workdir DIR] [--workers N]
    estflow preprocess PIPELINE [--output DIR] [--runner R] [BEAM_OPTION ...]
    estflow submit PIPELINE --host URL [--experiment NAME] [--param k=v ...]
    estflow schedule PIPELINE --cron "0 3 * * *" --host URL [--name NAME] [--param k=v ...]
    estflow schedules {list,pause,resume,delete} [ID] --host URL
    estflow serve BASE_PATH [--port 8501] [--host 127.0.0.1]
    estflow --version

``PIPELINE`` is ``path/to/file.py[:attr]`` or ``package.module[:attr]``. Mistakes in what the
user gave (an invalid declaration, a missing file, a target holding no pipeline, a bad option)
print one message to stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.pipelines import beam_options
from estflow.pipelines import kfp_compiler
from estflow.pipelines import loader
from estflow.pipelines import local_runner
from estflow.pipelines import submit
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep

__all__ = ["main", "build_parser", "UsageError"]

EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake in the command's input; reported as one message, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``estflow`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"estflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="estflow", description="Declarative ML pipelines on TensorFlow: run one locally "
        "or compile it for Kubeflow Pipelines.")
    parser.add_argument("--version", action="version", version=f"estflow {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_compile(commands)
    _add_run(commands)
    _add_preprocess(commands)
    submit.add_commands(commands, compile_fn=_compile_to)
    _add_serve(commands)
    return parser


def _version() -> str:
    try:
        return metadata.version("estflow")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def _load(target: str) -> loader.LoadedPipeline:
    """Load ``target``, turning the user's mistakes into a :class:`UsageError`."""
    try:
        return loader.load(target)
    except (DslError, DslErrors) as err:
        raise UsageError(f"the pipeline in {target} is invalid: {err}") from None
    except FileNotFoundError as err:
        raise UsageError(f"{err}") from None
    except ModuleNotFoundError as err:
        raise UsageError(f"cannot load {target!r}: {err}; give a path/to/file.py or an "
                         "importable package.module") from None
    except ValueError as err:  # the loader's "no Pipeline / several Pipelines / not a Pipeline"
        raise UsageError(str(err)) from None


# --- estflow compile ---------------------------------------------------------------------------

def _add_compile(commands) -> None:
    cmd = commands.add_parser(
        "compile", help="compile a pipeline to Kubeflow Pipelines v2 IR YAML",
        description="Compile a pipeline to Kubeflow Pipelines v2 IR YAML (one task per step). "
        "Never imports TensorFlow or Beam.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help="path/to/file.py[:attr] or "
                     "package.module[:attr]")
    cmd.add_argument("-o", "--output", required=True, metavar="OUT.yaml",
                     help="the YAML file to write")
    cmd.add_argument("--image", default=kfp_compiler.DEFAULT_IMAGE,
                     help="container image of every task (default: %(default)s)")
    cmd.add_argument("--source-root", default=None, metavar="ROOT",
                     help="default of the source_root pipeline parameter: where the ingest "
                     "task resolves relative data paths (a directory in the image, or "
                     "module:pkg.mod); default: the pipeline module's directory")
    cmd.add_argument("--no-cache", action="store_true",
                     help="disable KFP caching for every task")
    cmd.add_argument("--beam-runner", default=None, metavar="RUNNER",
                     help="Beam runner of the ingest and transform tasks: local (default: "
                     "in-memory in the task's pod), dataflow, flink, spark or portable")
    cmd.add_argument("--beam-options", default="", metavar='"--name=value ..."',
                     help="further Beam options as one string, written with '=' (e.g. "
                     "--beam-options=\"--project=p --region=r --temp_location=gs://b/tmp\"); "
                     "checked for the runner, and the default of "
                     "the beam_options pipeline parameter (override per run with "
                     "estflow submit --param beam_options=...)")
    cmd.set_defaults(handler=_compile)


def _compile(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    loaded = _load(args.pipeline)
    if args.source_root is None and not loaded.importable:
        print(f"estflow compile: note: {args.pipeline} is not an importable module, so the "
              f"source_root parameter defaults to the local directory {loaded.file.parent}, "
              "which the image may not have; pass --source-root", file=sys.stderr)
    caching = dict.fromkeys(kfp_compiler.DEFAULT_CACHING, False) if args.no_cache else None
    try:
        compiled = kfp_compiler.compile_pipeline(
            loaded, args.output, image=args.image, source_root=args.source_root,
            caching=caching, beam_runner=args.beam_runner,
            beam_options=shlex.split(args.beam_options))
    except kfp_compiler.CompileError as err:
        raise UsageError(str(err)) from None
    print(f"Compiled pipeline {loaded.pipeline.name!r} to {compiled.path}: "
          f"{len(compiled.tasks)} tasks ({' -> '.join(compiled.tasks)}), image {args.image}, "
          f"in {time.perf_counter() - start:.2f}s")
    return 0


# --- estflow run: the local runner (estflow.pipelines.local_runner) ----------------------------

def _add_run(commands) -> None:
    cmd = commands.add_parser(
        "run", help="run a pipeline end to end on this machine",
        description="Run every step of a pipeline on this machine, each in its own process "
        "(the same entry points a Kubeflow task runs).")
    cmd.add_argument("pipeline", metavar="PIPELINE", help="path/to/file.py[:attr] or "
                     "package.module[:attr]")
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
    loaded = _load(args.pipeline)
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


def _compile_to(target: str, output: str) -> None:
    """Compile ``target`` to ``output`` with the default image (used by submit/schedule)."""
    try:
        kfp_compiler.compile_pipeline(_load(target), output)
    except kfp_compiler.CompileError as err:
        raise UsageError(str(err)) from None


# --- estflow preprocess: ingest + transform only, one Beam job (estflow.components.preprocess) --

PREPROCESS_MODULE = "estflow.components.preprocess"


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


def _add_preprocess(commands) -> None:
    cmd = commands.add_parser(
        "preprocess", help="run only a pipeline's preprocessing (ingest + transform)",
        description="Read, validate and split the pipeline's data and analyze and transform it "
        "with tf.Transform, in one Beam job, writing what the ingest and transform steps "
        "write. Other options are Beam pipeline options, checked for the runner and passed "
        "through, e.g. --runner dataflow --project P --region R --temp_location gs://B/tmp.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help="path/to/file.py[:attr] or "
                     "package.module[:attr]")
    _preprocess_options(cmd)
    cmd.add_argument("beam_options", nargs=argparse.REMAINDER, metavar="BEAM_OPTION",
                     help="Beam pipeline options (--name=value)")
    cmd.set_defaults(handler=_preprocess)


def _preprocess(args: argparse.Namespace) -> int:
    loaded = _load(args.pipeline)
    own, rest = _PREPROCESS_OWN.parse_known_args(args.beam_options)
    args = argparse.Namespace(**{**vars(args), **vars(own)})  # given after PIPELINE: they win
    try:
        beam = beam_options.build_options(args.runner, rest)
    except beam_options.BeamOptionsError as err:
        raise UsageError(str(err)) from None
    workdir = Path(args.output) if args.output else local_runner.default_workdir(loaded.pipeline)
    options = [("source-root", loaded.local_source_root), ("gzip-level", str(args.gzip_level)),
               ("num-shards", str(args.num_shards))]
    if beam:
        options.append(("beam-options", shlex.join(beam)))
    step = PlannedStep(name="preprocess", module=PREPROCESS_MODULE, inputs=(),
                       outputs=("examples", "transformed"), options=tuple(options),
                       description="ingest + transform in one Beam job")
    print(f"estflow preprocess: pipeline {loaded.pipeline.name!r} on "
          f"{args.runner or 'the local in-memory runner'}, output {workdir}")
    try:
        result = local_runner.run_plan(Plan(loaded.pipeline, (step,)), workdir.resolve())
    except local_runner.StepFailed as err:
        print(f"estflow preprocess: {err}", file=sys.stderr)
        return 1
    for artifact, path in result.artifacts.items():
        print(f"{artifact}: {path}")
    return 0


# --- estflow serve: the TF-Serving-compatible server (estflow.components.serve) ----------------

SERVE_MODULE = "estflow.components.serve"


def _add_serve(commands) -> None:
    cmd = commands.add_parser(
        "serve", help="serve pushed models over TF Serving's REST API",
        description="Serve the models under BASE_PATH (<model_name>/<version>/ SavedModels, as "
        "pushed by a pipeline) over TF Serving's REST API; picks up new versions as they are "
        "pushed.", add_help=True)
    cmd.add_argument("base_path", metavar="BASE_PATH")
    cmd.add_argument("rest", nargs=argparse.REMAINDER,
                     help="server options: --port, --host, --poll-seconds, --max-body-bytes")
    cmd.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.base_path):
        raise UsageError(f"BASE_PATH {args.base_path!r} is not a directory")
    # The server is a component (it imports TensorFlow); this package never imports components,
    # so the command replaces this process with the component's entry point.
    argv = [sys.executable, "-m", SERVE_MODULE, args.base_path, *args.rest]
    os.execv(sys.executable, argv)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
