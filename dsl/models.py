"""Model declarations: premade Estimator models and custom ``model_fn``s.

Premade models are declarations (no TensorFlow here); the train step turns each into a
``model_fn`` with the original tf.estimator defaults (DNN: Adagrad, learning rate 0.05; linear:
FTRL, learning rate min(0.2, 1/sqrt(n_features)); baseline: FTRL, learning rate 0.3).

Head options, as tf.estimator's canned models take them: ``weight_column`` (a raw column
weighting each example), ``loss_reduction`` (``"sum_over_batch_size"`` or ``"sum"``) and, for
classifiers, ``label_vocabulary`` (class names in id order; predictions then carry string
``classes``) and ``thresholds`` (binary only: per-threshold accuracy/precision/recall).

How a feature enters a network mirrors tf.feature_column: numeric features by name; a
categorical feature (vocabulary, hash, identity, bucketized, crossed) through ``Indicator`` (one
hot) or ``Embedding`` in a DNN, or by name in a linear model.

Example:
    >>> import estflow.dsl as ef
    >>> model = ef.DNNClassifier(
    ...     hidden_units=(64, 32),
    ...     feature_columns=("fare", ef.Embedding("company", dimension=8)))
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import Union

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.model_fn import ModeKeys
from estflow.dsl.refs import CallableRef
from estflow.dsl.refs import as_ref
from estflow.dsl.serialization import serializable

__all__ = [
    "Embedding",
    "Indicator",
    "DNNClassifier",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "BaselineClassifier",
    "BaselineRegressor",
    "BoostedTreesClassifier",
    "BoostedTreesRegressor",
    "CustomModel",
    "Model",
    "Candidates",
    "OPTIMIZERS",
    "LOSS_REDUCTIONS",
    "head_of",
    "HEADS",
    "HEAD_OUTPUTS",
    "EVALUATED_OUTPUT",
    "METRIC_NAMES",
    "METRIC_ALIASES",
]

OPTIMIZERS = ("Adagrad", "Adam", "Ftrl", "RMSProp", "SGD")
ACTIVATIONS = ("relu", "elu", "selu", "tanh", "sigmoid", "gelu", "swish")
LOSS_REDUCTIONS = ("sum_over_batch_size", "sum")
HEADS = ("binary", "multi_class", "regression")

HEAD_OUTPUTS: dict[str, dict[str, str]] = {
    "binary": {
        "logits": "float [batch, 1]",
        "logistic": "float [batch, 1]: P(class 1), the sigmoid of the logit",
        "probabilities": "float [batch, 2]: P(class 0), P(class 1)",
        "class_ids": "int64 [batch, 1]: the predicted class id",
    },
    "multi_class": {
        "logits": "float [batch, n_classes]",
        "probabilities": "float [batch, n_classes]: the softmax of the logits",
        "class_ids": "int64 [batch, 1]: the predicted class id",
    },
    "regression": {
        "predictions": "float [batch, label_dimension]: the predicted values",
    },
}
"""The prediction keys (with dtype, shape and meaning) a model exports for each head, in the
order the premade models export them; a premade classifier with a ``label_vocabulary`` adds the
string ``classes``. A :class:`CustomModel`'s PREDICT ``predictions`` should hold the same."""

EVALUATED_OUTPUT: dict[str, str] = {"binary": "logistic", "multi_class": "probabilities",
                                    "regression": "predictions"}
"""The prediction key the evaluate step scores for each head: a model that does not export it
fails the evaluate step."""

METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "binary": ("average_loss", "accuracy", "auc", "auc_precision_recall", "auc_exact", "auc_pr",
               "precision", "recall", "label/mean", "prediction/mean", "examples"),
    "multi_class": ("average_loss", "accuracy", "examples"),
    "regression": ("average_loss", "rmse", "mae", "label/mean", "prediction/mean", "examples"),
}
"""The metrics the evaluate step computes for each head, the names an eval ``Threshold`` may
use. A name tf.estimator's heads also report (``average_loss``, ``accuracy``, ``auc``,
``auc_precision_recall``, ``precision``, ``recall``, ``label/mean``, ``prediction/mean``) is
tf.estimator 2.15's metric: for the same checkpoint and eval rows, the number the train step's
evaluation line, ``train.json`` and TensorBoard's eval scalars show, weighted by the model's
``weight_column`` as tf.estimator weighs it (a mean divides by the examples' total weight).
``average_loss`` is the mean over the eval examples of each one's loss (log loss, cross-entropy
or squared error); tf.estimator's eval ``loss`` (the mean of the eval batches' losses, which
weighs a short last batch as much as a full one) is not among them: a threshold on ``loss`` is
refused, naming ``average_loss``. ``auc`` and ``auc_precision_recall`` are tf.estimator's
approximations from 200 evenly spaced probability thresholds (trapezoidal ROC area;
interpolated precision-recall area); ``auc_exact`` and ``auc_pr`` are the exact ROC area and
average precision, estflow's own names. ``precision``, ``recall`` and ``accuracy`` of a binary
head are at probability 0.5; ``rmse`` and ``mae`` are estflow's (weighted too); ``examples``
counts rows. A test keeps this table equal to what the evaluate step produces."""

