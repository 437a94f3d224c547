"""Premade models: model_fns of DSL declarations, built from parts that the tf.estimator-style
Estimator classes of :mod:`.canned` share.

``model_fn_for(declaration, cardinalities)`` turns each premade declaration of
:mod:`estflow.dsl.models` into ``model_fn(features, labels, mode, params)``. A pipeline's
defaults are tf.estimator's module constants (the TF 1 canned models' learning rates; the TF 2
classes of tf.estimator 2.15, which :mod:`.canned` reproduces, instead fall back to the Keras
optimizers' own defaults, e.g. Adagrad 0.001, far slower to train on a pipeline's budget):

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

Parts (:func:`dnn_part`, :func:`linear_part`, :func:`baseline_part`) are
``part(features, units, training) -> Part(logits, variables, optimizer factory)``;
:func:`premade_model_fn` sums their logits through a head. The DNN part takes any input layer
(the DSL's :class:`InputLayer` here, a feature-column ``DenseFeatures`` in :mod:`.canned`).

Example::

    model_fn = model_fn_for(ef.DNNClassifier((64, 32), ("fare", ef.Embedding("company"))),
                            cardinalities={"company": 101})
    est = Estimator(model_fn, model_dir)
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

import keras
import tensorflow as tf

from estflow.dsl import models as m
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._fc.inputs import batch_size
from estflow.estimator._premade.inputs import InputLayer
from estflow.estimator._premade.inputs import LinearLayer
from estflow.estimator._premade.inputs import cardinality_of
from estflow.estimator.heads import BinaryClassHead
from estflow.estimator.heads import Head
from estflow.estimator.heads import LossReduction
from estflow.estimator.heads import MultiClassHead
from estflow.estimator.heads import head_for

__all__ = ["model_fn_for", "head_of", "make_optimizer", "DNN_LEARNING_RATE",
           "LINEAR_LEARNING_RATE", "BASELINE_LEARNING_RATE", "OPTIMIZERS", "DNNTower", "Part",
           "PartFn", "dnn_part", "linear_part", "baseline_part", "premade_model_fn", "linear_rate"]

DNN_LEARNING_RATE = 0.05
LINEAR_LEARNING_RATE = 0.2
BASELINE_LEARNING_RATE = 0.3  # tf.estimator's: "a historical artifact ... a reasonable choice"

OPTIMIZERS = {"Adagrad": keras.optimizers.Adagrad, "Adam": keras.optimizers.Adam,
              "Ftrl": keras.optimizers.Ftrl, "RMSProp": keras.optimizers.RMSprop,
              "SGD": keras.optimizers.SGD}


def make_optimizer(name: str, learning_rate: float | None = None):
    """A Keras optimizer by declaration name (the class's own default learning rate when
    ``learning_rate`` is None). Keras 3's defaults match tf.estimator's v2 optimizers
    (Adagrad and FTRL accumulators start at 0.1)."""
    cls = OPTIMIZERS[name]
    return cls() if learning_rate is None else cls(learning_rate=learning_rate)


def linear_rate(n_columns: int, cap: float = LINEAR_LEARNING_RATE) -> float:
    """tf.estimator's default linear learning rate: ``min(cap, 1/sqrt(n_columns))``."""
    return min(cap, 1.0 / math.sqrt(n_columns))


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
    def __init__(self, units: int, width: int, activation, name: str) -> None:
        super().__init__(name=name)
        glorot = keras.initializers.GlorotUniform()
        self.kernel = tf.Variable(lambda: glorot([width, units], dtype="float32"),
                                  name=f"{name}_kernel")
        self.bias = tf.Variable(lambda: tf.zeros([units]), name=f"{name}_bias")
        self.activation = keras.activations.get(activation) if activation else None

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        y = tf.matmul(x, self.kernel) + self.bias
        return self.activation(y) if self.activation else y


class DNNTower(tf.Module):
    """An input layer, hidden layers (dense, dropout, batch norm), logits.

    Args:
        input_layer: any module ``input_layer(features) -> [batch, input_layer.width]``: the
            DSL's :class:`InputLayer` or a feature-column ``DenseFeatures``.
        hidden_units: units per hidden layer.
        units: number of logits.
        activation: of the hidden layers, a callable or a Keras activation name (None:
            linear).
        dropout: rate applied after each hidden layer in training (None: none).
        batch_norm: batch normalization (momentum 0.999) after each hidden layer.
    """

    def __init__(self, input_layer, hidden_units: Sequence[int], units: int, activation,
                 dropout: float | None, batch_norm: bool) -> None:
        super().__init__(name="dnn")
        self.input_layer = input_layer
        widths = (input_layer.width,) + tuple(hidden_units)
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


Part = collections.namedtuple("Part", ("logits", "variables", "optimizer"))
"""One trained part of a premade model: its logits, its trainable variables and a zero-argument
function building its optimizer (called in TRAIN mode only)."""

PartFn = Callable[[object, int, bool], Part]
"""``part_fn(features, units, training) -> Part``, called inside the model_fn."""


def dnn_part(make_input: Callable[[], object], hidden_units: Sequence[int], activation,
             dropout: float | None, batch_norm: bool, optimizer: Callable) -> PartFn:
    """A DNN part; ``make_input()`` builds its input layer (inside the model_fn)."""

    def part(features, units: int, training: bool) -> Part:
        tower = DNNTower(make_input(), hidden_units, units, activation, dropout, batch_norm)
        return Part(tower(features, training), tower.trainable(), optimizer)

    return part


