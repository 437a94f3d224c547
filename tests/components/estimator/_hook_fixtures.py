"""A tiny logistic model and in-memory data for the training-control tests (hooks,
train_and_evaluate, exporters, warm start, kill/resume)."""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import RunConfig
from estflow.estimator import parsing_serving_input_receiver_fn

CONFIG = RunConfig(save_checkpoints_steps=10, save_summary_steps=10, log_step_count_steps=10,
                   steps_per_loop=5, keep_checkpoint_max=10, tf_random_seed=7)


def data(n: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.RandomState(seed)
    x = r.randn(n, 2).astype("float32")
    y = (x[:, :1] + 0.5 * x[:, 1:] > 0).astype("float32")
    return x, y


X, Y = data()


def train_input_fn(batch: int = 32) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(
        batch, drop_remainder=True)


def whole_batch_input_fn() -> tf.data.Dataset:
    """Every step sees the same batch: training is a pure function of the state."""
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(len(X)).repeat()


def eval_input_fn() -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(25)


def predict_input_fn() -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices({"x": X[:10]}).batch(4)


def make_model_fn(spec_hooks: dict | None = None):
    """Logistic regression (Adagrad, engine-applied) with named tensors hooks can fetch:
    ``double_loss`` (TRAIN) and the ``logits``/``probability`` predictions. ``spec_hooks``:
    ``{"train"|"eval"|"predict": () -> [hooks]}`` returned in the EstimatorSpec."""
    hooks = spec_hooks or {}

    def spec_hooks_of(kind):
        return tuple(hooks[kind]()) if kind in hooks else ()

    def model_fn(features, labels, mode, params):
        w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
        b = tf.Variable(lambda: tf.zeros([1]), name="b")
        logits = tf.matmul(features["x"], w) + b
        predictions = {"logits": logits, "probability": tf.sigmoid(logits)}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions,
                                 prediction_hooks=spec_hooks_of("predict"))
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits))
        if mode == ModeKeys.EVAL:
            accuracy = keras.metrics.BinaryAccuracy(name="accuracy")
            accuracy.update_state(labels, predictions["probability"])
            return EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy},
                                 evaluation_hooks=spec_hooks_of("eval"))
        tf.identity(2.0 * loss, name="double_loss")
        optimizer = keras.optimizers.Adagrad(params.get("learning_rate", 0.5))
        return EstimatorSpec(mode, loss=loss, predictions=predictions, optimizer=optimizer,
                             training_hooks=spec_hooks_of("train"))

    return model_fn


model_fn = make_model_fn()


def estimator(model_dir, config: RunConfig = CONFIG, params: dict | None = None,
              fn=model_fn, **kwargs) -> Estimator:
    return Estimator(fn, str(model_dir) if model_dir else None, config, params or {},
                     progress=lambda m: None,
                     **kwargs)


def receiver_fn():
    return parsing_serving_input_receiver_fn({"x": tf.io.FixedLenFeature([2], tf.float32)})()


def checkpoint_steps(model_dir) -> list[int]:
    return sorted(int(p.split("-")[-1].split(".")[0]) for p in os.listdir(model_dir)
                  if p.startswith("model.ckpt-") and p.endswith(".index"))
