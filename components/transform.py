"""Transform: analyze the train split and transform both splits with Beam + tf.Transform.

``python -m estflow.components.transform --spec S --examples IN_DIR --transformed OUT_DIR
[BEAM_OPTION ...]``

Output layout (names from :class:`estflow.dsl.contracts.Files`)::

    OUT_DIR/transform_fn/          a TFTransformOutput dir (transform_fn/, transformed_metadata/)
    OUT_DIR/train/part-*.tfrecord.gz   GZIP TFRecords of transformed tf.train.Example
    OUT_DIR/eval/part-*.tfrecord.gz
    OUT_DIR/transform.json         rows per split, "cardinalities" of every categorical
                                   feature (read by train: a contract), vocabulary sizes,
                                   train statistics; written last, only on success

Locally the Beam pipeline runs on an explicit in-memory FnApiRunner: deterministic, offline (no
Prism download), and on few cores faster than multi-process running. Extra arguments are Beam
pipeline options; passing ``--runner=...`` (Dataflow, Flink, Spark) scales the same step out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from estflow.components import _preprocessing
from estflow.components import _runtime
from estflow.dsl import features as f
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

# Quiet TensorFlow's C++ start-up logs before tf.Transform imports it.
_runtime.quiet_tensorflow()
import apache_beam as beam  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import tensorflow_transform as tft  # noqa: E402
import tensorflow_transform.beam as tft_beam  # noqa: E402
from apache_beam.metrics.metric import MetricsFilter  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.runners.portability.fn_api_runner import FnApiRunner  # noqa: E402
from tensorflow_transform.tf_metadata import schema_utils  # noqa: E402
from tfx_bsl.public import tfxio  # noqa: E402

__all__ = ["TransformError", "SHARD_PREFIX", "run", "main"]

SHARD_PREFIX = "part"
"""Transformed shards are ``<split>/part-SSSSS-of-NNNNN.tfrecord.gz`` (readers glob the dir)."""

_METRICS_NAMESPACE = "estflow.transform"
_STATS_FILE = "statistics.json"  # inside the temp dir only, never in an artifact dir


class TransformError(RuntimeError):
    """The transform step cannot run on its inputs (e.g. no examples from ingest)."""


def run(pipeline: Pipeline, examples_dir: str | Path, transformed_dir: str | Path, *,
        beam_options: list[str] | tuple[str, ...] = ()) -> dict:
    """Analyze the train split, transform train and eval, and write the transform_fn.

    Args:
        pipeline: the validated pipeline (raw columns, derive hook, features, label, model).
        examples_dir: the ingest output (``train/`` and ``eval/`` raw tf.Example shards).
        transformed_dir: the output artifact directory (previous outputs are replaced).
        beam_options: Beam pipeline options; without ``--runner`` the pipeline runs on an
            in-memory FnApiRunner.

    Returns:
        The summary also written to ``transform.json``.

    Raises:
        TransformError: a split directory of ``examples_dir`` has no shards.
        ValueError: the derive fn or the declarations cannot build the transform graph.
    """
    progress = _runtime.Progress("transform")
    examples, out = Path(examples_dir), Path(transformed_dir)
    patterns = {split: _input_pattern(examples, name) for split, name in
                (("train", Files.TRAIN_EXAMPLES), ("eval", Files.EVAL_EXAMPLES))}
    preprocessing_fn = _preprocessing.build_preprocessing_fn(pipeline)
    _clear_outputs(out)
    with tempfile.TemporaryDirectory(prefix="estflow-transform-") as tmp:
        progress("building the Beam pipeline (analyze train, transform train + eval)")
        beam_pipeline = _new_beam_pipeline(beam_options)
        with tft_beam.Context(temp_dir=os.path.join(tmp, "tft")):
            _build(beam_pipeline, pipeline, patterns, out, preprocessing_fn, tmp)
            progress("running: analyze + transform")
            result = beam_pipeline.run()
            result.wait_until_finish()
        rows = _row_counts(result)
        statistics = json.loads(Path(tmp, _STATS_FILE).read_text())
    progress(f"wrote {rows['train']} train and {rows['eval']} eval transformed examples; "
             f"transform_fn in {out / Files.TRANSFORM_FN}")
    summary = _summary(pipeline, out, rows, statistics, progress.elapsed)
    _runtime.write_json(out / Files.TRANSFORM_STATS, summary)
    progress(f"done: cardinalities {summary['cardinalities']}")
    return summary


def _input_pattern(examples: Path, split_dir: str) -> str:
    directory = examples / split_dir
    if not directory.is_dir() or not any(p.is_file() for p in directory.iterdir()):
        raise TransformError(f"no example shards in {directory}: expected the output of the "
                             "ingest step there")
    return str(directory / "*")


def _clear_outputs(out: Path) -> None:
    # Replace only what this step writes, so a rerun never mixes old shards with new ones.
    for name in (Files.TRANSFORM_FN, Files.TRANSFORMED_TRAIN, Files.TRANSFORMED_EVAL):
        shutil.rmtree(out / name, ignore_errors=True)
    (out / Files.TRANSFORM_STATS).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def _new_beam_pipeline(beam_options) -> beam.Pipeline:
    options = PipelineOptions(list(beam_options))
    if any(opt.startswith("--runner") for opt in beam_options):
        return beam.Pipeline(options=options)
    # Explicit in-memory runner: Beam's default would first try to download Prism.
    return beam.Pipeline(runner=FnApiRunner(), options=options)


def _build(p: beam.Pipeline, pipeline: Pipeline, patterns: dict[str, str], out: Path,
           preprocessing_fn, tmp: str) -> None:
    """Add every stage to ``p``: read, analyze + transform, encode, write, statistics."""
    schema = schema_utils.schema_from_feature_spec(_preprocessing.raw_feature_spec(pipeline))
    sources = {split: tfxio.TFExampleRecord(pattern, schema=schema)
               for split, pattern in patterns.items()}
    raw = {split: p | f"Read{split.title()}" >> io.BeamSource()
           for split, io in sources.items()}
    train_dataset, transform_fn = (
        (raw["train"], sources["train"].TensorAdapterConfig())
        | "AnalyzeAndTransformTrain" >> tft_beam.AnalyzeAndTransformDataset(
            preprocessing_fn, output_record_batches=True))
    eval_dataset = (
        ((raw["eval"], sources["eval"].TensorAdapterConfig()), transform_fn)
        | "TransformEval" >> tft_beam.TransformDataset(output_record_batches=True))
    _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(
        str(out / Files.TRANSFORM_FN))
    for split, dataset, name in (("train", train_dataset, Files.TRANSFORMED_TRAIN),
                                 ("eval", eval_dataset, Files.TRANSFORMED_EVAL)):
        _ = (dataset
             | f"Encode{split.title()}" >> tft_beam.EncodeTransformedDataset()
             | f"Count{split.title()}" >> beam.ParDo(_CountRows(split))
             | f"Write{split.title()}" >> beam.io.WriteToTFRecord(
                 str(out / name / SHARD_PREFIX), file_name_suffix=".tfrecord.gz"))
    _add_statistics(pipeline, raw["train"], train_dataset[0], os.path.join(tmp, _STATS_FILE))


class _CountRows(beam.DoFn):
    """Passes elements through, counting them in a Beam metric read after the run."""

    def __init__(self, split: str) -> None:
        self._counter = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, split)

    def process(self, element):
        self._counter.inc()
        yield element


def _row_counts(result) -> dict[str, int]:
    counters = result.metrics().query(MetricsFilter().with_namespace(_METRICS_NAMESPACE))
    rows = {"train": 0, "eval": 0}
    for counter in counters["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        rows[counter.key.metric.name] = int(value)
    return rows


def _add_statistics(pipeline: Pipeline, raw_train, transformed_train, path: str) -> None:
    """Train statistics: numeric raw columns (present values) and the transformed label."""
    numeric = [c.name for c in pipeline.raw_columns() if c.dtype in ("float", "int")]
    raw_stats = raw_train | "RawStats" >> beam.CombineGlobally(_ColumnStats(numeric))
    label_stats = (transformed_train
                   | "TransformedBatches" >> beam.Map(lambda element: element[0])
                   | "LabelStats" >> beam.CombineGlobally(_ColumnStats([pipeline.label.name])))
    _ = (raw_stats
         | "JoinStats" >> beam.Map(
             lambda raw, label: json.dumps({"raw_numeric": raw, "label": label}),
             label=beam.pvalue.AsSingleton(label_stats))
         | "WriteStats" >> beam.io.WriteToText(path, shard_name_template=""))


class _ColumnStats(beam.CombineFn):
    """count / missing / min / max / mean of numeric columns of Arrow RecordBatches.

    Raw columns arrive as list arrays (a missing cell is an empty or null list); the
    accumulator is ``{name: [present_rows, missing_rows, sum, min, max]}``.
    """

    def __init__(self, names: list[str]) -> None:
        self._names = names

    def create_accumulator(self) -> dict:
        return {name: [0, 0, 0.0, float("inf"), float("-inf")] for name in self._names}

    def add_input(self, acc: dict, batch: pa.RecordBatch) -> dict:
        for name in self._names:
            column = batch.column(batch.schema.get_field_index(name))
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                present = pc.fill_null(pc.greater(pc.list_value_length(column), 0), False)
                column = pc.list_flatten(column)
                rows = pc.sum(present).as_py() or 0
            else:
                rows = len(column) - column.null_count
            stats = acc[name]
            stats[0] += rows
            stats[1] += batch.num_rows - rows
            if len(column) - column.null_count:
                low, high = pc.min_max(column).values()
                stats[2] += float(pc.sum(column).as_py())
                stats[3] = min(stats[3], float(low.as_py()))
                stats[4] = max(stats[4], float(high.as_py()))
        return acc

    def merge_accumulators(self, accumulators) -> dict:
        merged = self.create_accumulator()
        for acc in accumulators:
            for name, (rows, missing, total, low, high) in acc.items():
                m = merged[name]
                merged[name] = [m[0] + rows, m[1] + missing, m[2] + total, min(m[3], low),
                                max(m[4], high)]
        return merged

    def extract_output(self, acc: dict) -> dict:
        return {name: {"count": rows, "missing": missing,
                       "min": low if rows else None, "max": high if rows else None,
                       "mean": total / rows if rows else None}
                for name, (rows, missing, total, low, high) in acc.items()}


def _summary(pipeline: Pipeline, out: Path, rows: dict, statistics: dict,
             elapsed: float) -> dict:
    output = tft.TFTransformOutput(str(out / Files.TRANSFORM_FN))
    vocab_sizes = {feat.name: int(output.vocabulary_size_by_name(feat.name))
                   for feat in pipeline.features if isinstance(feat, f.CategoricalVocab)}
    cardinalities = {}
    for feat in pipeline.features:
        if isinstance(feat, f.CategoricalVocab):
            cardinalities[feat.name] = vocab_sizes[feat.name] + feat.num_oov_buckets
        elif isinstance(feat, f.CATEGORICAL_KINDS):
            cardinalities[feat.name] = int(feat.cardinality)
    spec = output.transformed_feature_spec()
    return {
        "rows": rows,
        "cardinalities": cardinalities,
        "vocabulary_sizes": vocab_sizes,
        "outputs": {name: spec[name].dtype.name for name in sorted(spec)},
        "label": pipeline.label.name,
        "weight_column": getattr(pipeline.model, "weight_column", None),
        "statistics": statistics,
        "elapsed_s": round(elapsed, 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.transform --spec S --examples IN
    --transformed OUT [BEAM_OPTION ...]``."""
    parser = argparse.ArgumentParser(prog="estflow.components.transform", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="pipeline spec: JSON file path or text")
    parser.add_argument("--examples", required=True, help="ingest output directory")
    parser.add_argument("--transformed", required=True, help="output directory")
    args, beam_options = parser.parse_known_args(argv)
    pipeline = _runtime.load_pipeline(args.spec)
    try:
        run(pipeline, args.examples, args.transformed, beam_options=beam_options)
    except TransformError as err:
        print(f"[transform] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


def _main_and_exit() -> None:
    """Run :func:`main`, then leave with ``os._exit``.

    Beam + tf.Transform can segfault in interpreter teardown after all work is done
    (DESIGN.md). Every output is written and closed before ``main`` returns, so skipping the
    teardown loses nothing and keeps a healthy run from exiting with a crash code.
    """
    try:
        code = main()
    except SystemExit as exit_:  # argparse errors and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then exit without teardown
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _main_and_exit()