METRIC_ALIASES: dict[str, dict[str, str]] = {
    "binary": {},
    "multi_class": {},
    "regression": {},
}
"""Other names for the metrics, per head: a ``Threshold`` may use them, and a :class:`Pipeline`
stores the threshold under the name in :data:`METRIC_NAMES`. None today: tf.estimator's
``auc_precision_recall`` once stood for ``auc_pr``, but the two differ (an interpolated
approximation and the exact average precision: 0.7823 and 0.7829 on the taxi example), so it is
a metric of its own, computed as tf.estimator computes it."""


@serializable
@dataclasses.dataclass(frozen=True)
class Embedding:
    """A categorical feature as a dense, learned embedding of ``dimension`` floats (in a DNN's
    feature columns).

    Args:
        feature: the name of a categorical, bucketized or crossed feature.
        dimension: the embedding width.
        combiner: how the embeddings of a multi-valued cell combine: ``"mean"``, ``"sum"`` or
            ``"sqrtn"``.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Embedding("company", dimension=16)
        Embedding(feature='company', dimension=16, combiner='mean')
    """

    feature: str
    dimension: int = 8
    combiner: str = "mean"

    def __post_init__(self) -> None:
        _checks.name(self.feature, "feature")
        _checks.positive_int(self.dimension, "dimension")
        _checks.one_of(self.combiner, ("mean", "sum", "sqrtn"), "combiner")


@serializable
@dataclasses.dataclass(frozen=True)
class Indicator:
    """A categorical feature as a one-hot (multi-hot) vector (in a DNN's feature columns).

    Args:
        feature: the name of a categorical, bucketized or crossed feature.

    Example:
        >>> import estflow.dsl as ef
        >>> payment = ef.Indicator("payment_type")
        >>> payment
        Indicator(feature='payment_type')
    """

    feature: str

    def __post_init__(self) -> None:
        _checks.name(self.feature, "feature")


DnnColumn = Union[str, Embedding, Indicator]


def _dnn_columns(obj, field: str) -> None:
    cols = _checks.tuple_of(getattr(obj, field), field, (str, Embedding, Indicator),
                            min_len=1, what="feature names, Embedding or Indicator")
    _checks.freeze(obj, field, cols)


def _linear_columns(obj, field: str) -> None:
    cols = _checks.tuple_of(getattr(obj, field), field, str, min_len=1, what="feature names")
    _checks.freeze(obj, field, cols)


def _hidden(obj, field: str = "hidden_units") -> None:
    units = _checks.tuple_of(getattr(obj, field), field, int, min_len=1,
                             what="positive layer widths")
    for i, u in enumerate(units):
        _checks.positive_int(u, f"{field}[{i}]")
    _checks.freeze(obj, field, units)


def _dnn_options(obj, prefix: str = "") -> None:
    _checks.one_of(getattr(obj, prefix + "optimizer"), OPTIMIZERS, prefix + "optimizer")
    _checks.number(getattr(obj, prefix + "learning_rate"), prefix + "learning_rate",
                   low=0, low_open=True, allow_none=True)
    _checks.one_of(getattr(obj, prefix + "activation"), ACTIVATIONS, prefix + "activation")
    _checks.number(getattr(obj, prefix + "dropout"), prefix + "dropout", low=0, high=0.99,
                   allow_none=True)


def _head_options(obj, classifier: bool) -> None:
    if classifier:
        _checks.positive_int(obj.n_classes, "n_classes", minimum=2)
        _label_vocabulary(obj)
        _thresholds(obj)
    else:
        _checks.positive_int(obj.label_dimension, "label_dimension")
    if obj.weight_column is not None:
        _checks.name(obj.weight_column, "weight_column")
    _checks.one_of(obj.loss_reduction, LOSS_REDUCTIONS, "loss_reduction")


def _label_vocabulary(obj) -> None:
    vocab = _checks.tuple_of(obj.label_vocabulary, "label_vocabulary", str,
                             what="class names")
    _checks.freeze(obj, "label_vocabulary", vocab)
    if vocab and (len(vocab) != obj.n_classes or len(set(vocab)) != len(vocab)):
        raise DslError("label_vocabulary", f"{obj.n_classes} distinct class names "
                       f"(n_classes={obj.n_classes}), or () for integer labels", vocab)


def _thresholds(obj) -> None:
    values = _checks.tuple_of(obj.thresholds, "thresholds", (int, float),
                              what="probabilities in (0, 1)")
    for i, t in enumerate(values):
        _checks.number(t, f"thresholds[{i}]", low=0, high=1, low_open=True)
        if t >= 1:
            raise DslError(f"thresholds[{i}]", "a probability in (0, 1)", t)
    if values and obj.n_classes != 2:
        raise DslError("thresholds", "() when n_classes > 2 (per-threshold metrics are "
                       "binary)", values)
    _checks.freeze(obj, "thresholds", tuple(float(t) for t in values))


