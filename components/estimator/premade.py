"""Premade models as functions returning a model_fn (never Estimator subclasses).

``model_fn_for(declaration, cardinalities)`` turns each premade declaration of
:mod:`estflow.dsl.models` into ``model_fn(features, labels, mode, params)`` with
tf.estimator's defaults:

- DNN: Adagrad, learning rate 0.05; each hidden layer is ``Dense`` + activation (Glorot
  uniform kernel), then dropout (training only), then batch normalization (momentum 0.999) when
  asked; then linear logits.
- Linear: FTRL, learning rate ``min(0.2, 1/sqrt(number of feature columns))``; zero weights.
- Wide & deep: the sum of the linear and the DNN logits, each part with its own optimizer.
- Baseline: one bias per logit (zero-initialised), FTRL with learning rate 0.3; it learns the
  label prior (classifier) or the label mean (regressor) and ignores the features.

Heads come from the declaration (:func:`head_of`): binary or multi-class by ``n_classes``, or
regression, with ``weight_column``, ``label_vocabulary``, ``thresholds`` and
``loss_reduction``. Predictions keep the keys the serving export has always had (binary:
``logits``, ``logistic``, ``probabilities``, ``class_ids``; multi-class: ``logits``,
``probabilities``, ``class_ids``; regression: ``predictions``), plus the string ``classes``
when a ``label_vocabulary`` is declared.

The model_fns return ``optimizer`` and let the engine take the gradients: one optimizer, or
one ``(optimizer, variables)`` pair per part for wide & deep. Layers are built inside the
model_fn on every call (Estimator style); the engine's store gives each call the same variables.

Example::

    model_fn = model_fn_for(ef.DNNClassifier((64, 32), ("fare", ef.Embedding("company"))),
                            cardinalities={"company": 101})
    est = Estimator(model_fn, model_dir)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping

import keras
import tensorflow as tf

from estflow.components.estimator.feature_layers import InputLayer
from estflow.components.estimator.feature_layers import LinearLayer
from estflow.components.estimator.feature_layers import cardinality_of
from estflow.components.estimator.heads import BinaryClassHead
from estflow.components.estimator.heads import Head
from estflow.components.estimator.heads import LossReduction
from estflow.components.estimator.heads import MultiClassHead
from estflow.components.estimator.heads import head_for
from estflow.dsl import models as m
from estflow.dsl.model_fn import ModeKeys

__all__ = ["model_fn_for", "head_of", "make_optimizer", "DNN_LEARNING_RATE",
           "LINEAR_LEARNING_RATE", "BASELINE_LEARNING_RATE"]

DNN_LEARNING_RATE = 0.05
LINEAR_LEARNING_RATE = 0.2
BASELINE_LEARNING_RATE = 0.3  # tf.estimator's: "a historical artifact ... a reasonable choice"

_OPTIMIZERS = {"Adagrad": keras.optimizers.Adagrad, "Adam": keras.optimizers.Adam,
               "Ftrl": keras.optimizers.Ftrl, "RMSProp": keras.optimizers.RMSprop,
               "SGD": keras.optimizers.SGD}


def make_optimizer(name: str, learning_rate: float):
    """A Keras optimizer by declaration name. Keras 3's defaults match tf.estimator's v2
    optimizers (Adagrad and FTRL accumulators start at 0.1)."""
    return _OPTIMIZERS[name](learning_rate=learning_rate)


def head_of(model) -> Head:
    """The head a premade declaration implies (classifier or regressor) with its options."""
    reduction = getattr(model, "loss_reduction", LossReduction.SUM_OVER_BATCH_SIZE)
    if hasattr(model, "n_classes"):
        return head_for("classifier", n_classes=model.n_classes,
                        weight_column=model.weight_column,
                        label_vocabulary=getattr(model, "label_vocabulary", None) or None,
                        thresholds=getattr(model, "thresholds", None) or None,
                        loss_reduction=reduction)
    return head_for("regressor", label_dimension=model.label_dimension,
                    weight_column=model.weight_column, loss_reduction=reduction)


def _prediction_keys(head: Head) -> tuple[str, ...]:
    """The premade serving outputs (see the module docstring)."""
    if isinstance(head, BinaryClassHead):
        keys = ("logits", "logistic", "probabilities", "class_ids")
    elif isinstance(head, MultiClassHead):
        keys = ("logits", "probabilities", "class_ids")
    else:
        return ("predictions",)
    return keys + (("classes",) if head.label_vocabulary else ())


class _Dense(tf.Module):
    def __init__(self, units: int, width: int, activation: str | None, name: str) -> None:
        super().__init__(name=name)
        glorot = keras.initializers.GlorotUniform()
        self.kernel = tf.Variable(lambda: glorot([width, units], dtype="float32"),
                                  name=f"{name}_kernel")
        self.bias = tf.Variable(lambda: tf.zeros([units]), name=f"{name}_bias")
        self.activation = keras.activations.get(activation) if activation else None

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        y = tf.matmul(x, self.kernel) + self.bias
        return self.activation(y) if self.activation else y


class _DNN(tf.Module):
    """Input layer, hidden layers (dense, dropout, batch norm), logits."""

    def __init__(self, columns, cardinalities, hidden_units, units: int, activation: str,
                 dropout: float | None, batch_norm: bool) -> None:
        super().__init__(name="dnn")
        self.input_layer = InputLayer(columns, cardinalities)
        widths = (self.input_layer.width,) + tuple(hidden_units)
        self.hidden = [_Dense(u, widths[i], activation, f"hiddenlayer_{i}")
                       for i, u in enumerate(hidden_units)]
        self.norms = [keras.layers.BatchNormalization(momentum=0.999, name=f"batchnorm_{i}")
                      for i in range(len(hidden_units))] if batch_norm else []
        self.logits = _Dense(units, widths[-1], None, "logits")
        self.dropout = dropout

    def __call__(self, features, training: bool) -> tf.Tensor:
        net = self.input_layer(features)
        for i, layer in enumerate(self.hidden):
            net = layer(net)
            if self.dropout and training:
                net = tf.nn.dropout(net, rate=self.dropout)
            if self.norms:
                net = self.norms[i](net, training=training)
        return self.logits(net)

    def trainable(self) -> list:
        """Own variables plus the batch norms' (Keras variables are not tf.Module-tracked)."""
        return list(self.trainable_variables) + [
            v for norm in self.norms for v in norm.trainable_variables]


