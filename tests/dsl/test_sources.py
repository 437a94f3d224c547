"""Data sources, the schema check and declared split ratios: JSON round trips, and errors that
name the field, what was expected and what was received."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import serialization
from estflow.pipelines.examples import taxi

EXAMPLES = [
    ef.SchemaCheck(),
    ef.SchemaCheck(max_missing_fraction=0.2, max_type_error_fraction=0.0,
                   allow_unseen_columns=False),
    ef.CsvSource("gs://bucket/data/*.csv", delimiter="\t", max_rejected_fraction=0.05,
                 schema_check=ef.SchemaCheck()),
    ef.TFRecordSource("s3://bucket/examples/*.tfrecord.gz", compression="gzip"),
    ef.ParquetSource("data/*.parquet", schema_check=ef.SchemaCheck(max_missing_fraction=0.5)),
    ef.BigQuerySource(query="SELECT * FROM `proj.ds.trips` WHERE fare > 0"),
    ef.BigQuerySource(table="my-project:trips.raw", project="billing-proj"),
    ef.Split(eval_fraction=0.1, key="trip_id"),
    ef.Split(ratios={"train": 8, "eval": 1, "test": 1}, key="trip_id"),
]


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_round_trip(value):
    text = serialization.to_json(value)
    assert serialization.from_json(text) == value
    assert serialization.to_json(serialization.from_json(text)) == text  # deterministic


def test_every_source_class_has_an_example():
    covered = {type(v).__name__ for v in EXAMPLES}
    assert {"SchemaCheck", "CsvSource", "TFRecordSource", "ParquetSource", "BigQuerySource",
            "Split"} <= covered


@pytest.mark.parametrize("source", EXAMPLES[2:7], ids=lambda v: type(v).__name__)
def test_a_pipeline_accepts_every_source_and_round_trips(source):
    pipeline = dataclasses.replace(taxi.pipeline, source=source)
    assert ef.Pipeline.from_json(pipeline.to_json()) == pipeline


def test_a_pipeline_refuses_something_else_as_source():
    with pytest.raises(ef.DslError) as info:
        dataclasses.replace(taxi.pipeline, source="data.csv")
    assert info.value.path == "source" and "ParquetSource" in info.value.expected


@pytest.mark.parametrize("build, path, words", [
    (lambda: ef.BigQuerySource(), "query", "exactly one of"),
    (lambda: ef.BigQuerySource(query="SELECT 1", table="a.b"), "query", "exactly one of"),
    (lambda: ef.BigQuerySource(table="just_a_table"), "table", "dataset.table"),
    (lambda: ef.BigQuerySource(query="  "), "query", "non-empty"),
    (lambda: ef.BigQuerySource(table="d.t", project="Bad Project"), "project", "project id"),
    (lambda: ef.TFRecordSource("x", compression="zip"), "compression", "'gzip'"),
    (lambda: ef.ParquetSource(""), "path", "non-empty"),
    (lambda: ef.CsvSource("x.csv", delimiter='"'), "delimiter", "single character"),
    (lambda: ef.CsvSource("x.csv", max_rejected_fraction=2), "max_rejected_fraction", "<= 1"),
    (lambda: ef.CsvSource("x.csv", schema_check={"max": 1}), "schema_check", "SchemaCheck"),
    (lambda: ef.SchemaCheck(max_missing_fraction=-0.1), "max_missing_fraction", ">= 0"),
    (lambda: ef.SchemaCheck(allow_unseen_columns="no"), "allow_unseen_columns", "True or"),
])
def test_invalid_sources_name_the_field(build, path, words):
    with pytest.raises(ef.DslError) as info:
        build()
    assert info.value.path == path and words in info.value.expected


def test_split_ratios_give_fractions_in_a_fixed_order():
    split = ef.Split(ratios={"test": 1, "eval": 1, "train": 8})
    assert split.fractions() == (("train", 0.8), ("eval", 0.1), ("test", 0.1))
    assert split.eval_fraction == 0.1
    assert ef.Split(eval_fraction=0.25).fractions() == (("train", 0.75), ("eval", 0.25))


@pytest.mark.parametrize("kwargs, path", [
    ({"ratios": {"train": 1}}, "ratios"),
    ({"ratios": {"train": 1, "eval": 0}}, "ratios['eval']"),
    ({"ratios": {"train": 1, "eval": 1, "transform_fn": 1}}, "ratios['transform_fn']"),
    ({"ratios": {"train": 1, "eval": 1, "bad-name": 1}}, "ratios['bad-name']"),
    ({"ratios": {"train": 1, "eval": 19}}, "ratios"),
    ({"ratios": {"train": 8, "eval": 2}, "eval_fraction": 0.3}, "eval_fraction"),
])
def test_invalid_ratios_name_the_field(kwargs, path):
    with pytest.raises(ef.DslError) as info:
        ef.Split(**kwargs)
    assert info.value.path == path
