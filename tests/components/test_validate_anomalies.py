"""Anomalies on injected faults, each caught with TFDV's kind, and clean nights (new samples of
the same generator) never flagged: the schema inferred from night 0, validate, drift against
night 0 and skew. Also the schema's text round trip and TFDV's inference rules."""

from __future__ import annotations

import pytest

from estflow.components.validate.anomalies import Thresholds
from estflow.components.validate.anomalies import drift
from estflow.components.validate.anomalies import skew
from estflow.components.validate.anomalies import validate
from estflow.components.validate.schema import infer_schema
from estflow.components.validate.schema import read_schema
from estflow.components.validate.schema import schema_pb2
from estflow.components.validate.schema import write_schema
from tests.components._validate_data import night
from tests.components._validate_data import statistics
from tests.components._validate_data import stats_list


def _night_stats(seed: int, **faults):
    return stats_list(statistics(night(seed, **faults), "train", cuts=(1000, 2500)),
                      statistics(night(seed + 1000, rows=1000, **faults), "eval"))


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
    found = _kinds(validate(tonight, schema, thresholds=None))
    assert ("train", "x", "FEATURE_TYPE_LOW_FRACTION_PRESENT") in found
    assert ("eval", "x", "FEATURE_TYPE_LOW_NUMBER_PRESENT") in found
    gone = stats_list(*tonight.datasets)
    for dataset in gone.datasets:  # the column absent from the statistics altogether
        kept = [f for f in dataset.features if f.path.step != ["x"]]
        del dataset.features[:]
        dataset.features.extend(kept)
    assert ("train", "x", "SCHEMA_MISSING_COLUMN") in _kinds(validate(gone, schema))
    assert ("train", "x", "COMPARATOR_TREATMENT_DATA_MISSING") in _kinds(drift(gone, stats))


def test_category_flood_is_caught(baseline):
    stats, schema = baseline
    tonight = _night_stats(8, flood=0.5)
    found = validate(tonight, schema)
    flood = next(a for a in found if a.kind == "ENUM_TYPE_UNEXPECTED_STRING_VALUES")
    assert flood.column == "color" and 0.4 < flood.observed < 0.6 and flood.allowed == 0.0
    assert "magenta" in flood.description
    assert ("train", "color", "COMPARATOR_L_INFTY_HIGH") in _kinds(drift(tonight, stats))
    loose = Thresholds(out_of_domain_fraction={"color": 0.6})
    assert not [a for a in validate(tonight, schema, thresholds=loose)
                if a.kind == "ENUM_TYPE_UNEXPECTED_STRING_VALUES"]


@pytest.mark.parametrize("shift", [3.0, -4.0])
def test_shifted_distribution_is_caught_as_drift_and_skew(baseline, shift):
    stats, schema = baseline
    tonight = _night_stats(9, shift=shift)
    assert validate(tonight, schema) == []  # valid row by row and for the schema
    drifted = [a for a in drift(tonight, stats) if a.column == "x"]
    assert {(a.split, a.kind) for a in drifted} == {
        ("train", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH"),
        ("eval", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH")}
    assert all(a.observed > a.allowed == 0.1 for a in drifted)
    serving = stats_list(statistics(night(60, rows=500, shift=shift), "serving"))
    assert _kinds(skew(serving, stats)) == {
        ("serving", "x", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH")}


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
    empty = stats_list(statistics(night(11), "train"),
                       statistics({k: [] for k in night(11, rows=0)}, "eval"))
    assert _kinds(validate(empty, schema)) == {("eval", "", "DATASET_LOW_NUM_EXAMPLES")}
    ranged = infer_schema(stats, value_ranges=True)
    wide = _night_stats(12, shift=40.0)
    assert ("train", "x", "FLOAT_TYPE_BIG_FLOAT") in _kinds(validate(wide, ranged))
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
    assert ("train", "n", "SCHEMA_NEW_COLUMN") in found
    assert ("train", "x", "UNEXPECTED_DATA_TYPE") in found
