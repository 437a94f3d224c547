"""``add_metrics`` (components/estimator/extenders.py), tf.estimator's way to add evaluation
metrics to an Estimator without changing its model_fn."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys

X = np.array([[1., 1.5], [2., 2.5], [3., 3.5], [4., 4.5]], "float32")
Y = np.array([0, 0, 1, 1])


def model_fn(features, labels, mode, params):
    logits = keras.layers.Dense(2)(features["x"])
    predictions = tf.math.argmax(logits, axis=1)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=predictions)
    return EstimatorSpec(mode, loss=loss, predictions=predictions,
                         eval_metric_ops={"accuracy": accuracy},
                         optimizer=keras.optimizers.Adagrad(params["rate"]))


def input_fn(params):
    assert params["rate"] == 0.5  # the extended Estimator keeps params for its input_fns
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2)


def test_add_metrics_reports_the_model_fns_metrics_and_the_new_ones(tmp_path):
    est = estimator.Estimator(model_fn, str(tmp_path), params={"rate": 0.5},
                              progress=lambda m: None)
    est.train(input_fn, steps=3)  # the input ends after 2
    before = est.evaluate(input_fn)
    seen = {}

    def metric_fn(labels, predictions, features, config):
        seen.update(features=sorted(features), model_dir=config.model_dir)
        labels = tf.cast(labels, tf.float32)
        return {"mean_squared_error": tf.compat.v1.metrics.mean_squared_error(
                    labels=labels, predictions=tf.cast(predictions, tf.float32)),
                "accuracy": tf.compat.v1.metrics.mean(labels)}  # overrides the model_fn's

    extended = estimator.add_metrics(est, metric_fn)
    assert extended is not est and extended.model_dir == est.model_dir
    assert extended.config == est.config and extended.params == est.params
    after = extended.evaluate(input_fn)
    assert set(after) == {"accuracy", "mean_squared_error", "loss", "global_step"}
    assert after["loss"] == pytest.approx(before["loss"])  # the same checkpoint
    assert after["global_step"] == before["global_step"] == 2
    assert after["accuracy"] == pytest.approx(0.5)  # the label mean: the new one won
    assert 0 <= after["mean_squared_error"] <= 1
    assert seen == {"features": ["x"], "model_dir": str(tmp_path)}
    # training and predicting go through the model_fn unchanged
    extended.train(input_fn, steps=1)
    assert extended.global_step == 3 and len(list(extended.predict(input_fn))) == 4
    assert est.evaluate(input_fn).keys() == before.keys()  # the original is unchanged


def test_add_metrics_checks_the_metric_fn_arguments():
    est = estimator.Estimator(model_fn, params={"rate": 0.5})
    with pytest.raises(ValueError, match=r"not expected args: \['mode'\]"):
        estimator.add_metrics(est, lambda labels, mode: {})
