"""ef.DataChecks and ef.Spans: their checks name the field, they travel in the spec, and a span
selects one partition of the source."""

import pytest

import estflow.dsl as ef
from estflow.dsl.checks import select_span
from estflow.dsl.checks import select_window
from estflow.dsl.checks import source_patterns
from estflow.dsl.checks import span_of
from estflow.dsl.serialization import from_dict
from estflow.dsl.serialization import to_dict


def _pipeline(**kwargs):
    fields = dict(name="trips", source=ef.CsvSource("data/{span:%Y-%m-%d}/*.csv",
                                                     spans=ef.Spans()),
                  features=(ef.Numeric("fare", default=0.0),
                            ef.CategoricalVocab("company", default="")),
                  label=ef.Label("tipped"),
                  model=ef.LinearClassifier(feature_columns=("fare", "company")),
                  train=ef.TrainSpec(max_steps=10))
    return ef.Pipeline(**{**fields, **kwargs})


def test_checks_travel_in_the_spec():
    pipeline = _pipeline(checks=ef.DataChecks(schema="schema.pbtxt", drift={"company": 0.2},
                                              warn_only=("fare", "SCHEMA_NEW_COLUMN")))
    assert ef.Pipeline.from_json(pipeline.to_json()) == pipeline
    assert '"checks"' in pipeline.to_json() and '"spans"' in pipeline.to_json()


@pytest.mark.parametrize("kwargs, field", [
    ({"min_examples": 0}, "min_examples"),
    ({"max_missing_fraction": 1.5}, "max_missing_fraction"),
    ({"drift": {"company": 2.0}}, "drift['company']"),
    ({"drift": ["company"]}, "drift"),
    ({"drift_js": -0.1}, "drift_js"),
    ({"schema": ""}, "schema"),
    ({"warn_only": "drift"}, "warn_only"),
    ({"warn_only": ("drift", 3)}, "warn_only[1]"),
])
def test_a_wrong_check_names_its_field(kwargs, field):
    with pytest.raises(ef.DslError) as err:
        ef.DataChecks(**kwargs)
    assert err.value.path == field


def test_columns_the_checks_name_must_be_raw_columns():
    with pytest.raises(ef.DslErrors) as err:
        _pipeline(checks=ef.DataChecks(drift={"compnay": 0.1}, warn_only=("fair", "drift")))
    paths = [e.path for e in err.value.errors]
    assert paths == ["checks.drift['compnay']", "checks.warn_only[0]"]


def test_warn_only_by_family_kind_or_column():
    checks = ef.DataChecks(warn_only=("drift", "fare", "SCHEMA_NEW_COLUMN"))
    assert not checks.blocks("company", "COMPARATOR_L_INFINITY_HIGH", family="drift")
    assert not checks.blocks("fare", "DATASET_LOW_NUM_EXAMPLES", family="examples")
    assert not checks.blocks("x", "SCHEMA_NEW_COLUMN", family="schema")
    assert checks.blocks("company", "SCHEMA_MISSING_COLUMN", family="schema")


def test_drift_thresholds_per_column_then_by_kind():
    checks = ef.DataChecks(drift={"fare": 0.3}, drift_linf=0.1)
    assert checks.drift_threshold("fare") == 0.3
    assert checks.drift_threshold("company", categorical=True) == 0.1
    assert checks.drift_threshold("tips") is None


def test_a_placeholder_needs_spans_and_spans_need_one_placeholder():
    with pytest.raises(ef.DslError) as err:
        ef.CsvSource("data/{span:%Y-%m-%d}/*.csv")
    assert err.value.path == "spans"
    with pytest.raises(ef.DslError) as err:
        ef.ParquetSource("data/*.parquet", spans=ef.Spans())
    assert err.value.path == "path"
    with pytest.raises(ef.DslError) as err:
        ef.Spans(last=0)
    assert err.value.path == "spans.last"


def test_a_span_selects_its_partition():
    source = _pipeline().source
    chosen = select_span(source, "2024-01-02")
    assert (chosen.path, chosen.spans) == ("data/2024-01-02/*.csv", None)
    with pytest.raises(ef.DslError) as err:
        select_span(source, "2024-1-2")
    assert err.value.path == "--span" and "'%Y-%m-%d'" in str(err.value)
    with pytest.raises(ef.DslError):
        select_span(ef.CsvSource("data/*.csv"), "2024-01-02")


def test_a_window_of_spans_reads_each_partition_and_records_them():
    source = ef.CsvSource("data/{span:%Y-%m-%d}/*.csv", spans=ef.Spans(last=2))
    window = select_window(source, ("2024-01-01", "2024-01-02"))
    assert window.spans.selected == ("2024-01-01", "2024-01-02")
    assert source_patterns(window) == ("data/2024-01-01/*.csv", "data/2024-01-02/*.csv")
    assert source_patterns(source) == (source.path,)
    assert select_window(source, ("2024-01-02",)).path == "data/2024-01-02/*.csv"
    assert from_dict(to_dict(window)) == window  # the run's spec keeps the window
    with pytest.raises(ef.DslError) as err:
        select_window(source, ("2024-01-01", "2024-1-2"))
    assert err.value.path == "--span"


def test_span_of_a_path():
    assert span_of("data/{span:%Y-%m-%d}/*.csv", "data/2024-01-03/a.csv") == "2024-01-03"
    assert span_of("in/*/{span:%Y%m%d%H}.csv", "in/x/2024010305.csv") == "2024010305"
    assert span_of("data/{span:%Y-%m-%d}/*.csv", "other/2024-01-03/a.csv") is None