def linear_part(make_layer: Callable[[int], tf.Module], optimizer: Callable) -> PartFn:
    """A linear part; ``make_layer(units)`` builds its layer (inside the model_fn)."""

    def part(features, units: int, training: bool) -> Part:
        layer = make_layer(units)
        return Part(layer(features), list(layer.trainable_variables), optimizer)

    return part


def _batch_size(features, weight_column: str | None) -> tf.Tensor:
    """The batch size, from the first feature that is not the weight column."""
    for name in sorted(features) if isinstance(features, Mapping) else ():
        if name != weight_column:
            return batch_size(features[name])
    raise ValueError("a Baseline model needs at least one feature besides the weight column "
                     "(its batch size gives the number of predictions); received "
                     f"features={features!r}")


def baseline_part(weight_column: str | None, optimizer: Callable) -> PartFn:
    """One bias per logit, broadcast to the batch (the features only give the batch size;
    ``weight_column`` names the feature not to take it from)."""

    def part(features, units: int, training: bool) -> Part:
        bias = tf.Variable(lambda: tf.zeros([units]), name="bias")
        batch = _batch_size(features, weight_column)
        return Part(bias * tf.ones(tf.stack([batch, units])), [bias], optimizer)

    return part


def premade_model_fn(head: Head, parts: Sequence[PartFn], name: str,
                     prediction_keys: Sequence[str] | None = None) -> Callable:
    """``model_fn(features, labels, mode)``: the parts' logits summed, through ``head``; in
    TRAIN mode one optimizer (one part: over every trainable variable) or one
    ``(optimizer, variables)`` pair per part."""
    parts = tuple(parts)

    def model_fn(features, labels, mode, params=None):
        del params  # accepted: an Estimator may be given params for its input_fns
        built = [part(features, head.logits_dimension, mode == ModeKeys.TRAIN)
                 for part in parts]
        logits = built[0].logits if len(built) == 1 else tf.add_n([p.logits for p in built])
        optimizer = None
        if mode == ModeKeys.TRAIN:
            optimizer = built[0].optimizer() if len(built) == 1 else tuple(
                (p.optimizer(), p.variables) for p in built)
        return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer,
                                          prediction_keys=prediction_keys)

    model_fn.__name__ = model_fn.__qualname__ = name
    return model_fn


def _named(name: str, rate: float) -> Callable:
    return lambda: make_optimizer(name, rate)


def _or(declared: float | None, default: float) -> float:
    return default if declared is None else declared


def _dnn(model, cards) -> list[PartFn]:
    return [dnn_part(lambda: InputLayer(model.feature_columns, cards), model.hidden_units,
                     model.activation, model.dropout, model.batch_norm,
                     _named(model.optimizer, _or(model.learning_rate, DNN_LEARNING_RATE)))]


def _linear_of(columns, cards, optimizer: str, rate: float | None) -> PartFn:
    return linear_part(lambda units: LinearLayer(columns, cards, units),
                       _named(optimizer, _or(rate, linear_rate(len(columns)))))


def _linear(model, cards) -> list[PartFn]:
    return [_linear_of(model.feature_columns, cards, model.optimizer, model.learning_rate)]


def _combined(model, cards) -> list[PartFn]:
    dnn = dnn_part(lambda: InputLayer(model.dnn_feature_columns, cards),
                   model.dnn_hidden_units, model.dnn_activation, model.dnn_dropout,
                   model.batch_norm,
                   _named(model.dnn_optimizer, _or(model.dnn_learning_rate, DNN_LEARNING_RATE)))
    return [_linear_of(model.linear_feature_columns, cards, model.linear_optimizer,
                       model.linear_learning_rate), dnn]


def _baseline(model, cards) -> list[PartFn]:
    return [baseline_part(model.weight_column, _named(
        model.optimizer, _or(model.learning_rate, BASELINE_LEARNING_RATE)))]


_BUILDERS = {m.DNNClassifier: _dnn, m.DNNRegressor: _dnn,
             m.LinearClassifier: _linear, m.LinearRegressor: _linear,
             m.DNNLinearCombinedClassifier: _combined, m.DNNLinearCombinedRegressor: _combined,
             m.BaselineClassifier: _baseline, m.BaselineRegressor: _baseline}


def _boosted_trees(model, cards: Mapping[str, int]) -> Callable:
    # imported here: the boosted trees' modules import this one's neighbours (no cycle)
    from estflow.estimator._premade.boosted_trees import boosted_trees_model_fn_for
    return boosted_trees_model_fn_for(model, cards, _prediction_keys)


_MODEL_FNS: dict[type, Callable] = {m.BoostedTreesClassifier: _boosted_trees,
                                    m.BoostedTreesRegressor: _boosted_trees}
"""Declarations whose model_fn is not a sum of parts: ``build(model, cardinalities)``."""


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
    whole = _MODEL_FNS.get(type(model))
    if whole is not None:
        cards = {k: int(v) for k, v in cardinalities.items()}
        _check_cardinalities(model, cards)
        return whole(model, cards)
    builder = _BUILDERS.get(type(model))
    if builder is None:
        raise TypeError(f"model_fn_for takes a premade model declaration, got "
                        f"{type(model).__name__} (a CustomModel brings its own model_fn)")
    cards = {k: int(v) for k, v in cardinalities.items()}
    _check_cardinalities(model, cards)
    head = head_of(model)
    return premade_model_fn(head, builder(model, cards), f"{type(model).__name__}_model_fn",
                            _prediction_keys(head))
