"""The transform stages of a Beam job: tf.Transform analysis and transformation of every split.

:class:`TransformSplits` takes the raw rows of each split as Arrow RecordBatches (read back from
ingest's Examples by :class:`ReadRawExamples`, or straight from the ingest stages in the fused
``preprocess`` job), analyzes ``train`` with ``tft_beam.AnalyzeAndTransformDataset``
(RecordBatches + TensorAdapterConfig: the batched Arrow path), transforms the other splits with
the same transform_fn, and writes GZIP TFRecords of transformed Examples (numpy encoder, block
writes), the transform_fn and a statistics JSON (rows per split, train statistics of the raw
numeric columns and of the label) that the driver reads after the run.
"""

from __future__ import annotations

import contextlib
import os

import apache_beam as beam
import pyarrow as pa
import tensorflow_transform.beam as tft_beam
from apache_beam.io.filesystems import FileSystems
from tensorflow_transform.tf_metadata import schema_utils
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tensor_adapter
from tfx_bsl.tfxio import tensor_representation_util

from estflow.components._io.example_codec import EncodeError
from estflow.components._io.example_codec import encode_batch
from estflow.components._io.example_codec import frame_records
from estflow.components._io.jsonfile import take_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.raw_features import raw_feature_spec
from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._io.tfrecords import Destination
from estflow.components._io.tfrecords import WriteBlocks
from estflow.components._io.tfrecords import expand_pattern
from estflow.components._io.tfrecords import read_records
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components.transform import preprocessing_fn as _preprocessing
from estflow.components.transform._graph_states import shared_graph_states
from estflow.components.transform.report import summarize
from estflow.components.transform.report import summary_lines
from estflow.components.transform.stats import ColumnStats
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["STATS_FILE", "ReadRawExamples", "TransformSplits", "raw_schema", "adapter_config",
           "tft_context", "clear_outputs", "finish"]

STATS_FILE = ".transform-stats.json"
_TFT_TEMP = ".tft-temp"


def raw_schema(pipeline: Pipeline):
    """The TFMD schema of the raw Examples (required columns fixed-length, others varlen)."""
    return schema_utils.schema_from_feature_spec(raw_feature_spec(pipeline))


def adapter_config(pipeline: Pipeline, arrow_schema: pa.Schema
                   ) -> tensor_adapter.TensorAdapterConfig:
    """What tf.Transform needs to turn raw RecordBatches of ``arrow_schema`` into tensors."""
    representations = tensor_representation_util.InferTensorRepresentationsFromSchema(
        raw_schema(pipeline))
    return tensor_adapter.TensorAdapterConfig(arrow_schema, representations)


class _DecodeFile(beam.DoFn):
    """A TFRecord file of raw Examples -> RecordBatches of up to 262,144 rows (tf.Transform
    runs faster on fewer, larger batches)."""

    def __init__(self, serialized_schema: bytes) -> None:
        self._schema = serialized_schema
        self._decoder = None

    def setup(self) -> None:
        self._decoder = example_coder.ExamplesToRecordBatchDecoder(self._schema)

    def process(self, path: str):
        for records in read_records(path, batch_records=1 << 18):
            yield self._decoder.DecodeBatch(records)


class ReadRawExamples(beam.PTransform):
    """The raw Examples of one split directory, as RecordBatches of :meth:`arrow_schema`
    (their rows counted under ``count = (tally, counter)`` when given)."""

    def __init__(self, pipeline: Pipeline, directory: str,
                 count: tuple[_progress.Tally, str] | None = None) -> None:
        super().__init__()
        self._schema = raw_schema(pipeline).SerializeToString()
        self._files = self.files_in(directory)
        self._count = count

    @staticmethod
    def files_in(directory: str) -> list[str]:
        return expand_pattern(FileSystems.join(directory, "*"))

    def expand(self, pbegin):
        files = pbegin | "Files" >> beam.Create(self._files)
        if len(self._files) > 1:  # one file has nothing to spread (and a shuffle costs a stage)
            files = files | "SpreadFiles" >> beam.Reshuffle()
        batches = files | "Decode" >> beam.ParDo(_DecodeFile(self._schema))
        if self._count is not None:  # (tally, counter): rows read, for the progress reports
            batches = batches | "Progress" >> _progress.CountRows(*self._count)
        return batches

    def arrow_schema(self) -> pa.Schema:
        return example_coder.ExamplesToRecordBatchDecoder(self._schema).ArrowSchema()


def _encode(element) -> bytes:
    batch = element[0]  # tf.Transform's (RecordBatch, passthrough features)
    try:
        return encode_batch(batch).data.tobytes()
    except EncodeError:  # several values in a row: the general (slower) encoder
        return frame_records(example_coder.RecordBatchToExamplesEncoder().encode(batch))