def _dnn(model, cards, head: Head, features, mode: str):
    tower = _DNN(model.feature_columns, cards, model.hidden_units, head.logits_dimension,
                 model.activation, model.dropout, model.batch_norm)
    logits = tower(features, training=mode == ModeKeys.TRAIN)
    if mode != ModeKeys.TRAIN:
        return logits, None
    rate = DNN_LEARNING_RATE if model.learning_rate is None else model.learning_rate
    return logits, make_optimizer(model.optimizer, rate)


def _linear_rate(declared: float | None, n_columns: int) -> float:
    return declared if declared is not None else min(LINEAR_LEARNING_RATE,
                                                     1.0 / math.sqrt(n_columns))


def _linear(model, cards, head: Head, features, mode: str):
    layer = LinearLayer(model.feature_columns, cards, head.logits_dimension)
    logits = layer(features)
    if mode != ModeKeys.TRAIN:
        return logits, None
    rate = _linear_rate(model.learning_rate, len(model.feature_columns))
    return logits, make_optimizer(model.optimizer, rate)


def _combined(model, cards, head: Head, features, mode: str):
    linear = LinearLayer(model.linear_feature_columns, cards, head.logits_dimension)
    dnn = _DNN(model.dnn_feature_columns, cards, model.dnn_hidden_units, head.logits_dimension,
               model.dnn_activation, model.dnn_dropout, model.batch_norm)
    logits = linear(features) + dnn(features, training=mode == ModeKeys.TRAIN)
    if mode != ModeKeys.TRAIN:
        return logits, None
    linear_rate = _linear_rate(model.linear_learning_rate, len(model.linear_feature_columns))
    dnn_rate = DNN_LEARNING_RATE if model.dnn_learning_rate is None else model.dnn_learning_rate
    return logits, ((make_optimizer(model.linear_optimizer, linear_rate),
                     list(linear.trainable_variables)),
                    (make_optimizer(model.dnn_optimizer, dnn_rate), dnn.trainable()))


def _batch_size(features, weight_column) -> tf.Tensor:
    """The batch size, from the first feature that is not the weight column."""
    for name in sorted(features) if isinstance(features, Mapping) else ():
        if name != weight_column:
            value = features[name]
            if isinstance(value, tf.SparseTensor):
                return value.dense_shape[0]
            return tf.shape(value, out_type=tf.int64)[0]
    raise ValueError("a Baseline model needs at least one feature besides the weight column "
                     "(its batch size gives the number of predictions); received "
                     f"features={features!r}")


def _baseline(model, cards, head: Head, features, mode: str):
    bias = tf.Variable(lambda: tf.zeros([head.logits_dimension]), name="bias")
    batch = _batch_size(features, model.weight_column)
    logits = bias * tf.ones(tf.stack([batch, head.logits_dimension]))
    if mode != ModeKeys.TRAIN:
        return logits, None
    rate = BASELINE_LEARNING_RATE if model.learning_rate is None else model.learning_rate
    return logits, make_optimizer(model.optimizer, rate)


_BUILDERS = {m.DNNClassifier: _dnn, m.DNNRegressor: _dnn,
             m.LinearClassifier: _linear, m.LinearRegressor: _linear,
             m.DNNLinearCombinedClassifier: _combined, m.DNNLinearCombinedRegressor: _combined,
             m.BaselineClassifier: _baseline, m.BaselineRegressor: _baseline}


def _check_cardinalities(model, cards: Mapping[str, int]) -> None:
    """Fail at build time, not mid-trace, when an Embedding/Indicator lacks its cardinality."""
    for field in ("feature_columns", "dnn_feature_columns"):
        for col in getattr(model, field, ()):
            if isinstance(col, (m.Embedding, m.Indicator)):
                cardinality_of(col.feature, cards, type(col).__name__)


def model_fn_for(model, cardinalities: Mapping[str, int]) -> Callable:
    """The model_fn of a premade declaration.

    Args:
        model: a premade declaration from :mod:`estflow.dsl.models` (not ``CustomModel``).
        cardinalities: ids per categorical feature (the transform step's ``transform.json``);
            a linear column listed here is categorical, otherwise numeric.

    Raises:
        TypeError: ``model`` is not a premade declaration.
        ValueError: an ``Embedding``/``Indicator`` feature has no cardinality, or head
            options the head cannot take.
    """
    builder = _BUILDERS.get(type(model))
    if builder is None:
        raise TypeError(f"model_fn_for takes a premade model declaration, got "
                        f"{type(model).__name__} (a CustomModel brings its own model_fn)")
    cards = {k: int(v) for k, v in cardinalities.items()}
    _check_cardinalities(model, cards)
    head = head_of(model)
    keys = _prediction_keys(head)

    def model_fn(features, labels, mode, params=None):
        logits, optimizer = builder(model, cards, head, features, mode)
        return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer,
                                          prediction_keys=keys)

    model_fn.__name__ = model_fn.__qualname__ = f"{type(model).__name__}_model_fn"
    return model_fn
