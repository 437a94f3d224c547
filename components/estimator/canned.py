"""tf.estimator's premade (canned) Estimators with their constructor signatures, over
:mod:`.feature_column` columns: code written for ``tf.estimator.DNNClassifier`` & co. ports by
changing imports::

    import estflow.estimator as estimator
    fc = estimator.feature_column

    cols = [fc.numeric_column("x"),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["a", "b"]))]
    est = estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=cols)
    est.train(input_fn, steps=2000)

``DNNClassifier``/``DNNRegressor`` (a :class:`~.feature_column.DenseFeatures` input, then the
premade DNN tower), ``LinearClassifier``/``LinearRegressor`` (a
:class:`~.feature_column.LinearModel`), ``DNNLinearCombinedClassifier``/``Regressor`` (both,
logits summed, one optimizer per part) and ``BaselineClassifier``/``Regressor`` (one bias per
logit). Heads come from :mod:`.heads` (binary or multi-class by ``n_classes``, regression by
``label_dimension``); predictions are all the head's keys. ``DNNEstimator``,
``LinearEstimator`` and ``DNNLinearCombinedEstimator`` take the head as their first argument,
as tf.estimator's did.

Default optimizers and learning rates are tf.estimator 2.15's (its TF 2 classes, measured):

- DNN: the optimizer's own default learning rate (``'Adagrad'`` -> 0.001; ``'SGD'`` -> 0.01);
- linear: a name gets 0.2; ``optimizer=None`` is FTRL with ``min(0.2, 1/sqrt(#columns))``;
- wide & deep: DNN part 0.001, linear part ``min(0.005, 1/sqrt(#linear columns))``;
- baseline: 0.3.

``optimizer`` may also be a Keras optimizer, a ``tf.compat.v1.train`` optimizer (as tf.estimator's
TF 1 classes took; applied TF 1 style, its slots checkpointed with the model) or a zero-argument
callable returning one (called when the TRAIN graph is traced; the engine keeps the first Keras
optimizer it gets, with its state).

Arguments are checked when the Estimator is constructed: a bad one raises ``ValueError`` or
``TypeError`` naming it, what was expected and what was received.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from estflow.estimator._engine.tf1 import is_v1_optimizer
from estflow.estimator._fc.dense import DenseColumn
from estflow.estimator._fc.dense import NumericColumn
from estflow.estimator._fc.layers import normalize_columns
from estflow.estimator._premade.model_fns import BASELINE_LEARNING_RATE
from estflow.estimator._premade.model_fns import LINEAR_LEARNING_RATE
from estflow.estimator._premade.model_fns import OPTIMIZERS
from estflow.estimator._premade.model_fns import PartFn
from estflow.estimator._premade.model_fns import baseline_part
from estflow.estimator._premade.model_fns import dnn_part
from estflow.estimator._premade.model_fns import linear_part
from estflow.estimator._premade.model_fns import linear_rate
from estflow.estimator._premade.model_fns import make_optimizer
from estflow.estimator._premade.model_fns import premade_model_fn
from estflow.estimator._premade.names import tf_estimator_aliases
from estflow.estimator.estimator import Estimator
from estflow.estimator.feature_column import CategoricalColumn
from estflow.estimator.feature_column import DenseFeatures
from estflow.estimator.feature_column import LinearModel
from estflow.estimator.heads import Head
from estflow.estimator.heads import LossReduction
from estflow.estimator.heads import head_for

__all__ = ["DNNClassifier", "DNNRegressor", "DNNEstimator", "LinearClassifier",
           "LinearRegressor", "LinearEstimator", "DNNLinearCombinedClassifier",
           "DNNLinearCombinedRegressor", "DNNLinearCombinedEstimator", "BaselineClassifier",
           "BaselineRegressor", "COMBINED_DNN_LEARNING_RATE", "COMBINED_LINEAR_LEARNING_RATE"]

# tf.estimator's dnn_linear_combined.py: "a historical artifact of the initial implementation".
COMBINED_DNN_LEARNING_RATE = 0.001
COMBINED_LINEAR_LEARNING_RATE = 0.005

_SOR = LossReduction.SUM_OVER_BATCH_SIZE
_COMBINERS = ("sum", "mean", "sqrtn")
_DENSE = ("dense columns (numeric_column, bucketized_column, indicator_column, "
          "embedding_column, shared_embeddings)")
_ANY = "feature columns (categorical or dense)"


def _invalid(error: type, field: str, expected: str, value: Any) -> Exception:
    return error(f"Received an invalid value for `{field}`, expected {expected}. "
                 f"Received: {field}={value!r}")


# -- argument checks (at construction) -------------------------------------------------------
def _hidden_units(value, field: str) -> tuple[int, ...]:
    units = tuple(value) if isinstance(value, (list, tuple)) else None
    if not units or any(isinstance(u, bool) or not isinstance(u, numbers.Integral) or u < 1
                        for u in units):
        raise _invalid(ValueError, field, "a non-empty list of positive integers (units per "
                       "hidden layer)", value)
    return tuple(int(u) for u in units)


def _activation(value, field: str):
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        try:
            keras.activations.get(value)
        except ValueError:
            raise _invalid(ValueError, field, "a callable or a Keras activation name such as "
                           "'relu'", value) from None
        return value
    raise _invalid(TypeError, field, "a callable (e.g. tf.nn.relu), an activation name or None",
                   value)


def _dropout(value, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise _invalid(ValueError, field, "None or a probability in [0, 1)", value)
    return float(value)


def _combiner(value, field: str) -> str:
    if value not in _COMBINERS:
        raise _invalid(ValueError, field, f"one of {list(_COMBINERS)}", value)
    return value


def _optimizer(value, learning_rate: float | None, field: str) -> Callable:
    """A zero-argument function building the optimizer ``value`` stands for (tf.estimator's
    ``get_optimizer_instance_v2``): a name with ``learning_rate`` (None: the optimizer's own
    default), an optimizer as is, or a callable's result."""
    if isinstance(value, str):
        if value not in OPTIMIZERS:
            raise _invalid(ValueError, field, f"one of {sorted(OPTIMIZERS)}, a Keras optimizer "
                           "or a callable returning one", value)
        return lambda: make_optimizer(value, learning_rate)
    if _is_optimizer(value):
        return lambda: value
    if callable(value):
        def build():
            optimizer = value()
            if not _is_optimizer(optimizer):
                raise _invalid(TypeError, field, "a callable returning a Keras or "
                               f"tf.compat.v1.train optimizer (it returned {optimizer!r})",
                               value)
            return optimizer
        return build
    raise _invalid(TypeError, field, f"an optimizer name ({', '.join(sorted(OPTIMIZERS))}), a "
                   "Keras or tf.compat.v1.train optimizer or a zero-argument callable "
                   "returning one", value)


