"""Batch prediction: score a table of rows with a pushed model, in a Beam job.

A :class:`BatchPredict` is either a step of a training pipeline, after push (it scores with the
model the pipeline has just pushed; when nothing was pushed it is skipped), or the only thing a
pipeline does (``Pipeline(name=..., predict=BatchPredict(model=...))``: nightly scoring with a
model that is already served, e.g. on a schedule). Rows are read and validated as ingest reads
them (bad rows go to ``rejected.jsonl`` with their reason), encoded as the raw ``tf.Example``
records the model's serving signature parses, and scored in batches, so a row scored in batch gets
exactly what ``estflow serve`` (or TF Serving) would answer for it.

Example:
    >>> import estflow.dsl as ef
    >>> nightly = ef.Pipeline(name="taxi-nightly", predict=ef.BatchPredict(
    ...     model="gs://bucket/models/taxi", source=ef.CsvSource("gs://bucket/trips/*.csv"),
    ...     output="gs://bucket/scores/latest", keys=("trip_id",)))
    >>> nightly.trains, [c.name for c in nightly.raw_columns()]
    (False, [])
"""

from __future__ import annotations

import dataclasses
import re

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.serialization import serializable
from estflow.dsl.sources import Source
from estflow.dsl.sources import expect_source

__all__ = ["BatchPredict", "PREDICTION_FORMATS"]

PREDICTION_FORMATS = ("jsonl", "csv", "parquet", "tfrecord")
"""The formats predictions are written in (``BatchPredict.format``)."""

_SIGNATURE = re.compile(r"^[A-Za-z0-9_./-]{1,128}$")
_MAX_BATCH = 1 << 20


@serializable
@dataclasses.dataclass(frozen=True)
class BatchPredict:
    """Score every row of a source with a model's serving signature, in a Beam job.

    Each output row holds the ``keys`` columns passed through from the input row, then every
    output of the signature, by name, with the values the REST server's ``:predict`` answers
    for the same row (``:classify``'s ``classes`` and ``scores`` with
    ``signature="classify"``). Rows that do not fit the model's raw features are rejected as
    ingest rejects them, each with its file, line and reason in ``rejected.jsonl``; more than
    ``source.max_rejected_fraction`` of the data lines rejected fails the step. The output is
    replaced atomically: shards ``predictions-SSSSS-of-NNNNN.<format>``, ``rejected.jsonl``
    and ``predict.json`` (the summary: rows scored and rejected, throughput, the files),
    written last; a directory without ``predict.json`` is not a finished output.

    Args:
        source: the rows to score (CSV, TFRecord, Parquet or BigQuery); relative paths
            resolve as the pipeline's source paths do. Its columns are checked against the
            model's raw features (the export's ``estflow_raw_features.json``); other columns
            are ignored unless named in ``keys``.
        output: the directory the predictions replace (a local path, or a URL Beam writes:
            ``gs://``, ``s3://``); None: the step's own output artifact.
        keys: input columns copied to every output row (ids to join the predictions back on).
            A key is text as read (CSV, TFRecord, BigQuery), or keeps its Parquet type.
        model: where the model is, for a pipeline that only predicts: a pushed model
            ``<base_path>/<model_name>`` (its latest version), one version
            ``<base_path>/<model_name>/<version>``, a SavedModel directory, or a run's
            ``train/model`` artifact or run directory. None (in a training pipeline): the
            model the push step has just pushed.
        signature: the serving signature that scores: ``serving_default`` (``:predict``'s
            outputs), ``classify`` or ``regress``, or any signature taking serialized
            ``tf.Example`` records.
        format: one of :data:`PREDICTION_FORMATS`: ``"jsonl"`` (a JSON object per row),
            ``"csv"`` (a header row, then a column per key and per output value:
            ``probabilities_0``, ``probabilities_1``, ...), ``"parquet"`` (a column per key and
            per output, lists for outputs with several values) or ``"tfrecord"`` (GZIP
            TFRecords of ``tf.train.Example``: a feature per key and per output).
        batch_size: examples per call of the model.
        fail_on_skew: whether rows skewed from the model's training data past a drift
            threshold fail the step (exit status 4, after the predictions are published);
            False: each skewed column is a warning. The thresholds are the pipeline's
            ``checks`` where declared, else those the model was trained under.

    Example:
        >>> import estflow.dsl as ef
        >>> step = ef.BatchPredict(source=ef.ParquetSource("data/to_score/*.parquet"),
        ...                        output="gs://bucket/scores", keys=("trip_id",),
        ...                        signature="classify", format="parquet")
        >>> step.model is None  # in a training pipeline: the model just pushed
        True
    """

    source: Source
    output: str | None = None
    keys: tuple[str, ...] = ()
    model: str | None = None
    signature: str = "serving_default"
    format: str = "jsonl"
    batch_size: int = 8192
    fail_on_skew: bool = False

    def __post_init__(self) -> None:
        expect_source(self.source)
        for field in ("output", "model"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise DslError(field, "a non-empty directory path or URL, or None", value)
        keys = _checks.tuple_of(self.keys, "keys", str, what="column names")
        for i, key in enumerate(keys):
            _checks.name(key, f"keys[{i}]")
            if key in keys[:i]:
                raise DslError(f"keys[{i}]", "a column named once", key)
        _checks.freeze(self, "keys", keys)
        if not isinstance(self.signature, str) or not _SIGNATURE.match(self.signature):
            raise DslError("signature", "a signature name such as 'serving_default' or "
                           "'classify'", self.signature)
        _checks.one_of(self.format, PREDICTION_FORMATS, "format")
        _checks.positive_int(self.batch_size, "batch_size")
        if not isinstance(self.fail_on_skew, bool):
            raise DslError("fail_on_skew", "True or False", self.fail_on_skew)
        if self.batch_size > _MAX_BATCH:
            raise DslError("batch_size", f"at most {_MAX_BATCH} examples per call",
                           self.batch_size)
