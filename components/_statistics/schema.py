"""A tensorflow-metadata ``Schema`` inferred from statistics as TFDV's ``infer_schema`` does.

Per column: its type (INT, FLOAT, BYTES for strings); presence ``min_count`` 1 when it was
present at all and ``min_fraction`` 1.0 when it was never missing; a one-value shape when
always present, else a value count of 1; a string domain (named after the column, values
sorted) for string columns with at most ``max_string_domain_size`` distinct values; an
``int_domain`` marked categorical for int columns a categorical feature reads. TFDV sets no
value ranges; ``value_ranges=True`` also writes each numeric column's observed min and max as
its ``int_domain``/``float_domain`` (what a user would otherwise write by hand). It is inferred
from the whole span (the statistics' ``All Examples`` dataset, every split together, as the
checks use it): a column missing in any row is not required to be present.
The schema is written and read as text format, the file a user commits and edits.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from estflow.components._statistics.statistics import span_dataset

__all__ = ["infer_schema", "read_schema", "write_schema", "feature_name", "DEFAULT_MIN_EXAMPLES"]

DEFAULT_MIN_EXAMPLES = 1
"""An inferred schema's ``dataset_constraints.min_examples_count`` unless ``min_examples``
says more: an empty span is an anomaly (DATASET_LOW_NUM_EXAMPLES), never a silently smaller
training set."""
_TYPES = {statistics_pb2.FeatureNameStatistics.INT: schema_pb2.INT,
          statistics_pb2.FeatureNameStatistics.FLOAT: schema_pb2.FLOAT,
          statistics_pb2.FeatureNameStatistics.STRING: schema_pb2.BYTES,
          statistics_pb2.FeatureNameStatistics.BYTES: schema_pb2.BYTES}


def feature_name(feature) -> str:
    """A feature's name (``path`` as TFDV writes it, or the older ``name``)."""
    return ".".join(feature.path.step) if feature.path.step else feature.name


def infer_schema(stats: statistics_pb2.DatasetFeatureStatisticsList, *,
                 max_string_domain_size: int = 100, value_ranges: bool = False,
                 min_examples: int = DEFAULT_MIN_EXAMPLES) -> schema_pb2.Schema:
    """The schema the statistics describe (see the module docstring).

    Args:
        stats: statistics of one or more splits (their span is used:
            :func:`~.statistics.span_dataset`).
        max_string_domain_size: TFDV's threshold for giving a string column a domain.
        value_ranges: also record each numeric column's min and max as its domain.
        min_examples: ``dataset_constraints.min_examples_count`` (``DataChecks.min_examples``
            in the validate step), so TFDV validating with the schema asks what estflow does.

    Raises:
        ValueError: the span has no row (nothing to infer from).
    """
    datasets = [d for d in [span_dataset(stats)] if d.num_examples]
    if not datasets:
        raise ValueError("cannot infer a schema: the statistics hold no split with rows "
                         f"(splits: {[d.name for d in stats.datasets]})")
    schema = schema_pb2.Schema()
    schema.dataset_constraints.min_examples_count = max(int(min_examples), 1)
    names = list(dict.fromkeys(feature_name(f) for d in datasets for f in d.features))
    for name in names:
        views = [f for d in datasets for f in d.features if feature_name(f) == name]
        feature = schema.feature.add(name=name, type=_TYPES[views[0].type])
        missing = len(views) < len(datasets) or any(_common(v).num_missing for v in views)
        _presence(feature, sum(_common(v).num_non_missing for v in views), missing)
        _domain(schema, feature, views, max_string_domain_size, value_ranges)
    return schema


def _common(feature) -> statistics_pb2.CommonStatistics:
    stats = feature.string_stats if feature.HasField("string_stats") else feature.num_stats
    return stats.common_stats


def _presence(feature: schema_pb2.Feature, present: int, missing: bool) -> None:
    feature.presence.min_count = 1 if present >= 1 else 0
    if present <= 0:
        return
    if not missing:  # TFDV's InitPresenceAndShape: required, one value each
        feature.presence.min_fraction = 1.0
        feature.shape.dim.add(size=1)
    else:
        feature.value_count.min = feature.value_count.max = 1


def _domain(schema: schema_pb2.Schema, feature: schema_pb2.Feature, views: list,
            max_size: int, value_ranges: bool) -> None:
    categorical = any(v.HasField("string_stats") for v in views)
    if feature.type == schema_pb2.BYTES:
        values = sorted({b.label for v in views for b in v.string_stats.rank_histogram.buckets})
        unique = max(v.string_stats.unique for v in views)
        if values and unique <= max_size and len(values) >= unique:
            schema.string_domain.add(name=feature.name, value=values)
            feature.domain = feature.name
    elif feature.type == schema_pb2.INT and categorical:
        feature.int_domain.is_categorical = True
    elif value_ranges and any(v.HasField("num_stats") for v in views):
        low = min(v.num_stats.min for v in views if v.num_stats.common_stats.num_non_missing)
        high = max(v.num_stats.max for v in views if v.num_stats.common_stats.num_non_missing)
        domain = feature.int_domain if feature.type == schema_pb2.INT else feature.float_domain
        domain.min, domain.max = (int(low), int(high)) if feature.type == schema_pb2.INT \
            else (low, high)


def write_schema(schema: schema_pb2.Schema, path: str) -> None:
    """Write ``schema`` as text format to ``path`` (any Beam filesystem path)."""
    with FileSystems.create(str(path)) as handle:
        handle.write(text_format.MessageToString(schema).encode("utf-8"))


def read_schema(path: str) -> schema_pb2.Schema:
    """Read a text-format schema.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a Schema in text format (the message names the file and
            the parser's line and column).
    """
    path = str(path)
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"no schema at {path} (expected a tensorflow-metadata Schema "
                                "in text format)")
    with FileSystems.open(path) as handle:
        text = handle.read().decode("utf-8")
    try:
        return text_format.Parse(text, schema_pb2.Schema())
    except text_format.ParseError as err:
        raise ValueError(f"{path}: not a tensorflow-metadata Schema in text format: {err}"
                         ) from None