def _is_optimizer(value) -> bool:
    """A Keras optimizer, or a ``tf.compat.v1.train`` one (as tf.estimator's TF 1 classes took:
    the engine applies it TF 1 style, see :mod:`._engine.loop`)."""
    return isinstance(value, keras.optimizers.Optimizer) or is_v1_optimizer(value)


def _weight_key(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, NumericColumn):
        return value.key
    raise _invalid(TypeError, "weight_column", "None, a feature name or a numeric_column",
                   value)


def _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction) -> Head:
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or \
            n_classes < 2:
        raise _invalid(ValueError, "n_classes", "an integer > 1", n_classes)
    _weight_key(weight_column)
    return head_for("classifier", n_classes=int(n_classes), weight_column=weight_column,
                    label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)


def _given_head(head, owner: str) -> Head:
    """The ``head`` of a head-based Estimator (``DNNEstimator`` & co.)."""
    if not isinstance(head, Head):
        raise _invalid(TypeError, "head", "a head of estflow.estimator.heads "
                       f"(BinaryClassHead(), RegressionHead(), ...) for {owner}", head)
    return head


def _regressor_head(label_dimension, weight_column, loss_reduction) -> Head:
    _weight_key(weight_column)
    return head_for("regressor", label_dimension=label_dimension, weight_column=weight_column,
                    loss_reduction=loss_reduction)


# -- parts ----------------------------------------------------------------------------------
def _dnn(owner: str, prefix: str, hidden_units, feature_columns, optimizer, rate, activation_fn,
         dropout, batch_norm) -> PartFn:
    """The DNN part; arguments are named ``prefix + name`` (``dnn_`` in wide & deep)."""
    hidden = _hidden_units(hidden_units, f"{prefix}hidden_units")
    columns = normalize_columns(feature_columns, (DenseColumn,), _DENSE, owner,
                                f"{prefix}feature_columns")
    return dnn_part(lambda: DenseFeatures(columns), hidden,
                    _activation(activation_fn, f"{prefix}activation_fn"),
                    _dropout(dropout, f"{prefix}dropout"), bool(batch_norm),
                    _optimizer(optimizer, rate, f"{prefix}optimizer"))


