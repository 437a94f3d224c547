"""``estflow serve``: the TF-Serving-compatible REST server over pushed models
(:data:`estflow.dsl.contracts.SERVE_MODULE`, with the options of
:data:`estflow.dsl.contracts.SERVE_OPTIONS`, which the component's parser is built from too)."""

from __future__ import annotations

import argparse
import os
import sys

from estflow.dsl.contracts import SERVE_MODULE
from estflow.dsl.contracts import SERVE_OPTIONS
from estflow.dsl.contracts import add_options
from estflow.pipelines.cli.usage import UsageError

__all__ = ["add_commands"]

def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``serve``."""
    cmd = commands.add_parser(
        "serve", help="serve pushed models over TF Serving's REST API",
        description="Serve the models under BASE_PATH (<model_name>/<version>/ SavedModels, as "
        "pushed by a pipeline) over TF Serving's REST API; picks up new versions as they are "
        "pushed.", add_help=True)
    cmd.add_argument("base_path", metavar="BASE_PATH", nargs="?",
                     help="push base path: BASE_PATH/<model_name>/<integer version>/ (one "
                     "model's folder, BASE_PATH/<integer version>/, is served as that model; "
                     "or --model-base-path or --model-config-file instead)")
    add_options(cmd, SERVE_OPTIONS)
    cmd.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    # a bucket (gs://, s3://) is checked by the server, which reads it with the step's clients
    given = [v for v in (args.base_path, args.model_base_path, args.model_config_file) if v]
    if len(given) != 1:
        raise UsageError("give one of BASE_PATH, --model-base-path (with --model-name) or "
                         f"--model-config-file ({len(given)} given)")
    if args.base_path and not args.base_path.startswith(("gs://", "s3://")) \
            and not os.path.isdir(args.base_path):
        raise UsageError(f"BASE_PATH {args.base_path!r} is not a directory")
    options = []
    for option in SERVE_OPTIONS:
        value = getattr(args, option.flag.replace("-", "_"))
        if value is not None:
            options += [f"--{option.flag}", str(value)]
    # The server is a component (it imports TensorFlow); this package never imports components,
    # so the command replaces this process with the component's entry point, which binds the
    # port first (a busy port fails at once) and filters TensorFlow's start-up logging.
    argv = [sys.executable, "-m", SERVE_MODULE, *([args.base_path] if args.base_path else []),
            *options]
    os.execve(sys.executable, argv, {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ})
    return 0  # not reached
