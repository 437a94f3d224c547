"""Evaluation and prediction: the model_fn in EVAL and PREDICT mode, compiled once each.

Evaluation runs the whole (finite) input in one ``tf.function`` call: a ``tf.while_loop`` over
the iterator calls the model_fn (which updates its metrics) and sums the loss. With hooks
(``evaluate(hooks=...)`` or the spec's ``evaluation_hooks``) the same function runs chunks of
``steps_per_loop`` batches and the hooks run around each chunk. Metric variables are store
locals: never checkpointed, reset before every evaluation.

Under ``RunConfig.eval_distribute`` (:mod:`.distribute`) the iterator is distributed, the
model_fn runs per replica, and a global batch's loss is its replicas' losses weighted by their
example counts; metric variables are then created in the strategy's scope (``ON_READ``
variables, summed over replicas when read). TF 1 ``(value, update_op)`` pairs are refused
there: an update_op's value is one replica's metric, which does not combine into the whole's.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._engine.calls import ModelFn
from estflow.estimator._engine.calls import scalar_loss
from estflow.estimator._engine.calls import split_element
from estflow.estimator._engine.driver import HookRunner
from estflow.estimator._engine.driver import HookSession
from estflow.estimator._engine.driver import as_hooks
from estflow.estimator._engine.loop import examples_in
from estflow.estimator._engine.store import VariableStore
from estflow.estimator.distribute import DistributeError
from estflow.estimator.distribute import Distribution

__all__ = ["Evaluator", "Predictor", "to_python", "select_keys", "unbatch"]


def to_python(value) -> Any:
    """A metric result as a plain Python number (or list, for vector results)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return array.tolist()


class Evaluator:
    """Runs EVAL over a dataset and collects the model_fn's ``eval_metric_ops``."""

    def __init__(self, store: VariableStore, model_fn: ModelFn,
                 distribution: Distribution | None = None,
                 global_step: tf.Variable | None = None) -> None:
        self._store = store
        self._model_fn = model_fn
        self._global_step = global_step
        # TF 1 idioms: what tf.compat.v1.train.get_global_step() returns in the model_fn, a
        # copy of the step set before each batch (a train_op built in every mode, say
        # `step.assign_add(1)`, must not move the Estimator's step). Not checkpointed.
        self._step_view = None
        if global_step is not None:
            with tf.init_scope():
                self._step_view = tf.Variable(0, dtype=tf.int64, trainable=False,
                                              name="global_step")
        # distribution: RunConfig.eval_distribute (none: one device).
        self._distribution = distribution or Distribution()
        self._metrics: dict[str, Any] = {}
        self._spec_hooks: tuple = ()
        with tf.init_scope():
            self._loss_sum = tf.Variable(0.0, trainable=False, name="eval_loss_sum")
            self._batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="eval_batches")
        self._pair_values: dict[str, tf.Variable] = {}  # TF 1 pairs: value after each update
        self._fn = tf.function(self._run, autograph=False)

    @property
    def distribution(self) -> Distribution:
        """Evaluation's distribution (what an input_fn's ``input_context`` describes)."""
        return self._distribution

    def _call(self, features, labels) -> tf.Tensor:
        with self._store.scope(ModeKeys.EVAL, global_step=self._step_view):
            spec = self._model_fn(features, labels, ModeKeys.EVAL)
        # A trace-time side effect: the metric objects of the latest trace (every trace's
        # objects read the same store variables).
        metrics = dict(spec.eval_metric_ops or {})
        for name, metric in metrics.items():
            if isinstance(metric, (tuple, list)):
                if self._distribution.strategy is not None:
                    raise DistributeError(
                        f"eval_metric_ops[{name!r}] is a TF 1 (value, update_op) pair, which "
                        "eval_distribute does not support: each replica's update_op is the "
                        "metric over that replica's examples only, and such parts do not "
                        "combine into the metric of all examples. Expected a Keras metric "
                        "object (e.g. keras.metrics.BinaryAccuracy() with update_state called "
                        "in the model_fn), or eval_distribute=None. Received: "
                        f"{type(metric).__name__} of {len(metric)} under eval_distribute="
                        f"{type(self._distribution.strategy).__name__}")
                metrics[name] = self._track_pair(name, metric[1])
        self._metrics = metrics
        self._spec_hooks = tuple(spec.evaluation_hooks)
        return scalar_loss(spec.loss)

    def _track_pair(self, name: str, update_op: tf.Tensor) -> tf.Variable:
        """A TF 1 ``(value, update_op)`` metric: the update runs with the batch (a stateful op
        of the traced step) and its value, the metric after this batch, is kept in a variable
        read once evaluation ends. (``value`` itself cannot be read outside the trace, and in
        the trace it reads the state before the batch's update.)"""
        update = tf.convert_to_tensor(update_op)
        if not update.shape.is_fully_defined():
            raise ValueError(f"eval_metric_ops[{name!r}]: expected an update_op of static "
                             f"shape (its value is the metric); received shape {update.shape}")
        kept = self._pair_values.get(name)
        if kept is None or kept.shape != update.shape or kept.dtype != update.dtype:
            with tf.init_scope():
                kept = tf.Variable(tf.zeros(update.shape, update.dtype), trainable=False,
                                   name=f"eval_metric_{len(self._pair_values)}")
            self._pair_values[name] = kept
        kept.assign(update)
        return kept

    def _run(self, iterator, n):
        """Evaluate up to ``n`` more batches; returns how many ran."""

        def body(i, more):
            element = iterator.get_next_as_optional()

            def step():
                if self._step_view is not None:
                    self._step_view.assign(self._global_step)
                self._loss_sum.assign_add(self._batch_loss(element.get_value()))
                self._batches.assign_add(1)
                return tf.constant(True)

            more = tf.cond(element.has_value(), step, lambda: tf.constant(False))
            return i + tf.cast(more, tf.int64), more

        ran, _ = tf.while_loop(lambda i, more: tf.logical_and(more, i < n), body,
                               (tf.constant(0, tf.int64), tf.constant(True)))
        return ran

    def _batch_loss(self, element) -> tf.Tensor:
        """The loss of one (global) batch."""
        if self._distribution.strategy is None:
            features, labels = split_element(element)
            return self._call(features, labels)
        weighted, examples = self._distribution.sum_over_replicas(self._replica_loss, element)
        return tf.math.divide_no_nan(weighted, examples)

    def _replica_loss(self, element) -> tuple[tf.Tensor, tf.Tensor]:
        """distribution: (loss x examples, examples) of this replica's part of the batch. A
        replica left without examples (a short last batch) reports (0, 0), whatever its loss
        (the mean of nothing is NaN)."""
        features, labels = split_element(element)
        loss = self._call(features, labels)
        examples = tf.cast(examples_in(features), tf.float32)
        return tf.where(examples > 0, loss * examples, 0.0), examples

    def prepare(self, dataset: tf.data.Dataset):
        """The iterator :meth:`evaluate` reads, with the evaluation traced for it: metric
        variables (and the model's, when this is the model_fn's first trace) and the spec's
        hooks exist once this returns."""
        # distribution: the input split over the replicas, metric variables in the scope.
        with self._distribution.scope():
            iterator = self._distribution.iterator(dataset)
            self._fn.get_concrete_function(iterator, tf.TensorSpec([], tf.int64))
        return iterator

    def evaluate(self, iterator, hooks: tuple = (), session: HookSession | None = None,
                 chunk: int = 100) -> dict[str, Any]:
        """Metrics over all of ``iterator`` (:meth:`prepare`'s; unless a hook stops early):
        ``eval_metric_ops`` results and the mean ``loss``."""
        with self._distribution.scope():
            self._store.reset_locals(ModeKeys.EVAL)
            self._loss_sum.assign(0.0)
            self._batches.assign(0)
            hooks = tuple(hooks) + as_hooks(self._spec_hooks, "evaluation_hooks")
            if hooks:
                self._run_with_hooks(iterator, HookRunner(hooks, session), chunk)
            else:
                self._fn(iterator, tf.constant(2 ** 62, tf.int64))
            if int(self._batches.numpy()) == 0:
                raise ValueError("evaluation input_fn produced no batches")
            return self._results()

    def _results(self) -> dict[str, Any]:
        results = {name: to_python(metric.numpy() if isinstance(metric, tf.Variable)
                                    else metric.result())
                   for name, metric in self._metrics.items()}
        results["loss"] = float(self._loss_sum.numpy()) / max(int(self._batches.numpy()), 1)
        return results

    def _run_with_hooks(self, iterator, runner: HookRunner, chunk: int) -> None:
        runner.begin()
        while True:
            context = runner.before()
            unknown = runner.graph_names(("loss", *self._metrics))
            if unknown:
                raise ValueError(f"Evaluation hooks fetch {list(unknown)}; expected 'loss', "
                                 f"metric names {sorted(self._metrics)}, 'global_step', "
                                 "variable names or callables")
            ran = int(self._fn(iterator, tf.constant(chunk, tf.int64)))
            runner.after(context, self._results(), ran)
            if context.stop_requested or ran < chunk:
                break
        runner.end()