@serializable
@dataclasses.dataclass(frozen=True)
class DNNClassifier:
    """A feed-forward network classifier (tf.estimator.DNNClassifier).

    Args:
        hidden_units: widths of the hidden layers, input side first, e.g. ``(64, 32)``.
        feature_columns: what the network reads: numeric features by name, categorical
            features wrapped in :class:`Indicator` (one-hot) or :class:`Embedding`.
        n_classes: number of label classes: 2 is a binary head, more a multi-class head.
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate (None: 0.05, tf.estimator's DNN default).
        activation: hidden layers' activation: ``"relu"``, ``"elu"``, ``"selu"``,
            ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"swish"``.
        dropout: the fraction of hidden units dropped while training (at most 0.99;
            None: no dropout).
        batch_norm: batch normalization after each hidden layer.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        label_vocabulary: the ``n_classes`` class names in id order; predictions then also
            carry the string ``classes`` (() : integer class ids only).
        thresholds: binary heads only: probabilities in (0, 1) at which accuracy, precision
            and recall are also reported.
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.DNNClassifier(hidden_units=(64, 32), dropout=0.1, feature_columns=(
        ...     "fare", ef.Indicator("payment_type"), ef.Embedding("company", dimension=8)))
        >>> model.optimizer, model.learning_rate
        ('Adagrad', 0.05)
    """

    hidden_units: tuple[int, ...]
    feature_columns: tuple[DnnColumn, ...]
    n_classes: int = 2
    optimizer: str = "Adagrad"
    learning_rate: float | None = 0.05
    activation: str = "relu"
    dropout: float | None = None
    batch_norm: bool = False
    weight_column: str | None = None
    label_vocabulary: tuple[str, ...] = ()
    thresholds: tuple[float, ...] = ()
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _hidden(self)
        _dnn_columns(self, "feature_columns")
        _dnn_options(self)
        _head_options(self, classifier=True)


@serializable
@dataclasses.dataclass(frozen=True)
class DNNRegressor:
    """A feed-forward network regressor (tf.estimator.DNNRegressor).

    Args:
        hidden_units: widths of the hidden layers, input side first, e.g. ``(64, 32)``.
        feature_columns: what the network reads: numeric features by name, categorical
            features wrapped in :class:`Indicator` (one-hot) or :class:`Embedding`.
        label_dimension: number of regression targets per example.
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate (None: 0.05, tf.estimator's DNN default).
        activation: hidden layers' activation: ``"relu"``, ``"elu"``, ``"selu"``,
            ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"swish"``.
        dropout: the fraction of hidden units dropped while training (at most 0.99;
            None: no dropout).
        batch_norm: batch normalization after each hidden layer.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.DNNRegressor(hidden_units=(32,), feature_columns=("trip_miles",),
        ...                         optimizer="Adam", learning_rate=0.001)
        >>> model.label_dimension
        1
    """

    hidden_units: tuple[int, ...]
    feature_columns: tuple[DnnColumn, ...]
    label_dimension: int = 1
    optimizer: str = "Adagrad"
    learning_rate: float | None = 0.05
    activation: str = "relu"
    dropout: float | None = None
    batch_norm: bool = False
    weight_column: str | None = None
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _hidden(self)
        _dnn_columns(self, "feature_columns")
        _dnn_options(self)
        _head_options(self, classifier=False)


@serializable
@dataclasses.dataclass(frozen=True)
class LinearClassifier:
    """A linear classifier (tf.estimator.LinearClassifier); learning_rate None means the
    original default min(0.2, 1/sqrt(number of feature columns)).

    Args:
        feature_columns: names of the features the linear model reads (numeric features
            get one weight, categorical ones one weight per id).
        n_classes: number of label classes: 2 is a binary head, more a multi-class head.
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate; None: tf.estimator's default
            ``min(0.2, 1/sqrt(number of feature columns))``.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        label_vocabulary: the ``n_classes`` class names in id order; predictions then also
            carry the string ``classes`` (() : integer class ids only).
        thresholds: binary heads only: probabilities in (0, 1) at which accuracy, precision
            and recall are also reported.
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.LinearClassifier(feature_columns=("fare", "payment_type"),
        ...                             thresholds=(0.3, 0.7))
        >>> model.learning_rate is None  # min(0.2, 1/sqrt(2)) when training
        True
    """

    feature_columns: tuple[str, ...]
    n_classes: int = 2
    optimizer: str = "Ftrl"
    learning_rate: float | None = None
    weight_column: str | None = None
    label_vocabulary: tuple[str, ...] = ()
    thresholds: tuple[float, ...] = ()
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _linear_columns(self, "feature_columns")
        _checks.one_of(self.optimizer, OPTIMIZERS, "optimizer")
        _checks.number(self.learning_rate, "learning_rate", low=0, low_open=True,
                       allow_none=True)
        _head_options(self, classifier=True)


