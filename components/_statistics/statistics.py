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

The file holds one dataset per split, in declaration order, then the whole span (every split
together) as the dataset :data:`ALL_EXAMPLES`, TFDV's name for the default slice: its
accumulator is the splits' accumulators merged, so its figures are those TFDV computes on all
the rows ingest kept, and it is the dataset TFDV's ``validate_statistics`` picks from a list of
several. The data checks (:mod:`.anomalies`, the validate step's
:mod:`estflow.components.validate.step`) run on it (:func:`span_dataset`).
The rows ingest rejected are in no dataset; per column, the cells that were not a value of
its declared type are recorded on the span's feature as custom statistics
(:data:`TYPE_ERRORS`, :data:`TYPE_ERROR_FRACTION`, :data:`TYPE_ERROR_EXAMPLE`), written only
for a column that had some.
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

from estflow.components._statistics._sketch import FrequencyCounter
from estflow.components._statistics._sketch import QuantileSketch

__all__ = ["STATISTICS_FILE", "STATISTICS_TEXT", "SplitStatistics", "WriteStatistics",
           "ColumnSpec", "column_specs", "read_statistics", "write_statistics", "gather",
           "span_dataset", "split_datasets", "type_errors", "ALL_EXAMPLES", "TYPE_ERRORS",
           "TYPE_ERROR_FRACTION", "TYPE_ERROR_EXAMPLE", "NUM_BUCKETS", "NUM_TOP_VALUES",
           "NUM_RANK_BUCKETS"]

STATISTICS_FILE = "statistics.pb"
STATISTICS_TEXT = "statistics.pbtxt"
NUM_BUCKETS = 10  # TFDV's num_histogram_buckets and num_quantiles_histogram_buckets
NUM_TOP_VALUES = 20  # TFDV's num_top_values
NUM_RANK_BUCKETS = 1000  # TFDV's num_rank_histogram_buckets
ALL_EXAMPLES = "All Examples"
"""The dataset of the whole span (every split together): TFDV's default slice name
(``tensorflow_data_validation.constants.DEFAULT_SLICE_KEY``)."""
TYPE_ERRORS = "estflow_type_errors"
"""Custom statistic of a span's feature: the rows ingest rejected whose cell in this column
was not a value of its declared type (text in a numeric column, a non-finite float, an int
out of range); absent: none."""
TYPE_ERROR_FRACTION = "estflow_type_error_fraction"
"""Custom statistic: :data:`TYPE_ERRORS` over the rows ingest read (kept and rejected)."""
TYPE_ERROR_EXAMPLE = "estflow_type_error_example"
"""Custom statistic (``str``): one such cell as read (the smallest, so reruns agree)."""
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


class _SplitAccumulator(SplitStatistics):
    """:class:`SplitStatistics` that hands on ``(split, accumulator)``: the splits' accumulators
    merge into the whole span's after the job has combined each split."""

    def extract_output(self, accumulator: _Accumulator):
        return self._split, accumulator


class WriteStatistics(beam.PTransform):
    """``{split: PCollection of RecordBatches}`` -> ``out/statistics.pb`` and ``.pbtxt``: one
    dataset per split, then :data:`ALL_EXAMPLES`.

    Args:
        specs: the raw columns (:func:`column_specs`).
        out: the directory (any Beam filesystem path).
        rejects: a PCollection of one element, the ingest job's merged statistics (its
            ``columns``' ``type_errors``, ``checked`` and ``type_error_example``), recorded on
            the span's features (:func:`gather`); None: nothing recorded.
    """

    def __init__(self, specs: tuple[ColumnSpec, ...], out: str, rejects=None) -> None:
        super().__init__()
        self._specs, self._out, self._rejects = tuple(specs), out, rejects

    def expand(self, splits: dict):
        per_split = [batches | f"Statistics[{name}]" >> beam.CombineGlobally(
            _SplitAccumulator(name, self._specs)) for name, batches in splits.items()]
        rejects = (beam.pvalue.AsSingleton(self._rejects) if self._rejects is not None
                   else None)
        return (per_split | "FlattenStatistics" >> beam.Flatten()
                | "GatherStatistics" >> beam.combiners.ToList()
                | "WriteStatistics" >> beam.Map(_write_gathered, self._out, self._specs,
                                                tuple(splits), rejects))