class Predictor:
    """The model_fn in PREDICT mode, compiled once (shapes relaxed across batch sizes)."""

    def __init__(self, predictions_fn) -> None:
        self._fn = tf.function(predictions_fn, reduce_retracing=True, autograph=False)

    def __call__(self, features):
        return self._fn(features)

    def prepare(self, element_spec) -> None:
        """Trace for ``element_spec``'s features ahead of the first batch: the spec's
        ``prediction_hooks`` are known once this returns."""
        features_spec, _ = split_element(element_spec)
        self._fn.get_concrete_function(features_spec)

    def batches(self, dataset: tf.data.Dataset, runner: HookRunner):
        """Predictions per batch of ``dataset``, with ``runner``'s hooks around each batch
        (they may fetch prediction keys; ``request_stop()`` ends the predictions)."""
        if runner.hooks:
            runner.begin()
        for element in dataset:
            context = runner.before() if runner.hooks else None
            features, _ = split_element(element)
            outputs = self(features)
            if context is not None:
                values = outputs if isinstance(outputs, Mapping) else {"predictions": outputs}
                runner.after(context, values, 1)
            yield outputs
            if context is not None and context.stop_requested:
                break
        if runner.hooks:
            runner.end()


def select_keys(outputs, keys: Sequence[str] | None):
    """``outputs`` restricted to ``predict_keys``."""
    if keys is None:
        return outputs
    if not isinstance(outputs, Mapping):
        raise ValueError("predict_keys given, but the model_fn's predictions are not a dict")
    missing = [k for k in keys if k not in outputs]
    if missing:
        raise ValueError(f"Expected to find {missing} in predictions; available: "
                         f"{sorted(outputs)}")
    return {k: outputs[k] for k in keys}


def unbatch(outputs, single: bool):
    """Numpy predictions: the batch as is, or one example at a time."""
    values = tf.nest.map_structure(lambda t: t.numpy(), outputs)
    if not single:
        yield values
        return
    size = len(tf.nest.flatten(values)[0])
    for i in range(size):
        yield tf.nest.map_structure(lambda v, i=i: v[i], values)