@serializable
@dataclasses.dataclass(frozen=True)
class LinearRegressor:
    """A linear regressor (tf.estimator.LinearRegressor).

    Args:
        feature_columns: names of the features the linear model reads (numeric features
            get one weight, categorical ones one weight per id).
        label_dimension: number of regression targets per example.
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate; None: tf.estimator's default
            ``min(0.2, 1/sqrt(number of feature columns))``.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.LinearRegressor(feature_columns=("trip_miles", "trip_start_hour"))
        >>> model.optimizer
        'Ftrl'
    """

    feature_columns: tuple[str, ...]
    label_dimension: int = 1
    optimizer: str = "Ftrl"
    learning_rate: float | None = None
    weight_column: str | None = None
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _linear_columns(self, "feature_columns")
        _checks.one_of(self.optimizer, OPTIMIZERS, "optimizer")
        _checks.number(self.learning_rate, "learning_rate", low=0, low_open=True,
                       allow_none=True)
        _head_options(self, classifier=False)


@serializable
@dataclasses.dataclass(frozen=True)
class DNNLinearCombinedClassifier:
    """Wide & deep (tf.estimator.DNNLinearCombinedClassifier): a linear model over
    ``linear_feature_columns`` plus a DNN over ``dnn_feature_columns``, logits summed; each part
    has its own optimizer.

    Args:
        linear_feature_columns: names of the features the linear model reads (numeric features
            get one weight, categorical ones one weight per id).
        dnn_feature_columns: what the network reads: numeric features by name, categorical
            features wrapped in :class:`Indicator` (one-hot) or :class:`Embedding`.
        dnn_hidden_units: widths of the hidden layers, input side first, e.g. ``(64, 32)``.
        n_classes: number of label classes: 2 is a binary head, more a multi-class head.
        linear_optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        linear_learning_rate: the optimizer's learning rate; None: tf.estimator's default
            ``min(0.2, 1/sqrt(number of feature columns))``.
        dnn_optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        dnn_learning_rate: the optimizer's learning rate (None: 0.05, tf.estimator's DNN default).
        dnn_activation: hidden layers' activation: ``"relu"``, ``"elu"``, ``"selu"``,
            ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"swish"``.
        dnn_dropout: the fraction of hidden units dropped while training (at most 0.99;
            None: no dropout).
        batch_norm: batch normalization after each hidden layer.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        label_vocabulary: the ``n_classes`` class names in id order; predictions then also
            carry the string ``classes`` (() : integer class ids only).
        thresholds: binary heads only: probabilities in (0, 1) at which accuracy, precision
            and recall are also reported.
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.DNNLinearCombinedClassifier(
        ...     linear_feature_columns=("payment_type", "payment_x_hour"),
        ...     dnn_feature_columns=("fare", ef.Embedding("company", dimension=8)),
        ...     dnn_hidden_units=(32, 16))
        >>> model.linear_optimizer, model.dnn_optimizer
        ('Ftrl', 'Adagrad')
    """

    linear_feature_columns: tuple[str, ...]
    dnn_feature_columns: tuple[DnnColumn, ...]
    dnn_hidden_units: tuple[int, ...]
    n_classes: int = 2
    linear_optimizer: str = "Ftrl"
    linear_learning_rate: float | None = None
    dnn_optimizer: str = "Adagrad"
    dnn_learning_rate: float | None = 0.05
    dnn_activation: str = "relu"
    dnn_dropout: float | None = None
    batch_norm: bool = False
    weight_column: str | None = None
    label_vocabulary: tuple[str, ...] = ()
    thresholds: tuple[float, ...] = ()
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _linear_columns(self, "linear_feature_columns")
        _dnn_columns(self, "dnn_feature_columns")
        _hidden(self, "dnn_hidden_units")
        _dnn_options(self, "dnn_")
        _checks.one_of(self.linear_optimizer, OPTIMIZERS, "linear_optimizer")
        _checks.number(self.linear_learning_rate, "linear_learning_rate", low=0,
                       low_open=True, allow_none=True)
        _head_options(self, classifier=True)


@serializable
@dataclasses.dataclass(frozen=True)
class DNNLinearCombinedRegressor:
    """Wide & deep regressor (tf.estimator.DNNLinearCombinedRegressor).

    Args:
        linear_feature_columns: names of the features the linear model reads (numeric features
            get one weight, categorical ones one weight per id).
        dnn_feature_columns: what the network reads: numeric features by name, categorical
            features wrapped in :class:`Indicator` (one-hot) or :class:`Embedding`.
        dnn_hidden_units: widths of the hidden layers, input side first, e.g. ``(64, 32)``.
        label_dimension: number of regression targets per example.
        linear_optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        linear_learning_rate: the optimizer's learning rate; None: tf.estimator's default
            ``min(0.2, 1/sqrt(number of feature columns))``.
        dnn_optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        dnn_learning_rate: the optimizer's learning rate (None: 0.05, tf.estimator's DNN default).
        dnn_activation: hidden layers' activation: ``"relu"``, ``"elu"``, ``"selu"``,
            ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"swish"``.
        dnn_dropout: the fraction of hidden units dropped while training (at most 0.99;
            None: no dropout).
        batch_norm: batch normalization after each hidden layer.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.DNNLinearCombinedRegressor(
        ...     linear_feature_columns=("trip_start_hour",), dnn_feature_columns=("trip_miles",),
        ...     dnn_hidden_units=(16,), dnn_dropout=0.2)
        >>> model.dnn_hidden_units
        (16,)
    """

    linear_feature_columns: tuple[str, ...]
    dnn_feature_columns: tuple[DnnColumn, ...]
    dnn_hidden_units: tuple[int, ...]
    label_dimension: int = 1
    linear_optimizer: str = "Ftrl"
    linear_learning_rate: float | None = None
    dnn_optimizer: str = "Adagrad"
    dnn_learning_rate: float | None = 0.05
    dnn_activation: str = "relu"
    dnn_dropout: float | None = None
    batch_norm: bool = False
    weight_column: str | None = None
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _linear_columns(self, "linear_feature_columns")
        _dnn_columns(self, "dnn_feature_columns")
        _hidden(self, "dnn_hidden_units")
        _dnn_options(self, "dnn_")
        _checks.one_of(self.linear_optimizer, OPTIMIZERS, "linear_optimizer")
        _checks.number(self.linear_learning_rate, "linear_learning_rate", low=0,
                       low_open=True, allow_none=True)
        _head_options(self, classifier=False)


