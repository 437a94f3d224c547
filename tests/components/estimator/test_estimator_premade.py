"""Premade models (model_fn_for) train on a real tf.Transform output and beat a trivial model.

Also: multi-class and weighted heads on in-memory data, and clear errors for declarations the
transform output cannot serve.
"""

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.estimator import Estimator
from estflow.estimator import InputLayer
from estflow.estimator import LinearLayer
from estflow.estimator import model_fn_for
from tests.components import _train_fixtures as fx


@pytest.fixture(scope="session")
def transformed_dir(tmp_path_factory):
    """A real tf.Transform output in the transform step's layout (built once per session)."""
    return fx.transformed(tmp_path_factory)

CONFIG = ef.RunConfig(save_checkpoints_steps=1000, save_summary_steps=100,
                      log_step_count_steps=100, steps_per_loop=50)

CLASSIFIERS = {
    "dnn_embedding": ef.DNNClassifier((16, 8), ("x", "z", ef.Embedding("color", 3))),
    "dnn_indicator_dropout_batchnorm": ef.DNNClassifier(
        (16,), ("x", "z", ef.Indicator("color")), dropout=0.1, batch_norm=True),
    "linear": ef.LinearClassifier(("x", "z", "color")),
    "wide_and_deep": ef.DNNLinearCombinedClassifier(
        linear_feature_columns=("color", "x"),
        dnn_feature_columns=("x", "z", ef.Indicator("color")), dnn_hidden_units=(8,)),
}


def _labels(transformed, split, label):
    ds = fx.input_fn(transformed, split, label, 64, repeat=False)()
    return np.concatenate([y.numpy() for _, y in ds])


def _estimator(model, transformed, path):
    return Estimator(model_fn_for(model, fx.cardinalities(transformed)), str(path), CONFIG,
                     progress=lambda m: None)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifiers_train_and_beat_the_majority_class(transformed_dir, tmp_path, name):
    est = _estimator(CLASSIFIERS[name], transformed_dir, tmp_path)
    est.train(fx.input_fn(transformed_dir, "train", "label"), max_steps=300)
    eval_fn = fx.input_fn(transformed_dir, "eval", "label", 64, repeat=False)
    metrics = est.evaluate(eval_fn)
    y = _labels(transformed_dir, "eval", "label")
    majority = max(y.mean(), 1 - y.mean())
    assert metrics["accuracy"] > majority + 0.1, (metrics, majority)
    assert metrics["auc"] > 0.85
    assert metrics["global_step"] == 300
    assert {"loss", "average_loss", "precision", "recall", "label/mean",
            "prediction/mean", "auc_precision_recall"} <= set(metrics)
    first = next(est.predict(eval_fn))
    assert set(first) == {"logits", "logistic", "probabilities", "class_ids"}
    assert first["probabilities"].shape == (2,)
    assert first["class_ids"].dtype == np.int64


@pytest.mark.parametrize("model", [
    ef.DNNRegressor((16, 8), ("x", "z", ef.Embedding("color", 3))),
    ef.DNNLinearCombinedRegressor(linear_feature_columns=("color",),
                                  dnn_feature_columns=("x", "z"), dnn_hidden_units=(8,)),
], ids=["dnn", "wide_and_deep"])
def test_regressors_reduce_loss_well_below_predicting_the_mean(transformed_dir, tmp_path, model):
    est = _estimator(model, transformed_dir, tmp_path)
    est.train(fx.input_fn(transformed_dir, "train", "target"), max_steps=300)
    metrics = est.evaluate(fx.input_fn(transformed_dir, "eval", "target", 64, repeat=False))
    y = _labels(transformed_dir, "eval", "target")
    assert metrics["average_loss"] < 0.3 * y.var(), (metrics, y.var())
    assert set(next(est.predict(fx.input_fn(transformed_dir, "eval", "target", 8,
                                            repeat=False)))) == {"predictions"}


