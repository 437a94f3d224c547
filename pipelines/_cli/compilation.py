"""``estflow compile``: a pipeline to Kubeflow Pipelines v2 IR YAML
(:mod:`estflow.pipelines.kfp_compiler`)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from estflow.pipelines import kfp_compiler
from estflow.pipelines._cli.usage import PIPELINE_HELP
from estflow.pipelines._cli.usage import UsageError
from estflow.pipelines._cli.usage import load_target

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``compile``."""
    cmd = commands.add_parser(
        "compile", help="compile a pipeline to Kubeflow Pipelines v2 IR YAML",
        description="Compile a pipeline to Kubeflow Pipelines v2 IR YAML (one task per step). "
        "Never imports TensorFlow or Beam.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=PIPELINE_HELP)
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
    loaded = load_target(args.pipeline)
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
