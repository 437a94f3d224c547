"""``MultiHead``: several named heads trained together on one network (multi-task)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence

import tensorflow as tf

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._heads.base import Head
from estflow.estimator._heads.base import mean_metric
from estflow.estimator._heads.base import train_spec

__all__ = ["MultiHead"]


class MultiHead:
    """Several heads on one set of logits (tf.estimator.MultiHead).

    ``logits`` is a dict keyed by head name, or one tensor split along its last axis in head
    order; ``labels`` is a dict keyed by head name. The loss is the (``head_weights``-weighted)
    sum of the heads' losses. Predictions are keyed ``"<head name>/<key>"`` (tf.estimator
    used ``(head name, key)`` tuples; EstimatorSpec keys are strings here). Metrics are each
    head's (suffixed ``/<head name>``) plus ``loss/<head name>``.

    Args:
        heads: heads, each with a distinct ``name``.
        head_weights: optional loss weight per head.

    Raises:
        ValueError: no heads, unnamed or duplicate heads, mismatched ``head_weights``.

    Example:
        >>> import numpy as np
        >>> from estflow.estimator.heads import MultiLabelHead
        >>> head = MultiHead([MultiLabelHead(2, name="head1"),
        ...                   MultiLabelHead(3, name="head2")])
        >>> logits = {"head1": np.array([[-10., 10.], [-15., 10.]], np.float32),
        ...           "head2": np.array([[20., -20., 20.], [-30., 20., -20.]], np.float32)}
        >>> labels = {"head1": np.array([[1, 0], [1, 1]]),
        ...           "head2": np.array([[0, 1, 0], [1, 1, 0]])}
        >>> round(float(head.loss(labels, logits, {})), 2)  # 8.75 + 15.0
        23.75
    """

    def __init__(self, heads: Sequence[Head], head_weights: Sequence[float] | None = None
                 ) -> None:
        heads = tuple(heads) if isinstance(heads, (list, tuple)) else ()
        if not heads or not all(isinstance(h, Head) for h in heads):
            raise ValueError("Received an invalid value for `heads`, expected a non-empty list "
                             f"of heads. Received: heads={heads!r}")
        names = [h.name for h in heads]
        if None in names or len(set(names)) != len(names):
            raise ValueError("Received an invalid value for `heads`, expected heads with "
                             f"distinct names (name=...). Received names: {names}")
        if head_weights is not None and len(head_weights) != len(heads):
            raise ValueError("Received an invalid value for `head_weights`, expected one "
                             f"weight per head ({len(heads)}). Received: "
                             f"head_weights={head_weights!r}")
        reductions = {h.loss_reduction for h in heads}
        if len(reductions) > 1:
            raise ValueError(f"All heads of a MultiHead need the same loss_reduction; "
                             f"received {sorted(reductions)}")
        self.heads = heads
        self.head_weights = tuple(head_weights) if head_weights is not None else None
        self.logits_dimension = sum(h.logits_dimension for h in heads)
        self.loss_reduction = reductions.pop()
        self.name = "_".join(names)

    def _logits(self, logits) -> dict[str, tf.Tensor]:
        if isinstance(logits, Mapping):
            missing = [h.name for h in self.heads if h.name not in logits]
            if missing:
                raise ValueError(f"logits has no values for head(s) {missing}")
            return {h.name: tf.convert_to_tensor(logits[h.name]) for h in self.heads}
        logits = tf.convert_to_tensor(logits)
        if logits.shape[-1] not in (None, self.logits_dimension):
            raise ValueError(f"logits of shape {logits.shape} cannot be split among heads "
                             f"with logits dimensions "
                             f"{[h.logits_dimension for h in self.heads]}")
        parts = tf.split(logits, [h.logits_dimension for h in self.heads], axis=-1)
        return {h.name: part for h, part in zip(self.heads, parts, strict=True)}

    def _labels(self, labels) -> Mapping:
        if not isinstance(labels, Mapping):
            raise ValueError(f"MultiHead labels must be a dict keyed by head name; received "
                             f"{type(labels).__name__}")
        missing = [h.name for h in self.heads if h.name not in labels]
        if missing:
            raise ValueError(f"labels has no values for head(s) {missing}")
        return labels

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        """Sum of the heads' training losses (weighted by ``head_weights``)."""
        logits, labels = self._logits(logits), self._labels(labels)
        weights = self.head_weights or (1.0,) * len(self.heads)
        losses = [w * h.loss(labels[h.name], logits[h.name], features, mode)
                  for h, w in zip(self.heads, weights, strict=True)]
        total = tf.add_n(losses)
        if regularization_losses:
            total += tf.add_n(list(regularization_losses))
        return total

    def predictions(self, logits, keys: Sequence[str] | None = None) -> dict[str, tf.Tensor]:
        """Every head's predictions keyed ``"<head>/<key>"`` (or only ``keys``)."""
        logits = self._logits(logits)
        out = {f"{h.name}/{k}": v for h in self.heads
               for k, v in h.predictions(logits[h.name]).items()}
        if keys is None:
            return out
        unknown = [k for k in keys if k not in out]
        if unknown:
            raise ValueError(f"Received an invalid value for `keys`, expected a subset of "
                             f"{sorted(out)}. Received: keys={list(keys)}")
        return {k: out[k] for k in keys}

    def metrics(self, regularization_losses=None) -> dict:
        """Every head's metrics plus ``loss/<head>`` (and ``regularization_loss``)."""
        out = {}
        if regularization_losses is not None:
            out["regularization_loss"] = mean_metric("regularization_loss")
        for head in self.heads:
            out[f"loss/{head.name}"] = mean_metric(f"loss_{head.name}")
            out.update(head.metrics())
        return out

    def update_metrics(self, eval_metrics, features, logits, labels,
                       regularization_losses=None) -> dict:
        """Update every head's metrics with one batch; returns ``eval_metrics``."""
        logits, labels = self._logits(logits), self._labels(labels)
        if regularization_losses is not None:
            eval_metrics["regularization_loss"].update_state(
                tf.add_n(list(regularization_losses)))
        for head in self.heads:
            eval_metrics[f"loss/{head.name}"].update_state(
                head.loss(labels[head.name], logits[head.name], features))
            head.update_metrics(eval_metrics, features, logits[head.name], labels[head.name])
        return eval_metrics

    def create_estimator_spec(self, features, mode: str, logits, labels=None, optimizer=None,
                              trainable_variables=None, train_op_fn=None, update_ops=None,
                              regularization_losses=None, *,
                              prediction_keys: Sequence[str] | None = None) -> EstimatorSpec:
        """As :meth:`Head.create_estimator_spec`, for all heads at once."""
        del update_ops
        predictions = self.predictions(logits, prediction_keys)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        loss = self.loss(labels, logits, features, mode, regularization_losses)
        if mode == ModeKeys.EVAL:
            metrics = self.update_metrics(self.metrics(regularization_losses), features,
                                          logits, labels, regularization_losses)
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops=metrics)
        return train_spec(mode, predictions, loss, optimizer, trainable_variables, train_op_fn)