def _multi_class_data(n=600, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(n).astype("float32")
    c = r.randint(0, 3, n).astype("int64")
    y = np.where(x < -0.5, 0, np.where(x > 0.5, 2, 1)).astype("int64")
    y = np.where(c == 2, 2, y)
    w = np.where(y == 0, 3.0, 1.0).astype("float32")
    return {"x": x, "c": c, "w": w}, y


def test_multi_class_head_with_weights(tmp_path):
    features, y = _multi_class_data()
    model = ef.DNNClassifier((16,), ("x", ef.Indicator("c")), n_classes=3, weight_column="w",
                             optimizer="Adam", learning_rate=0.02)
    est = Estimator(model_fn_for(model, {"c": 3}), str(tmp_path), CONFIG,
                    progress=lambda m: None)
    est.train(lambda: tf.data.Dataset.from_tensor_slices((features, y)).repeat().batch(32),
              max_steps=300)
    metrics = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((features, y)).batch(100))
    assert metrics["accuracy"] > 0.85
    first = next(est.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(5)))
    assert first["probabilities"].shape == (3,)
    assert first["probabilities"].sum() == pytest.approx(1.0, abs=1e-5)


def test_linear_default_learning_rate_and_separate_wide_deep_optimizers(tmp_path):
    features, y = _multi_class_data()
    y = (y == 2).astype("int64")
    model = ef.DNNLinearCombinedClassifier(linear_feature_columns=("c", "x"),
                                           dnn_feature_columns=("x",), dnn_hidden_units=(4,))
    est = Estimator(model_fn_for(model, {"c": 3}), str(tmp_path), CONFIG,
                    progress=lambda m: None)
    est.train(lambda: tf.data.Dataset.from_tensor_slices((features, y)).repeat().batch(32),
              max_steps=50)
    names = est.get_variable_names()
    optimizers = {n.split("/")[2] for n in names if n.startswith("optimizers/")}
    assert optimizers == {"0", "1"}  # FTRL for the linear part, Adagrad for the DNN
    rates = sorted(float(est.get_variable_value(f"optimizers/optimizers/{i}/_learning_rate"))
                   for i in (0, 1))
    assert rates == pytest.approx([0.05, min(0.2, 1 / np.sqrt(2))])
    assert any("linear_c_weights" in n for n in names)
    assert any("hiddenlayer_0_kernel" in n for n in names)


def test_missing_cardinality_fails_before_training():
    with pytest.raises(ValueError, match="cardinality"):
        model_fn_for(ef.DNNClassifier((4,), ("x", ef.Embedding("color", 2))), {})
    with pytest.raises(TypeError, match="CustomModel"):
        model_fn_for(ef.CustomModel("pkg.mod:fn"), {})


def test_feature_layers_eager_in_tf_function_and_with_unknown_batch():
    features = {"x": tf.constant([1.0, 2.0]), "c": tf.constant([0, 2], tf.int64)}
    dense = InputLayer(("x", ef.Indicator("c"), ef.Embedding("c", 4)), {"c": 3})
    linear = LinearLayer(("x", "c"), {"c": 3}, units=1)
    eager = dense(features)
    assert eager.shape == (2, 1 + 3 + 4)
    np.testing.assert_array_equal(eager[:, :4], [[1, 1, 0, 0], [2, 0, 0, 1]])
    assert linear(features).numpy().tolist() == [[0.0], [0.0]]  # zero-initialised

    @tf.function(input_signature=[{"x": tf.TensorSpec([None], tf.float32),
                                   "c": tf.TensorSpec([None, 1], tf.int64)}])
    def traced(f):
        out = dense(f)
        assert out.shape.as_list() == [None, 8]  # static width with an unknown batch
        return out, linear(f)

    out, logits = traced({"x": features["x"], "c": tf.reshape(features["c"], [-1, 1])})
    np.testing.assert_allclose(out, eager)
    assert logits.shape == (2, 1)