@serializable
@dataclasses.dataclass(frozen=True)
class BaselineClassifier:
    """Bias-only classifier (tf.estimator.BaselineClassifier): ignores the features and
    learns the class prior; a floor a real model must beat. ``learning_rate`` None means the
    original 0.3 (with FTRL).

    Args:
        n_classes: number of label classes: 2 is a binary head, more a multi-class head.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        label_vocabulary: the ``n_classes`` class names in id order; predictions then also
            carry the string ``classes`` (() : integer class ids only).
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate (None: 0.3).
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.
        thresholds: binary heads only: probabilities in (0, 1) at which accuracy, precision
            and recall are also reported.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.BaselineClassifier(n_classes=3, label_vocabulary=("a", "b", "c"))
        >>> model.learning_rate is None  # FTRL at 0.3 when training
        True
    """

    n_classes: int = 2
    weight_column: str | None = None
    label_vocabulary: tuple[str, ...] = ()
    optimizer: str = "Ftrl"
    learning_rate: float | None = None
    loss_reduction: str = "sum_over_batch_size"
    thresholds: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        _checks.one_of(self.optimizer, OPTIMIZERS, "optimizer")
        _checks.number(self.learning_rate, "learning_rate", low=0, low_open=True,
                       allow_none=True)
        _head_options(self, classifier=True)


@serializable
@dataclasses.dataclass(frozen=True)
class BaselineRegressor:
    """Bias-only regressor (tf.estimator.BaselineRegressor): learns the label mean.

    Args:
        label_dimension: number of regression targets per example.
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        optimizer: ``"Adagrad"``, ``"Adam"``, ``"Ftrl"``, ``"RMSProp"`` or ``"SGD"``.
        learning_rate: the optimizer's learning rate (None: 0.3).
        loss_reduction: ``"sum_over_batch_size"`` (the mean over the batch) or ``"sum"``.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.BaselineRegressor(label_dimension=2)
        >>> model.optimizer
        'Ftrl'
    """

    label_dimension: int = 1
    weight_column: str | None = None
    optimizer: str = "Ftrl"
    learning_rate: float | None = None
    loss_reduction: str = "sum_over_batch_size"

    def __post_init__(self) -> None:
        _checks.one_of(self.optimizer, OPTIMIZERS, "optimizer")
        _checks.number(self.learning_rate, "learning_rate", low=0, low_open=True,
                       allow_none=True)
        _head_options(self, classifier=False)


PRUNING_MODES = ("none", "pre", "post")


def _tree_columns(obj) -> None:
    cols = _checks.tuple_of(obj.feature_columns, "feature_columns", (str, Indicator), min_len=1,
                            what="feature names or ef.Indicator(...)")
    _checks.freeze(obj, "feature_columns", cols)


def _tree_options(obj) -> None:
    _checks.positive_int(obj.n_batches_per_layer, "n_batches_per_layer")
    _checks.positive_int(obj.n_trees, "n_trees")
    _checks.positive_int(obj.max_depth, "max_depth")
    _checks.number(obj.learning_rate, "learning_rate", low=0, low_open=True)
    for field in ("l1_regularization", "l2_regularization", "tree_complexity",
                  "min_node_weight"):
        _checks.number(getattr(obj, field), field, low=0)
    _checks.one_of(obj.pruning_mode, PRUNING_MODES, "pruning_mode")
    _checks.number(obj.quantile_sketch_epsilon, "quantile_sketch_epsilon", low=0, high=0.5,
                   low_open=True)
    if not isinstance(obj.center_bias, bool):
        raise DslError("center_bias", "True or False", obj.center_bias)
    if obj.pruning_mode == "none" and obj.tree_complexity > 0:
        raise DslError("tree_complexity", "0 with pruning_mode='none' (it only acts when "
                       "pruning: set pruning_mode='pre' or 'post')", obj.tree_complexity)
    if obj.pruning_mode != "none" and obj.tree_complexity <= 0:
        raise DslError("tree_complexity", f"a number > 0 with pruning_mode="
                       f"{obj.pruning_mode!r}", obj.tree_complexity)


