"""Anomalies of a run's statistics against a schema, drift against a baseline, and skew.

Every anomaly carries TFDV's kind (tensorflow-metadata ``AnomalyInfo.Type`` names):

Like TFDV's ``validate_statistics``, which validates one dataset (of several, the default
slice ``All Examples``), the checks run on the whole span: the statistics' ``All Examples``
dataset (every split together, :func:`~.statistics.span_dataset`), so each anomaly is found
once, on all the rows, whatever the split sizes; the ``split`` of such an anomaly is
``All Examples``. Only an empty split is named by itself (nothing can train or evaluate on it).

* :func:`validate` (statistics vs schema): DATASET_LOW_NUM_EXAMPLES /
  DATASET_HIGH_NUM_EXAMPLES (``dataset_constraints``, the span's rows; an empty split is
  always one),
  SCHEMA_MISSING_COLUMN (a required column absent), SCHEMA_NEW_COLUMN (a column the schema
  does not know), UNEXPECTED_DATA_TYPE, FEATURE_TYPE_LOW_FRACTION_PRESENT /
  FEATURE_TYPE_LOW_NUMBER_PRESENT (``presence``), INVALID_FEATURE_SHAPE (a fixed ``shape``,
  which an inferred schema gives a column always present, and the column missing in some rows
  or with another number of values: TFDV reports it besides the presence anomaly), ENUM_TYPE_UNEXPECTED_STRING_VALUES (values
  outside the string domain above the allowed fraction: ``1 - min_domain_mass`` when the
  schema sets ``distribution_constraints``, else the thresholds'), INT_TYPE_SMALL_INT /
  INT_TYPE_BIG_INT and FLOAT_TYPE_SMALL_FLOAT / FLOAT_TYPE_BIG_FLOAT (``int_domain`` /
  ``float_domain`` bounds).
* :func:`rejected_types` (this run's span vs the baseline's span): UNEXPECTED_DATA_TYPE when
  ingest rejected more cells of a column for their type (text in a numeric column) than the
  baseline's did, beyond chance. TFDV, reading such a column, finds text where the schema
  says INT or FLOAT; estflow rejects those rows at ingest (they are in no dataset), and the
  span's features record them (:data:`~.statistics.TYPE_ERRORS`), so the change is a data
  anomaly rather than a silently smaller training set.
* :func:`drift` (this run's span vs the baseline's span) and :func:`skew` (serving data vs
  the training split): COMPARATOR_L_INFTY_HIGH for categorical columns,
  COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH for numeric ones (their STANDARD histograms),
  COMPARATOR_CONTROL_DATA_MISSING / COMPARATOR_TREATMENT_DATA_MISSING when one side lacks the
  column. A schema's ``drift_comparator`` / ``skew_comparator`` thresholds win over
  :class:`Thresholds`, as in TFDV.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from estflow.components._statistics.distance import jensen_shannon
from estflow.components._statistics.distance import l_infinity
from estflow.components._statistics.distance import value_counts
from estflow.components._statistics.schema import feature_name
from estflow.components._statistics.statistics import ALL_EXAMPLES
from estflow.components._statistics.statistics import span_dataset
from estflow.components._statistics.statistics import split_datasets
from estflow.components._statistics.statistics import type_errors

__all__ = ["Anomaly", "Thresholds", "validate", "drift", "skew", "rejected_types",
           "records_rejects", "ERROR", "WARNING"]

ERROR, WARNING = "ERROR", "WARNING"  # AnomalyInfo.Severity names
_INACTIVE = (schema_pb2.DEPRECATED, schema_pb2.DISABLED, schema_pb2.PLANNED,
             schema_pb2.ALPHA, schema_pb2.DEBUG_ONLY)
Stats = statistics_pb2.DatasetFeatureStatisticsList


@dataclasses.dataclass(frozen=True)
class Anomaly:
    """One anomaly: ``kind`` is TFDV's name; ``observed`` and ``allowed`` are what the data
    shows and what the schema or threshold allows (a number, or words for sets);
    ``description`` says it in one sentence."""

    column: str  # "" for a whole split
    kind: str
    observed: object
    allowed: object
    split: str
    severity: str = ERROR
    description: str = ""


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Limits of the checks; a mapping value means per column (``"*"``: the rest).

    Attributes:
        min_examples: rows the span (every split together) must have (None: the schema's,
            else 1).
        out_of_domain_fraction: the fraction of a column's values that may fall outside its
            string domain (TFDV's default: none).
        linf: the L-infinity distance above which a categorical column drifted or skewed.
        js_divergence: the Jensen-Shannon divergence above which a numeric column did.
    """

    min_examples: int | None = None
    out_of_domain_fraction: float | Mapping[str, float] = 0.0
    linf: float | Mapping[str, float] = 0.1
    js_divergence: float | Mapping[str, float] = 0.1

    def get(self, field: str, column: str) -> float:
        """The limit ``field`` for ``column``."""
        value = getattr(self, field)
        if isinstance(value, Mapping):
            return value.get(column, value.get("*", getattr(Thresholds, field)))
        return value


