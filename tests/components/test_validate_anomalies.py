"""Anomalies on injected faults, each caught with TFDV's kind, and clean nights (new samples of
the same generator) never flagged: the schema inferred from night 0, validate, drift against
night 0 and skew. The checks run on the whole span (``All Examples``, every split together),
as TFDV validates one dataset: an anomaly of every split is found once, and a small eval
split's noise is no drift. Also the schema's text round trip and TFDV's inference rules."""

from __future__ import annotations

import pytest

from estflow.components._statistics.anomalies import Thresholds
from estflow.components._statistics.anomalies import drift
from estflow.components._statistics.anomalies import skew
from estflow.components._statistics.anomalies import validate
from estflow.components._statistics.distance import jensen_shannon
from estflow.components._statistics.schema import infer_schema
from estflow.components._statistics.schema import read_schema
from estflow.components._statistics.schema import schema_pb2
from estflow.components._statistics.schema import write_schema
from estflow.components._statistics.statistics import ALL_EXAMPLES
from tests.components._validate_data import night
from tests.components._validate_data import span
from tests.components._validate_data import statistics
from tests.components._validate_data import stats_list

ALL = ALL_EXAMPLES


def _night_stats(seed: int, eval_rows: int = 1000, **faults):
    """A night's statistics file: train and eval, then the span (``All Examples``)."""
    return span({"train": night(seed, **faults),
                 "eval": night(seed + 1000, rows=eval_rows, **faults)})


@pytest.fixture(scope="module")
def baseline():
    stats = _night_stats(0)
    return stats, infer_schema(stats)


def _kinds(anomalies) -> set[tuple[str, str, str]]:
    return {(a.split, a.column, a.kind) for a in anomalies}


def test_inferred_schema_follows_tfdv(baseline, tmp_path):
    stats, schema = baseline
    features = {f.name: f for f in schema.feature}
    assert features["x"].type == schema_pb2.FLOAT and features["color"].type == schema_pb2.BYTES
    assert features["x"].presence.min_fraction == 1.0 and features["x"].presence.min_count == 1
    assert [d.size for d in features["x"].shape.dim] == [1]
    assert features["color"].domain == "color"
    assert sorted(schema.string_domain[0].value) == ["blue", "green", "grün", "red"]
    assert features["code"].int_domain.is_categorical
    assert not features["x"].HasField("float_domain")  # TFDV infers no ranges
    ranged = infer_schema(stats, value_ranges=True)
    assert next(f for f in ranged.feature if f.name == "n").int_domain.min == 0
    write_schema(schema, str(tmp_path / "schema.pbtxt"))
    assert read_schema(str(tmp_path / "schema.pbtxt")) == schema


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_clean_nights_are_never_flagged(baseline, seed):
    stats, schema = baseline
    tonight = _night_stats(seed)
    assert validate(tonight, schema, thresholds=Thresholds()) == []
    assert drift(tonight, stats, thresholds=Thresholds()) == []
    assert skew(stats_list(statistics(night(seed + 50, rows=500), "serving")), stats) == []


def test_dropped_column_is_caught(baseline):
    stats, schema = baseline
    tonight = _night_stats(7, drop="x")
    found = validate(tonight, schema, thresholds=None)
    assert sorted((a.split, a.column, a.kind) for a in found) == [
        (ALL, "x", "FEATURE_TYPE_LOW_FRACTION_PRESENT"),
        (ALL, "x", "FEATURE_TYPE_LOW_NUMBER_PRESENT"),
        (ALL, "x", "INVALID_FEATURE_SHAPE")]  # once each, not once per split
    gone = stats_list(*tonight.datasets)
    for dataset in gone.datasets:  # the column absent from the statistics altogether
        kept = [f for f in dataset.features if f.path.step != ["x"]]
        del dataset.features[:]
        dataset.features.extend(kept)
    assert _kinds(validate(gone, schema)) == {(ALL, "x", "SCHEMA_MISSING_COLUMN")}
    assert [(a.split, a.kind) for a in drift(gone, stats) if a.column == "x"] == [
        (ALL, "COMPARATOR_TREATMENT_DATA_MISSING")]


def test_category_flood_is_caught(baseline):
    stats, schema = baseline
    tonight = _night_stats(8, flood=0.5)
    found = validate(tonight, schema)
    (flood,) = [a for a in found if a.kind == "ENUM_TYPE_UNEXPECTED_STRING_VALUES"]
    assert flood.column == "color" and 0.4 < flood.observed < 0.6 and flood.allowed == 0.0
    assert flood.split == ALL and "magenta" in flood.description
    assert [(a.split, a.column, a.kind) for a in drift(tonight, stats)] == [
        (ALL, "color", "COMPARATOR_L_INFTY_HIGH")]
    loose = Thresholds(out_of_domain_fraction={"color": 0.6})
    assert not [a for a in validate(tonight, schema, thresholds=loose)
                if a.kind == "ENUM_TYPE_UNEXPECTED_STRING_VALUES"]


