"""Statistics of a run's data per split, as tensorflow-metadata's DatasetFeatureStatisticsList.

:class:`SplitStatistics` is a Beam CombineFn over one split's Arrow RecordBatches (the ingest
job's per-split outputs, one value or none per row and column), so the statistics come from the
same pass that writes the Examples. Per column: ``num_non_missing``/``num_missing``; numeric
columns get min, max, mean, population std, zeros, median and a STANDARD (10 equal-width
buckets) and a QUANTILES (10 buckets of equal count) histogram from a mergeable quantile sketch
(exact up to 2048 values per split and column, see :mod:`._sketch`); categorical columns
(strings, and int columns read by a categorical feature) get string statistics as TFDV fills
them: unique count, the top 20 values, a rank histogram of up to 1000 values, the average
length. :class:`WriteStatistics` gathers the splits and writes :data:`STATISTICS_FILE` (binary,
what TFDV's ``load_statistics`` and Facets read) and :data:`STATISTICS_TEXT` (text format).
"""

from __future__ import annotations

import math

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import statistics_pb2

from estflow.components.validate._sketch import FrequencyCounter
from estflow.components.validate._sketch import QuantileSketch

__all__ = ["STATISTICS_FILE", "STATISTICS_TEXT", "SplitStatistics", "WriteStatistics",
           "ColumnSpec", "column_specs", "read_statistics", "write_statistics",
           "NUM_BUCKETS", "NUM_TOP_VALUES", "NUM_RANK_BUCKETS"]

STATISTICS_FILE = "statistics.pb"
STATISTICS_TEXT = "statistics.pbtxt"
NUM_BUCKETS = 10  # TFDV's num_histogram_buckets and num_quantiles_histogram_buckets
NUM_TOP_VALUES = 20  # TFDV's num_top_values
NUM_RANK_BUCKETS = 1000  # TFDV's num_rank_histogram_buckets
_Stats = statistics_pb2.FeatureNameStatistics
_TYPES = {"float": _Stats.FLOAT, "int": _Stats.INT, "string": _Stats.STRING}

ColumnSpec = tuple[str, str, bool]
"""``(name, dtype, categorical)`` of one raw column."""


def column_specs(pipeline) -> tuple[ColumnSpec, ...]:
    """The raw columns of ``pipeline`` with whether each is categorical: strings always, ints
    when a categorical feature (vocabulary, hash, identity) reads them."""
    from estflow.dsl.features import CategoricalHash
    from estflow.dsl.features import CategoricalIdentity
    from estflow.dsl.features import CategoricalVocab

    kinds = (CategoricalVocab, CategoricalHash, CategoricalIdentity)
    categorical = {f.column for f in pipeline.features if isinstance(f, kinds)}
    return tuple((c.name, c.dtype, c.dtype == "string" or c.name in categorical)
                 for c in pipeline.raw_columns())