@serializable
@dataclasses.dataclass(frozen=True)
class BoostedTreesClassifier:
    """Gradient boosted decision trees, grown layer by layer (tf.estimator's
    BoostedTreesClassifier, with its defaults).

    Args:
        feature_columns: what the trees split on: numeric features by name (bucketized by a
            quantile sketch of the first ``n_batches_per_layer`` batches), categorical
            features wrapped in :class:`Indicator` (one 0/1 feature per category).
        n_batches_per_layer: batches whose statistics build each layer of a tree (the
            training set's size over the batch size uses all the data per layer).
        n_classes: number of label classes: 2 is a binary head, more a multi-class head.
        n_trees: number of trees.
        max_depth: depth of every tree.
        learning_rate: shrinkage of each layer's leaf values.
        l1_regularization: L1 penalty on leaf values (per example).
        l2_regularization: L2 penalty on leaf values (per example).
        tree_complexity: penalty per leaf; needs ``pruning_mode`` ``"pre"`` or ``"post"``.
        min_node_weight: the least (mean) hessian a node needs to be split.
        center_bias: start with the label prior in the first tree's root (binary only).
        pruning_mode: ``"none"``, ``"pre"`` (skip splits with negative gain) or ``"post"``
            (grow, then prune negative-gain splits).
        quantile_sketch_epsilon: the quantile sketch's error bound; numeric features get
            ``1 / quantile_sketch_epsilon`` buckets (at most 0.5).
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).
        label_vocabulary: the ``n_classes`` class names in id order; predictions then also
            carry the string ``classes`` (() : integer class ids only).
        thresholds: binary heads only: probabilities in (0, 1) at which accuracy, precision
            and recall are also reported.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.BoostedTreesClassifier(("fare", ef.Indicator("payment_type")),
        ...                                   n_batches_per_layer=4, n_trees=50)
        >>> model.max_depth, model.learning_rate
        (6, 0.1)
    """

    feature_columns: tuple[str | Indicator, ...]
    n_batches_per_layer: int
    n_classes: int = 2
    n_trees: int = 100
    max_depth: int = 6
    learning_rate: float = 0.1
    l1_regularization: float = 0.0
    l2_regularization: float = 0.0
    tree_complexity: float = 0.0
    min_node_weight: float = 0.0
    center_bias: bool = False
    pruning_mode: str = "none"
    quantile_sketch_epsilon: float = 0.01
    weight_column: str | None = None
    label_vocabulary: tuple[str, ...] = ()
    thresholds: tuple[float, ...] = ()
    loss_reduction: ClassVar[str] = "sum_over_batch_size"  # tf.estimator's, fixed

    def __post_init__(self) -> None:
        _tree_columns(self)
        _tree_options(self)
        _head_options(self, classifier=True)
        if self.center_bias and self.n_classes > 2:
            raise DslError("center_bias", "False when n_classes > 2 (bias centering is "
                           "binary only)", self.center_bias)


@serializable
@dataclasses.dataclass(frozen=True)
class BoostedTreesRegressor:
    """Gradient boosted decision trees on the squared error (tf.estimator's
    BoostedTreesRegressor, with its defaults).

    Args:
        feature_columns: what the trees split on: numeric features by name (bucketized by a
            quantile sketch of the first ``n_batches_per_layer`` batches), categorical
            features wrapped in :class:`Indicator` (one 0/1 feature per category).
        n_batches_per_layer: batches whose statistics build each layer of a tree.
        label_dimension: number of regression targets per example.
        n_trees: number of trees.
        max_depth: depth of every tree.
        learning_rate: shrinkage of each layer's leaf values.
        l1_regularization: L1 penalty on leaf values (per example).
        l2_regularization: L2 penalty on leaf values (per example).
        tree_complexity: penalty per leaf; needs ``pruning_mode`` ``"pre"`` or ``"post"``.
        min_node_weight: the least (mean) hessian a node needs to be split.
        center_bias: start with the label mean in the first tree's root (one target only).
        pruning_mode: ``"none"``, ``"pre"`` or ``"post"``.
        quantile_sketch_epsilon: the quantile sketch's error bound (at most 0.5).
        weight_column: a raw column weighting each example in the loss and metrics (None:
            every example weighs 1).

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.BoostedTreesRegressor(("trip_miles",), n_batches_per_layer=1,
        ...                                  center_bias=True)
        >>> model.label_dimension
        1
    """

    feature_columns: tuple[str | Indicator, ...]
    n_batches_per_layer: int
    label_dimension: int = 1
    n_trees: int = 100
    max_depth: int = 6
    learning_rate: float = 0.1
    l1_regularization: float = 0.0
    l2_regularization: float = 0.0
    tree_complexity: float = 0.0
    min_node_weight: float = 0.0
    center_bias: bool = False
    pruning_mode: str = "none"
    quantile_sketch_epsilon: float = 0.01
    weight_column: str | None = None
    loss_reduction: ClassVar[str] = "sum_over_batch_size"  # tf.estimator's, fixed

    def __post_init__(self) -> None:
        _tree_columns(self)
        _tree_options(self)
        _head_options(self, classifier=False)
        if self.center_bias and self.label_dimension > 1:
            raise DslError("center_bias", "False when label_dimension > 1 (bias centering "
                           "takes one target)", self.center_bias)


