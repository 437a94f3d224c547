"""A sparse gradient's repeated rows are summed before a Keras optimizer applies it, as
tf.estimator's optimizers (``tf.compat.v1.train``, Keras 2) did: Keras 3's Adagrad would
accumulate the sum of the squares of the repeats instead of the square of their sum."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import estflow.estimator as estimator
from estflow.estimator._engine.loop import summed_repeats

IDS = np.array([[0, 0, 0, 1]], dtype=np.int64)  # row 0 three times in the one example


def test_repeats_are_summed_into_one_slice():
    grad = tf.IndexedSlices(tf.constant([[1.0], [2.0], [3.0], [4.0]]), tf.constant([2, 0, 2, 2]),
                            tf.constant([3, 1]))
    summed = summed_repeats(grad)
    dense = tf.convert_to_tensor(summed)
    np.testing.assert_allclose(dense.numpy(), tf.convert_to_tensor(grad).numpy())
    assert sorted(summed.indices.numpy().tolist()) == [0, 2]
    assert summed_repeats(tf.constant([1.0])).numpy().tolist() == [1.0]


def _train_one_step(tmp_path, optimizer_fn) -> np.ndarray:
    def model_fn(features, labels, mode):
        table = tf.compat.v1.get_variable("table", [2, 1],
                                          initializer=tf.compat.v1.ones_initializer())
        logits = tf.reduce_sum(tf.gather(table, features["ids"]), axis=[1, 2])
        loss = tf.reduce_sum(logits - labels)  # d loss / d table[i] = repeats of i
        return estimator.EstimatorSpec(mode, loss=loss, optimizer=optimizer_fn())

    def input_fn():
        return tf.data.Dataset.from_tensors(({"ids": IDS}, np.zeros([1], np.float32)))

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=1)
    name = next(n for n in est.get_variable_names() if n.endswith("table"))
    return est.get_variable_value(name)


def test_keras_adagrad_updates_a_repeated_row_as_tf1_adagrad(tmp_path):
    """Row 0's gradient is 1 three times: TF 1's accumulator is 0.1 + 3**2, so the row moves by
    0.5 * 3 / sqrt(9.1); each repeat squared on its own (0.1 + 3) moved it 0.5 * 3 / sqrt(3.1)."""
    table = _train_one_step(tmp_path, lambda: keras.optimizers.Adagrad(0.5, epsilon=0.0))
    expected = 1.0 - 0.5 * 3 / np.sqrt(0.1 + 9.0)
    np.testing.assert_allclose(table[0, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(table[1, 0], 1.0 - 0.5 * 1 / np.sqrt(1.1), rtol=1e-5)
