"""The training loop: ``steps_per_loop`` steps inside one ``tf.function`` call.

One call runs a ``tf.while_loop`` over the input iterator; Python sees the global step, the
last loss and the example count once per loop, never per step (a per-step Python round trip
costs ~15% against Keras ``fit``). The loop stops early, inside the graph, at the end of the
input or at the first non-finite loss.

A model_fn trains in one of two styles:

- Estimator style: it applies its own gradients and returns ``train_op``;
- estflow style: it returns ``optimizer`` (or ``(optimizer, variables)`` pairs) and the engine
  takes the gradients of ``loss`` and applies them. The engine keeps the optimizer objects of
  the first trace (``Optimizers``), builds their slots eagerly, outside the trace, and
  checkpoints them; optimizers constructed by later traces of the model_fn are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from estflow.components.estimator._calls import ModelFn
from estflow.components.estimator._calls import split_element
from estflow.components.estimator._store import VariableStore
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys

__all__ = ["Optimizers", "Trainer"]


class Optimizers(tf.Module):
    """The optimizers the engine applies (estflow style), tracked for checkpoints."""

    def __init__(self) -> None:
        super().__init__(name="optimizers")
        self.optimizers: list = []

    def adopt(self, candidates: Sequence) -> list:
        """The kept optimizers: ``candidates`` on the first call, the first ones afterwards."""
        if not self.optimizers:
            with tf.init_scope():
                for opt in candidates:
                    self.optimizers.append(opt)
        if len(candidates) != len(self.optimizers) or any(
                type(a) is not type(b) for a, b in zip(candidates, self.optimizers, strict=False)):
            raise ValueError("model_fn returned different optimizers on different calls: "
                             f"{[type(o).__name__ for o in self.optimizers]} then "
                             f"{[type(o).__name__ for o in candidates]}")
        return list(self.optimizers)


def _as_tf_variable(var):
    """A Keras 3 variable wraps a tf.Variable (``.value``); the store holds the latter."""
    return var if isinstance(var, tf.Variable) else getattr(var, "value", var)


def _pairs(optimizer) -> list[tuple]:
    if hasattr(optimizer, "apply_gradients"):
        return [(optimizer, None)]
    return [(opt, [_as_tf_variable(v) for v in variables]) for opt, variables in optimizer]


def _batch_size(features) -> tf.Tensor:
    first = tf.nest.flatten(features)[0]
    if isinstance(first, tf.SparseTensor):
        return first.dense_shape[0]
    return tf.shape(first, out_type=tf.int64)[0]


class Trainer:
    """Builds and holds the compiled training loop of one Estimator."""

    def __init__(self, store: VariableStore, model_fn: ModelFn, global_step: tf.Variable,
                 optimizers: Optimizers) -> None:
        self._store = store
        self._model_fn = model_fn
        self._global_step = global_step
        self._optimizers = optimizers
        self.loop = tf.function(self._loop, autograph=False)

    def _loop(self, iterator, n):
        """Run up to ``n`` steps; returns (steps run, last loss, examples, loss finite)."""

        def cond(i, loss, examples, finite, more):
            return tf.logical_and(tf.logical_and(i < n, finite), more)

        def body(i, loss, examples, finite, more):
            element = iterator.get_next_as_optional()

            def step():
                features, labels = split_element(element.get_value())
                return self._step(features, labels), _batch_size(features)

            def end():
                return loss, tf.constant(0, tf.int64)

            more = element.has_value()
            loss, size = tf.cond(more, step, end)
            done = tf.cast(more, tf.int64)
            return (i + done, loss, examples + size, tf.reduce_all(tf.math.is_finite(loss)),
                    more)

        start = (tf.constant(0, tf.int64), tf.constant(0.0), tf.constant(0, tf.int64),
                 tf.constant(True), tf.constant(True))
        i, loss, examples, finite, _ = tf.while_loop(cond, body, start)
        return i, loss, examples, finite

    def _step(self, features, labels) -> tf.Tensor:
        with tf.GradientTape() as tape:
            with self._store.scope(ModeKeys.TRAIN):
                spec = self._model_fn(features, labels, ModeKeys.TRAIN)
            loss = tf.cast(spec.loss, tf.float32)
        if spec.optimizer is not None:
            self._apply(spec, loss, tape)
        # Stateful ops run in program order inside a tf.function, so the model_fn's own
        # train_op (Estimator style) has run before the step count moves.
        self._global_step.assign_add(1)
        return tf.identity(loss)

    def _apply(self, spec: EstimatorSpec, loss: tf.Tensor, tape: tf.GradientTape) -> None:
        pairs = _pairs(spec.optimizer)
        optimizers = self._optimizers.adopt([opt for opt, _ in pairs])
        watched = [v for v in tape.watched_variables() if v.trainable]
        var_lists = [self._store.ordered(v if v is not None else watched) for _, v in pairs]
        flat = [v for variables in var_lists for v in variables]
        grads = tape.gradient(loss, flat)
        at = 0
        for opt, variables in zip(optimizers, var_lists, strict=True):
            part = grads[at:at + len(variables)]
            at += len(variables)
            pairs_gv = [(g, v) for g, v in zip(part, variables, strict=True) if g is not None]
            if not getattr(opt, "built", True):
                with tf.init_scope():  # slots are created eagerly, once, outside the trace
                    opt.build(variables)
            opt.apply_gradients(pairs_gv)