class _Numeric:
    """Exact moments (Chan's parallel update: no overflow or cancellation on huge values)
    and a quantile sketch."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2, self.zeros = 0, 0.0, 0.0, 0
        self.min, self.max = math.inf, -math.inf
        self.sketch = QuantileSketch()

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        floats = values.astype(np.float64)
        other = _Numeric()
        other.count, other.mean = len(floats), float(floats.mean())
        other.m2 = float(np.square(floats - other.mean).sum())
        other.zeros = int(len(floats) - np.count_nonzero(floats))
        other.min, other.max = float(floats.min()), float(floats.max())
        self._merge_moments(other)
        self.sketch.add(floats)

    def merge(self, other: _Numeric) -> None:
        self._merge_moments(other)
        self.sketch.merge(other.sketch)

    def _merge_moments(self, other: _Numeric) -> None:
        if not other.count:
            return
        total = self.count + other.count
        delta = other.mean - self.mean
        self.mean += delta * (other.count / total)
        self.m2 += other.m2 + delta * delta * (self.count * other.count / total)
        self.count, self.zeros = total, self.zeros + other.zeros
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)


class _Categorical:
    def __init__(self) -> None:
        self.counter = FrequencyCounter()
        self.total_length = 0

    def add(self, values: pa.Array) -> None:
        if not len(values):
            return
        text = values if pa.types.is_large_binary(values.type) else pc.cast(values, pa.string())
        self.total_length += int(pc.sum(pc.binary_length(text)).as_py() or 0)
        counted = pc.value_counts(values)
        self.counter.add_counts(counted.field("values").to_pylist(),
                                counted.field("counts").to_pylist())

    def merge(self, other: _Categorical) -> None:
        self.counter.merge(other.counter)
        self.total_length += other.total_length


class _Accumulator:
    def __init__(self, specs: tuple[ColumnSpec, ...]) -> None:
        self.num_examples = 0
        self.present = {name: 0 for name, _, _ in specs}
        self.columns = {name: _Categorical() if categorical else _Numeric()
                        for name, _, categorical in specs}


class SplitStatistics(beam.CombineFn):
    """RecordBatches of one split -> its ``DatasetFeatureStatistics``, serialized.

    Args:
        split: the split's name (the statistics' ``name``).
        specs: the raw columns (:func:`column_specs`).
    """

    def __init__(self, split: str, specs: tuple[ColumnSpec, ...]) -> None:
        self._split, self._specs = split, tuple(specs)

    def create_accumulator(self) -> _Accumulator:
        return _Accumulator(self._specs)

    def add_input(self, accumulator: _Accumulator, batch: pa.RecordBatch) -> _Accumulator:
        accumulator.num_examples += batch.num_rows
        for name, _, _ in self._specs:
            values = batch.column(name).flatten()  # absent cells are empty lists
            accumulator.present[name] += len(values)
            column = accumulator.columns[name]
            column.add(values if isinstance(column, _Categorical)
                       else values.to_numpy(zero_copy_only=False))
        return accumulator

    def merge_accumulators(self, accumulators) -> _Accumulator:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            merged.num_examples += other.num_examples
            for name, _, _ in self._specs:
                merged.present[name] += other.present[name]
                merged.columns[name].merge(other.columns[name])
        return merged

    def extract_output(self, accumulator: _Accumulator) -> bytes:
        return dataset_statistics(self._split, self._specs, accumulator).SerializeToString()


def dataset_statistics(split: str, specs: tuple[ColumnSpec, ...], accumulator: _Accumulator
                       ) -> statistics_pb2.DatasetFeatureStatistics:
    """The proto of one split (no features when it has no rows, as TFDV)."""
    result = statistics_pb2.DatasetFeatureStatistics(
        name=split, num_examples=accumulator.num_examples)
    if not accumulator.num_examples:
        return result
    for name, dtype, _ in specs:
        feature = result.features.add(type=_TYPES[dtype])
        feature.path.step.append(name)
        column, present = accumulator.columns[name], accumulator.present[name]
        if isinstance(column, _Categorical):
            _fill_strings(feature.string_stats, column, present)
            common = feature.string_stats.common_stats
        else:
            _fill_numbers(feature.num_stats, column)
            common = feature.num_stats.common_stats
        _fill_common(common, present, accumulator.num_examples - present)
    return result


def _fill_common(common: statistics_pb2.CommonStatistics, present: int, missing: int) -> None:
    common.num_non_missing, common.num_missing = present, missing
    if present:  # one value per present row: every valency is 1
        common.min_num_values = common.max_num_values = 1
        common.avg_num_values, common.tot_num_values = 1.0, present
        hist = common.num_values_histogram
        hist.type = statistics_pb2.Histogram.QUANTILES
        for _ in range(NUM_BUCKETS):
            hist.buckets.add(low_value=1.0, high_value=1.0, sample_count=present / NUM_BUCKETS)


def _fill_numbers(stats: statistics_pb2.NumericStatistics, column: _Numeric) -> None:
    if not column.count:
        return
    stats.mean = column.mean
    stats.std_dev = math.sqrt(max(0.0, column.m2 / column.count))
    stats.num_zeros, stats.min, stats.max = column.zeros, column.min, column.max
    fractions = np.linspace(0.0, 1.0, NUM_BUCKETS + 1)
    bounds = column.sketch.quantiles(fractions)
    bounds[0], bounds[-1] = column.min, column.max
    stats.median = float(column.sketch.quantiles(np.array([0.5]))[0])
    standard = stats.histograms.add(type=statistics_pb2.Histogram.STANDARD)
    if column.min == column.max:  # one point: one bucket holding everything
        standard.buckets.add(low_value=column.min, high_value=column.max,
                             sample_count=column.count)
    else:
        edges = np.linspace(column.min, column.max, NUM_BUCKETS + 1)
        counts = column.sketch.counts_between(edges)
        for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True):
            standard.buckets.add(low_value=low, high_value=high, sample_count=count)
    quantiles = stats.histograms.add(type=statistics_pb2.Histogram.QUANTILES)
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        quantiles.buckets.add(low_value=low, high_value=high,
                              sample_count=column.count / NUM_BUCKETS)


def _fill_strings(stats: statistics_pb2.StringStatistics, column: _Categorical,
                  present: int) -> None:
    if not present:
        return
    counter = column.counter
    stats.unique = counter.unique()
    stats.avg_length = column.total_length / present
    ranked = counter.most_common(NUM_RANK_BUCKETS)
    for value, count in ranked[:NUM_TOP_VALUES]:
        stats.top_values.add(value=_label(value), frequency=count)
    for rank, (value, count) in enumerate(ranked):
        stats.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=_label(value),
                                         sample_count=count)


def _label(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


class WriteStatistics(beam.PTransform):
    """``{split: PCollection of RecordBatches}`` -> ``out/statistics.pb`` and ``.pbtxt``.

    Args:
        specs: the raw columns (:func:`column_specs`).
        out: the directory (any Beam filesystem path).
    """

    def __init__(self, specs: tuple[ColumnSpec, ...], out: str) -> None:
        super().__init__()
        self._specs, self._out = tuple(specs), out

    def expand(self, splits: dict):
        per_split = [batches | f"Statistics[{name}]" >> beam.CombineGlobally(
            SplitStatistics(name, self._specs)) for name, batches in splits.items()]
        return (per_split | "FlattenStatistics" >> beam.Flatten()
                | "GatherStatistics" >> beam.combiners.ToList()
                | "WriteStatistics" >> beam.Map(_write_gathered, self._out,
                                                tuple(splits)))


def _write_gathered(serialized: list[bytes], out: str, order: tuple[str, ...]) -> None:
    datasets = [statistics_pb2.DatasetFeatureStatistics.FromString(s) for s in serialized]
    datasets.sort(key=lambda d: order.index(d.name))  # the splits in declaration order
    write_statistics(statistics_pb2.DatasetFeatureStatisticsList(datasets=datasets), out)


def write_statistics(stats: statistics_pb2.DatasetFeatureStatisticsList, out: str) -> None:
    """Write :data:`STATISTICS_FILE` and :data:`STATISTICS_TEXT` into directory ``out``."""
    with FileSystems.create(FileSystems.join(out, STATISTICS_FILE)) as handle:
        handle.write(stats.SerializeToString())
    with FileSystems.create(FileSystems.join(out, STATISTICS_TEXT)) as handle:
        handle.write(text_format.MessageToString(stats).encode("utf-8"))


def read_statistics(path: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    """Read statistics: a ``statistics.pb`` (binary), a ``.pbtxt`` (text), or a directory
    holding :data:`STATISTICS_FILE`.

    Raises:
        FileNotFoundError: nothing there (the message names the path).
    """
    path = str(path)
    if not path.endswith((".pb", ".pbtxt")):
        path = FileSystems.join(path, STATISTICS_FILE)
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"no statistics at {path} (expected a {STATISTICS_FILE} "
                                "written by the ingest step)")
    with FileSystems.open(path) as handle:
        data = handle.read()
    if path.endswith(".pbtxt"):
        return text_format.Parse(data.decode("utf-8"),
                                 statistics_pb2.DatasetFeatureStatisticsList())
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(data)