def _thresholds(value) -> Thresholds:
    if value is None:
        return Thresholds()
    if isinstance(value, Mapping):
        return Thresholds(**value)
    return value


def _active(schema: schema_pb2.Schema) -> dict[str, schema_pb2.Feature]:
    return {f.name: f for f in schema.feature if f.lifecycle_stage not in _INACTIVE}


def validate(stats: Stats, schema: schema_pb2.Schema, *, thresholds=None) -> list[Anomaly]:
    """Every anomaly of ``stats``' span against ``schema``, each once (see the module
    docstring), and each empty split; ``thresholds``: a :class:`Thresholds`, a mapping of its
    fields, or None."""
    limits = _thresholds(thresholds)
    span = span_dataset(stats)
    found = [Anomaly("", "DATASET_LOW_NUM_EXAMPLES", 0, 1, split.name,
                     description=f"split {split.name!r} has no rows")
             for split in split_datasets(stats) if not split.num_examples
             and split is not span and span.num_examples]
    found += _dataset_anomalies(span, schema, limits)
    if span.num_examples:
        found += _column_anomalies(span, schema, limits)
    return found


def _dataset_anomalies(dataset, schema: schema_pb2.Schema, limits: Thresholds) -> list[Anomaly]:
    constraints = schema.dataset_constraints
    low = limits.min_examples
    if low is None:
        low = constraints.min_examples_count if constraints.HasField("min_examples_count") else 1
    if dataset.num_examples < max(low, 1):  # an empty span is never a valid one
        return [Anomaly("", "DATASET_LOW_NUM_EXAMPLES", dataset.num_examples, max(low, 1),
                        dataset.name, description=f"the data has {dataset.num_examples} rows "
                        f"(every split together), fewer than the {max(low, 1)} expected")]
    if constraints.HasField("max_examples_count") and \
            dataset.num_examples > constraints.max_examples_count:
        return [Anomaly("", "DATASET_HIGH_NUM_EXAMPLES", dataset.num_examples,
                        constraints.max_examples_count, dataset.name)]
    return []


def _column_anomalies(dataset, schema: schema_pb2.Schema, limits: Thresholds) -> list[Anomaly]:
    columns = {feature_name(f): f for f in dataset.features}
    declared = _active(schema)
    known = {f.name for f in schema.feature}
    found = []
    for name, feature in declared.items():
        if name not in columns:
            if feature.presence.min_count > 0 or feature.presence.min_fraction > 0:
                found.append(Anomaly(name, "SCHEMA_MISSING_COLUMN", "absent", "present",
                                     dataset.name, description=f"column {name!r} is missing "
                                     f"from split {dataset.name!r}"))
            continue
        found += _feature_anomalies(dataset, feature, columns[name], schema, limits)
    for name in columns:
        if name not in known:
            found.append(Anomaly(name, "SCHEMA_NEW_COLUMN", "present", "not in the schema",
                                 dataset.name, description=f"column {name!r} is not in the "
                                 "schema"))
    return found


