"""ef.BoostedTreesClassifier / ef.BoostedTreesRegressor: defaults (tf.estimator's), checks
naming the field, JSON round trip, and the pipeline's feature cross-checks."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.dsl import serialization
from estflow.pipelines.examples import taxi


def test_defaults_are_tf_estimators():
    model = ef.BoostedTreesClassifier(("fare",), n_batches_per_layer=1)
    assert (model.n_trees, model.max_depth, model.learning_rate, model.l1_regularization,
            model.l2_regularization, model.tree_complexity, model.min_node_weight,
            model.center_bias, model.pruning_mode, model.quantile_sketch_epsilon) == (
        100, 6, 0.1, 0.0, 0.0, 0.0, 0.0, False, "none", 0.01)
    assert ef.models.head_of(model) == "binary"
    assert ef.models.head_of(ef.BoostedTreesClassifier(("fare",), 1, n_classes=3)) == \
        "multi_class"
    assert ef.models.head_of(ef.BoostedTreesRegressor(("fare",), 1)) == "regression"


@pytest.mark.parametrize("make, field", [
    (lambda: ef.BoostedTreesClassifier((), 1), "feature_columns"),
    (lambda: ef.BoostedTreesClassifier((ef.Embedding("c", 2),), 1), "feature_columns[0]"),
    (lambda: ef.BoostedTreesClassifier(("x",), 0), "n_batches_per_layer"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, n_trees=0), "n_trees"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, max_depth=0), "max_depth"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, learning_rate=0), "learning_rate"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, l2_regularization=-1), "l2_regularization"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, pruning_mode="late"), "pruning_mode"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, tree_complexity=0.1), "tree_complexity"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, pruning_mode="pre"), "tree_complexity"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, quantile_sketch_epsilon=0.9),
     "quantile_sketch_epsilon"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, center_bias="yes"), "center_bias"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, n_classes=3, center_bias=True),
     "center_bias"),
    (lambda: ef.BoostedTreesClassifier(("x",), 1, n_classes=1), "n_classes"),
    (lambda: ef.BoostedTreesRegressor(("x",), 1, label_dimension=2, center_bias=True),
     "center_bias"),
    (lambda: ef.BoostedTreesRegressor(("x",), 1, label_dimension=0), "label_dimension"),
])
def test_invalid_values_name_the_field(make, field):
    with pytest.raises(ef.DslError) as info:
        make()
    assert info.value.path == field
    assert f"`{field}`" in str(info.value)


def test_json_round_trip():
    for model in (ef.BoostedTreesClassifier(["fare", ef.Indicator("hour")], 2, n_classes=3,
                                            label_vocabulary=("a", "b", "c"),
                                            pruning_mode="post", tree_complexity=0.01),
                  ef.BoostedTreesRegressor(("fare",), 1, center_bias=True, weight_column="w")):
        again = serialization.from_json(serialization.to_json(model))
        assert again == model
        assert isinstance(again.feature_columns, tuple)


def test_pipeline_checks_the_columns_against_the_features():
    model = ef.BoostedTreesClassifier(("fare", ef.Indicator("payment_type")), 1)
    assert dataclasses.replace(taxi.pipeline, model=model).model == model
    with pytest.raises(ef.DslErrors) as info:
        dataclasses.replace(taxi.pipeline, model=ef.BoostedTreesClassifier(
            ("payment_type", ef.Indicator("nope")), 1))
    paths = [e.path for e in info.value.errors]
    assert "model.feature_columns[0]" in paths and "model.feature_columns[1]" in paths
