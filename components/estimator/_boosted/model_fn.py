"""The boosted-trees model_fn (tf.estimator's ``_bt_model_fn``, single process).

Every mode bucketizes the features (:mod:`.features`) and sums the trees' leaf values
(:class:`.trees.Ensemble`) into logits for the head. TRAIN returns a ``train_op`` doing, per
batch, what tf.estimator did per ``session.run``:

1. while the quantile boundaries are not ready (numeric columns only): add the batch to the
   quantile sketch (:mod:`.quantiles`); after ``n_batches_per_layer`` batches, set the
   boundaries;
2. with ``center_bias``: average the batches' mean gradient and hessian over
   ``n_batches_per_layer`` batches, then take a Newton step for the bias, until it settles;
3. otherwise add the batch's gradient/hessian statistics per (node, feature, bucket) of the
   layer being grown; every ``n_batches_per_layer`` batches grow the layer from their average;
4. once ``n_trees`` trees are finalized (or ``2 * n_trees * max_depth`` layers attempted)
   nothing changes any more, and the training hook stops training at the end of the loop.

Gradients and hessians are the loss's with respect to the logits: the closed form
``(p - y) / N`` and ``p (1 - p) / N`` for a plain binary classifier, second-order
``tf.gradients`` otherwise (a full hessian for several logits), as tf.estimator computed them.

State: the ensemble and the quantile boundaries are model variables (created in every mode,
exported); the accumulators, the sketch, the batch counters and the bias-centering flag are
TRAIN variables (checkpointed, so training resumes mid-layer). Differences from tf.estimator:
the engine counts every batch as a global step, the quantile ones included (tf.estimator did
not count those), and a training loop runs to its end (``steps_per_loop``) after the ensemble
is complete, doing nothing.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import tensorflow as tf

from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._boosted import quantiles
from estflow.estimator._boosted.features import Layout
from estflow.estimator._boosted.features import bucketize
from estflow.estimator._boosted.trees import Ensemble
from estflow.estimator._boosted.trees import aggregate_stats
from estflow.estimator._boosted.trees import best_splits
from estflow.estimator.heads import BinaryClassHead
from estflow.estimator.hooks import SessionRunHook

__all__ = ["TreeHParams", "boosted_trees_model_fn", "StopAtAttemptsHook",
           "per_example_maxent_loss"]

TreeHParams = collections.namedtuple("TreeHParams", [
    "n_trees", "max_depth", "learning_rate", "l1", "l2", "tree_complexity", "min_node_weight",
    "center_bias", "pruning_mode", "quantile_sketch_epsilon"])


def num_quantiles(hp: TreeHParams) -> int:
    return int(1.0 / hp.quantile_sketch_epsilon)


_MAXENT_EPS = 1e-15


def per_example_maxent_loss(labels, logits):
    """tf.estimator's twice-differentiable softmax cross-entropy (``labels``: ids ``[batch, 1]``):
    unweighted ``[batch, 1]`` losses."""
    eps = _MAXENT_EPS
    n_classes = logits.shape[-1]
    target = tf.one_hot(tf.reshape(tf.cast(labels, tf.int64), [-1]), n_classes)
    unnormalized = tf.exp(logits)
    probs = unnormalized / (tf.reduce_sum(unnormalized, 1, keepdims=True) + eps)
    real = tf.reduce_sum(target * probs, 1)
    real = tf.where(real >= eps, real, tf.zeros_like(real) + eps)
    real = tf.where(real <= 1 - eps, real, tf.ones_like(real) - eps)
    return -tf.math.log(real)[:, tf.newaxis]


class StopAtAttemptsHook(SessionRunHook):
    """Stops training once the ensemble is complete (tf.estimator's ``_StopAtAttemptsHook``),
    checked after each loop."""

    def __init__(self, ensemble: Ensemble) -> None:
        self._ensemble = ensemble

    def after_run(self, run_context, run_values) -> None:
        if bool(self._ensemble.done().numpy()):
            run_context.request_stop()


def _gradients(head, loss, logits, labels, closed_form: bool):
    """(gradients ``[batch, K]``, hessians ``[batch, K]`` or ``[batch, K*K]``)."""
    k = logits.shape[-1]
    if closed_form:
        p = tf.math.reciprocal(tf.exp(-logits) + 1.0)
        normalizer = tf.math.reciprocal(tf.cast(tf.size(p), tf.float32))
        y = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
        return (p - y) * normalizer, p * (1.0 - p) * normalizer
    grads = tf.gradients(loss, logits)[0]
    if k == 1:
        return grads, tf.gradients(grads, logits)[0]
    rows = [tf.gradients(grads[:, i], logits)[0] for i in range(k)]
    return grads, tf.reshape(tf.stack(rows, axis=1), [-1, k * k])


@dataclasses.dataclass
class _Boundaries:
    """The quantile boundaries of the numeric features (model variables): ``values``
    ``[n_numeric, num_quantiles]`` padded with +inf, ``sizes`` ``[n_numeric]``. (Fixed shapes:
    the engine's store keys variables by name, dtype and shape.)"""

    values: tf.Variable | None
    sizes: tf.Variable | None

    @classmethod
    def create(cls, layout: Layout, quantiles_count: int) -> _Boundaries:
        n = len(layout.numeric_ids)
        if not n:
            return cls(None, None)
        return cls(tf.Variable(np.full([n, quantiles_count], np.inf, np.float32),
                               trainable=False, name="quantile_boundaries"),
                   tf.Variable(np.zeros([n], np.int32), trainable=False,
                               name="quantile_boundaries_size"))

    def of(self, j: int) -> tf.Tensor:
        return self.values[j, :self.sizes[j]]


class _TrainState(tf.Module):
    """TRAIN-only variables: accumulators, sketch, counters."""

    def __init__(self, layout: Layout, hp: TreeHParams, logits_dim: int) -> None:
        super().__init__(name="boosted_trees_training")
        hess_dim = 1 if logits_dim == 1 else logits_dim * logits_dim
        width = 2 ** (hp.max_depth - 1)
        self.center_bias_needed = tf.Variable(bool(hp.center_bias), trainable=False,
                                              name="center_bias_needed")
        self.batches = tf.Variable(np.int32(0), trainable=False, name="batches_accumulated")
        self.bias_stats = tf.Variable(np.zeros([2, logits_dim], np.float32), trainable=False,
                                      name="bias_stats")
        self.stats = [tf.Variable(np.zeros([width, len(ids), buckets + 1, logits_dim + hess_dim],
                                           np.float32), trainable=False, name=f"stats_{i}")
                      for i, (buckets, ids) in enumerate(layout.groups)]
        self.boundaries_ready = tf.Variable(not layout.numeric_ids, trainable=False,
                                            name="boundaries_ready")
        self.sketch_batches = tf.Variable(np.int32(0), trainable=False, name="sketch_batches")
        self.sketches = [tf.Variable(b"", trainable=False, name=f"quantile_sketch_{i}")
                         for i in layout.numeric_ids]


def _bucket_matrix(layout: Layout, values: list, boundaries: _Boundaries) -> tf.Tensor:
    numeric = {i: j for j, i in enumerate(layout.numeric_ids)}
    cols = [bucketize(v, boundaries.of(numeric[i])) if i in numeric else v
            for i, v in enumerate(values)]
    return tf.stack(cols, axis=1)


def _example_weights(head, features, batch) -> tf.Tensor:
    if head.weight_column is None:
        return tf.ones(tf.reshape(batch, [1]))
    key = head.weight_column if isinstance(head.weight_column, str) else head.weight_column.key
    return tf.reshape(tf.cast(features[key], tf.float32), [-1])


def _done(*ops) -> tf.Tensor:
    with tf.control_dependencies([op for op in ops if op is not None]):
        return tf.constant(True)


def boosted_trees_model_fn(head, layout: Layout, hp: TreeHParams, n_batches_per_layer: int,
                           closed_form: bool = False, name: str = "boosted_trees_model_fn",
                           prediction_keys=None):
    """``model_fn(features, labels, mode[, params])`` of a boosted trees model."""
    n_batches = int(n_batches_per_layer)
    eps = float(np.float32(hp.quantile_sketch_epsilon))
    buckets_numeric = num_quantiles(hp)

    def model_fn(features, labels, mode, params=None):
        del params
        ensemble = Ensemble(hp.n_trees, hp.max_depth, head.logits_dimension)
        boundaries = _Boundaries.create(layout, buckets_numeric)
        values = layout.read(features)
        bucket_matrix = _bucket_matrix(layout, values, boundaries)
        logits, leaves = ensemble.logits(bucket_matrix)
        if mode != ModeKeys.TRAIN:
            return head.create_estimator_spec(features, mode, logits, labels,
                                              prediction_keys=prediction_keys)
        state = _TrainState(layout, hp, head.logits_dimension)

        def train_op_fn(loss):
            grads, hess = _gradients(head, loss, logits, labels, closed_form)
            weights = _example_weights(head, features, tf.shape(logits)[0])

            def sketch():
                ops = []
                for var, i in zip(state.sketches, layout.numeric_ids, strict=True):
                    new = tf.numpy_function(quantiles.add_summary_bytes,
                                            [var, values[i], weights, eps], tf.string,
                                            stateful=True)
                    ops.append(var.assign(tf.reshape(new, [])))
                with tf.control_dependencies(ops):
                    count = state.sketch_batches.assign_add(1)
                return tf.cond(count >= n_batches, flush, lambda: tf.constant(True))

            def flush():
                rows, sizes = [], []
                for sk in state.sketches:
                    row, size = tf.numpy_function(quantiles.flush_padded,
                                                  [sk, buckets_numeric, eps],
                                                  (tf.float32, tf.int32), stateful=True)
                    rows.append(tf.reshape(row, [buckets_numeric]))
                    sizes.append(tf.reshape(size, []))
                ops = [boundaries.values.assign(tf.stack(rows)),
                       boundaries.sizes.assign(tf.stack(sizes))]
                ops += [sk.assign(b"") for sk in state.sketches]
                with tf.control_dependencies(ops):
                    return _done(state.boundaries_ready.assign(True),
                                 state.sketch_batches.assign(0))

            def centering():
                mean = tf.stack([tf.reduce_mean(grads, 0), tf.reduce_mean(hess, 0)])
                with tf.control_dependencies([state.bias_stats.assign_add(mean)]):
                    count = state.batches.assign_add(1)

                def center():
                    avg = state.bias_stats / n_batches
                    keep = ensemble.center_bias(avg[0:1], avg[1:2], hp.l1, hp.l2)
                    return _done(state.center_bias_needed.assign(keep),
                                 state.bias_stats.assign(tf.zeros_like(state.bias_stats)),
                                 state.batches.assign(0))

                return tf.cond(count >= n_batches, center, lambda: tf.constant(True))

            def growing():
                positions = ensemble.layer_positions(leaves)
                ops = []
                for var, (n_buckets, ids) in zip(state.stats, layout.groups, strict=True):
                    cols = tf.gather(bucket_matrix, list(ids), axis=1)
                    ops.append(var.assign_add(aggregate_stats(
                        positions, grads, hess, cols, var.shape[0], n_buckets)))
                with tf.control_dependencies(ops):
                    count = state.batches.assign_add(1)

                def grow():
                    candidates = [best_splits(var / n_batches, ids, head.logits_dimension, hp)
                                  for var, (_, ids) in zip(state.stats, layout.groups,
                                                           strict=True)]
                    grown = ensemble.grow(candidates, hp)
                    resets = [var.assign(tf.zeros_like(var)) for var in state.stats]
                    return _done(grown, *resets, state.batches.assign(0))

                return tf.cond(count >= n_batches, grow, lambda: tf.constant(True))

            def update():
                if hp.center_bias:
                    return tf.cond(state.center_bias_needed, centering, growing)
                return growing()

            def active():
                if not layout.numeric_ids:
                    return update()
                return tf.cond(state.boundaries_ready, update, sketch)

            return tf.cond(ensemble.done(), lambda: tf.constant(False), active)

        spec = head.create_estimator_spec(features, mode, logits, labels,
                                          train_op_fn=train_op_fn,
                                          prediction_keys=prediction_keys)
        return dataclasses.replace(spec, training_hooks=tuple(spec.training_hooks) + (
            StopAtAttemptsHook(ensemble),))

    model_fn.__name__ = model_fn.__qualname__ = name
    return model_fn


def closed_form_applies(head) -> bool:
    """tf.estimator's closed-form gradients: a binary head without weights or vocabulary."""
    return isinstance(head, BinaryClassHead) and head.weight_column is None and \
        not head.label_vocabulary
