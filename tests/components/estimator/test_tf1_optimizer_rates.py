"""TF 1 optimizers in a model_fn keep their learning rate under different attribute names
(``_learning_rate`` for SGD/Adagrad/Momentum/RMSProp/FTRL, ``_lr`` for Adam and Adadelta); the
engine's wrapper of ``apply_gradients`` must read either."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as estimator


def _input_fn():
    x = np.linspace(-1, 1, 64, dtype=np.float32)[:, None]
    return tf.data.Dataset.from_tensor_slices(({"x": x}, 2 * x)).repeat().batch(16)


@pytest.mark.parametrize("optimizer", ["AdamOptimizer", "AdadeltaOptimizer"])
def test_tf1_adam_and_adadelta_minimize_in_a_model_fn(optimizer, tmp_path):
    """training-data-analyst 09_sequence/sinemodel: ``tf.train.AdamOptimizer(lr).minimize(loss,
    global_step)`` in a model_fn (failed: 'AdamOptimizer' object has no attribute
    '_learning_rate')."""
    def model_fn(features, labels, mode):
        predictions = tf.keras.layers.Dense(1)(features["x"])
        loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
        train_op = getattr(tf.compat.v1.train, optimizer)(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"))
    est.train(_input_fn, steps=5)
    assert est.get_variable_value("global_step") == 5
