"""The head protocol shared by every head: loss reduction, example weights, EstimatorSpecs.

A head turns logits into predictions, a loss and EVAL metrics (tf.estimator's ``base_head``).
Subclasses define ``logits_dimension``, ``_processed_labels``, ``_loss`` (unweighted,
``[batch, 1]`` or ``[batch, logits_dimension]``), ``predictions``, ``metrics`` and
``_update_head_metrics``; this module does the rest.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._fc.lookup import VocabularyLookup
from estflow.estimator.export import PredictOutput

__all__ = ["Head", "LossReduction", "check_thresholds", "check_vocabulary", "mean_metric",
           "update_mean", "dense_labels", "assert_range", "train_spec", "label_ids",
           "select_predictions"]


class LossReduction:
    """How a head reduces the weighted per-example losses of a batch to the training loss
    (the values of ``tf.keras.losses.Reduction`` that tf.estimator heads accept)."""

    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    SUM = "sum"
    ALL = (SUM_OVER_BATCH_SIZE, SUM)


def _check_reduction(value: Any) -> str:
    if value not in LossReduction.ALL:
        raise ValueError(f"Received an invalid value for `loss_reduction`, expected one of "
                         f"{list(LossReduction.ALL)}. Received: loss_reduction={value!r}")
    return value


def check_thresholds(thresholds) -> tuple[float, ...]:
    """``thresholds`` as a tuple of floats in (0, 1)."""
    values = tuple(thresholds) if thresholds else ()
    for t in values:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 < t < 1.0:
            raise ValueError("Received an invalid value for `thresholds`, expected numbers in "
                             f"(0, 1). Received: thresholds={thresholds!r}")
    return tuple(float(t) for t in values)


def check_vocabulary(label_vocabulary, n_classes: int) -> tuple[str, ...] | None:
    """``label_vocabulary`` as a tuple of ``n_classes`` distinct strings, or None."""
    if label_vocabulary is None:
        return None
    if not isinstance(label_vocabulary, (list, tuple)) or len(label_vocabulary) != n_classes \
            or not all(isinstance(v, str) for v in label_vocabulary) \
            or len(set(label_vocabulary)) != n_classes:
        raise ValueError(f"Received an invalid value for `label_vocabulary`, expected a list "
                         f"of {n_classes} distinct strings (n_classes={n_classes}). Received: "
                         f"label_vocabulary={label_vocabulary!r}")
    return tuple(label_vocabulary)


def dense_labels(labels, dimension: int, what: str) -> tf.Tensor:
    """Labels as ``[batch, dimension]``: ``[batch]`` is accepted when ``dimension`` is 1."""
    if labels is None:
        raise ValueError("labels are required in TRAIN and EVAL mode; the input_fn returned "
                         "features only")
    if isinstance(labels, tf.SparseTensor):
        raise ValueError(f"{what} labels must be a dense tensor; received a SparseTensor")
    labels = tf.convert_to_tensor(labels)
    rank = labels.shape.rank
    if rank == 1 and dimension == 1:
        labels = labels[:, tf.newaxis]
    elif rank is not None and (rank != 2 or labels.shape[-1] not in (None, dimension)):
        raise ValueError(f"{what} labels must have shape [batch, {dimension}]"
                         f"{' or [batch]' if dimension == 1 else ''}; received shape "
                         f"{labels.shape}")
    return tf.reshape(labels, [-1, dimension])


def assert_range(values: tf.Tensor, low, high, message: str) -> tf.Tensor:
    """``values`` after a check that ``low <= values <= high`` (raises when run)."""
    ok = tf.reduce_all(tf.logical_and(values >= low, values <= high))
    check = tf.debugging.Assert(ok, [message, values], summarize=10)
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(values)


def update_mean(metric, values: tf.Tensor, weights: tf.Tensor) -> None:
    """Update a Mean metric with ``weights`` broadcast to ``values``."""
    values = tf.cast(values, tf.float32)
    metric.update_state(values, sample_weight=tf.broadcast_to(weights, tf.shape(values)))


def select_predictions(predictions: dict, keys: Sequence[str] | None) -> dict:
    """``predictions`` restricted to ``keys`` (all when None)."""
    if keys is None:
        return predictions
    unknown = [k for k in keys if k not in predictions]
    if unknown:
        raise ValueError(f"Received an invalid value for `keys`, expected a subset of "
                         f"{sorted(predictions)}. Received: keys={list(keys)}")
    return {k: predictions[k] for k in keys}


def mean_metric(name: str):
    return keras.metrics.Mean(name=name)


def _loss_fn_arguments(loss_fn: Callable) -> set[str]:
    names = set(inspect.signature(loss_fn).parameters)
    if not {"labels", "logits"} <= names or names - {"labels", "logits", "features",
                                                      "loss_reduction"}:
        raise ValueError("Received an invalid value for `loss_fn`, expected a function of "
                         "(labels, logits[, features][, loss_reduction]). Received "
                         f"arguments: {sorted(names)}")
    return names


class Head:
    """Base of the heads: everything but the problem-specific loss, predictions and metrics.

    Args:
        weight_column: a feature name (or a ``numeric_column``) whose values weight each
            example in the loss and the metrics.
        loss_reduction: :class:`LossReduction` ``SUM_OVER_BATCH_SIZE`` (weighted sum / number
            of loss elements) or ``SUM``.
        loss_fn: ``loss_fn(labels, logits[, features][, loss_reduction])`` -> unweighted
            per-example loss, replacing the head's own.
        name: suffixes metric keys (``"auc/<name>"``); required inside a :class:`MultiHead`.
    """

    logits_dimension: int = 1

    def __init__(self, weight_column=None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE,
                 loss_fn: Callable | None = None, name: str | None = None) -> None:
        if weight_column is not None and not isinstance(weight_column, str) and \
                not hasattr(weight_column, "key"):
            raise ValueError("Received an invalid value for `weight_column`, expected a "
                             "feature name or a numeric_column. Received: "
                             f"weight_column={weight_column!r}")
        self.weight_column = weight_column
        self.loss_reduction = _check_reduction(loss_reduction)
        self._loss_fn_args = _loss_fn_arguments(loss_fn) if loss_fn is not None else set()
        self.loss_fn = loss_fn
        self.name = name

    # -- subclass hooks ----------------------------------------------------------------------
    def _processed_labels(self, logits: tf.Tensor, labels) -> tf.Tensor:
        raise NotImplementedError

    def _loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def predictions(self, logits: tf.Tensor, keys: Sequence[str] | None = None) -> dict:
        raise NotImplementedError

    def metrics(self, regularization_losses=None) -> dict[str, Any]:
        raise NotImplementedError

    def _update_head_metrics(self, eval_metrics, logits, labels, unweighted, weights) -> None:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def _summary_key(self, key: str) -> str:
        return f"{key}/{self.name}" if self.name else key

    def _weights(self, features, logits: tf.Tensor) -> tf.Tensor:
        """Per-example weights, ``[batch, 1]`` (or ``[batch, logits_dimension]``)."""
        if self.weight_column is None:
            return tf.ones_like(logits[:, :1])
        key = self.weight_column if isinstance(self.weight_column, str) \
            else self.weight_column.key
        if not isinstance(features, dict) or key not in features:
            raise KeyError(f"weight_column {key!r} is not among the features "
                           f"{sorted(features) if isinstance(features, dict) else features}")
        if isinstance(self.weight_column, str):
            weights = tf.cast(features[key], tf.float32)
        else:
            weights = self.weight_column.dense_tensor(features)
        if weights.shape.rank == 1:
            weights = weights[:, tf.newaxis]
        width = weights.shape[-1]
        if width not in (None, 1, self.logits_dimension):
            raise ValueError(f"weight_column {key!r} must have shape [batch] or [batch, 1]; "
                             f"received {weights.shape}")
        return weights

    def _unweighted_loss_and_weights(self, logits, labels, features):
        """(unweighted loss, weights) for processed labels."""
        if self.loss_fn is None:
            unweighted = self._loss(labels, logits)
        else:
            kwargs = {"labels": labels, "logits": logits}
            if "features" in self._loss_fn_args:
                kwargs["features"] = features
            if "loss_reduction" in self._loss_fn_args:
                kwargs["loss_reduction"] = self.loss_reduction
            unweighted = tf.cast(self.loss_fn(**kwargs), tf.float32)
        return unweighted, self._weights(features, logits)

    def _reduce(self, unweighted: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
        total = tf.reduce_sum(unweighted * weights)
        if self.loss_reduction == LossReduction.SUM:
            return total
        return total / tf.cast(tf.size(unweighted), tf.float32)

    def export_outputs(self, logits, predictions) -> dict[str, Any]:
        """The export's signatures, as tf.estimator's heads declare them: ``serving_default``
        and the head's own (``classification``/``regression``, :meth:`_serving_output`),
        plus ``predict`` (the spec's predictions)."""
        predict = PredictOutput(predictions)
        own = self._serving_output(logits)
        if own is None:
            return {"serving_default": predict, "predict": predict}
        name, output = own
        return {"serving_default": output, name: output, "predict": predict}

    def _serving_output(self, logits):
        """``(signature name, output)`` of a classification/regression head, or None."""
        del logits
        return None

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        """The training loss: weighted per-example losses reduced by ``loss_reduction``, plus
        ``regularization_losses`` (a list of scalars) when given."""
        del mode  # the same loss in every mode, as tf.estimator's heads
        logits = tf.convert_to_tensor(logits)
        processed = self._processed_labels(logits, labels)
        unweighted, weights = self._unweighted_loss_and_weights(logits, processed, features)
        loss = self._reduce(unweighted, weights)
        if self.loss_reduction == LossReduction.SUM:
            self._tf1_graph_names(loss, unweighted, weights)
        if regularization_losses:
            loss += tf.add_n(list(regularization_losses))
        return loss

    def _tf1_graph_names(self, loss, unweighted, weights) -> None:
        """The graph names TF 1's heads (``loss_reduction=SUM``, tf.compat.v1's canned
        Estimators) gave the loss and the mean loss, which programs' LoggingTensorHooks fetch:
        ``head/weighted_loss/Sum`` and ``head/truediv`` (the head's ``name`` for ``head``)."""
        scope = self.name or "head"
        tf.identity(loss, name=f"{scope}/weighted_loss/Sum")
        weight_sum = tf.reduce_sum(weights * tf.ones_like(unweighted))
        tf.identity(loss / weight_sum, name=f"{scope}/truediv")

    def _base_metrics(self, regularization_losses) -> dict[str, Any]:
        out = {self._summary_key("average_loss"): mean_metric("average_loss")}
        if regularization_losses is not None:
            out[self._summary_key("regularization_loss")] = mean_metric("regularization_loss")
        return out

    def update_metrics(self, eval_metrics, features, logits, labels,
                       regularization_losses=None) -> dict[str, Any]:
        """Update ``eval_metrics`` (from :meth:`metrics`) with one batch; returns them."""
        logits = tf.convert_to_tensor(logits)
        processed = self._processed_labels(logits, labels)
        unweighted, weights = self._unweighted_loss_and_weights(logits, processed, features)
        update_mean(eval_metrics[self._summary_key("average_loss")], unweighted, weights)
        if regularization_losses is not None:
            eval_metrics[self._summary_key("regularization_loss")].update_state(
                tf.add_n(list(regularization_losses)))
        self._update_head_metrics(eval_metrics, logits, processed, unweighted, weights)
        return eval_metrics

    def create_estimator_spec(self, features, mode: str, logits, labels=None, optimizer=None,
                              trainable_variables=None, train_op_fn=None, update_ops=None,
                              regularization_losses=None, *,
                              prediction_keys: Sequence[str] | None = None) -> EstimatorSpec:
        """The EstimatorSpec of ``mode``: predictions; loss in TRAIN/EVAL; metrics in EVAL;
        in TRAIN ``optimizer`` (the engine applies it, to ``trainable_variables`` if given)
        or ``train_op_fn(loss)``. ``update_ops`` are accepted and need nothing: stateful ops
        run inside the engine's ``tf.function`` anyway. ``prediction_keys`` (estflow) keeps
        only those predictions."""
        del update_ops
        logits = tf.convert_to_tensor(logits)
        predictions = self.predictions(logits, prediction_keys)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions,
                                 export_outputs=self.export_outputs(logits, predictions))
        loss = self.loss(labels, logits, features, mode, regularization_losses)
        if mode == ModeKeys.EVAL:
            metrics = self.update_metrics(self.metrics(regularization_losses), features,
                                          logits, labels, regularization_losses)
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops=metrics)
        return train_spec(mode, predictions, loss, optimizer, trainable_variables, train_op_fn)