@serializable
@dataclasses.dataclass(frozen=True)
class CustomModel:
    """A user ``model_fn(features, labels, mode, params[, config]) -> EstimatorSpec``.

    ``model_fn`` is a module-level function or a ``"package.module:function"`` string; it is
    imported by the train step, so a pipeline module can declare it without importing
    TensorFlow at module level (import it inside the function body). It receives the
    transformed features, the label (``None`` when predicting), a :class:`ModeKeys` value and
    ``params``, and returns an :class:`EstimatorSpec` for that mode.

    Head output contract: in ``ModeKeys.PREDICT`` the ``predictions`` should be a dict with
    the keys of :data:`HEAD_OUTPUTS` for ``head``, as the premade models export them. One of
    them is required: the evaluate step scores the exported model by
    :data:`EVALUATED_OUTPUT` (``logistic`` for binary, ``probabilities`` for multi-class,
    ``predictions`` for regression) and fails without it. ``probabilities`` (classifiers) or
    a one-column ``predictions`` (regression) also give the export its ``classify`` or
    ``regress`` serving signature.

    What is checked when: the declaration checks ``head`` and, in :class:`Pipeline`, that it
    fits the label (a binary head for a 2-name label vocabulary) and the eval thresholds (the
    head's :data:`METRIC_NAMES`). The prediction keys exist only once the function has run:
    :meth:`check_predictions` checks the PREDICT-mode ``EstimatorSpec`` the function returns,
    and :meth:`checked_model_fn` wraps the function so that every PREDICT call is checked.

    Args:
        model_fn: the function, or where to import it from.
        params: JSON-serialisable hyperparameters passed as ``params``.
        head: ``"binary"``, ``"multi_class"`` or ``"regression"``: what the evaluate step
            computes from the exported model's outputs (``logistic``, ``probabilities`` or
            ``predictions``; see :data:`EVALUATED_OUTPUT`).

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.CustomModel("my_models.wide:model_fn", params={"units": [16, 8]},
        ...                        head="multi_class")
        >>> str(model.model_fn), model.params
        ('my_models.wide:model_fn', {'units': (16, 8)})
    """

    model_fn: Any
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    head: str = "binary"

    def __post_init__(self) -> None:
        _checks.freeze(self, "model_fn", as_ref(self.model_fn, "model_fn"))
        if not isinstance(self.params, dict):
            raise DslError("params", "a dict of JSON-serialisable values", self.params)
        _checks.freeze(self, "params", _frozen(self.params))
        _checks.one_of(self.head, HEADS, "head")

    @property
    def model_fn_ref(self) -> CallableRef:
        """Where the train step imports ``model_fn`` from (``model_fn`` itself, resolved)."""
        return self.model_fn

    def check_predictions(self, spec: Any) -> None:
        """Check an ``EstimatorSpec`` the model_fn returned against the head output contract:
        in ``ModeKeys.PREDICT`` its ``predictions`` must be a dict holding the head's
        :data:`EVALUATED_OUTPUT` (other modes are not checked: their ``predictions`` are
        optional); raises :class:`DslError` naming the missing key and the keys received."""
        if getattr(spec, "mode", None) != ModeKeys.PREDICT:
            return
        key = EVALUATED_OUTPUT[self.head]
        predictions = spec.predictions
        path = "model_fn(...).predictions"
        note = (f"the {self.head} head's outputs are {list(HEAD_OUTPUTS[self.head])} (see "
                f"estflow.dsl.models.HEAD_OUTPUTS); the evaluate step scores {key!r}")
        if not isinstance(predictions, Mapping):
            raise DslError(path, f"a dict such as {{{key!r}: ...}} in mode "
                           f"{ModeKeys.PREDICT!r} for head={self.head!r}",
                           f"a single {type(predictions).__name__}", note=note)
        if key not in predictions:
            raise DslError(path, f"a dict holding {key!r} in mode {ModeKeys.PREDICT!r} for "
                           f"head={self.head!r} (missing: [{key!r}])",
                           sorted(map(str, predictions)), note=note)

    def checked_model_fn(self, fn: Callable) -> Callable:
        """``fn`` (this model's resolved model_fn) wrapped so that the spec of every call is
        checked by :meth:`check_predictions`; the signature stays ``fn``'s."""

        @functools.wraps(fn)
        def model_fn(*args, **kwargs):
            spec = fn(*args, **kwargs)
            self.check_predictions(spec)
            return spec

        return model_fn


Model = Union[DNNClassifier, DNNRegressor, LinearClassifier, LinearRegressor,
              DNNLinearCombinedClassifier, DNNLinearCombinedRegressor, BaselineClassifier,
              BaselineRegressor, BoostedTreesClassifier, BoostedTreesRegressor, CustomModel]
CallableLike = Union[Callable, str, CallableRef]


