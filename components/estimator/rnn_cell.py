"""TF 1's RNN cells and RNN functions (``tf.compat.v1.nn.rnn_cell.*``, ``tf.contrib.rnn.*``,
``tf.compat.v1.nn.dynamic_rnn``...) for model_fns written against them.

Keras 3 removed ``tf.compat.v1.nn.rnn_cell``: ``tf.compat.v1.nn.rnn_cell.GRUCell`` raises
"not available with Keras 3" on TF 2.16+. TensorFlow still ships the TF 1 cells themselves
(its own legacy copy, the code ``tf.compat.v1.nn.rnn_cell`` ran on TF 2.15), and
``tf.compat.v1.nn.dynamic_rnn`` & co. are core TensorFlow: this module gives them their TF 1
names, so a TF 1 model keeps its math, initial values' distributions, state layout
(``LSTMStateTuple(c, h)``) and variable names (``rnn/gru_cell/gates/kernel``)::

    from estflow.estimator import rnn_cell

    def model_fn(features, labels, mode):
        cell = rnn_cell.GRUCell(16)
        outputs, state = rnn_cell.dynamic_rnn(cell, features["x"], dtype=tf.float32)
        ...

``estflow migrate`` rewrites ``tf.nn.rnn_cell.X`` / ``tf.contrib.rnn.X`` to these names. Inside
an Estimator the cells' variables are the model's like any other (they are created once, by the
first trace, and trained by the model_fn's optimizer). Cells only ``tf.contrib.rnn`` had
(``LSTMBlockCell``, ``LayerNormBasicLSTMCell``, ...) are not here: ``estflow migrate`` reports
them with the Keras replacement.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import BasicLSTMCell
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import BasicRNNCell
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import DeviceWrapper
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import DropoutWrapper
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import GRUCell
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import LSTMCell
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import LSTMStateTuple
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import MultiRNNCell
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import ResidualWrapper
from tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl import RNNCell

__all__ = [
    "BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell", "LSTMCell",
    "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper", "dynamic_rnn", "static_rnn",
    "bidirectional_dynamic_rnn", "static_bidirectional_rnn", "raw_rnn",
    "static_state_saving_rnn",
]

dynamic_rnn = tf.compat.v1.nn.dynamic_rnn
static_rnn = tf.compat.v1.nn.static_rnn
bidirectional_dynamic_rnn = tf.compat.v1.nn.bidirectional_dynamic_rnn
static_bidirectional_rnn = tf.compat.v1.nn.static_bidirectional_rnn
raw_rnn = tf.compat.v1.nn.raw_rnn
static_state_saving_rnn = tf.compat.v1.nn.static_state_saving_rnn
