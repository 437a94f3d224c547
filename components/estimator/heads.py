"""Heads: the problem type (loss, predictions, metrics) apart from the network (tf.estimator's
``head``). A premade model_fn computes logits and asks its head for the EstimatorSpec.

Losses follow tf.estimator's v2 heads: per-example loss, weighted by ``weight_column`` when
given, reduced with SUM_OVER_BATCH_SIZE (sum of weighted losses / number of loss elements).

Predictions (all batch-major):

- binary: ``logits`` [N, 1], ``logistic`` [N, 1], ``probabilities`` [N, 2],
  ``class_ids`` [N, 1] int64;
- multi-class: ``logits`` [N, K], ``probabilities`` [N, K], ``class_ids`` [N, 1] int64;
- regression: ``predictions`` [N, label_dimension].

EVAL metrics (Keras metrics, created per trace, kept out of checkpoints by the engine):
``average_loss``, ``accuracy``, ``auc``, ``auc_precision_recall``, ``precision``, ``recall``,
``label/mean``, ``prediction/mean`` (binary); ``average_loss``, ``accuracy`` (multi-class);
``average_loss``, ``label/mean``, ``prediction/mean`` (regression). The engine adds ``loss``
(mean of batch losses) and ``global_step``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys

__all__ = ["Head", "BinaryClassHead", "MultiClassHead", "RegressionHead", "head_for"]


class Head:
    """Shared plumbing; subclasses define ``logits_dimension``, ``predictions``,
    ``unreduced_loss`` and ``metrics``."""

    logits_dimension: int = 1

    def __init__(self, weight_column: str | None = None) -> None:
        self.weight_column = weight_column

    def predictions(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def unreduced_loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def metrics(self, labels, predictions, unreduced, weights) -> dict[str, Any]:
        raise NotImplementedError

    def weights(self, features, unreduced: tf.Tensor) -> tf.Tensor:
        """Per-example weights broadcastable to the unreduced loss ([N, 1])."""
        if self.weight_column is None:
            return tf.ones_like(unreduced[:, :1])
        if not isinstance(features, dict) or self.weight_column not in features:
            raise KeyError(f"weight_column {self.weight_column!r} is not among the features "
                           f"({sorted(features) if isinstance(features, dict) else features})")
        return tf.reshape(tf.cast(features[self.weight_column], tf.float32), [-1, 1])

    def loss(self, features, labels, logits) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(training loss, unreduced loss, weights)."""
        unreduced = self.unreduced_loss(labels, logits)
        weights = self.weights(features, unreduced)
        total = tf.reduce_sum(unreduced * weights)
        return total / tf.cast(tf.size(unreduced), tf.float32), unreduced, weights

    def create_estimator_spec(self, features, mode: str, logits: tf.Tensor, labels=None,
                              optimizer=None,
                              train_op_fn: Callable[[tf.Tensor], Any] | None = None
                              ) -> EstimatorSpec:
        """The EstimatorSpec for ``mode``: predictions always; loss in TRAIN and EVAL;
        metrics in EVAL; ``optimizer`` (engine applies it) or ``train_op_fn(loss)`` in TRAIN."""
        predictions = self.predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        if labels is None:
            raise ValueError(f"labels are required in mode {mode!r}")
        loss, unreduced, weights = self.loss(features, labels, logits)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops=self.metrics(labels, predictions, unreduced,
                                                              weights))
        train_op = train_op_fn(loss) if train_op_fn is not None else None
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op,
                             optimizer=None if train_op is not None else optimizer)


def _column(labels: tf.Tensor, dtype) -> tf.Tensor:
    """Labels as a [N, 1] column."""
    return tf.cast(tf.reshape(labels, [-1, 1]), dtype)


def _mean(name: str, values, weights):
    metric = keras.metrics.Mean(name=name)
    metric.update_state(values, sample_weight=tf.broadcast_to(weights, tf.shape(values)))
    return metric


class BinaryClassHead(Head):
    """Two classes, sigmoid cross-entropy on one logit; labels are 0/1 ids."""

    logits_dimension = 1

    def predictions(self, logits):
        logistic = tf.sigmoid(logits)
        return {"logits": logits, "logistic": logistic,
                "probabilities": tf.concat([1.0 - logistic, logistic], axis=1),
                "class_ids": tf.cast(logits > 0.0, tf.int64)}

    def unreduced_loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=_column(labels, tf.float32),
                                                       logits=logits)

    def metrics(self, labels, predictions, unreduced, weights):
        y = _column(labels, tf.float32)
        p = predictions["logistic"]
        out = {"average_loss": _mean("average_loss", unreduced, weights)}
        for name, metric, value in (
                ("accuracy", keras.metrics.Accuracy(name="accuracy"),
                 tf.cast(predictions["class_ids"], tf.float32)),
                ("auc", keras.metrics.AUC(num_thresholds=200, name="auc"), p),
                ("auc_precision_recall", keras.metrics.AUC(num_thresholds=200, curve="PR",
                                                           name="auc_precision_recall"), p),
                ("precision", keras.metrics.Precision(name="precision"), p),
                ("recall", keras.metrics.Recall(name="recall"), p)):
            metric.update_state(y, value, sample_weight=weights)
            out[name] = metric
        out["label/mean"] = _mean("label_mean", y, weights)
        out["prediction/mean"] = _mean("prediction_mean", p, weights)
        return out


class MultiClassHead(Head):
    """``n_classes`` > 2, softmax cross-entropy; labels are ids in [0, n_classes)."""

    def __init__(self, n_classes: int, weight_column: str | None = None) -> None:
        super().__init__(weight_column)
        self.logits_dimension = n_classes

    def predictions(self, logits):
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "class_ids": tf.argmax(logits, axis=1, output_type=tf.int64)[:, tf.newaxis]}

    def unreduced_loss(self, labels, logits):
        ids = tf.reshape(tf.cast(labels, tf.int64), [-1])
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids,
                                                              logits=logits)[:, tf.newaxis]

    def metrics(self, labels, predictions, unreduced, weights):
        accuracy = keras.metrics.Accuracy(name="accuracy")
        accuracy.update_state(_column(labels, tf.int64), predictions["class_ids"],
                              sample_weight=weights)
        return {"average_loss": _mean("average_loss", unreduced, weights),
                "accuracy": accuracy}


class RegressionHead(Head):
    """Squared error on ``label_dimension`` outputs."""

    def __init__(self, label_dimension: int = 1, weight_column: str | None = None) -> None:
        super().__init__(weight_column)
        self.logits_dimension = label_dimension

    def _labels(self, labels):
        return tf.reshape(tf.cast(labels, tf.float32), [-1, self.logits_dimension])

    def predictions(self, logits):
        return {"predictions": logits}

    def unreduced_loss(self, labels, logits):
        return tf.square(logits - self._labels(labels))

    def metrics(self, labels, predictions, unreduced, weights):
        return {"average_loss": _mean("average_loss", unreduced, weights),
                "label/mean": _mean("label_mean", self._labels(labels), weights),
                "prediction/mean": _mean("prediction_mean", predictions["predictions"],
                                         weights)}


def head_for(kind: str, n_classes: int = 2, label_dimension: int = 1,
             weight_column: str | None = None) -> Head:
    """``"classifier"`` (binary or multi-class by ``n_classes``) or ``"regressor"``."""
    if kind == "classifier":
        return (BinaryClassHead(weight_column) if n_classes == 2
                else MultiClassHead(n_classes, weight_column))
    if kind == "regressor":
        return RegressionHead(label_dimension, weight_column)
    raise ValueError(f"head kind must be 'classifier' or 'regressor', got {kind!r}")