class TransformSplits(beam.PTransform):
    """``{split: raw RecordBatches}`` -> analyzed, transformed and written.

    Args:
        pipeline: the validated pipeline (its preprocessing is built from the declarations).
        config: the TensorAdapterConfig of the raw batches (:func:`adapter_config`).
        out: the transformed artifact directory (statistics go to a hidden file there).
        gzip_level, num_shards: as for the raw Examples.
        analyze: the train rows the analysis reads (None: ``raw["train"]``); a second read of
            the same rows, so that no split is held in memory between analysis and transform.
    """

    def __init__(self, pipeline: Pipeline, config, out: str, *,
                 gzip_level: int = DEFAULT_GZIP_LEVEL,
                 num_shards: int = 0, analyze=None) -> None:
        super().__init__()
        self._pipeline, self._config, self._out = pipeline, config, out
        self._stats_path = FileSystems.join(out, STATS_FILE)
        self._gzip, self._shards = gzip_level, num_shards
        self._analyze = analyze

    def expand(self, raw: dict):
        preprocessing_fn = _preprocessing.build_preprocessing_fn(self._pipeline)
        # The analysis reads its own copy of the train rows when given one (``analyze``): the
        # train rows then stream through the transformation too, instead of being held in
        # memory until the analysis ends (the in-memory runner keeps a PCollection that a
        # later stage reads whole: memory grew with the rows). Same results as
        # AnalyzeAndTransformDataset, which is AnalyzeDataset then TransformDataset.
        analyzed = raw["train"] if self._analyze is None else self._analyze
        transform_fn = ((analyzed, self._config)
                        | "AnalyzeTrain" >> tft_beam.AnalyzeDataset(preprocessing_fn))
        transformed = {}
        for name in raw:
            transformed[name] = (
                ((raw[name], self._config), transform_fn)
                | f"Transform{name.title()}" >> tft_beam.TransformDataset(
                    output_record_batches=True))[0]
        train = transformed["train"]
        _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(
            FileSystems.join(self._out, Files.TRANSFORM_FN))
        counts = []
        for name, data in transformed.items():
            label = name.title()
            where = Destination(FileSystems.join(self._out, name, Files.SHARD_PREFIX),
                                gzip_level=self._gzip)
            # One writer per split, fused with the stage that transforms it.
            _ = (data
                 | f"Encode{label}" >> beam.Map(lambda element, where=where: (
                     where, _encode(element)))
                 | f"Write{label}" >> WriteBlocks(num_shards=self._shards))
            counts.append(data | f"Count{label}" >> beam.Map(
                lambda element, n=name: (n, element[0].num_rows)))
        self._statistics(analyzed, train, counts)
        return transform_fn

    def _statistics(self, raw_train, transformed_train, counts) -> None:
        """Train statistics (raw numeric columns, transformed label) and rows per split."""
        numeric = [c.name for c in self._pipeline.raw_columns() if c.dtype in ("float", "int")]
        label = self._pipeline.label.name
        rows = (counts | "AllCounts" >> beam.Flatten()
                | "RowsPerSplit" >> beam.CombinePerKey(sum))
        label_stats = (transformed_train
                       | "TransformedBatches" >> beam.Map(lambda element: element[0])
                       | "LabelStats" >> beam.CombineGlobally(ColumnStats([label])))
        _ = (raw_train
             | "RawStats" >> beam.CombineGlobally(ColumnStats(numeric))
             | "JoinStats" >> beam.Map(
                 lambda raw, labels, rows: {"raw_numeric": raw, "label": labels,
                                            "rows": dict(rows)},
                 labels=beam.pvalue.AsSingleton(label_stats),
                 rows=beam.pvalue.AsList(rows))
             | "WriteStats" >> beam.Map(_write_stats, self._stats_path))


@contextlib.contextmanager
def tft_context(out: str):
    """tf.Transform's context, its temporary files under ``out`` (a path every worker of a
    distributed runner can reach, unlike a local temp dir); removed afterwards. The stages of
    a job run in this process load each transform graph once (:mod:`._graph_states`)."""
    temp = FileSystems.join(out, _TFT_TEMP)
    with tft_beam.Context(temp_dir=temp), shared_graph_states():
        yield
    if FileSystems.exists(temp):
        FileSystems.delete([temp])


def clear_outputs(out: str, splits: tuple[str, ...]) -> None:
    """Remove what this step writes, so a rerun never mixes old shards with new ones."""
    for name in (Files.TRANSFORM_FN, *splits, Files.TRANSFORM_STATS, STATS_FILE, _TFT_TEMP):
        path = FileSystems.join(out, name)
        if FileSystems.exists(path):
            FileSystems.delete([path])
    if "://" not in out:
        os.makedirs(out, exist_ok=True)


def finish(pipeline: Pipeline, out: str, progress: entry.Progress) -> dict:
    """After the job: summarise, show the statistics, write transform.json."""
    statistics = take_json(FileSystems.join(out, STATS_FILE))
    summary = summarize(pipeline, out, statistics, progress.elapsed)
    for line in summary_lines(summary):
        progress(line)
    progress(f"transform_fn in {FileSystems.join(out, Files.TRANSFORM_FN)}; cardinalities "
             f"{summary['cardinalities']}")
    write_json(FileSystems.join(out, Files.TRANSFORM_STATS), summary)
    return summary


def _write_stats(stats: dict, path: str) -> None:
    """Write the job's statistics from inside the job (one small file on any filesystem the
    workers reach; lighter than a text sink, whose fixed cost is ~0.1 s of stages per use)."""
    write_json(path, stats)