def _write_gathered(pairs: list, out: str, specs: tuple[ColumnSpec, ...],
                    order: tuple[str, ...], rejects: dict | None) -> None:
    accumulators = dict(pairs)
    write_statistics(gather({name: accumulators[name] for name in order}, specs,
                            (rejects or {}).get("columns")), out)


def gather(accumulators: dict, specs: tuple[ColumnSpec, ...], columns: dict | None = None
           ) -> statistics_pb2.DatasetFeatureStatisticsList:
    """The statistics file's content: each split's dataset (in ``accumulators``' order), then
    :data:`ALL_EXAMPLES` from their merged accumulators (none is changed), with the type
    errors of ``columns`` (ingest's per-column figures: ``type_errors``, ``checked``,
    ``type_error_example``) as custom statistics of its features."""
    combine = SplitStatistics(ALL_EXAMPLES, specs)
    datasets = [dataset_statistics(name, specs, acc) for name, acc in accumulators.items()]
    whole = combine.merge_accumulators([combine.create_accumulator(), *accumulators.values()])
    span = dataset_statistics(ALL_EXAMPLES, specs, whole)
    for feature in span.features:
        entry = (columns or {}).get(feature.path.step[0]) or {}
        errors = int(entry.get("type_errors") or 0)
        if errors:
            feature.custom_stats.add(name=TYPE_ERRORS, num=errors)
            feature.custom_stats.add(name=TYPE_ERROR_FRACTION,
                                     num=errors / max(int(entry.get("checked") or 0), errors))
            if entry.get("type_error_example") is not None:
                feature.custom_stats.add(name=TYPE_ERROR_EXAMPLE,
                                         str=str(entry["type_error_example"]))
    return statistics_pb2.DatasetFeatureStatisticsList(datasets=[*datasets, span])


def split_datasets(stats: statistics_pb2.DatasetFeatureStatisticsList) -> list:
    """The datasets of the splits (every one but :data:`ALL_EXAMPLES`)."""
    return [d for d in stats.datasets if d.name != ALL_EXAMPLES]


def span_dataset(stats: statistics_pb2.DatasetFeatureStatisticsList
                 ) -> statistics_pb2.DatasetFeatureStatistics:
    """The dataset the data checks run on: :data:`ALL_EXAMPLES` when the statistics hold it
    (ingest writes it), the only dataset when there is one, else the splits merged here (for
    statistics written before ingest recorded the span: the counts, moments, extremes and
    categorical counts are exact; each numeric column's STANDARD histogram is its splits'
    re-bucketed onto ten equal buckets spreading each bucket evenly, as TFDV re-buckets for
    its distances; there are no quantiles)."""
    named = next((d for d in stats.datasets if d.name == ALL_EXAMPLES), None)
    if named is not None:
        return named
    if len(stats.datasets) == 1:
        return stats.datasets[0]
    return _merged(list(stats.datasets))


def _merged(datasets: list) -> statistics_pb2.DatasetFeatureStatistics:
    result = statistics_pb2.DatasetFeatureStatistics(
        name=ALL_EXAMPLES, num_examples=sum(d.num_examples for d in datasets))
    with_rows = [d for d in datasets if d.num_examples]
    names = list(dict.fromkeys(_name(f) for d in with_rows for f in d.features))
    for name in names:
        views = [(d, next((f for f in d.features if _name(f) == name), None)) for d in with_rows]
        first = next(f for _, f in views if f is not None)
        feature = result.features.add(type=first.type)
        if first.path.step:
            feature.path.CopyFrom(first.path)
        else:
            feature.name = first.name
        present = sum(_common(f).num_non_missing for _, f in views if f is not None)
        if first.HasField("string_stats"):
            _merge_strings(feature.string_stats, [f for _, f in views if f is not None])
            common = feature.string_stats.common_stats
        else:
            _merge_numbers(feature.num_stats, [f for _, f in views if f is not None])
            common = feature.num_stats.common_stats
        _fill_common(common, present, result.num_examples - present)
    return result


