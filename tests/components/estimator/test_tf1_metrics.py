"""TF 1 ``(value, update_op)`` metrics from ``tf.compat.v1.metrics`` in ``eval_metric_ops``:
what tf.estimator model_fns return, evaluated by the engine over several batches and checked
against Keras metrics and numpy on the same predictions."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import SessionRunArgs
from estflow.estimator import SessionRunHook
from estflow.estimator.run_config import RunConfig

R = np.random.RandomState(3)
X = R.randn(300, 2).astype("float32")
Y = ((X[:, :1] - X[:, 1:] + 0.7 * R.randn(300, 1)) > 0).astype("float32")  # noisy: acc < 1


def model_fn(features, labels, mode):
    logits = keras.layers.Dense(1)(features["x"])
    probability = tf.sigmoid(logits)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"probability": probability})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == ModeKeys.EVAL:
        keras_accuracy = keras.metrics.BinaryAccuracy()
        keras_accuracy.update_state(labels, probability)
        return EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.round(probability)),
            "mean_probability": tf.compat.v1.metrics.mean(probability),
            "precision": tf.compat.v1.metrics.precision(labels, tf.round(probability)),
            "keras_accuracy": keras_accuracy})
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.Adagrad(0.3))


def _input(batch, repeat=False):
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return dataset.repeat().batch(batch) if repeat else dataset.batch(batch)
    return input_fn


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    config = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None,
                       steps_per_loop=10)
    est = Estimator(model_fn, str(tmp_path_factory.mktemp("tf1")), config,
                    progress=lambda m: None)
    est.train(_input(32, repeat=True), max_steps=40)
    return est


def test_tf1_pairs_equal_keras_and_numpy_over_many_batches(trained):
    results = trained.evaluate(_input(64))  # 5 batches, the last one short
    probability = np.concatenate([p["probability"] for p in trained.predict(
        _input(64), yield_single_examples=False)])
    predicted = np.round(probability)
    assert 0.5 < results["accuracy"] < 1.0
    assert results["accuracy"] == pytest.approx(results["keras_accuracy"], abs=1e-6)
    assert results["accuracy"] == pytest.approx(float(np.mean(predicted == Y)), abs=1e-6)
    assert results["mean_probability"] == pytest.approx(float(probability.mean()), abs=1e-5)
    true_pos = float(np.sum((predicted == 1) & (Y == 1)))
    assert results["precision"] == pytest.approx(true_pos / float(np.sum(predicted == 1)),
                                                 abs=1e-6)


def test_a_second_evaluation_starts_from_zero(trained):
    whole = trained.evaluate(_input(300))
    part = trained.evaluate(lambda: _input(100)().take(1))  # the first 100 rows only
    again = trained.evaluate(_input(300))
    assert again == whole
    expected = float(np.mean(np.round(np.concatenate([p["probability"] for p in trained.predict(
        _input(100), yield_single_examples=False)])[:100]) == Y[:100]))
    assert part["accuracy"] == pytest.approx(expected, abs=1e-6)


def test_hooks_fetch_a_tf1_metric_by_name(trained):
    class Fetch(SessionRunHook):
        seen: list = []

        def before_run(self, run_context):
            return SessionRunArgs("accuracy")

        def after_run(self, run_context, run_values):
            self.seen.append(run_values.results)

    hook = Fetch()
    results = trained.evaluate(_input(64), hooks=[hook])
    assert hook.seen and hook.seen[-1] == pytest.approx(results["accuracy"])


def test_an_update_that_is_a_group_op_is_rejected_naming_the_metric(tmp_path):
    def grouped(features, labels, mode):
        logits = keras.layers.Dense(1)(features["x"])
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.reduce_mean(tf.square(logits - labels))
        if mode == ModeKeys.EVAL:
            value, update = tf.compat.v1.metrics.mean(logits)
            return EstimatorSpec(mode, loss=loss,
                                 eval_metric_ops={"m": (value, tf.group(update))})
        return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.1))

    est = Estimator(grouped, str(tmp_path), progress=lambda m: None)
    est.train(_input(32, repeat=True), max_steps=2)
    with pytest.raises(Exception, match=r"eval_metric_ops\['m'\].*update_op tensor"):
        est.evaluate(_input(64))