def _linear(owner: str, prefix: str, feature_columns, optimizer, sparse_combiner) -> PartFn:
    """The linear part; arguments are named ``prefix + name`` (``linear_`` in wide & deep)."""
    columns = normalize_columns(feature_columns, (DenseColumn, CategoricalColumn), _ANY, owner,
                                f"{prefix}feature_columns")
    combiner = _combiner(sparse_combiner, f"{prefix}sparse_combiner")
    if prefix:  # wide & deep: every optimizer name gets min(0.005, 1/sqrt(#columns))
        build = _optimizer(optimizer, linear_rate(len(columns), COMBINED_LINEAR_LEARNING_RATE),
                           f"{prefix}optimizer")
    elif optimizer is None:  # tf.estimator's default optimizer when given none
        build = _optimizer("Ftrl", linear_rate(len(columns)), "optimizer")
    else:
        build = _optimizer(optimizer, LINEAR_LEARNING_RATE, "optimizer")
    return linear_part(lambda units: LinearModel(columns, units, combiner), build)


def _combined(owner: str, linear_feature_columns, linear_optimizer, dnn_feature_columns,
              dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm,
              linear_sparse_combiner) -> list[PartFn]:
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError(f"{owner} needs feature columns: expected at least one of "
                         "`linear_feature_columns` and `dnn_feature_columns` to be a non-empty "
                         f"list. Received: linear_feature_columns={linear_feature_columns!r}, "
                         f"dnn_feature_columns={dnn_feature_columns!r}")
    parts = []
    if linear_feature_columns:
        parts.append(_linear(owner, "linear_", linear_feature_columns, linear_optimizer,
                             linear_sparse_combiner))
    if dnn_feature_columns:
        parts.append(_dnn(owner, "dnn_", dnn_hidden_units, dnn_feature_columns, dnn_optimizer,
                          COMBINED_DNN_LEARNING_RATE, dnn_activation_fn, dnn_dropout,
                          batch_norm))
    if len(parts) == 2 and _is_optimizer(linear_optimizer) and linear_optimizer is dnn_optimizer:
        raise ValueError(f"{owner} trains its linear and DNN parts with separate optimizers: "
                         "expected two different optimizer objects for `linear_optimizer` and "
                         f"`dnn_optimizer`. Received the same object: {linear_optimizer!r}")
    return parts


class _Canned(Estimator):
    """An Estimator whose model_fn is :func:`premade_model_fn` of ``head`` and ``parts``."""

    def __init__(self, head: Head, parts: list[PartFn], model_dir, config, warm_start_from,
                 progress) -> None:
        super().__init__(premade_model_fn(head, parts, f"{type(self).__name__}_model_fn"),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from,
                         progress=progress)

    def _variable_aliases(self, names: list[str]) -> dict[str, str]:
        return tf_estimator_aliases(names)  # dnn/hiddenlayer_0/kernel, linear/linear_model/...


