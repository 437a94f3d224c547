"""Evaluation and prediction: the model_fn in EVAL and PREDICT mode, compiled once each.

Evaluation runs the whole (finite) input in one ``tf.function`` call: a ``tf.while_loop`` over
the iterator calls the model_fn (which updates its metrics) and sums the loss. Metric
variables are store locals: never checkpointed, reset before every evaluation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from estflow.components.estimator._calls import ModelFn
from estflow.components.estimator._calls import split_element
from estflow.components.estimator._store import VariableStore
from estflow.dsl.model_fn import ModeKeys

__all__ = ["Evaluator", "Predictor", "to_python"]


def to_python(value) -> Any:
    """A metric result as a plain Python number (or list, for vector results)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return array.tolist()


class Evaluator:
    """Runs EVAL over a dataset and collects the model_fn's ``eval_metric_ops``."""

    def __init__(self, store: VariableStore, model_fn: ModelFn) -> None:
        self._store = store
        self._model_fn = model_fn
        self._metrics: dict[str, Any] = {}
        with tf.init_scope():
            self._loss_sum = tf.Variable(0.0, trainable=False, name="eval_loss_sum")
            self._batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="eval_batches")
        self._fn = tf.function(self._run, autograph=False)

    def _call(self, features, labels) -> tf.Tensor:
        with self._store.scope(ModeKeys.EVAL):
            spec = self._model_fn(features, labels, ModeKeys.EVAL)
        # A trace-time side effect: the metric objects of the latest trace (every trace's
        # objects read the same store variables).
        self._metrics = dict(spec.eval_metric_ops or {})
        return tf.cast(spec.loss, tf.float32)

    def _run(self, dataset):
        iterator = iter(dataset)

        def body(more):
            element = iterator.get_next_as_optional()

            def step():
                features, labels = split_element(element.get_value())
                self._loss_sum.assign_add(self._call(features, labels))
                self._batches.assign_add(1)
                return tf.constant(True)

            return (tf.cond(element.has_value(), step, lambda: tf.constant(False)),)

        tf.while_loop(lambda more: more, body, (tf.constant(True),))
        return self._batches.read_value()

    def evaluate(self, dataset: tf.data.Dataset) -> dict[str, Any]:
        """Metrics over all of ``dataset``: ``eval_metric_ops`` results and the mean ``loss``."""
        self._fn.get_concrete_function(dataset)  # trace first: metric variables exist now
        self._store.reset_locals(ModeKeys.EVAL)
        self._loss_sum.assign(0.0)
        self._batches.assign(0)
        batches = int(self._fn(dataset))
        if batches == 0:
            raise ValueError("evaluation input_fn produced no batches")
        results = {name: to_python(metric.result()) for name, metric in self._metrics.items()}
        results["loss"] = float(self._loss_sum.numpy()) / batches
        return results


class Predictor:
    """The model_fn in PREDICT mode, compiled once (shapes relaxed across batch sizes)."""

    def __init__(self, predictions_fn) -> None:
        self._fn = tf.function(predictions_fn, reduce_retracing=True, autograph=False)

    def __call__(self, features):
        return self._fn(features)
