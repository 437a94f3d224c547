"""``estflow init DATA.csv``: write a first pipeline for a CSV file, from its header and a sample
of its rows (:mod:`estflow.pipelines.cli.scaffold`), that ``estflow run`` takes as it is.

Imports neither TensorFlow nor Beam (nor kfp): it reads the file with the standard library.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.pipeline import Pipeline
from estflow.pipelines import data_check
from estflow.pipelines.cli import scaffold
from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import positive_int

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``init``."""
    cmd = commands.add_parser(
        "init", help="write a first pipeline for a CSV file, from its header and rows",
        description="Write a first pipeline for a CSV file: read its header and a sample of its "
        "rows, infer each column's type (int, float, string), its missing cells and their "
        "tokens (\"\", NA, N/A, null, ?, ...), and declare a feature per usable column "
        "(Numeric with z_score for numbers, CategoricalVocab for strings; the sample's median, "
        "or \"\", as the default of a column with missing cells), the label (a string label "
        "with its class names, an int 0/1 label, a float one: a classifier or a regressor), "
        "the CSV source (column_na_values where a column's missing tokens are not the "
        "default), a TrainSpec and a PushTarget. The file is commented, column by column; "
        "`estflow run` takes it as it is. It never overwrites a file.")
    cmd.add_argument("data", metavar="DATA.csv",
                     help="a CSV file with a header row (.gz, .bz2, .xz: compressed)")
    cmd.add_argument("--label", metavar="COLUMN",
                     help="the label column (default: a column named label, target, class, y "
                     "or outcome, else the last column)")
    cmd.add_argument("-o", "--output", metavar="PIPELINE.py",
                     help="the pipeline file to write (default: DATA's name with .py, in the "
                     "current directory); never overwritten")
    cmd.add_argument("--name", metavar="NAME",
                     help="the pipeline's name (default: from DATA's name); the pushed model "
                     "is named after it")
    cmd.add_argument("--max-steps", type=positive_int, metavar="N",
                     help="TrainSpec.max_steps (default: about 30 passes over the training "
                     "split, at least 200)")
    cmd.add_argument("--delimiter", metavar="CHAR",
                     help="the field delimiter (default: the one of , ; TAB | that splits the "
                     "header most)")
    cmd.add_argument("--sample-rows", type=positive_int, default=scaffold.SAMPLE_ROWS,
                     metavar="N", help="read at most this many rows (default: %(default)s)")
    cmd.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    data = Path(args.data)
    output = Path(args.output) if args.output else Path(data.name.split(".")[0] + ".py")
    if output.suffix != ".py":
        raise UsageError(f"-o {args.output}: expected a .py file (estflow run loads it)")
    if output.exists() or output.is_symlink():
        raise UsageError(f"{output} exists: estflow init never overwrites a file; remove it or "
                         "give another with -o PIPELINE.py")
    if not output.parent.is_dir():
        raise UsageError(f"-o {args.output}: no such directory: {output.parent}")
    delimiter = args.delimiter
    if delimiter is not None:
        delimiter = {"\\t": "\t", "TAB": "\t", "tab": "\t"}.get(delimiter, delimiter)
        if len(delimiter) != 1:
            raise UsageError(f"--delimiter {args.delimiter!r}: expected one character")
    if args.name:
        try:
            _checks.pipeline_name(args.name, "--name")
        except DslError as err:
            raise UsageError(str(err)) from None
    try:
        profile = scaffold.profile_csv(data, delimiter, args.sample_rows)
        proposal = scaffold.propose(profile, args.label, args.name or output.stem,
                                    args.max_steps)
    except scaffold.ScaffoldError as err:
        raise UsageError(str(err)) from None
    source = os.path.relpath(data.resolve(), output.resolve().parent).replace(os.sep, "/")
    text = scaffold.render(proposal, source, _command(args), output.name)
    _check(text, output)
    try:
        with open(output, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{output} exists: estflow init never overwrites a file") from None
    _report(proposal, output)
    return 0


def _command(args: argparse.Namespace) -> str:
    """The command line, as the file's docstring records it."""
    argv = ["estflow", "init", args.data]
    for option, value in (("--label", args.label), ("-o", args.output), ("--name", args.name),
                          ("--max-steps", args.max_steps), ("--delimiter", args.delimiter)):
        if value is not None:
            argv += [option, str(value)]
    if args.sample_rows != scaffold.SAMPLE_ROWS:
        argv += ["--sample-rows", str(args.sample_rows)]
    return shlex.join(argv)


def _check(text: str, output: Path) -> None:
    """The file must declare a valid pipeline whose CSV header matches (a bug otherwise)."""
    namespace: dict = {"__name__": "estflow_init_check", "__file__": str(output.resolve())}
    try:
        exec(compile(text, str(output), "exec"), namespace)  # noqa: S102 (our own text)
        (pipeline,) = [v for v in namespace.values() if isinstance(v, Pipeline)]
        data_check.check_local_source(pipeline, str(output.resolve().parent))
    except (DslError, DslErrors, SyntaxError, ValueError) as err:
        raise RuntimeError(f"estflow init wrote a pipeline that does not load ({err}); "
                           f"please report it, with this file:\n{text}") from err


def _report(proposal: scaffold.Proposal, output: Path) -> None:
    p, label = proposal.profile, proposal.label
    rows = f"{p.rows:,} rows" + ("" if p.complete else " (a sample: --sample-rows)")
    print(f"estflow init: wrote {output} from {p.path} ({rows})")
    if label.classes:
        shown = ", ".join(label.classes[:6]) + (", ..." if len(label.classes) > 6 else "")
        kind = f"{label.n_classes} classes: {shown}"
    elif label.kind == "regression":
        kind = f"{label.column.dtype}, regression"
    else:
        kind = f"class ids 0..{label.n_classes - 1}"
    how = "" if label.chosen_by == "--label" else f" ({label.chosen_by}; --label picks another)"
    print(f"  label    {label.column.name}: {kind}{how}")
    for f in proposal.features:
        missing = f", {f.column.missing} missing -> default {f.default!r}" if f.column.missing \
            else ""
        print(f"  feature  {f.column.name}: {f.column.dtype}, {f.kind}{missing}")
    for f in proposal.left_out:
        print(f"  left out {f.column.name}: {f.reason}")
    if proposal.column_na_values:
        shown = "; ".join(f"{k}: {', '.join(map(repr, v))}"
                          for k, v in proposal.column_na_values.items())
        print(f"  missing tokens (column_na_values): {shown}")
    if proposal.rejected:
        print(f"  {proposal.rejected} of the {p.rows} rows read will be rejected at ingest "
              "(no label, or another number of fields)")
    print(f"Next: estflow run {shlex.quote(str(output))}")
