"""``estflow migrate``: rewrite a tf.estimator program (TF <= 2.15) into an estflow one
(:mod:`estflow.pipelines.migrate.codemod`)."""

from __future__ import annotations

import argparse
import os
import sys

from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.migrate import codemod as migrate

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``migrate``."""
    cmd = commands.add_parser(
        "migrate", help="rewrite a tf.estimator program into an estflow one",
        description="Rewrite a tf.estimator program (TensorFlow <= 2.15) to run on estflow's "
        "Estimator engine: imports, tf.estimator.* and tf.feature_column.* names, Keras 3 "
        "(legacy optimizers, tf.compat.v1.layers), TF 1 learning-rate decays, and the TF "
        "2.15-only workarounds. Prints a report of what changed and what could not be migrated, "
        "with OLD.py's line numbers. Without -o the migrated program goes to stdout and the report to "
        "stderr.")
    cmd.add_argument("program", metavar="OLD.py")
    cmd.add_argument("-o", "--output", metavar="NEW.py",
                     help="write the migrated program here (may be OLD.py itself)")
    cmd.add_argument("--strict", action="store_true",
                     help="exit with status 1 when something could not be migrated")
    cmd.set_defaults(handler=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    if not os.path.isfile(args.program):
        raise UsageError(f"{args.program!r} is not a file")
    try:
        with open(args.program, encoding="utf-8") as f:
            text = f.read()
        migration = migrate.migrate_source(text, filename=args.program)
    except SyntaxError as err:
        raise UsageError(f"{args.program} is not valid Python: {err}") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{args.program} is not UTF-8 text: {err}") from None
    name = args.program + (f" -> {args.output}" if args.output else "")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(migration.source)
        sys.stdout.write(migration.report(name))
    else:
        sys.stdout.write(migration.source)
        sys.stderr.write(migration.report(name))
    return 1 if args.strict and migration.unresolved else 0
