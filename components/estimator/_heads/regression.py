"""Regression heads: squared error, Poisson and logistic regression (tf.estimator's v2)."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from estflow.estimator._heads.base import Head
from estflow.estimator._heads.base import LossReduction
from estflow.estimator._heads.base import assert_range
from estflow.estimator._heads.base import dense_labels
from estflow.estimator._heads.base import mean_metric
from estflow.estimator._heads.base import select_predictions
from estflow.estimator._heads.base import update_mean
from estflow.estimator.export import RegressionOutput

__all__ = ["RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead"]

_SOR = LossReduction.SUM_OVER_BATCH_SIZE


class RegressionHead(Head):
    """Squared error on ``label_dimension`` outputs (tf.estimator.RegressionHead).

    Labels: float ``[batch, label_dimension]`` (``[batch]`` when it is 1). Weights may be
    ``[batch]``, ``[batch, 1]`` or per output ``[batch, label_dimension]``. Predictions:
    ``predictions`` (plus ``logits`` with an ``inverse_link_fn``). Metrics: ``average_loss``,
    ``label/mean``, ``prediction/mean``.

    Args:
        label_dimension: outputs per example.
        weight_column: feature weighting each example.
        loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
        loss_fn: a custom ``loss_fn(labels, logits[, features][, loss_reduction])``.
        inverse_link_fn: predictions = ``inverse_link_fn(logits)`` (a GLM link).
        name: metric key suffix.

    Example:
        >>> import numpy as np
        >>> head = RegressionHead()
        >>> logits = np.array([[45.0], [41.0]], np.float32)
        >>> labels = np.array([[43.0], [44.0]], np.float32)
        >>> float(head.loss(labels, logits, {}))  # ((45-43)^2 + (41-44)^2) / 2
        6.5
    """

    def __init__(self, label_dimension: int = 1, weight_column=None,
                 loss_reduction: str = _SOR, loss_fn: Callable | None = None,
                 inverse_link_fn: Callable | None = None, name: str | None = None) -> None:
        if isinstance(label_dimension, bool) or not isinstance(label_dimension, int) or \
                label_dimension < 1:
            raise ValueError("Received an invalid value for `label_dimension`, expected a "
                             f"positive integer. Received: label_dimension={label_dimension!r}")
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self.logits_dimension = label_dimension
        self.inverse_link_fn = inverse_link_fn

    def _processed_labels(self, logits, labels):
        return tf.cast(dense_labels(labels, self.logits_dimension, type(self).__name__),
                       tf.float32)

    def _loss(self, labels, logits):
        return tf.square(logits - labels)

    def _serving_output(self, logits):
        """Regression (TF Serving's Regress) for one output; none for several."""
        if self.logits_dimension != 1:
            return None
        return "regression", RegressionOutput(self.predictions(logits)["predictions"])

    def predictions(self, logits, keys=None):
        """``predictions`` (and ``logits`` with an inverse link), or those in ``keys``."""
        if self.inverse_link_fn is None:
            return select_predictions({"predictions": logits}, keys)
        return select_predictions({"predictions": self.inverse_link_fn(logits),
                                   "logits": logits}, keys)

    def metrics(self, regularization_losses=None):
        """Fresh metric objects: ``average_loss``, ``label/mean``, ``prediction/mean``."""
        out = self._base_metrics(regularization_losses)
        out[self._summary_key("prediction/mean")] = mean_metric("prediction_mean")
        out[self._summary_key("label/mean")] = mean_metric("label_mean")
        return out

    def _update_head_metrics(self, m, logits, labels, unweighted, weights):
        update_mean(m[self._summary_key("label/mean")], labels, weights)
        update_mean(m[self._summary_key("prediction/mean")],
                    self.predictions(logits)["predictions"], weights)


class PoissonRegressionHead(RegressionHead):
    """Poisson regression: ``tf.nn.log_poisson_loss`` on log-rate logits; predictions are
    ``exp(logits)`` (tf.estimator.PoissonRegressionHead).

    Example:
        >>> import numpy as np
        >>> head = PoissonRegressionHead()
        >>> head.predictions(np.log(np.array([[2.0]], np.float32)))["predictions"].numpy()
        array([[2.]], dtype=float32)
    """

    def __init__(self, label_dimension: int = 1, weight_column=None,
                 loss_reduction: str = _SOR, compute_full_loss: bool = True,
                 name: str | None = None) -> None:
        super().__init__(label_dimension, weight_column, loss_reduction,
                         inverse_link_fn=tf.exp, name=name)
        self.compute_full_loss = compute_full_loss

    def _loss(self, labels, logits):
        return tf.nn.log_poisson_loss(labels, logits,
                                      compute_full_loss=self.compute_full_loss)


class LogisticRegressionHead(RegressionHead):
    """Logistic regression: labels in [0, 1], sigmoid cross-entropy; predictions are
    ``sigmoid(logits)`` (tf.estimator.LogisticRegressionHead).

    Example:
        >>> import numpy as np
        >>> head = LogisticRegressionHead()
        >>> round(float(head.loss(np.array([[0.5]]), np.array([[0.0]], np.float32), {})), 4)
        0.6931
    """

    def __init__(self, weight_column=None, loss_reduction: str = _SOR,
                 name: str | None = None) -> None:
        super().__init__(1, weight_column, loss_reduction, inverse_link_fn=tf.sigmoid,
                         name=name)

    def _processed_labels(self, logits, labels):
        labels = super()._processed_labels(logits, labels)
        return assert_range(labels, 0.0, 1.0,
                            "LogisticRegressionHead labels must be in [0, 1]; received")

    def _loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