def _frozen(value: Any) -> Any:
    """Lists become tuples (declarations are immutable and compare equal after a round trip)."""
    if isinstance(value, dict):
        return {str(k): _frozen(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


LOWER_IS_BETTER = ("average_loss", "rmse", "mae")
"""Metrics of :data:`METRIC_NAMES` where smaller is better (:class:`Candidates` picks the least)."""
_DEFAULT_BEST_BY = {"binary": "auc", "multi_class": "accuracy", "regression": "average_loss"}


@serializable
@dataclasses.dataclass(frozen=True)
class Candidates:
    """Several models trained side by side on the same transform output, each evaluated; the
    best blessed one by ``best_by`` is the pipeline's model (pushed, scored with).

    Each candidate trains in its own step (``train_<name>``, then ``evaluate_<name>``), at
    once where the machine allows; the ``select`` step then picks the blessed candidate with
    the best ``best_by`` on the eval split (ties: the first by name), and its evaluation
    report compares them all. No candidate blessed: nothing is pushed, and the report says
    why for each. Every candidate must have the same head (the label fits one head) and the
    same ``weight_column`` and ``label_vocabulary``: they are compared on the same rows, by
    the same metrics. Each candidate is cached by its own declaration: editing one retrains
    that one only.

    Args:
        models: candidate name (an identifier: it names the candidate's steps) -> a model, at
            least two.
        best_by: the metric compared, one of the head's :data:`METRIC_NAMES` (default: ``auc``
            for a binary head, ``accuracy`` for a multi-class one, ``average_loss`` for
            regression).
        higher_is_better: None: smaller wins for the losses and errors
            (:data:`LOWER_IS_BETTER`), larger for the rest.

    Example:
        >>> import estflow.dsl as ef
        >>> model = ef.Candidates({
        ...     "linear": ef.LinearClassifier(feature_columns=("fare", "company")),
        ...     "dnn": ef.DNNClassifier(hidden_units=(16, 8), feature_columns=("fare",)),
        ... }, best_by="auc")
        >>> model.head, sorted(model.models)
        ('binary', ['dnn', 'linear'])
    """

    models: Mapping[str, Model]
    best_by: str | None = None
    higher_is_better: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.models, Mapping) or len(self.models) < 2:
            raise DslError("models", "a dict of at least two candidates: name -> model",
                           self.models)
        for name, model in self.models.items():
            _checks.name(name, f"models[{name!r}]")
            if not isinstance(model, Model.__args__):
                raise DslError(f"models[{name!r}]", "a premade model or CustomModel",
                               type(model).__name__)
        _checks.freeze(self, "models", dict(self.models))
        defaults = {"weight_column": None, "label_vocabulary": (), "label_dimension": 1}
        for attr in ("head", *defaults):
            values = {n: head_of(mdl) if attr == "head" else
                      tuple(getattr(mdl, attr, ()) or ()) if attr == "label_vocabulary" else
                      getattr(mdl, attr, defaults[attr]) for n, mdl in self.models.items()}
            if len(set(map(repr, values.values()))) > 1:
                raise DslError(f"models[...].{attr}", "the same for every candidate (they are "
                               "compared on the same rows by the same metrics)",
                               values)
        head = self.head
        best_by = self.best_by if self.best_by is not None else _DEFAULT_BEST_BY[head]
        best_by = METRIC_ALIASES[head].get(best_by, best_by)
        if best_by not in METRIC_NAMES[head] or best_by == "examples":
            raise DslError("best_by", f"one of the {head} head's metrics "
                           f"{[n for n in METRIC_NAMES[head] if n != 'examples']}", best_by)
        _checks.freeze(self, "best_by", best_by)
        if self.higher_is_better is None:
            _checks.freeze(self, "higher_is_better", best_by not in LOWER_IS_BETTER)
        elif not isinstance(self.higher_is_better, bool):
            raise DslError("higher_is_better", "True, False or None", self.higher_is_better)

    @property
    def head(self) -> str:
        """The candidates' head (the same for every one)."""
        return head_of(next(iter(self.models.values())))

    @property
    def weight_column(self) -> str | None:
        """The candidates' ``weight_column`` (the same for every one)."""
        return getattr(next(iter(self.models.values())), "weight_column", None)

    @property
    def label_vocabulary(self) -> tuple[str, ...]:
        """The candidates' ``label_vocabulary`` (the same for every one)."""
        return getattr(next(iter(self.models.values())), "label_vocabulary", ())

    @property
    def n_classes(self) -> int | None:
        """The classifiers' ``n_classes`` (None for regressors)."""
        return next((mdl.n_classes for mdl in self.models.values()
                     if hasattr(mdl, "n_classes")), None)

    @property
    def label_dimension(self) -> int:
        """The regressors' ``label_dimension`` (1 for classifiers)."""
        return getattr(next(iter(self.models.values())), "label_dimension", 1)


def head_of(model: Model | Candidates) -> str:
    """The problem type of a model: ``"binary"``, ``"multi_class"`` or ``"regression"``."""
    if isinstance(model, Candidates):
        return model.head
    if isinstance(model, CustomModel):
        return model.head
    if hasattr(model, "n_classes"):
        return "binary" if model.n_classes == 2 else "multi_class"
    return "regression"