_STATS_TYPES = {statistics_pb2.FeatureNameStatistics.INT: schema_pb2.INT,
                statistics_pb2.FeatureNameStatistics.FLOAT: schema_pb2.FLOAT,
                statistics_pb2.FeatureNameStatistics.STRING: schema_pb2.BYTES,
                statistics_pb2.FeatureNameStatistics.BYTES: schema_pb2.BYTES}


def _feature_anomalies(dataset, feature: schema_pb2.Feature, stats, schema, limits
                       ) -> list[Anomaly]:
    name, split = feature.name, dataset.name
    seen = _STATS_TYPES[stats.type]
    if feature.type != schema_pb2.TYPE_UNKNOWN and seen != feature.type:
        return [Anomaly(name, "UNEXPECTED_DATA_TYPE", schema_pb2.FeatureType.Name(seen),
                        schema_pb2.FeatureType.Name(feature.type), split,
                        description=f"column {name!r} holds {schema_pb2.FeatureType.Name(seen)}"
                        f" values, the schema expects {schema_pb2.FeatureType.Name(feature.type)}")]
    is_string = stats.HasField("string_stats")
    common = (stats.string_stats if is_string else stats.num_stats).common_stats
    found = _presence(name, split, feature, common, dataset.num_examples)
    found += _shape(name, split, feature, common)
    if is_string:
        found += _domain(name, split, feature, stats, schema, common, limits)
    else:
        found += _range(name, split, feature, stats.num_stats)
    return found


def _presence(name, split, feature, common, examples: int) -> list[Anomaly]:
    found, present = [], common.num_non_missing
    fraction = present / examples if examples else 0.0
    if feature.presence.HasField("min_fraction") and fraction < feature.presence.min_fraction:
        found.append(Anomaly(name, "FEATURE_TYPE_LOW_FRACTION_PRESENT", fraction,
                             feature.presence.min_fraction, split, description=f"column "
                             f"{name!r} is present in {fraction:.4g} of the rows, below the "
                             f"minimum {feature.presence.min_fraction:.4g}"))
    if present < feature.presence.min_count:
        found.append(Anomaly(name, "FEATURE_TYPE_LOW_NUMBER_PRESENT", present,
                             feature.presence.min_count, split, description=f"column {name!r}"
                             f" is present in {present} rows, below the minimum "
                             f"{feature.presence.min_count}"))
    return found


def _shape(name, split, feature, common) -> list[Anomaly]:
    """TFDV's INVALID_FEATURE_SHAPE: a fixed shape (what an inferred schema declares for a
    column always present) whose column is missing in some rows, or has another number of
    values than the shape holds (estflow's columns: one value a row)."""
    if not feature.HasField("shape"):
        return []
    size = math.prod(d.size for d in feature.shape.dim)  # no dims: a scalar, one value
    dims = "[" + ", ".join(str(d.size) for d in feature.shape.dim) + "]"
    allowed = f"shape {dims}: {size} value(s) in every row"
    if common.num_missing:
        return [Anomaly(name, "INVALID_FEATURE_SHAPE", f"missing in {common.num_missing} rows",
                        allowed, split, description=f"column {name!r} has the fixed shape "
                        f"{dims} in the schema, but it is missing in {common.num_missing} "
                        "rows")]
    low, high = common.min_num_values, common.max_num_values
    if common.num_non_missing and (low != high or low != size):
        counts = f"{low}" if low == high else f"{low} to {high}"
        return [Anomaly(name, "INVALID_FEATURE_SHAPE", f"{counts} value(s) a row", allowed,
                        split, description=f"column {name!r} has the fixed shape {dims} "
                        f"({size} value(s)) in the schema, but {counts} value(s) a row")]
    return []


