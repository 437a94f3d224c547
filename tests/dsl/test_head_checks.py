"""Mistakes between the label, the model's head and the eval thresholds are caught when the
Pipeline is declared (all at once), not minutes later in the train or evaluate step."""

import dataclasses

import numpy as np
import pytest

import estflow.dsl as ef
from estflow.components.evaluate import metrics as evaluate_metrics
from estflow.dsl import models as m

COLORS = ("red", "green", "blue")


def _pipeline(**changes):
    base = dict(
        name="tiny", source=ef.CsvSource("data.csv"),
        features=(ef.Numeric("x", default=0.0),), label=ef.Label("y"),
        model=ef.LinearClassifier(feature_columns=("x",)), train=ef.TrainSpec(max_steps=5))
    return ef.Pipeline(**{**base, **changes})


def _errors(**changes) -> dict[str, ef.DslError]:
    with pytest.raises(ef.DslErrors) as info:
        _pipeline(**changes)
    return {e.path: e for e in info.value.errors}


def test_a_string_label_with_more_names_than_n_classes_is_refused():
    errors = _errors(label=ef.Label("y", dtype="string", vocabulary=COLORS))
    assert list(errors) == ["model.n_classes"]
    err = errors["model.n_classes"]
    assert err.received == 2
    assert "3 (the number of class names in label.vocabulary" in err.expected


def test_a_string_label_with_a_matching_n_classes_is_fine():
    pipeline = _pipeline(label=ef.Label("y", dtype="string", vocabulary=COLORS),
                         model=ef.LinearClassifier(feature_columns=("x",), n_classes=3))
    assert m.head_of(pipeline.model) == "multi_class"


def test_a_custom_binary_head_with_three_label_names_is_refused():
    model = ef.CustomModel("my_models:model_fn", head="binary")
    errors = _errors(label=ef.Label("y", dtype="string", vocabulary=COLORS), model=model)
    assert list(errors) == ["model.head"]
    assert "'multi_class'" in errors["model.head"].expected


def test_a_model_vocabulary_that_differs_from_the_labels_is_refused():
    model = ef.LinearClassifier(feature_columns=("x",), label_vocabulary=("yes", "no"))
    errors = _errors(label=ef.Label("y", dtype="string", vocabulary=("no", "yes")), model=model)
    assert list(errors) == ["model.label_vocabulary"]
    err = errors["model.label_vocabulary"]
    assert err.received == ("yes", "no") and "('no', 'yes')" in err.expected


def test_a_model_vocabulary_needs_a_string_label_with_that_vocabulary():
    model = ef.LinearClassifier(feature_columns=("x",), label_vocabulary=("no", "yes"))
    errors = _errors(model=model)  # Label("y") is an int label: ingest would reject every row
    assert list(errors) == ["label"]
    assert "dtype='string', vocabulary=('no', 'yes')" in errors["label"].expected
    assert "dtype='int'" in str(errors["label"].received)


def test_the_same_vocabulary_on_label_and_model_is_fine():
    vocab = ("no", "yes")
    _pipeline(label=ef.Label("y", dtype="string", vocabulary=vocab),
              model=ef.LinearClassifier(feature_columns=("x",), label_vocabulary=vocab))


def test_a_label_that_misspells_an_unread_derive_output_is_refused():
    derive = ef.Derive("hooks:big", outputs=(ef.Column("big_tipper", "int"),))
    errors = _errors(derive=derive, label=ef.Label("big_tiper"))
    assert list(errors) == ["label.name"]
    assert "did you mean 'big_tipper'" in errors["label.name"].expected
    _pipeline(derive=derive, label=ef.Label("big_tipper"))  # spelled right: fine
    # a raw label beside a derive output that a feature reads: fine
    _pipeline(derive=derive, label=ef.Label("big_tips"),
              features=(ef.Numeric("x", default=0.0), ef.Numeric("big_tipper")),
              model=ef.LinearClassifier(feature_columns=("x", "big_tipper")))


@pytest.mark.parametrize("model, metric, head", [
    (ef.LinearClassifier(feature_columns=("x",)), "f1", "binary"),
    (ef.LinearClassifier(feature_columns=("x",), n_classes=3), "auc", "multi_class"),
    (ef.LinearRegressor(feature_columns=("x",)), "accuracy", "regression"),
    (ef.CustomModel("my_models:model_fn", head="regression"), "auc", "regression"),
])
def test_a_threshold_on_a_metric_the_head_does_not_produce_is_refused(model, metric, head):
    thresholds = (ef.Threshold("average_loss", upper_bound=1.0),
                  ef.Threshold(metric, lower_bound=0.5))
    errors = _errors(model=model, eval=ef.EvalSpec(thresholds=thresholds))
    assert list(errors) == ["eval.thresholds[1].metric"]
    err = errors["eval.thresholds[1].metric"]
    assert err.received == metric
    assert f"one of the {head} head's metrics {list(m.METRIC_NAMES[head])}" in err.expected


@pytest.mark.parametrize("name", ["auc", "auc_precision_recall", "auc_exact", "auc_pr"])
def test_each_auc_is_a_metric_of_its_own_stored_as_declared(name):
    """tf.estimator's ``auc_precision_recall`` (200-threshold interpolation) is not the exact
    average precision ``auc_pr``: it was once stored as ``auc_pr``; each name is now its own
    number, tf.estimator's under tf.estimator's names."""
    pipeline = _pipeline(eval=ef.EvalSpec(
        thresholds=(ef.Threshold(name, lower_bound=0.1, max_regression=0.01),)))
    assert pipeline.eval.thresholds[0] == ef.Threshold(name, lower_bound=0.1,
                                                       max_regression=0.01)
    assert ef.Pipeline.from_json(pipeline.to_json()) == pipeline
    assert all(not aliases for aliases in m.METRIC_ALIASES.values())


