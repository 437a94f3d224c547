"""Premade Baseline models learn the label prior / mean; premade DNN, linear and wide & deep
declarations honour the head options (label vocabulary, thresholds, weights, reduction)."""

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.dsl.models import head_of
from estflow.estimator import Estimator
from estflow.estimator import model_fn_for
from estflow.estimator._premade.model_fns import BASELINE_LEARNING_RATE

CONFIG = ef.RunConfig(save_checkpoints_steps=1000, save_summary_steps=1000,
                      log_step_count_steps=1000, steps_per_loop=50)


def _estimator(model, path, cards=None):
    return Estimator(model_fn_for(model, cards or {}), str(path), CONFIG,
                     progress=lambda m: None)


def _train_fn(features, labels, batch=32):
    return lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(batch)


def _eval_fn(features, labels):
    return lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(200)


def _first_prediction(est, features):
    return next(est.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(4)))


def _binary_data(n=400, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(n).astype("float32")
    y = (r.rand(n) < 0.3).astype("int64")
    w = np.where(y == 1, 2.0, 1.0).astype("float32")  # weighted prior: 0.6/1.3 -> ~0.46
    return {"x": x, "w": w}, y


def test_baseline_classifier_learns_the_weighted_prior(tmp_path):
    features, y = _binary_data()
    est = _estimator(ef.BaselineClassifier(weight_column="w"), tmp_path)
    est.train(_train_fn(features, y), max_steps=300)
    prior = (features["w"] * y).sum() / features["w"].sum()
    first = _first_prediction(est, features)
    assert first["probabilities"][1] == pytest.approx(prior, abs=0.03)
    metrics = est.evaluate(_eval_fn(features, y))
    entropy = -(prior * np.log(prior) + (1 - prior) * np.log(1 - prior))
    assert metrics["average_loss"] == pytest.approx(entropy, abs=0.01)
    assert metrics["average_loss"] < np.log(2) - 0.002  # lower than at initialisation
    assert metrics["accuracy"] == pytest.approx(metrics["accuracy_baseline"], abs=1e-6)
    assert est.get_variable_names().count("store/model/000_bias") == 1
    assert float(est.get_variable_value("optimizers/optimizers/0/_learning_rate")) == \
        pytest.approx(BASELINE_LEARNING_RATE)


def test_baseline_multi_class_with_string_labels(tmp_path):
    r = np.random.RandomState(1)
    names = np.array(["cat", "dog", "eel"])
    y = names[r.choice(3, 600, p=[0.5, 0.3, 0.2])]
    features = {"x": r.randn(600).astype("float32")}
    model = ef.BaselineClassifier(n_classes=3, label_vocabulary=("cat", "dog", "eel"))
    est = _estimator(model, tmp_path)
    est.train(_train_fn(features, y), max_steps=300)
    first = _first_prediction(est, features)
    frequencies = [(y == n).mean() for n in names]
    np.testing.assert_allclose(first["probabilities"], frequencies, atol=0.03)
    assert first["classes"] == b"cat"
    metrics = est.evaluate(_eval_fn(features, y))
    assert metrics["accuracy"] == pytest.approx(frequencies[0], abs=1e-6)


def test_baseline_regressor_learns_the_mean(tmp_path):
    r = np.random.RandomState(2)
    y = np.stack([r.normal(3.0, 1.0, 500), r.normal(-1.0, 0.5, 500)], 1).astype("float32")
    features = {"x": r.randn(500).astype("float32")}
    est = _estimator(ef.BaselineRegressor(label_dimension=2), tmp_path)
    est.train(_train_fn(features, y), max_steps=300)
    first = _first_prediction(est, features)
    np.testing.assert_allclose(first["predictions"], y.mean(axis=0), atol=0.1)
    metrics = est.evaluate(_eval_fn(features, y))
    assert metrics["average_loss"] == pytest.approx(y.var(axis=0).mean(), rel=0.05)
    np.testing.assert_allclose(metrics["prediction/mean"], y.mean(), atol=0.1)


def _separable(n=400, seed=3):
    r = np.random.RandomState(seed)
    x = r.randn(n).astype("float32")
    c = r.randint(0, 3, n).astype("int64")
    y = ((x + (c == 2)) > 0.5).astype("int64")
    return {"x": x, "c": c, "w": np.where(y == 1, 2.0, 1.0).astype("float32")}, y


@pytest.mark.parametrize("model", [
    ef.DNNClassifier((8,), ("x", ef.Indicator("c")), weight_column="w",
                     label_vocabulary=("no", "yes"), thresholds=(0.3, 0.7),
                     optimizer="Adam", learning_rate=0.05),
    ef.LinearClassifier(("x", "c"), weight_column="w", label_vocabulary=("no", "yes"),
                        loss_reduction="sum", thresholds=(0.3,)),
    ef.DNNLinearCombinedClassifier(("c",), ("x",), (4,), label_vocabulary=("no", "yes"),
                                   thresholds=(0.7,), dnn_optimizer="Adam"),
], ids=["dnn", "linear", "wide_and_deep"])
def test_premade_classifiers_honour_head_options(tmp_path, model):
    features, ids = _separable()
    labels = np.array(["no", "yes"])[ids]
    est = _estimator(model, tmp_path, {"c": 3})
    est.train(_train_fn(features, labels), max_steps=200)
    metrics = est.evaluate(_eval_fn(features, labels))
    assert metrics["accuracy"] > metrics["accuracy_baseline"] + 0.1, metrics
    for t in model.thresholds:
        assert f"precision/positive_threshold_{t:g}" in metrics
    first = _first_prediction(est, features)
    assert first["classes"] in (b"no", b"yes")
    assert set(first) == {"logits", "logistic", "probabilities", "class_ids", "classes"}


def test_loss_reduction_sum_scales_the_training_loss(tmp_path):
    features, y = _separable()
    losses = {}
    for reduction in ("sum_over_batch_size", "sum"):
        model = ef.LinearRegressor(("x",), loss_reduction=reduction, optimizer="SGD",
                                   learning_rate=1e-9)  # the weights stay ~0
        est = _estimator(model, tmp_path / reduction)
        est.train(_train_fn(features, y.astype("float32"), batch=20), max_steps=1)
        losses[reduction] = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(
            (features, y.astype("float32"))).take(20).batch(20))["loss"]
    assert losses["sum"] == pytest.approx(20 * losses["sum_over_batch_size"], rel=1e-4)


def test_baseline_declarations_validate():
    with pytest.raises(ef.DslError, match="label_vocabulary"):
        ef.BaselineClassifier(label_vocabulary=("only",))
    with pytest.raises(ef.DslError, match="thresholds"):
        ef.BaselineClassifier(n_classes=3, thresholds=(0.5,))
    with pytest.raises(ef.DslError, match="thresholds"):
        ef.DNNClassifier((4,), ("x",), thresholds=(1.0,))
    with pytest.raises(ef.DslError, match="loss_reduction"):
        ef.BaselineRegressor(loss_reduction="mean")
    with pytest.raises(ef.DslError, match="optimizer"):
        ef.BaselineRegressor(optimizer="Lion")
    assert head_of(ef.BaselineRegressor()) == "regression"
    assert head_of(ef.BaselineClassifier(n_classes=4)) == "multi_class"
