"""``estflow.estimator.rnn_cell``: TF 1's RNN cells and ``dynamic_rnn`` & co. inside model_fns
(issue 23: GoogleCloudPlatform/training-data-analyst's sinemodel runs
``tf.nn.rnn_cell.GRUCell`` through ``tf.nn.dynamic_rnn``; Keras 3 removed the cells)."""

import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as tf_estimator
from estflow.estimator import layers
from estflow.estimator import rnn_cell
from estflow.pipelines.migrate.tf1 import ENGINE_RNN_NAMES
from estflow.pipelines.migrate.tf1 import LAYERS

R = np.random.RandomState(0)
STEPS = 12
X = R.rand(256, STEPS).astype("float32")
Y = X[:, -3:].mean(axis=1, keepdims=True)


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(32)


def _model_fn(features, labels, mode, params):
    x = tf.reshape(features["x"], [-1, STEPS, 1])
    if params["cell"] == "gru":
        _, state = rnn_cell.dynamic_rnn(rnn_cell.GRUCell(6), x, dtype=tf.float32)
    else:  # a 2-layer LSTM with dropout, over the unstacked time steps
        cells = [rnn_cell.DropoutWrapper(rnn_cell.BasicLSTMCell(6), output_keep_prob=0.9),
                 rnn_cell.LSTMCell(4)]
        _, states = rnn_cell.static_rnn(rnn_cell.MultiRNNCell(cells), tf.unstack(x, axis=1),
                                        dtype=tf.float32)
        assert isinstance(states[-1], rnn_cell.LSTMStateTuple)
        state = states[-1].h
    predictions = tf.keras.layers.Dense(1)(state)
    loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
    train_op = tf.compat.v1.train.AdamOptimizer(0.02).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      predictions=predictions)


# TensorFlow's legacy layer base (the TF 1 cells') reads its own deprecated `updates`
@pytest.mark.filterwarnings("ignore:`layer.updates` will be removed:UserWarning")
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_tf1_cells_train_inside_an_estimator(cell, tmp_path):
    est = tf_estimator.Estimator(_model_fn, model_dir=str(tmp_path), params={"cell": cell})
    est.train(_input_fn, steps=1)
    first = {n: est.get_variable_value(n) for n in est.get_variable_names() if "model" in n}
    if cell == "gru":  # TF 1's GRUCell: the gates' bias starts at 1.0 (Keras': 0)
        gate_bias = next(v for n, v in first.items() if v.shape == (12,))
        np.testing.assert_allclose(gate_bias, 1.0, atol=0.03)
    start = est.evaluate(lambda: _input_fn().take(4))["loss"]
    est.train(_input_fn, steps=150)
    after = est.evaluate(lambda: _input_fn().take(4))["loss"]
    assert after < start / 3, (start, after)
    for name, value in first.items():  # every cell variable trained
        assert not np.allclose(est.get_variable_value(name), value), name


def test_every_name_migrate_writes_is_the_engines():
    for name in ENGINE_RNN_NAMES:
        assert callable(getattr(rnn_cell, name)), name
    for name in LAYERS:
        assert callable(getattr(layers, name)), name