def test_an_unknown_metric_names_the_heads_metrics_without_an_empty_alias_list():
    err = _errors(eval=ef.EvalSpec(thresholds=(ef.Threshold("f1", lower_bound=0.5),)))[
        "eval.thresholds[0].metric"]
    assert "'auc_precision_recall', 'auc_exact', 'auc_pr'" in err.expected
    assert "[]" not in err.expected


@pytest.mark.parametrize("model", [
    ef.LinearClassifier(feature_columns=("x",)),
    ef.LinearClassifier(feature_columns=("x",), n_classes=4),
    ef.LinearRegressor(feature_columns=("x",)),
])
def test_the_loss_is_average_loss_and_a_threshold_on_loss_is_refused(model):
    """tf.estimator's eval `loss` (the mean of batch losses, in train.json and TensorBoard) is
    not what the evaluate step computes; its `average_loss` (the mean over the examples) is,
    under that name, stored as declared."""
    pipeline = _pipeline(model=model, eval=ef.EvalSpec(thresholds=(
        ef.Threshold("average_loss", upper_bound=0.5, higher_is_better=False),)))
    assert pipeline.eval.thresholds[0].metric == "average_loss"
    assert ef.Pipeline.from_json(pipeline.to_json()) == pipeline
    errors = _errors(model=model, eval=ef.EvalSpec(thresholds=(
        ef.Threshold("loss", upper_bound=0.5, higher_is_better=False),)))
    err = errors["eval.thresholds[0].metric"]
    assert err.received == "loss" and "'average_loss'" in err.expected
    assert "mean of the eval batches' losses" in str(err)


def test_every_mistake_is_reported_at_once():
    errors = _errors(label=ef.Label("y", dtype="string", vocabulary=COLORS),
                     model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x", "nope"),
                                            label_vocabulary=("a", "b")),
                     eval=ef.EvalSpec(thresholds=(ef.Threshold("f1", lower_bound=0.5),)))
    assert sorted(errors) == ["eval.thresholds[0].metric", "model.feature_columns[1]",
                              "model.label_vocabulary", "model.n_classes"]


@pytest.mark.parametrize("head", m.HEADS)
def test_the_dsl_metric_table_is_what_the_evaluate_step_computes(head):
    assert m.METRIC_NAMES[head] == evaluate_metrics.metric_names(head)
    for alias, name in m.METRIC_ALIASES[head].items():
        assert name in m.METRIC_NAMES[head] and alias not in m.METRIC_NAMES[head]


# --- the CustomModel's prediction contract, checked at the first PREDICT trace ----------------

def _spec(**predictions):
    return ef.EstimatorSpec(mode=ef.ModeKeys.PREDICT, predictions={
        k: np.zeros((2, 1), np.float32) for k in predictions})


def test_custom_predictions_without_the_evaluated_output_are_refused():
    model = ef.CustomModel("my_models:model_fn", head="binary")
    with pytest.raises(ef.DslError) as info:
        model.check_predictions(_spec(scores=1, logits=1))
    err = info.value
    assert err.path == "model_fn(...).predictions"
    assert err.received == ["logits", "scores"]
    assert "'logistic'" in err.expected and "missing: ['logistic']" in err.expected
    assert "HEAD_OUTPUTS" in err.note


@pytest.mark.parametrize("head, keys", [
    ("binary", ("logistic",)), ("binary", tuple(m.HEAD_OUTPUTS["binary"])),
    ("multi_class", ("probabilities", "class_ids")), ("regression", ("predictions",)),
])
def test_custom_predictions_with_the_evaluated_output_pass(head, keys):
    ef.CustomModel("my_models:model_fn", head=head).check_predictions(
        _spec(**dict.fromkeys(keys, 1)))


def test_a_single_tensor_prediction_is_refused_naming_the_key_to_use():
    spec = ef.EstimatorSpec(mode=ef.ModeKeys.PREDICT, predictions=np.zeros((2, 1)))
    with pytest.raises(ef.DslError) as info:
        ef.CustomModel("my_models:model_fn", head="regression").check_predictions(spec)
    assert "{'predictions': ...}" in info.value.expected


def test_train_and_eval_specs_are_not_checked():
    spec = ef.EstimatorSpec(mode=ef.ModeKeys.EVAL, loss=np.float32(0.5),
                            predictions={"other": np.zeros(2)})
    ef.CustomModel("my_models:model_fn", head="binary").check_predictions(spec)


def test_a_wrapped_model_fn_checks_its_predict_spec_and_keeps_its_signature():
    import inspect

    def model_fn(features, labels, mode, params, config=None):
        return ef.EstimatorSpec(mode, predictions={"scores": np.zeros((2, 1))})

    model = ef.CustomModel("my_models:model_fn", head="binary")
    checked = model.checked_model_fn(model_fn)
    assert inspect.signature(checked) == inspect.signature(model_fn)
    with pytest.raises(ef.DslError, match="missing: \\['logistic'\\]"):
        checked({}, None, ef.ModeKeys.PREDICT, {})


def test_dataclass_replace_keeps_the_checks():
    pipeline = _pipeline()
    with pytest.raises(ef.DslErrors):
        dataclasses.replace(pipeline, label=ef.Label("y", dtype="string", vocabulary=COLORS))