class DNNClassifier(_Canned):
    """tf.estimator.DNNClassifier: a feed-forward network over ``DenseFeatures(feature_columns)``
    (Glorot-uniform dense layers with ``activation_fn``, dropout in training, optional batch
    normalization), binary or multi-class head. ``progress`` (estflow) receives progress
    lines."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
                 loss_reduction=_SOR, batch_norm=False, *, progress=None) -> None:
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        parts = [_dnn(type(self).__name__, "", hidden_units, feature_columns, optimizer, None,
                      activation_fn, dropout, batch_norm)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class DNNRegressor(_Canned):
    """tf.estimator.DNNRegressor: :class:`DNNClassifier`'s network, squared-error head with
    ``label_dimension`` outputs."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
                 weight_column=None, optimizer="Adagrad", activation_fn=tf.nn.relu,
                 dropout=None, config=None, warm_start_from=None, loss_reduction=_SOR,
                 batch_norm=False, *, progress=None) -> None:
        head = _regressor_head(label_dimension, weight_column, loss_reduction)
        parts = [_dnn(type(self).__name__, "", hidden_units, feature_columns, optimizer, None,
                      activation_fn, dropout, batch_norm)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class LinearClassifier(_Canned):
    """tf.estimator.LinearClassifier: ``LinearModel(feature_columns, sparse_combiner)``
    logits (weights start at zero), binary or multi-class head."""

    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Ftrl", config=None, warm_start_from=None,
                 loss_reduction=_SOR, sparse_combiner="sum", *, progress=None) -> None:
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        parts = [_linear(type(self).__name__, "", feature_columns, optimizer, sparse_combiner)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class LinearRegressor(_Canned):
    """tf.estimator.LinearRegressor: :class:`LinearClassifier`'s model, squared-error
    head."""

    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Ftrl", config=None, warm_start_from=None, loss_reduction=_SOR,
                 sparse_combiner="sum", *, progress=None) -> None:
        head = _regressor_head(label_dimension, weight_column, loss_reduction)
        parts = [_linear(type(self).__name__, "", feature_columns, optimizer, sparse_combiner)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class DNNLinearCombinedClassifier(_Canned):
    """tf.estimator.DNNLinearCombinedClassifier (wide & deep): linear logits over
    ``linear_feature_columns`` plus DNN logits over ``dnn_feature_columns`` (at least one of
    the two), each part trained by its own optimizer."""

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, config=None, warm_start_from=None,
                 loss_reduction=_SOR, batch_norm=False, linear_sparse_combiner="sum", *,
                 progress=None) -> None:
        parts = _combined(type(self).__name__, linear_feature_columns, linear_optimizer,
                          dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                          dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class DNNLinearCombinedRegressor(_Canned):
    """tf.estimator.DNNLinearCombinedRegressor: :class:`DNNLinearCombinedClassifier`'s model,
    squared-error head."""

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, label_dimension=1,
                 weight_column=None, config=None, warm_start_from=None, loss_reduction=_SOR,
                 batch_norm=False, linear_sparse_combiner="sum", *, progress=None) -> None:
        parts = _combined(type(self).__name__, linear_feature_columns, linear_optimizer,
                          dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                          dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)
        head = _regressor_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class DNNEstimator(_Canned):
    """tf.estimator.DNNEstimator: :class:`DNNClassifier`'s network with the given ``head``
    (any head of :mod:`.heads`: multi-label, Poisson, a ``MultiHead``, ...)."""

    def __init__(self, head, hidden_units, feature_columns, model_dir=None,
                 optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, config=None,
                 warm_start_from=None, batch_norm=False, *, progress=None) -> None:
        head = _given_head(head, type(self).__name__)
        parts = [_dnn(type(self).__name__, "", hidden_units, feature_columns, optimizer, None,
                      activation_fn, dropout, batch_norm)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class LinearEstimator(_Canned):
    """tf.estimator.LinearEstimator: :class:`LinearClassifier`'s model with the given
    ``head``."""

    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None,
                 sparse_combiner="sum", warm_start_from=None, *, progress=None) -> None:
        head = _given_head(head, type(self).__name__)
        parts = [_linear(type(self).__name__, "", feature_columns, optimizer, sparse_combiner)]
        super().__init__(head, parts, model_dir, config, warm_start_from, progress)


class DNNLinearCombinedEstimator(_Canned):
    """tf.estimator.DNNLinearCombinedEstimator: the wide & deep model of
    :class:`DNNLinearCombinedClassifier` with the given ``head``."""

    def __init__(self, head, model_dir=None, linear_feature_columns=None,
                 linear_optimizer="Ftrl", dnn_feature_columns=None, dnn_optimizer="Adagrad",
                 dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                 config=None, batch_norm=False, linear_sparse_combiner="sum", *,
                 progress=None) -> None:
        head = _given_head(head, type(self).__name__)
        parts = _combined(type(self).__name__, linear_feature_columns, linear_optimizer,
                          dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                          dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)
        super().__init__(head, parts, model_dir, config, None, progress)


class BaselineClassifier(_Canned):
    """tf.estimator.BaselineClassifier: one bias per logit, ignoring the features' values; it
    learns the (weighted) label prior."""

    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, loss_reduction=_SOR, *, progress=None) -> None:
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        parts = [baseline_part(_weight_key(weight_column),
                               _optimizer(optimizer, BASELINE_LEARNING_RATE, "optimizer"))]
        super().__init__(head, parts, model_dir, config, None, progress)


class BaselineRegressor(_Canned):
    """tf.estimator.BaselineRegressor: one bias per output; it learns the (weighted) label
    mean."""

    def __init__(self, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Ftrl", config=None, loss_reduction=_SOR, *, progress=None) -> None:
        head = _regressor_head(label_dimension, weight_column, loss_reduction)
        parts = [baseline_part(_weight_key(weight_column),
                               _optimizer(optimizer, BASELINE_LEARNING_RATE, "optimizer"))]
        super().__init__(head, parts, model_dir, config, None, progress)
