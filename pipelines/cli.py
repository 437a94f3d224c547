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

The commands are defined in :mod:`estflow.pipelines._cli`, one module per command group; this
module assembles them and runs one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from estflow.pipelines._cli import compilation
from estflow.pipelines._cli import kfp_runs
from estflow.pipelines._cli import local_runs
from estflow.pipelines._cli import serving
from estflow.pipelines._cli.usage import EXIT_USAGE
from estflow.pipelines._cli.usage import UsageError

__all__ = ["main", "build_parser", "UsageError", "EXIT_USAGE"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``estflow`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"estflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    """The ``estflow`` parser; each command's parser has a ``handler(args) -> int``."""
    parser = argparse.ArgumentParser(
        prog="estflow", description="Declarative ML pipelines on TensorFlow: run one locally "
        "or compile it for Kubeflow Pipelines.")
    parser.add_argument("--version", action="version", version=f"estflow {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # In this order in `estflow --help`.
    compilation.add_commands(commands)
    local_runs.add_commands(commands)
    kfp_runs.add_commands(commands)
    serving.add_commands(commands)
    return parser


def _version() -> str:
    try:
        return metadata.version("estflow")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