@pytest.mark.parametrize("shift", [3.0, -4.0])
def test_shifted_distribution_is_caught_as_drift_and_skew(baseline, shift):
    stats, schema = baseline
    tonight = _night_stats(9, shift=shift)
    assert validate(tonight, schema) == []  # valid row by row and for the schema
    (drifted,) = [a for a in drift(tonight, stats) if a.column == "x"]
    assert (drifted.split, drifted.kind) == (ALL, "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH")
    assert drifted.observed > drifted.allowed == 0.1
    # the divergence of the two spans' histograms, not of a split's
    assert drifted.observed == jensen_shannon(_standard(tonight, "x"), _standard(stats, "x"))
    serving = stats_list(statistics(night(60, rows=500, shift=shift), "serving"))
    assert _kinds(skew(serving, stats)) == {
        ("serving", "x", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH")}


def _standard(stats, column: str):
    (dataset,) = [d for d in stats.datasets if d.name == ALL]
    feature = next(f for f in dataset.features if f.path.step == [column])
    return next(h for h in feature.num_stats.histograms if h.type == h.STANDARD)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_small_eval_splits_noise_is_no_drift_of_the_span(baseline, seed):
    # A clean night whose eval split has 150 rows: alone, its color and code frequencies are
    # 0.077-0.083 away from night 0's eval split (seeds 1 and 2); over the span, at most 0.008.
    stats, _ = baseline
    tonight = _night_stats(seed, eval_rows=150)
    assert drift(tonight, stats, thresholds=Thresholds(linf=0.05, js_divergence=0.1)) == []


def test_an_anomaly_of_every_split_is_reported_once(baseline):
    stats, schema = baseline
    tonight = _night_stats(15, flood=0.5, drop="x")
    found = [(a.column, a.kind) for a in validate(tonight, schema)]
    assert sorted(found) == sorted(set(found))
    assert sorted(found) == [("color", "ENUM_TYPE_UNEXPECTED_STRING_VALUES"),
                             ("x", "FEATURE_TYPE_LOW_FRACTION_PRESENT"),
                             ("x", "FEATURE_TYPE_LOW_NUMBER_PRESENT"),
                             ("x", "INVALID_FEATURE_SHAPE")]


def test_a_partly_blank_column_breaks_its_fixed_shape_as_in_tfdv(baseline):
    # The inferred schema gives x (never missing on night 0) shape [1]; a night where 30% of
    # x is blank is FEATURE_TYPE_LOW_FRACTION_PRESENT and INVALID_FEATURE_SHAPE, as TFDV says.
    stats, schema = baseline
    train, test = night(16), night(1016, rows=1000)
    for columns in (train, test):
        columns["x"] = [None if i % 10 < 3 else v for i, v in enumerate(columns["x"])]
    found = {a.kind: a for a in validate(span({"train": train, "eval": test}), schema)
             if a.column == "x"}
    assert sorted(found) == ["FEATURE_TYPE_LOW_FRACTION_PRESENT", "INVALID_FEATURE_SHAPE"]
    shape = found["INVALID_FEATURE_SHAPE"]
    assert (shape.split, shape.observed) == (ALL, "missing in 1500 rows")
    assert shape.allowed == "shape [1]: 1 value(s) in every row"
    # a declared shape of another size is broken by a column always present too
    wider = schema_pb2.Schema()
    wider.CopyFrom(schema)
    next(f for f in wider.feature if f.name == "n").shape.dim[0].size = 2
    (bad,) = [a for a in validate(_night_stats(17), wider) if a.column == "n"]
    assert (bad.kind, bad.observed) == ("INVALID_FEATURE_SHAPE", "1 value(s) a row")
    # no shape (a column that may be missing: a value count instead): never this anomaly
    assert not next(f for f in infer_schema(span({"train": train})).feature
                    if f.name == "x").HasField("shape")


def test_the_inferred_schema_asks_for_min_examples(baseline):
    stats, schema = baseline
    assert schema.dataset_constraints.min_examples_count == 1
    strict = infer_schema(stats, min_examples=6000)
    assert strict.dataset_constraints.min_examples_count == 6000
    assert [(a.kind, a.observed, a.allowed) for a in validate(stats, strict)] == [
        ("DATASET_LOW_NUM_EXAMPLES", 5000, 6000)]


def test_schema_comparator_thresholds_win(baseline):
    stats, schema = baseline
    strict = schema_pb2.Schema()
    strict.CopyFrom(schema)
    x = next(f for f in strict.feature if f.name == "x")
    x.drift_comparator.jensen_shannon_divergence.threshold = 0.0
    found = drift(_night_stats(10), stats, schema=strict)
    assert {a.column for a in found} == {"x"}


def test_empty_split_and_out_of_range(baseline):
    stats, schema = baseline
    empty = span({"train": night(11), "eval": {k: [] for k in night(11, rows=0)}})
    assert _kinds(validate(empty, schema)) == {("eval", "", "DATASET_LOW_NUM_EXAMPLES")}
    nothing = span({"train": {k: [] for k in night(11, rows=0)}})
    assert _kinds(validate(nothing, schema)) == {(ALL, "", "DATASET_LOW_NUM_EXAMPLES")}
    ranged = infer_schema(stats, value_ranges=True)
    wide = _night_stats(12, shift=40.0)
    assert (ALL, "x", "FLOAT_TYPE_BIG_FLOAT") in _kinds(validate(wide, ranged))
    low = stats_list(statistics({**night(13), "n": [-5] * 4000}, "train"))
    assert ("train", "n", "INT_TYPE_SMALL_INT") in _kinds(validate(low, ranged))


def test_new_column_and_type_change(baseline):
    _, schema = baseline
    fewer = schema_pb2.Schema()
    fewer.CopyFrom(schema)
    kept = [f for f in fewer.feature if f.name != "n"]
    del fewer.feature[:]
    fewer.feature.extend(kept)
    next(f for f in fewer.feature if f.name == "x").type = schema_pb2.INT
    found = _kinds(validate(_night_stats(14), fewer))
    assert found == {(ALL, "n", "SCHEMA_NEW_COLUMN"), (ALL, "x", "UNEXPECTED_DATA_TYPE")}