def _name(feature) -> str:
    return ".".join(feature.path.step) if feature.path.step else feature.name


def _common(feature) -> statistics_pb2.CommonStatistics:
    return (feature.string_stats if feature.HasField("string_stats")
            else feature.num_stats).common_stats


def _merge_numbers(stats: statistics_pb2.NumericStatistics, views: list) -> None:
    parts = [(v.num_stats, v.num_stats.common_stats.num_non_missing) for v in views
             if v.num_stats.common_stats.num_non_missing]
    count = sum(n for _, n in parts)
    if not count:
        return
    mean = sum(s.mean * n for s, n in parts) / count
    m2 = sum(n * (s.std_dev ** 2 + (s.mean - mean) ** 2) for s, n in parts)
    stats.mean, stats.std_dev = mean, math.sqrt(max(0.0, m2 / count))
    stats.num_zeros = sum(s.num_zeros for s, _ in parts)
    stats.min, stats.max = min(s.min for s, _ in parts), max(s.max for s, _ in parts)
    standard = stats.histograms.add(type=statistics_pb2.Histogram.STANDARD)
    if stats.min == stats.max:
        standard.buckets.add(low_value=stats.min, high_value=stats.max, sample_count=count)
        return
    edges = np.linspace(stats.min, stats.max, NUM_BUCKETS + 1)
    counts = np.zeros(NUM_BUCKETS)
    for s, _ in parts:
        hist = next((h for h in s.histograms if h.type == statistics_pb2.Histogram.STANDARD),
                    None)
        for bucket in (hist.buckets if hist is not None else ()):
            low, high, weight = bucket.low_value, bucket.high_value, bucket.sample_count
            if high <= low:  # a point: wholly in the bucket holding it
                counts[min(int(np.searchsorted(edges, low, side="right")) - 1,
                           NUM_BUCKETS - 1)] += weight
                continue
            overlap = np.clip(np.minimum(edges[1:], high) - np.maximum(edges[:-1], low), 0,
                              None)
            counts += weight * overlap / (high - low)
    for low, high, weight in zip(edges[:-1], edges[1:], counts, strict=True):
        standard.buckets.add(low_value=low, high_value=high, sample_count=weight)


def _merge_strings(stats: statistics_pb2.StringStatistics, views: list) -> None:
    counts: dict[str, float] = {}
    present = 0
    for view in views:
        present += view.string_stats.common_stats.num_non_missing
        for bucket in view.string_stats.rank_histogram.buckets:
            counts[bucket.label] = counts.get(bucket.label, 0) + bucket.sample_count
    if not present:
        return
    stats.unique = max([len(counts), *(v.string_stats.unique for v in views)])
    stats.avg_length = sum(v.string_stats.avg_length * v.string_stats.common_stats
                           .num_non_missing for v in views) / present
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:NUM_RANK_BUCKETS]
    for value, count in ranked[:NUM_TOP_VALUES]:
        stats.top_values.add(value=value, frequency=count)
    for rank, (value, count) in enumerate(ranked):
        stats.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=value,
                                         sample_count=count)


def type_errors(feature) -> tuple[int, float, str | None]:
    """``(count, fraction, example)`` of a span feature's rejected type errors (its custom
    statistics; ``(0, 0.0, None)`` without them)."""
    custom = {c.name: c for c in feature.custom_stats}
    if TYPE_ERRORS not in custom:
        return 0, 0.0, None
    example = custom.get(TYPE_ERROR_EXAMPLE)
    return (int(custom[TYPE_ERRORS].num), float(custom[TYPE_ERROR_FRACTION].num)
            if TYPE_ERROR_FRACTION in custom else 0.0,
            example.str if example is not None else None)


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
