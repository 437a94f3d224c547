"""The ``estflow`` command.

::

    estflow init DATA.csv [--label COLUMN] [-o PIPELINE.py]
    estflow compile PIPELINE -o OUT.yaml [--image IMAGE] [--source-root ROOT] [--no-cache]
    estflow run PIPELINE [--workdir DIR] [--workers N] [--no-cache [STEP]] [--resume [RUN]]
                         [--span SPAN]
    estflow backfill PIPELINE --from SPAN --to SPAN
    estflow runs {list [PIPELINE_NAME],show RUN,diff RUN_A RUN_B,prune [--keep N]}
    estflow preprocess PIPELINE [--output DIR] [--runner R] [BEAM_OPTION ...]
    estflow submit PIPELINE --host URL [--experiment NAME] [--param k=v ...]
    estflow schedule PIPELINE --cron "0 3 * * *" --host URL [--name NAME] [--param k=v ...]
    estflow schedules {list,pause,resume,delete} [ID] --host URL
    estflow serve BASE_PATH [--port 8501] [--host 127.0.0.1]
    estflow predict MODEL --input SOURCE --output DEST [--keys K,...] [--format jsonl]
    estflow migrate OLD.py [-o NEW.py] [--strict]
    estflow --version

``PIPELINE`` is ``path/to/file.py[:attr]`` or ``package.module[:attr]``. Mistakes in what the
user gave (an invalid declaration, an error the pipeline file raises, named by ``file:line``, a
missing file, a target holding no pipeline, a local CSV header that does not match the
declaration, a bad option) print one message to stderr and exit with status 2, without a
traceback.

Exit status (``estflow run``'s tells CI whether the model was pushed):

* 0: done; for ``run``, the model was pushed (without a push target: blessed);
* 1: a step failed (its log is named);
* 2: a usage error, as above;
* 3: ``run`` ran every step, but the model was not blessed, so it was not pushed;
* 4: ``run``: the data broke a blocking check (``Pipeline.checks``' anomalies, or a missing
  span): it stopped before training, with every anomaly named, and pushed nothing;
* 130: interrupted (Ctrl-C); ``run`` and ``preprocess`` first stop the running step and say
  what was kept and the command that continues;
* 143, 129: ``run`` or ``preprocess`` stopped by SIGTERM or SIGHUP, as after Ctrl-C;
* 141: the output's reader went away (``estflow runs list | head -1``): no traceback.

The commands are defined in this package, one module per command group; this module assembles
them and runs one:

* :mod:`.init`: ``init`` (a first pipeline for a CSV file; :mod:`.scaffold` writes it);
* :mod:`.compilation`: ``compile``;
* :mod:`.local_runs`: ``run`` and ``preprocess`` (the local runner), :mod:`.backfill`,
  :mod:`.run_history` and :mod:`.run_diff` (``runs``);
* :mod:`.kfp_runs`: ``submit``, ``schedule`` and ``schedules`` (a Kubeflow Pipelines API);
* :mod:`.serving`: ``serve``; :mod:`.prediction`: ``predict``; :mod:`.migration`: ``migrate``;
* :mod:`.usage`: what they share: :class:`~.usage.UsageError` and loading a PIPELINE target.

Each command module has ``add_commands(commands)``, registering its parsers on what
``ArgumentParser.add_subparsers()`` returned; each parser's ``handler(args) -> int`` runs it.
:mod:`.backfill`'s also takes ``main`` (it runs ``estflow run`` once per span): no command module
imports this one, which imports them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from estflow.pipelines.cli.usage import EXIT_FAILED
from estflow.pipelines.cli.usage import EXIT_INTERRUPTED
from estflow.pipelines.cli.usage import EXIT_NOT_PUSHED
from estflow.pipelines.cli.usage import EXIT_USAGE
from estflow.pipelines.cli.usage import UsageError

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left

__all__ = ["main", "build_parser", "UsageError", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_PUSHED",
           "EXIT_INTERRUPTED"]


# Commands whose modules import neither kfp nor the compiler: `estflow run` parses with these
# alone, so a run whose steps are all cached starts in a fraction of a second.
_LOCAL_COMMANDS = ("init", "run", "preprocess", "runs", "backfill")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``estflow`` command; returns the exit status (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else None
    if not argv:
        # No command: the help with the list of commands (argparse alone would print the usage
        # line, which names none), on stderr, exit 2 as for any usage error.
        parser = build_parser()
        parser.exit(EXIT_USAGE, parser.format_help() + "\nestflow: error: give a COMMAND "
                    "(estflow COMMAND --help describes one)\n")
    try:
        args = build_parser(local_only=command in _LOCAL_COMMANDS,
                            compile_only=command == "compile").parse_args(argv)
        status = _handle(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return status
    except BrokenPipeError:
        # The reader went away (`estflow runs diff A B | head`): stop quietly, as a command
        # killed by SIGPIPE does, instead of a traceback and a second one at interpreter exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _handle(args: argparse.Namespace) -> int:
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"estflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"estflow {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build_parser(local_only: bool = False, compile_only: bool = False
                 ) -> argparse.ArgumentParser:
    """The ``estflow`` parser; each command's parser has a ``handler(args) -> int``.
    ``local_only``: only the local commands (init, run, preprocess, runs, backfill), without
    importing kfp.
    ``compile_only``: only ``compile``, with kfp imported without its API client (see
    :mod:`estflow.pipelines.kubeflow.lean`): ``estflow compile`` imports what compiling needs."""
    parser = argparse.ArgumentParser(
        prog="estflow", description="Declarative ML pipelines on TensorFlow: run one locally "
        "or compile it for Kubeflow Pipelines.")
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if compile_only:
        from estflow.pipelines.kubeflow import lean  # noqa: PLC0415

        lean.import_kfp()
        from estflow.pipelines.cli import compilation  # noqa: PLC0415

        compilation.add_commands(commands)
        return parser
    from estflow.pipelines.cli import backfill  # noqa: PLC0415
    from estflow.pipelines.cli import init  # noqa: PLC0415
    from estflow.pipelines.cli import local_runs  # noqa: PLC0415
    from estflow.pipelines.cli import run_history  # noqa: PLC0415

    if local_only:
        init.add_commands(commands)
        local_runs.add_commands(commands)
        backfill.add_commands(commands, main)
        run_history.add_commands(commands)
        return parser
    from estflow.pipelines.cli import compilation  # noqa: PLC0415 (imports kfp)
    from estflow.pipelines.cli import kfp_runs  # noqa: PLC0415
    from estflow.pipelines.cli import migration  # noqa: PLC0415
    from estflow.pipelines.cli import prediction  # noqa: PLC0415
    from estflow.pipelines.cli import serving  # noqa: PLC0415

    # In this order in `estflow --help`.
    init.add_commands(commands)
    compilation.add_commands(commands)
    local_runs.add_commands(commands)
    backfill.add_commands(commands, main)
    run_history.add_commands(commands)
    kfp_runs.add_commands(commands)
    serving.add_commands(commands)
    prediction.add_commands(commands)
    migration.add_commands(commands)
    return parser


class _Version(argparse.Action):
    """argparse's ``version`` action, the version read only when asked for (importing
    importlib.metadata costs ~0.1 s of every command)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):  # noqa: A002 (argparse's)
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"estflow {_version()}\n", sys.stdout)  # noqa: SLF001
        parser.exit()


def _version() -> str:
    from importlib import metadata  # noqa: PLC0415 (~0.1 s; only for --version)

    try:
        return metadata.version("estflow")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