def _string_domain(feature: schema_pb2.Feature, schema: schema_pb2.Schema):
    if feature.HasField("string_domain"):
        return feature.string_domain
    if feature.HasField("domain"):
        return next((d for d in schema.string_domain if d.name == feature.domain), None)
    return None


def _domain(name, split, feature, stats, schema, common, limits) -> list[Anomaly]:
    domain = _string_domain(feature, schema)
    if domain is None or not common.num_non_missing:
        return []
    allowed_values = set(domain.value)
    counts = value_counts(stats)
    outside = {v: c for v, c in counts.items() if v not in allowed_values}
    fraction = sum(outside.values()) / common.num_non_missing
    allowed = limits.get("out_of_domain_fraction", name)
    if feature.distribution_constraints.HasField("min_domain_mass"):
        allowed = 1.0 - feature.distribution_constraints.min_domain_mass
    if not outside or fraction <= allowed:
        return []
    shown = sorted(outside, key=lambda v: -outside[v])[:10]
    return [Anomaly(name, "ENUM_TYPE_UNEXPECTED_STRING_VALUES", fraction, allowed, split,
                    description=f"column {name!r}: {fraction:.4g} of the values are outside "
                    f"its domain (allowed {allowed:.4g}), e.g. {shown}")]


def _range(name, split, feature, num_stats) -> list[Anomaly]:
    if not num_stats.common_stats.num_non_missing:
        return []
    found = []
    kinds = (("int_domain", "INT_TYPE_SMALL_INT", "INT_TYPE_BIG_INT"),
             ("float_domain", "FLOAT_TYPE_SMALL_FLOAT", "FLOAT_TYPE_BIG_FLOAT"))
    for field, small, big in kinds:
        if not feature.HasField(field):
            continue
        domain = getattr(feature, field)
        if domain.HasField("min") and num_stats.min < domain.min:
            found.append(Anomaly(name, small, num_stats.min, domain.min, split,
                                 description=f"column {name!r} has values down to "
                                 f"{num_stats.min:.6g}, below the minimum {domain.min}"))
        if domain.HasField("max") and num_stats.max > domain.max:
            found.append(Anomaly(name, big, num_stats.max, domain.max, split,
                                 description=f"column {name!r} has values up to "
                                 f"{num_stats.max:.6g}, above the maximum {domain.max}"))
    return found


def drift(current: Stats, baseline: Stats, *, thresholds=None,
          schema: schema_pb2.Schema | None = None) -> list[Anomaly]:
    """Drift of ``current``'s span from ``baseline``'s span (TFDV's ``previous_statistics``;
    a side without rows is validate's business)."""
    return _compare(span_dataset(current), span_dataset(baseline), _thresholds(thresholds),
                    schema, "drift")


_WHAT = {statistics_pb2.FeatureNameStatistics.INT: "an integer",
         statistics_pb2.FeatureNameStatistics.FLOAT: "a finite float"}


def records_rejects(stats: Stats) -> bool:
    """Whether ``stats`` record the cells ingest rejected for their type (written with the
    span, :data:`~.statistics.ALL_EXAMPLES`; older statistics record none)."""
    return any(d.name == ALL_EXAMPLES for d in stats.datasets)


def rejected_types(current: Stats, baseline: Stats) -> list[Anomaly]:
    """UNEXPECTED_DATA_TYPE for each column of ``current``'s span whose cells of another type
    (rejected by ingest) are more than ``baseline``'s share predicts beyond chance: more than
    ``n * p + 3 * sqrt(n * p * (1 - p))`` of the ``n`` rows read, ``p`` the baseline's
    fraction (0: any such cell). ``baseline`` must record them (:func:`records_rejects`)."""
    before = {feature_name(f): f for f in span_dataset(baseline).features}
    found = []
    for feature in span_dataset(current).features:
        count, fraction, example = type_errors(feature)
        if not count:
            continue
        name = feature_name(feature)
        rows = round(count / fraction) if fraction else count
        _, usual, _ = type_errors(before[name]) if name in before else (0, 0.0, None)
        limit = (rows * usual + 3.0 * (rows * usual * (1.0 - usual)) ** 0.5) / rows
        if fraction <= limit:
            continue
        what = _WHAT.get(feature.type, "a value of its type")
        shown = f" (e.g. {example!r})" if example is not None else ""
        found.append(Anomaly(
            name, "UNEXPECTED_DATA_TYPE", round(fraction, 6), round(limit, 6), ALL_EXAMPLES,
            description=f"column {name!r}: {count} of {rows} rows read ({fraction:.2%}) were "
            f"not {what}{shown}, and ingest rejected them; the served model's training data "
            f"had {usual:.2%}"))
    return found


