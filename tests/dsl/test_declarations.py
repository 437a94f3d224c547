"""Declarations are validated when constructed; errors name the field, expected and received."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.pipelines.examples import taxi


@pytest.mark.parametrize(
    "make, field, expected, received",
    [
        (lambda: ef.Numeric("fare", normalize="zscore"), "normalize",
         "one of [None, 'z_score', 'min_max', 'log']", "'zscore'"),
        (lambda: ef.Numeric("fare", default="0"), "default", "a float value", "'0'"),
        (lambda: ef.Numeric("2fast"), "name", "an identifier", "'2fast'"),
        (lambda: ef.Bucketized("b", boundaries=(3.0, 1.0)), "boundaries",
         "strictly increasing", "(3.0, 1.0)"),
        (lambda: ef.Bucketized("b"), "boundaries", "exactly one of `boundaries`", "None"),
        (lambda: ef.Bucketized("b", boundaries=(1.0,), num_buckets=4), "boundaries",
         "exactly one of", "num_buckets"),
        (lambda: ef.CategoricalVocab("c", top_k=0), "top_k", "a positive integer", "0"),
        (lambda: ef.CategoricalHash("c", hash_buckets=1), "hash_buckets", "an integer >= 2",
         "1"),
        (lambda: ef.CategoricalIdentity("c", num_buckets=10, default="a"), "default",
         "a int value", "'a'"),
        (lambda: ef.Crossed("x", keys=("a",), hash_buckets=10), "keys", "at least 2", "('a',)"),
        (lambda: ef.DNNClassifier(hidden_units=(64, 0), feature_columns=("a",)),
         "hidden_units[1]", "a positive integer", "0"),
        (lambda: ef.DNNClassifier(hidden_units=(64,), feature_columns=()), "feature_columns",
         "at least 1", "()"),
        (lambda: ef.DNNClassifier(hidden_units=(64,), feature_columns=("a",), optimizer="adam"),
         "optimizer", "one of ['Adagrad'", "'adam'"),
        (lambda: ef.DNNClassifier(hidden_units=(64,), feature_columns=("a",), n_classes=1),
         "n_classes", "an integer >= 2", "1"),
        (lambda: ef.TrainSpec(max_steps=0), "max_steps", "a positive integer", "0"),
        (lambda: ef.CsvSource("d.csv", max_rejected_fraction=1.5), "max_rejected_fraction",
         "<= 1", "1.5"),
        (lambda: ef.Split(eval_fraction=0.0), "eval_fraction", "> 0", "0.0"),
        (lambda: ef.PushTarget("models", model_name="my model"), "model_name",
         "an identifier", "'my model'"),
        (lambda: ef.CustomModel(model_fn=lambda f, labels, m, p: None), "model_fn",
         "a module-level function", "<lambda>"),
        (lambda: ef.CustomModel(model_fn="no_colon"), "model_fn",
         "'package.module:function'", "'no_colon'"),
        (lambda: ef.RunConfig(eval_distribute="tpu"), "eval_distribute", "one of ['mirrored']",
         "'tpu'"),
        (lambda: ef.RunConfig(train_distribute="multi_worker_mirrored",
                              eval_distribute="mirrored"), "eval_distribute",
         "None when train_distribute='multi_worker_mirrored'", "'mirrored'"),
    ],
)
def test_invalid_declaration_names_field_expected_and_received(make, field, expected, received):
    with pytest.raises(ef.DslError) as info:
        make()
    message = str(info.value)
    assert info.value.path == field
    assert f"`{field}`" in message
    assert expected in message
    assert received in message


def _taxi(**changes):
    return dataclasses.replace(taxi.pipeline, **changes)


def test_pipeline_collects_every_cross_reference_error():
    model = ef.DNNClassifier(
        hidden_units=(8,),
        feature_columns=("payment_type", "nope", ef.Embedding("fare", dimension=2)))
    features = taxi.FEATURES + (ef.Numeric("fare", default=1.0),)
    with pytest.raises(ef.DslErrors) as info:
        _taxi(model=model, features=features, split=ef.Split(key="missing_column"))
    text = str(info.value)
    paths = [e.path for e in info.value.errors]
    assert "model.feature_columns[0]" in paths
    assert "wrap a categorical feature in ef.Indicator('payment_type')" in text
    assert "model.feature_columns[1]" in paths and "'nope'" in text
    assert "model.feature_columns[2]" in paths
    assert "split.key" in paths
    # the second 'fare' both redeclares the name and disagrees on the raw column's default
    assert any(p.endswith(".name") for p in paths)
    assert "the same dtype and default as" in text


def test_crossed_keys_must_be_categorical_features():
    features = taxi.FEATURES + (ef.Crossed("bad", keys=("fare", "company"), hash_buckets=10),)
    with pytest.raises(ef.DslErrors) as info:
        _taxi(features=features)
    assert [e.path for e in info.value.errors] == [f"features[{len(features) - 1}].keys[0]"]


def test_pipeline_field_types_are_checked():
    with pytest.raises(ef.DslError) as info:
        _taxi(train=ef.EvalSpec())
    assert "`train`" in str(info.value) and "TrainSpec" in str(info.value)
    with pytest.raises(ef.DslError) as info:
        _taxi(name="Chicago Taxi")
    assert "`name`" in str(info.value)


def test_raw_columns_merge_features_label_and_extra_columns():
    cols = {c.name: c for c in taxi.pipeline.raw_columns()}
    assert cols["tips"] == ef.Column("tips", "float", 0.0)
    assert cols["trip_seconds"] == ef.Column("trip_seconds", "int", 0)
    assert cols["pickup_latitude"].default == 0.0  # read through a Bucketized `source`
    assert "big_tipper" not in cols  # derived, not raw
    assert "pickup_cell" not in cols  # a cross of features, not a column


def test_int_default_on_float_column_is_normalised():
    assert ef.Numeric("x", default=0).default == 0.0
    assert isinstance(ef.Numeric("x", default=0).default, float)


def test_crosses_may_only_reference_earlier_features_so_no_cycles():
    features = (
        ef.CategoricalHash("a", hash_buckets=10),
        ef.Crossed("x", keys=("a", "y"), hash_buckets=10),
        ef.Crossed("y", keys=("a", "x"), hash_buckets=10),
    )
    with pytest.raises(ef.DslErrors) as info:
        _taxi(features=taxi.FEATURES + features)
    n = len(taxi.FEATURES)
    assert [e.path for e in info.value.errors] == [f"features[{n + 1}].keys[1]"]


def test_label_name_must_differ_from_feature_names():
    with pytest.raises(ef.DslErrors) as info:
        _taxi(label=ef.Label("fare", source="tips", dtype="float"))
    assert "label.name" in [e.path for e in info.value.errors]


def test_derived_outputs_take_no_default():
    with pytest.raises(ef.DslError) as info:
        ef.Derive(taxi.big_tipper, outputs=(ef.Column("big_tipper", "int", default=0),))
    assert info.value.path == "outputs[0].default"