def train_spec(mode, predictions, loss, optimizer, trainable_variables, train_op_fn):
    """A TRAIN EstimatorSpec from exactly one of ``optimizer`` and ``train_op_fn``."""
    if (optimizer is None) == (train_op_fn is None):
        raise ValueError("In TRAIN mode exactly one of `optimizer` and `train_op_fn` must be "
                         f"set. Received: optimizer={optimizer!r}, train_op_fn={train_op_fn!r}")
    if train_op_fn is not None:
        return EstimatorSpec(mode, predictions=predictions, loss=loss,
                             train_op=train_op_fn(loss))
    if trainable_variables is not None:
        optimizer = [(optimizer, list(trainable_variables))]
    return EstimatorSpec(mode, predictions=predictions, loss=loss, optimizer=optimizer)


def label_ids(labels: tf.Tensor, vocabulary: tuple[str, ...] | None,
              lookup: VocabularyLookup | None) -> tf.Tensor:
    """String labels mapped through the vocabulary (unknown -> a failing check); integer
    labels pass as ids (estflow: the transform step already mapped pipeline labels)."""
    if labels.dtype != tf.string:
        return labels
    if vocabulary is None:
        raise ValueError("labels are strings but the head has no `label_vocabulary`; set "
                         "label_vocabulary to map them to class ids")
    ids = lookup(labels)
    known = tf.reduce_all(ids >= 0)
    check = tf.debugging.Assert(known, [f"labels must be one of label_vocabulary "
                                        f"{list(vocabulary)}; received", labels], summarize=10)
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(ids)