def skew(serving_stats: Stats, training_stats: Stats, *, thresholds=None,
         schema: schema_pb2.Schema | None = None, split: str = "train") -> list[Anomaly]:
    """Skew of each dataset of ``serving_stats`` from ``training_stats``' split ``split``.

    Raises:
        ValueError: the training statistics have no split ``split``.
    """
    limits = _thresholds(thresholds)
    training = next((d for d in training_stats.datasets if d.name == split), None)
    if training is None:
        raise ValueError(f"the training statistics have no split {split!r} (they have "
                         f"{[d.name for d in training_stats.datasets]})")
    return [anomaly for dataset in serving_stats.datasets
            for anomaly in _compare(dataset, training, limits, schema, "skew")]


def _compare(treatment, control, limits: Thresholds, schema, what: str) -> list[Anomaly]:
    if not treatment.num_examples or not control.num_examples:
        return []
    mine = {feature_name(f): f for f in treatment.features}
    theirs = {feature_name(f): f for f in control.features}
    comparators = {f.name: getattr(f, f"{what}_comparator") for f in (
        schema.feature if schema is not None else ())}
    found = []
    for name in list(dict.fromkeys([*mine, *theirs])):
        if name not in mine or name not in theirs:
            kind = ("COMPARATOR_TREATMENT_DATA_MISSING" if name not in mine
                    else "COMPARATOR_CONTROL_DATA_MISSING")
            found.append(Anomaly(name, kind, "absent" if name not in mine else "present",
                                 "present", treatment.name, description=f"{what}: column "
                                 f"{name!r} is in only one of the two statistics"))
            continue
        anomaly = _distance(name, mine[name], theirs[name], limits, comparators.get(name),
                            what, treatment.name)
        if anomaly:
            found.append(anomaly)
    return found


def _distance(name, a, b, limits, comparator, what, split) -> Anomaly | None:
    if a.HasField("string_stats") and b.HasField("string_stats"):
        value, distance = l_infinity(value_counts(a), value_counts(b))
        limit = limits.get("linf", name)
        if comparator is not None and comparator.infinity_norm.HasField("threshold"):
            limit = comparator.infinity_norm.threshold
        if distance > limit:
            return Anomaly(name, "COMPARATOR_L_INFTY_HIGH", distance, limit, split,
                           description=f"{what} of {name!r}: L-infinity distance "
                           f"{distance:.6g} (at value {value!r}) above {limit:.6g}")
        return None
    h1, h2 = _standard(a), _standard(b)
    if h1 is None or h2 is None:
        return None
    divergence = jensen_shannon(h1, h2)
    limit = limits.get("js_divergence", name)
    if comparator is not None and comparator.jensen_shannon_divergence.HasField("threshold"):
        limit = comparator.jensen_shannon_divergence.threshold
    if divergence > limit:
        return Anomaly(name, "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH", divergence, limit,
                       split, description=f"{what} of {name!r}: approximate Jensen-Shannon "
                       f"divergence {divergence:.6g} above {limit:.6g}")
    return None


def _standard(feature):
    if not feature.HasField("num_stats"):
        return None
    return next((h for h in feature.num_stats.histograms
                 if h.type == statistics_pb2.Histogram.STANDARD and h.buckets), None)
