"""``estflow predict``: score a table of rows with a pushed model, on Beam.

The command declares a pipeline that only predicts (``Pipeline(predict=BatchPredict(...))``,
checked like any declaration) and runs its one step's entry point
(:data:`estflow.dsl.contracts.PREDICT_ONLY`) in place of this process, as ``estflow serve``
does: this package never imports the components (TensorFlow, Beam). The step runs under
:data:`QUIET_MODULE`, which keeps TensorFlow's C++ start-up logging out of its stderr, as
``estflow run`` shows only a step's own lines. Exit status: 0 done, 1 the
step failed (no model, unreadable source, too many rejected rows, ...), 2 a usage error, 4 the
rows are skewed from the model's training data and ``--fail-on-skew`` was given.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from estflow.dsl.batch import PREDICTION_FORMATS
from estflow.dsl.batch import BatchPredict
from estflow.dsl.contracts import PREDICT_ONLY
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.sources import CsvSource
from estflow.dsl.sources import ParquetSource
from estflow.dsl.sources import TFRecordSource
from estflow.pipelines import beam_options
from estflow.pipelines.cli.usage import UsageError

__all__ = ["add_commands", "prediction_pipeline", "input_format", "QUIET_MODULE"]

QUIET_MODULE = "estflow.components._runtime.quiet"
"""Runs ``python -m MODULE ARGS`` with TensorFlow's C++ start-up logging (which
``TF_CPP_MIN_LOG_LEVEL`` does not reach: XLA's CUDA probe, absl's banner) left out of its
stderr."""

INPUT_FORMATS = ("csv", "tfrecord", "parquet")
_SUFFIXES = (((".csv", ".tsv"), "csv"), ((".parquet", ".pq"), "parquet"),
             ((".tfrecord", ".tfrecords", ".tfr"), "tfrecord"))
_COMPRESSED = (".gz", ".gzip", ".bz2", ".zst", ".deflate")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``predict``."""
    cmd = commands.add_parser(
        "predict", help="score a table of rows with a pushed model (batch prediction on Beam)",
        description="Score every row of SOURCE with MODEL's serving signature in a Beam job: "
        "rows are validated as ingest validates them (bad rows go to DEST/rejected.jsonl with "
        "their reason) and scored in batches, each getting what `estflow serve` answers for "
        "it. DEST is replaced as a whole: predictions-*.<format>, rejected.jsonl, and "
        "predict.json (the summary), written last. Other options are Beam pipeline options, "
        "e.g. --runner dataflow --project P --region R --temp_location gs://B/tmp.")
    cmd.add_argument("model", metavar="MODEL", help="a pushed model <base>/<name> (its latest "
                     "version), one version <base>/<name>/<version>, a SavedModel directory, "
                     "or a run's directory or train/model artifact")
    _options(cmd)  # their values may also follow MODEL: checked once all are read
    cmd.add_argument("beam_options", nargs=argparse.REMAINDER, metavar="BEAM_OPTION",
                     help="Beam pipeline options (--name=value)")
    cmd.set_defaults(handler=_predict)


def _options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--input", metavar="SOURCE", help="(required) CSV, TFRecord or "
                        "Parquet file(s): a path, a glob, gs://, s3://")
    parser.add_argument("--output", metavar="DEST", help="(required) the directory the "
                        "predictions replace (a path, gs://, s3://)")
    parser.add_argument("--keys", default="", metavar="COL[,COL...]",
                        help="input columns copied to every prediction (ids)")
    parser.add_argument("--format", default="jsonl", choices=PREDICTION_FORMATS,
                        help="output format (default: jsonl)")
    parser.add_argument("--signature", default="serving_default",
                        help="serving signature: serving_default (:predict's outputs), "
                        "classify, regress, ... (default: serving_default)")
    parser.add_argument("--input-format", default=None, choices=INPUT_FORMATS,
                        help="the input's format (default: from its file name)")
    parser.add_argument("--delimiter", default=None,
                        help="CSV delimiter (default: ',', a tab for .tsv)")
    parser.add_argument("--max-rejected-fraction", type=float, default=0.01,
                        help="fail when more of the data lines are rejected (default: 0.01)")
    parser.add_argument("--batch-size", type=int, default=8192,
                        help="examples per call of the model (default: 8192)")
    parser.add_argument("--fail-on-skew", action="store_true",
                        help="exit 4 (after publishing the predictions) when the rows are "
                        "skewed from the model's training data past the drift thresholds "
                        "it was trained under (default: a warning per skewed column)")
    parser.add_argument("--runner", default=None, help="local (default: in-memory, "
                        "offline), dataflow, flink, spark or portable")
    return parser


# Re-reads the estflow options among the pass-through arguments (they may follow MODEL).
_OWN = _options(argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS))


def input_format(path: str, declared: str | None) -> str:
    """The input's format: ``declared``, else from the file name (``.csv``, ``.parquet``,
    ``.tfrecord``..., compressed or not).

    Raises:
        UsageError: the name does not tell.
    """
    if declared:
        return declared
    name = path.lower().rstrip("*")
    for suffix in _COMPRESSED:
        name = name.removesuffix(suffix)
    for suffixes, kind in _SUFFIXES:
        if name.endswith(suffixes):
            return kind
    raise UsageError(f"cannot tell the format of --input {path!r} from its name; give "
                     f"--input-format ({', '.join(INPUT_FORMATS)})")


def prediction_pipeline(args: argparse.Namespace) -> Pipeline:
    """The pipeline that only predicts, declared from the command's options.

    Raises:
        UsageError: an option is invalid (as the declaration reports it).
    """
    kind = input_format(args.input, args.input_format)
    try:
        if kind == "csv":
            delimiter = args.delimiter or ("\t" if ".tsv" in args.input.lower() else ",")
            source = CsvSource(args.input, delimiter=delimiter,
                               max_rejected_fraction=args.max_rejected_fraction)
        elif args.delimiter:
            raise UsageError(f"--delimiter is for CSV input, not {kind}")
        elif kind == "parquet":
            source = ParquetSource(args.input, max_rejected_fraction=args.max_rejected_fraction)
        else:
            source = TFRecordSource(args.input, max_rejected_fraction=args.max_rejected_fraction)
        keys = tuple(k.strip() for k in args.keys.split(",") if k.strip())
        predict = BatchPredict(source=source, keys=keys, model=args.model,
                               signature=args.signature, format=args.format,
                               batch_size=args.batch_size, fail_on_skew=args.fail_on_skew)
        return Pipeline(name="predict", predict=predict)
    except (DslError, DslErrors) as err:
        raise UsageError(str(err).replace("`predict.", "`").replace("`source.", "`")) from None


def _predict(args: argparse.Namespace) -> int:
    own, rest = _OWN.parse_known_args(args.beam_options)
    args = argparse.Namespace(**{**vars(args), **vars(own)})  # given after MODEL: they win
    missing = [f"--{name}" for name in ("input", "output") if not getattr(args, name)]
    if missing:
        raise UsageError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                         "required")
    pipeline = prediction_pipeline(args)
    try:
        beam = beam_options.build_options(args.runner, rest)
    except beam_options.BeamOptionsError as err:
        raise UsageError(str(err)) from None
    output = args.output if "://" in args.output else os.path.abspath(args.output)
    argv = [sys.executable, "-m", QUIET_MODULE, PREDICT_ONLY.module, "--spec",
            pipeline.to_json(), "--predictions", output, "--source-root", os.getcwd()]
    if beam:
        argv.append(f"--beam-options={shlex.join(beam)}")
    sys.stdout.flush()
    os.execve(sys.executable, argv, {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ})
    return 0  # not reached
