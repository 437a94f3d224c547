"""The batch prediction step: find the model, check the source and the output on the driver,
run the Beam job, then publish the predictions and the summary.

:func:`run` is what ``python -m estflow.components.predict`` calls, and tests call directly.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils import shared

from estflow.components._io import storage
from estflow.components._io.jsonfile import read_json
from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components._sources import read as sources
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import empty_chunk_stats
from estflow.components._sources.chunks import merge_chunk_stats
from estflow.components._sources.report import IngestError
from estflow.components._sources.report import check_summary
from estflow.components._statistics import report as data_report
from estflow.components._statistics.statistics import read_statistics
from estflow.components.predict import skew as _skew
from estflow.components.predict.formats import FormatError
from estflow.components.predict.formats import Formatter
from estflow.components.predict.formats import formatter_for
from estflow.components.predict.job import JobFiles
from estflow.components.predict.job import Merge
from estflow.components.predict.job import ScoreAndWrite
from estflow.components.predict.job import run_job
from estflow.components.predict.model import ModelError
from estflow.components.predict.model import ModelInfo
from estflow.components.predict.model import describe_model
from estflow.components.predict.model import resolve_model
from estflow.components.predict.schema import ScoringSchema
from estflow.components.predict.schema import arrow_keys
from estflow.components.predict.schema import key_columns
from estflow.components.predict.scoring import load_model
from estflow.components.predict.sinks import OutputDir
from estflow.components.predict.sinks import OutputError
from estflow.components.predict.summary import summarize
from estflow.components.predict.summary import summary_lines
from estflow.dsl.batch import BatchPredict
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.sources import CsvSource

__all__ = ["PredictError", "SkewError", "run"]


class PredictError(RuntimeError):
    """Batch prediction cannot run as declared (model, source, output, too many bad rows)."""


class SkewError(PredictError):
    """The scored rows are skewed past a threshold and ``fail_on_skew`` is declared."""


@dataclasses.dataclass(frozen=True)
class _Job:
    """What the Beam job is given, checked on the driver before it starts."""

    model: ModelInfo
    # The loaded model, held until the job ends: in-process workers reuse it (Shared keeps
    # weak references).
    loaded: object
    files: list[str]
    schema: ScoringSchema
    formatter: Formatter
    output: OutputDir


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
    # A bucket model is downloaded by this process and by each of Beam's workers; Beam ends
    # its workers without their exit handlers: the downloads go in one folder, removed here.
    with storage.downloads_folder():
        return _scored(pipeline, predictions_dir, pushed_dir, source_root, beam_options)


def _scored(pipeline: Pipeline, predictions_dir: str, pushed_dir: str | None,
            source_root: str | None, beam_options) -> dict:
    progress = entry.Progress("batch_predict")
    beam_options = _filesystem_options(beam_options)
    spec = pipeline.predict
    ref = spec.model
    if pushed_dir is not None:
        pushed = read_json(FileSystems.join(pushed_dir, Files.PUSH_RESULT))
        # Blessed and pushed now, or already served (the same model, pushed before).
        if not (pushed.get("pushed", False) or pushed.get("already_served", False)):
            return _skip(pushed, predictions_dir, progress)
        ref = pushed["path"]
    handle = shared.Shared()
    job = _prepare(spec, ref, handle, spec.output or predictions_dir, source_root, progress)
    version = f" version {job.model.version}" if job.model.version is not None else ""
    progress(f"scoring {type(spec.source).__name__} {', '.join(job.files) or 'BigQuery'} with "
             f"{job.model.path}{version} ({job.model.signature}), {spec.format} to "
             f"{job.output.dest}")
    baseline = _skew.baseline_of(job.model.path, job.schema.columns)
    if baseline is None:
        progress("skew: not checked (the model carries no training statistics)")
    reporter = _progress.Reporter(
        progress, _progress.estimate_rows(type(spec.source).__name__.removesuffix("Source"),
                                          job.files),
        estimated=True, local=_beam.is_local(beam_options))
    manifest, summary = _score(job, spec, handle, beam_options, baseline, reporter)
    serving = _skew_check(job, baseline, pipeline.checks, summary, progress)
    _publish(job, manifest, summary, predictions_dir)
    if serving is not None:
        _skew.write_serving(serving, predictions_dir)
    for line in summary_lines(summary):
        progress(line)
    skewed = sorted({a["column"] for a in summary.get("skew", {}).get("anomalies", ())})
    if spec.fail_on_skew and skewed:
        raise SkewError(f"the scored rows are skewed from the model's training data in "
                        f"{', '.join(map(repr, skewed))} (fail_on_skew; the predictions were "
                        f"published, the distances are in {Files.PREDICT_RESULT})")
    return summary


def _skew_check(job: _Job, baseline, checks, summary: dict, progress) -> object:
    """The scored rows' statistics (None: not computed), their skew recorded in ``summary``
    and each anomaly printed as a warning."""
    if baseline is None:
        return None
    path = JobFiles.of(job.output).statistics
    serving = read_statistics(path)
    FileSystems.delete([path])
    thresholds, origin = _skew.thresholds_of(checks, job.model.path)
    summary["skew"] = _skew.check(serving, baseline, thresholds)
    summary["skew"]["thresholds"] = {"values": thresholds, "from": origin}
    progress(f"skew: against the training data of {baseline.path}; thresholds: {origin}")
    for row in summary["skew"]["anomalies"]:
        progress("warning: skew: " + data_report.line(row))
    return serving


def _filesystem_options(beam_options) -> list[str]:
    """``beam_options`` with the S3 endpoint the environment names (``AWS_ENDPOINT_URL_S3``,
    ``AWS_ENDPOINT_URL``, KFP's ``S3_ENDPOINT``) unless they name one, given to Beam's
    filesystems now: the driver checks and publishes an ``s3://`` output outside the job's
    pipeline, and Beam's S3 filesystem works only once options are set, and never reads
    ``S3_ENDPOINT`` itself."""
    options = list(beam_options)
    endpoint = storage.s3_endpoint()
    if endpoint and not any(o.startswith("--s3_endpoint_url") for o in options):
        options.append(f"--s3_endpoint_url={endpoint}")
    FileSystems.set_options(PipelineOptions(options))
    return options


def _skip(pushed: dict, predictions_dir: str, progress: entry.Progress) -> dict:
    """``predict.json`` when the push step pushed no model: skipped, and why."""
    reasons = pushed.get("reasons") or ["the push step pushed nothing"]
    result = {"skipped": True, "reason": "the model was not pushed: " + "; ".join(reasons),
              "model_name": pushed.get("model_name")}
    write_json(FileSystems.join(predictions_dir, Files.PREDICT_RESULT), result)
    progress(f"skipped: {result['reason']}")
    return result


def _prepare(spec: BatchPredict, ref: str, handle: shared.Shared, dest: str,
             source_root: str | None, progress: entry.Progress) -> _Job:
    """Load the model, list and check the source, prepare the output directory.

    Raises:
        PredictError: the model, the source or the output cannot be used.
    """
    try:
        resolved = resolve_model(ref)
        loaded = load_model(handle, resolved.path)
        model = describe_model(resolved, spec.signature, loaded)
        files = sources.source_files(spec.source, str(source_root or "."))
        columns = model.columns + key_columns(spec.source, files, spec.keys, model.columns)
        source, changed = _read_as_trained(spec.source, model)
        for name in changed:
            progress(f"missing values: column {name!r} reads "
                     f"{_tokens(source.column_na_values[name])} as missing, as the model's "
                     "training did")
        schema = ScoringSchema(source, columns)
        sources.check_source(schema, files)
        formatter = formatter_for(spec.format, arrow_keys(columns, spec.keys), model.outputs)
        output = OutputDir(dest)
        for stale in output.prepare():
            progress(f"removed {stale} (left by a batch prediction killed over an hour ago)")
    except (ModelError, SourceError, FormatError, OutputError) as err:
        raise PredictError(str(err)) from None
    return _Job(model, loaded, files, schema, formatter, output)


def _read_as_trained(source, model: ModelInfo) -> tuple[object, list[str]]:
    """The scoring source, reading the model's features as its training read them: a CSV
    source's missing-value tokens of each model feature are those the model recorded (what
    ingest read as missing in training), plus any the scoring source declares for that column
    itself (``column_na_values``). Also the columns whose tokens differ from the scoring
    source's own."""
    if not isinstance(source, CsvSource) or not model.na_values:
        return source, []
    own = dict(source.column_na_values or {})
    tokens, changed = dict(own), []
    for column in model.columns:
        trained = model.na_values.get(column.name)
        if trained is None:
            continue
        merged = tuple(dict.fromkeys(trained + own.get(column.name, ())))
        if set(merged) != set(source.missing_tokens(column.name, column.dtype)):
            changed.append(column.name)
        tokens[column.name] = merged
    return dataclasses.replace(source, column_na_values=tokens), changed


