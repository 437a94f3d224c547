"""model_to_estimator: compiled Keras 3 models (Sequential, functional with several inputs)
as Estimators; train/evaluate/predict/export/resume; weights start from the Keras model's."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import RunConfig
from estflow.estimator import model_to_estimator
from tests.components.estimator import _hook_fixtures as fx

CONFIG = RunConfig(save_checkpoints_steps=50, steps_per_loop=10, tf_random_seed=3)


def binary_model(optimizer=None):
    model = keras.Sequential([keras.Input((2,), name="x"),
                              keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid", name="probability")])
    model.compile(optimizer=optimizer or keras.optimizers.Adam(0.05),
                  loss="binary_crossentropy", metrics=["accuracy", keras.metrics.AUC(name="auc")])
    return model


def _estimator(model, path, **kwargs):
    return model_to_estimator(model, model_dir=str(path), config=CONFIG,
                              progress=lambda m: None, **kwargs)


def test_sequential_model_trains_evaluates_predicts_and_exports(tmp_path):
    model = binary_model()
    original = [w.copy() for w in model.get_weights()]
    est = _estimator(model, tmp_path / "m")
    est.train(fx.train_input_fn, max_steps=100)
    metrics = est.evaluate(fx.eval_input_fn)
    assert set(metrics) == {"accuracy", "auc", "loss", "global_step"}
    assert metrics["accuracy"] > 0.9 and metrics["auc"] > 0.95 and metrics["loss"] < 0.3
    predictions = list(est.predict(fx.predict_input_fn))
    assert len(predictions) == 10 and set(predictions[0]) == {"probability"}
    path = est.export_saved_model(tmp_path / "export", fx.receiver_fn)
    examples = [tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
        float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in fx.X[:10]]
    served = tf.saved_model.load(path).signatures["serving_default"](
        examples=tf.constant(examples))["probability"].numpy()
    np.testing.assert_allclose(served[:, 0], [p["probability"][0] for p in predictions],
                               rtol=1e-5)
    for before, after in zip(original, model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)  # the given model is left alone


def test_starts_from_the_keras_models_weights_and_resumes(tmp_path):
    model = binary_model(keras.optimizers.SGD(0.0))  # no update: weights stay the Keras ones
    est = _estimator(model, tmp_path)
    est.train(fx.train_input_fn, max_steps=1)
    got = np.concatenate([p["probability"] for p in est.predict(fx.predict_input_fn)])
    np.testing.assert_allclose(got, model.predict(fx.X[:10], verbose=0)[:, 0], rtol=1e-5)
    again = _estimator(binary_model(), tmp_path)  # other initial weights: the checkpoint wins
    assert again.global_step == 1
    resumed = np.concatenate([p["probability"] for p in again.predict(fx.predict_input_fn)])
    np.testing.assert_allclose(resumed, got, rtol=1e-6)


def test_functional_model_with_named_inputs_regression(tmp_path):
    a, b = keras.Input((1,), name="a"), keras.Input((1,), name="b")
    hidden = keras.layers.Dense(4, activation="relu")(keras.layers.Concatenate()([a, b]))
    model = keras.Model({"a": a, "b": b}, keras.layers.Dense(1, name="target")(hidden))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    y = (2 * fx.X[:, :1] - fx.X[:, 1:]).astype("float32")

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(
            ({"a": fx.X[:, :1], "b": fx.X[:, 1:]}, y)).repeat().batch(32)

    est = _estimator(model, tmp_path)
    est.train(input_fn, max_steps=10)
    early = est.evaluate(input_fn, steps=8)
    est.train(input_fn, max_steps=200)
    late = est.evaluate(input_fn, steps=8)
    assert set(late) == {"mae", "loss", "global_step"}
    assert late["loss"] < 0.5 * early["loss"]


def test_multiclass_sparse_labels_accuracy(tmp_path):
    model = keras.Sequential([keras.Input((2,), name="x"), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.Adam(0.1), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = (fx.X[:, 0] > 0).astype("int64") + (fx.X[:, 1] > 1).astype("int64")

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": fx.X}, labels)).repeat().batch(64)

    est = _estimator(model, tmp_path)
    est.train(input_fn, max_steps=150)
    assert est.evaluate(input_fn, steps=4)["accuracy"] > 0.8


def test_keras_model_path_and_argument_errors(tmp_path):
    model = binary_model()
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = model_to_estimator(keras_model_path=path, model_dir=str(tmp_path / "m"),
                                progress=lambda m: None)
    loaded.train(fx.train_input_fn, max_steps=2)
    assert os.path.basename(loaded.latest_checkpoint()) == "model.ckpt-2"
    with pytest.raises(ValueError, match="exactly one of keras_model and keras_model_path"):
        model_to_estimator()
    uncompiled = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="compiled Keras model"):
        model_to_estimator(uncompiled)

    class Subclassed(keras.Model):
        def call(self, x):
            return x

    subclassed = Subclassed()
    subclassed.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="subclassed or unbuilt"):
        model_to_estimator(subclassed)
    x = keras.Input((2,), name="x")
    two = keras.Model(x, [keras.layers.Dense(1, name="a")(x), keras.layers.Dense(1, name="b")(x)])
    two.compile(optimizer="sgd", loss={"a": "mse", "c": "mse"})
    with pytest.raises(ValueError, match=r"loss keyed by the model's outputs \['a', 'b'\].*'c'"):
        model_to_estimator(two, model_dir=str(tmp_path / "two"), progress=lambda m: None).train(
            lambda: tf.data.Dataset.from_tensor_slices(
                ({"x": np.zeros((4, 2), "float32")},
                 {"a": np.zeros((4, 1)), "b": np.zeros((4, 1))})).batch(2), steps=1)


def _two_headed(outputs_as_dict: bool):
    """Click (binary, from logits) and amount (regression) heads over a shared layer."""
    x = keras.Input((2,), name="x")
    shared = keras.layers.Dense(16, activation="relu")(x)
    click = keras.layers.Dense(1, name="click")(shared)
    amount = keras.layers.Dense(1, name="amount")(shared)
    outputs = {"click": click, "amount": amount} if outputs_as_dict else [click, amount]
    model = keras.Model(x, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.03),
                  loss={"click": keras.losses.BinaryCrossentropy(from_logits=True),
                        "amount": "mse"},
                  loss_weights={"click": 1.0, "amount": 0.5},
                  metrics={"click": [keras.metrics.BinaryAccuracy(threshold=0.0,
                                                                  name="accuracy")],
                           "amount": ["mae"]})
    return model


def _two_headed_data(labels_as_list: bool = False):
    x, y = fx.X, fx.Y
    amount = (2.0 * x[:, :1] - x[:, 1:]).astype("float32")
    labels = (y, amount) if labels_as_list else {"click": y, "amount": amount}
    return x, labels


@pytest.mark.parametrize("outputs_as_dict", [False, True])
def test_multi_output_model_trains_each_head_and_names_metrics_per_output(tmp_path,
                                                                          outputs_as_dict):
    x, labels = _two_headed_data()
    est = _estimator(_two_headed(outputs_as_dict), tmp_path / "m")
    train = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        ({"x": x}, labels)).repeat().batch(32)
    evaluate = lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).batch(64)  # noqa: E731
    est.train(train, max_steps=150)
    metrics = est.evaluate(evaluate)
    assert set(metrics) == {"click_accuracy", "amount_mae", "loss", "global_step"}
    assert metrics["click_accuracy"] > 0.9
    assert metrics["amount_mae"] < 0.5 * float(np.mean(np.abs(labels["amount"])))
    predictions = next(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"x": x[:8]}).batch(8), yield_single_examples=False))
    assert set(predictions) == {"click", "amount"}
    # The loss is the weighted sum: recompute it from the predictions on all rows.
    outputs = next(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"x": x}).batch(len(x)), yield_single_examples=False))
    bce = keras.losses.BinaryCrossentropy(from_logits=True)(labels["click"], outputs["click"])
    mse = keras.losses.MeanSquaredError()(labels["amount"], outputs["amount"])
    assert metrics["loss"] == pytest.approx(float(bce) + 0.5 * float(mse), rel=0.05)


def test_multi_output_labels_as_a_list_and_missing_labels(tmp_path):
    x, labels = _two_headed_data(labels_as_list=True)
    est = _estimator(_two_headed(False), tmp_path / "m")
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).batch(32),
              max_steps=3)
    assert est.global_step == 3
    missing = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        ({"x": x}, {"click": labels[0]})).batch(32)
    with pytest.raises(ValueError, match=r"labels for the model outputs .*missing \['amount'\]"):
        est.train(missing, steps=1)
