"""Batch prediction: score every row of a source with a model's serving signature, on Beam.

``python -m estflow.components.predict --spec S --predictions DIR [--pushed DIR]
[--source-root ROOT] [--beam-options "OPTS"] [BEAM_OPTION ...]``

The spec's ``Pipeline.predict`` (a :class:`~estflow.dsl.BatchPredict`) says what to score and
where the predictions go. The model is the one the push step published (``--pushed``: its
``push.json``; or the version already serving the same model, which push did not push
again; when the model was not blessed the step is skipped, writing ``predict.json`` =
``{"skipped": true, ...}``), or, in a pipeline that only predicts (and ``estflow predict``), the
one ``predict.model`` names: a pushed model's latest version, one version, a SavedModel or a
run's export.

Rows are read and validated by the ingest step's readers, against the model's raw features
(``estflow_raw_features.json`` in the export) plus the key columns: a row that does not fit is
written to ``rejected.jsonl`` with its file, line and reason, and each CSV file's lines are
accounted for as ingest accounts for them (read = header + kept + rejected + blank). Kept
rows are encoded into the same raw ``tf.Example`` bytes ingest writes and scored by the
signature in batches (:mod:`estflow.components.predict.scoring`), so a row scored here gets
the outputs the REST server answers for it. Output (names from :class:`~estflow.dsl.contracts.
Files`), replacing the output directory as a whole (:mod:`estflow.components.predict.sinks`)::

    OUT/predictions-SSSSS-of-NNNNN.<jsonl|csv|parquet|tfrecord.gz>   one shard per bundle
    OUT/rejected.jsonl     {"file", "line", "row", "reason"} per rejected row
    OUT/predict.json       the summary (rows scored and rejected, throughput, line accounting,
                           the model, the files), written last: no predict.json, no output

``OUT`` is ``predict.output``, else ``--predictions``; with an ``output`` of its own, the
summary is also written to ``--predictions``. More than ``source.max_rejected_fraction`` of
the data lines rejected fails the step: then only ``rejected.jsonl`` is published.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils import shared

from estflow.components._io.jsonfile import read_json
from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._sources import registry as sources
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import empty_chunk_stats
from estflow.components._sources.chunks import merge_chunk_stats
from estflow.components._sources.report import IngestError
from estflow.components._sources.report import check_summary
from estflow.components._sources.report import summarize
from estflow.components.predict.formats import FormatError
from estflow.components.predict.formats import formatter_for
from estflow.components.predict.job import Merge
from estflow.components.predict.job import ScoreAndWrite
from estflow.components.predict.job import run_job
from estflow.components.predict.model import ModelError
from estflow.components.predict.model import describe_model
from estflow.components.predict.model import resolve_model
from estflow.components.predict.scoring import load_model
from estflow.components.predict.sinks import OutputDir
from estflow.components.predict.sinks import OutputError
from estflow.dsl import sources as s
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import PREDICT_ONLY
from estflow.dsl.contracts import Files
from estflow.dsl.features import Column
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.specs import Split

__all__ = ["PredictError", "ScoringSchema", "run", "main"]

_KEY_DTYPES = (("float", pa.types.is_floating), ("int", pa.types.is_integer))
_ARROW_KEYS = {"float": pa.float32(), "int": pa.int64(), "string": pa.string()}


class PredictError(RuntimeError):
    """Batch prediction cannot run as declared (model, source, output, too many bad rows)."""


@dataclasses.dataclass(frozen=True)
class _NoLabel:
    dtype: None = None
    column: None = None


@dataclasses.dataclass(frozen=True)
class ScoringSchema:
    """What ingest's readers read a pipeline for, when scoring: the source and the raw columns
    (the model's raw features, then the keys no feature is). Nothing is trained: no label, and
    one split nobody uses (ingest's summary wants one)."""

    source: s.Source
    columns: tuple[Column, ...]
    label: _NoLabel = _NoLabel()
    split: Split = Split()

    def raw_columns(self) -> tuple[Column, ...]:
        return self.columns


def _key_columns(source, files: list[str], keys: tuple[str, ...],
                 model_columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The key columns that are not model features: text, or a Parquet column's number type
    (a key may be missing in a row: it is then null in the output)."""
    known = {c.name for c in model_columns}
    types = {}
    if isinstance(source, s.ParquetSource) and files:
        with FileSystems.open(files[0], compression_type=CompressionTypes.UNCOMPRESSED) as f:
            schema = pq.read_schema(f)
        types = {name: schema.field(name).type for name in keys if name in schema.names}
    columns = []
    for name in keys:
        if name in known:
            continue
        dtype = next((d for d, test in _KEY_DTYPES if name in types and test(types[name])),
                     "string")
        columns.append(Column(name, dtype, {"float": 0.0, "int": 0, "string": ""}[dtype]))
    return tuple(columns)


def _skip(pipeline: Pipeline, pushed: dict, predictions_dir: str,
          progress: entry.Progress) -> dict:
    reasons = pushed.get("reasons") or ["the push step pushed nothing"]
    result = {"skipped": True, "reason": "the model was not pushed: " + "; ".join(reasons),
              "model_name": pushed.get("model_name")}
    write_json(FileSystems.join(predictions_dir, Files.PREDICT_RESULT), result)
    progress(f"skipped: {result['reason']}")
    return result


def _summary(schema: ScoringSchema, files: list[str], stats: dict, model, spec,
             dest: str, seconds: float) -> dict:
    """Ingest's summary of what was read (line accounting, rejects, column statistics),
    without its splits, plus what was scored, how fast, with which model, and where."""
    summary = summarize(schema, files, stats, seconds)
    for name in (*schema.split.names(), "splits", "split"):
        summary.pop(name, None)
    scored = int(stats["scored"])
    return {**summary, "complete": True, "scored": scored,
            "rows_per_second": round(scored / seconds, 1) if seconds else None,
            "model": {"path": model.path, "version": model.version,
                      "signature": model.signature},
            "output": dest, "format": spec.format, "keys": list(spec.keys)}


def run(pipeline: Pipeline, predictions_dir: str, *, pushed_dir: str | None = None,
        source_root: str | None = None, beam_options=()) -> dict:
    """Score ``pipeline.predict``'s source and publish the predictions.

    Args:
        pipeline: the validated pipeline (its ``predict``).
        predictions_dir: the step's output artifact directory (the summary; the predictions
            too unless ``predict.output`` names another place).
        pushed_dir: the push step's output (None: the model ``predict.model`` names).
        source_root: where relative source paths resolve (default: the working directory).
        beam_options: Beam pipeline options (default: the in-memory FnApiRunner).

    Returns:
        The summary written to ``predict.json``.

    Raises:
        PredictError: the model, the source or the output cannot be used, or more than
            ``source.max_rejected_fraction`` of the data lines were rejected.
    """
    progress = entry.Progress("batch_predict")
    spec = pipeline.predict
    ref = spec.model
    if pushed_dir is not None:
        pushed = read_json(FileSystems.join(pushed_dir, Files.PUSH_RESULT))
        # Blessed and pushed now, or already served (the same model, pushed before).
        if not (pushed.get("pushed", False) or pushed.get("already_served", False)):
            return _skip(pipeline, pushed, predictions_dir, progress)
        ref = pushed["path"]
    handle = shared.Shared()
    try:
        resolved = resolve_model(ref)
        # Held until the job ends: in-process workers reuse it (Shared keeps weak references).
        loaded = load_model(handle, resolved.path)
        model = describe_model(resolved, spec.signature, loaded)
        files = sources.source_files(spec.source, str(source_root or "."))
        columns = model.columns + _key_columns(spec.source, files, spec.keys, model.columns)
        schema = ScoringSchema(spec.source, columns)
        sources.check_source(schema, files)
        dtypes = {c.name: c.dtype for c in columns}
        formatter = formatter_for(spec.format, tuple(
            (name, _ARROW_KEYS[dtypes[name]]) for name in spec.keys), model.outputs)
        dest = spec.output or predictions_dir
        output = OutputDir(dest)
        for stale in output.prepare():
            progress(f"removed {stale} (left by a batch prediction killed over an hour ago)")
    except (ModelError, SourceError, FormatError, OutputError) as err:
        raise PredictError(str(err)) from None
    version = f" version {model.version}" if model.version is not None else ""
    progress(f"scoring {type(spec.source).__name__} {', '.join(files) or 'BigQuery'} with "
             f"{model.path}{version} ({model.signature}), {spec.format} to {output.dest}")
    beam_pipeline = _beam.new_pipeline(beam_options)
    merge = Merge(functools.partial(empty_chunk_stats, schema), merge_chunk_stats)
    _ = beam_pipeline | "BatchPredict" >> ScoreAndWrite(
        sources.ReadSource(schema, files, row_hashes=False), merge, model, spec.keys, formatter,
        spec.batch_size, output, handle)
    start = time.monotonic()
    try:
        manifest, stats = run_job(beam_pipeline, output)
    except SourceError as err:  # a file that cannot be read (Beam adds the stage's name)
        raise PredictError(re.sub(r" \[while running '[^]]*'\]", "", str(err))) from None
    summary = _summary(schema, files, stats, model, spec, output.dest,
                       time.monotonic() - start)
    try:
        check_summary(schema, summary, FileSystems.join(output.dest, Files.REJECTED))
    except IngestError as err:
        output.publish(manifest, formatter.extension, None)
        raise PredictError(f"{err}; nothing else was published") from None
    summary["output_files"] = output.publish(manifest, formatter.extension, summary)
    if os.path.normpath(output.dest) != os.path.normpath(str(predictions_dir)):
        write_json(FileSystems.join(predictions_dir, Files.PREDICT_RESULT), summary)
    for line in summary_lines(summary):
        progress(line)
    return summary


def summary_lines(summary: dict) -> list[str]:
    """What the step prints at its end."""
    lines = summary["lines"]
    rate = summary["rows_per_second"]
    out = [f"scored {summary['scored']} rows, rejected {summary['rejected']} "
           f"({lines['read']} lines read: {lines['header']} header, {lines['kept']} kept, "
           f"{lines['rejected']} rejected, {lines['blank']} blank), "
           f"{rate:,.0f} rows/s" if rate else "scored 0 rows"]
    if summary["rejected_by_reason"]:
        out.append("rejected by reason: " + ", ".join(
            f"{k} {v}" for k, v in summary["rejected_by_reason"].items()))
    out.append(f"predictions: {summary['output']} ({len(summary['output_files'])} "
               f"{summary['format']} file(s), {Files.REJECTED}, {Files.PREDICT_RESULT})")
    return out


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the contract row this run is: after push (``--pushed``) or alone."""
    after_push = any(a == "--pushed" or a.startswith("--pushed=") for a in argv)
    return entry.step_parser(BATCH_PREDICT if after_push else PREDICT_ONLY, __doc__)


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = _parser(argv).parse_known_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    _beam.freeze_imports()
    root = entry.resolve_source_root(args.source_root)
    try:
        io = _beam.resolve_io(args, _beam.split_options(extra, args.beam_options),
                              ("predictions",), ("predictions",), os.environ)
        run(pipeline, io.locations["predictions"], pushed_dir=getattr(args, "pushed", None),
            source_root=str(root), beam_options=io.options)
    except (PredictError, _beam.BeamLocationError) as err:
        print(f"[batch_predict] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    _beam.main_and_exit(main)