def _tokens(tokens: tuple[str, ...]) -> str:
    return ", ".join(repr(t) for t in tokens) if tokens else "nothing"


def _score(job: _Job, spec: BatchPredict, handle: shared.Shared,
           beam_options, baseline=None, reporter=None) -> tuple[list, dict]:
    """Run the Beam job: the files it wrote (not yet published) and the summary (its
    progress shown by ``reporter``, a ``progress.Reporter``, when given)."""
    beam_pipeline = _beam.new_pipeline(beam_options)
    merge = Merge(functools.partial(empty_chunk_stats, job.schema), merge_chunk_stats)
    read = sources.ReadSource(job.schema, job.files, row_hashes=False)
    if reporter is not None:
        read = _progress.counted(read, reporter.tally)
    _ = beam_pipeline | "BatchPredict" >> ScoreAndWrite(
        read, merge, job.model,
        spec.keys, job.formatter, spec.batch_size, job.output, handle,
        statistics=baseline.specs if baseline is not None else ())
    start = time.monotonic()
    try:
        manifest, stats = run_job(beam_pipeline, job.output, reporter)
    except SourceError as err:  # a file that cannot be read (Beam adds the stage's name)
        raise PredictError(re.sub(r" \[while running '[^]]*'\]", "", str(err))) from None
    return manifest, summarize(job.schema, job.files, stats, job.model, spec,
                               job.output.dest, time.monotonic() - start)


def _publish(job: _Job, manifest: list, summary: dict, predictions_dir: str) -> None:
    """Publish the predictions with the summary, or only the rejected rows when too many were
    rejected; the summary is also written to ``predictions_dir`` when that is not the output."""
    try:
        check_summary(job.schema, summary, FileSystems.join(job.output.dest, Files.REJECTED))
    except IngestError as err:
        job.output.publish(manifest, job.formatter.extension, None)
        # ingest's advice (start a new run) is a pipeline run's; here the rows are the input
        lines = [line for line in str(err).splitlines()
                 if not line.startswith("the data is at fault")]
        raise PredictError("\n".join(lines) + "\nnothing else was published; fix the rows "
                           "(or raise max_rejected_fraction) and score again") from None
    summary["output_files"] = job.output.publish(manifest, job.formatter.extension, summary)
    if os.path.normpath(job.output.dest) != os.path.normpath(str(predictions_dir)):
        write_json(FileSystems.join(predictions_dir, Files.PREDICT_RESULT), summary)
