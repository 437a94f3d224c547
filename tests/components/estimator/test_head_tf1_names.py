"""TF 1 heads' graph names: programs written for tf.compat.v1's canned Estimators log
``head/truediv`` (the mean loss) and ``head/weighted_loss/Sum`` (the loss) with a
LoggingTensorHook (tensorflow/models' official/r1 wide & deep does); a SUM head names them."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import LinearClassifier
from estflow.estimator import LoggingTensorHook
from estflow.estimator import feature_column as fc
from estflow.estimator import heads


def test_a_sum_head_names_the_loss_and_the_mean_loss_as_tf1s_head_did():
    head = heads.BinaryClassHead(loss_reduction="sum")
    logits = np.array([[0.5], [-1.0], [2.0], [0.0]], np.float32)
    labels = np.array([[1], [0], [0], [1]], np.int64)
    graph = tf.Graph()
    with graph.as_default():
        loss = head.loss(labels, tf.constant(logits))
        total = graph.get_tensor_by_name("head/weighted_loss/Sum:0")
        mean = graph.get_tensor_by_name("head/truediv:0")
        with tf.compat.v1.Session() as session:
            got_loss, got_total, got_mean = session.run([loss, total, mean])
    per_example = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=labels.astype(np.float32), logits=logits).numpy()
    assert got_total == pytest.approx(per_example.sum(), rel=1e-5) == got_loss
    assert got_mean == pytest.approx(per_example.mean(), rel=1e-5)


def test_a_mean_head_adds_no_tf1_names():
    graph = tf.Graph()
    with graph.as_default():
        heads.BinaryClassHead().loss(np.zeros((2, 1), np.int64), tf.zeros((2, 1)))
        with pytest.raises(KeyError):
            graph.get_tensor_by_name("head/truediv:0")


def test_a_logging_hook_fetches_them_from_a_canned_estimator(tmp_path, caplog):
    x = np.random.RandomState(0).rand(64, 2).astype(np.float32)
    y = (x[:, 0] > x[:, 1]).astype(np.int64)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16).repeat()

    model = LinearClassifier([fc.numeric_column("x", shape=(2,))], model_dir=str(tmp_path),
                             loss_reduction="sum")
    hook = LoggingTensorHook({"average_loss": "head/truediv",
                              "loss": "head/weighted_loss/Sum"}, every_n_iter=2)
    with caplog.at_level(logging.INFO):
        model.train(input_fn, steps=4, hooks=[hook])
    logged = " ".join(r.getMessage() for r in caplog.records)
    pairs = re.findall(r"average_loss = ([\d.e-]+), loss = ([\d.e-]+)", logged)
    assert len(pairs) == 2, logged  # steps 1 and 3
    for mean, total in pairs:  # the sum over a batch of 16, and its mean
        assert float(total) == pytest.approx(16 * float(mean), rel=1e-4)
