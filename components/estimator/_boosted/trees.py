"""A tree ensemble as variables, grown layer by layer with core TensorFlow ops.

This is tf.estimator's boosted-trees training (the ``BoostedTrees*`` kernels:
``AggregateStats``, ``CalculateBestFeatureSplitV2``, ``UpdateEnsembleV2``, ``CenterBias``,
``Predict``) rewritten as graph ops on dense arrays, because TF 2.15/2.21 wheels register no
kernel for those ops: the ensemble is plain variables (checkpointed by the engine's store,
exported in the SavedModel like any model), and prediction is ``Gather``/``Select`` ops only.

Layout: ``T = n_trees + 1`` trees (the +1 is the empty tree the original appends after the last
finalized one) of ``M = 2 ** (max_depth + 1) - 1`` heap-indexed nodes (children of ``n`` at
``2n + 1`` and ``2n + 2``). Per node: ``feature`` (-1: a leaf), ``threshold`` (a bucket id:
``bucket <= threshold`` goes left), ``value`` (the leaf value; a split node keeps the value it
had as a leaf, the original's ``metadata.original_leaf``), ``gain`` and ``exists``. Node
numbering differs from the original's (which appends nodes in creation order); trees, leaf
values and predictions do not.

Semantics kept from the kernels (``tensorflow/core/kernels/boosted_trees``):

- split search per node over every bucket of every feature, missing values (bucket
  ``num_buckets``) tried on the left and on the right; leaf weight ``-(g - sign(g) l1) /
  (h + l2)`` with gain ``-g w`` (one logit), or ``-(H + l2 I)^+ g`` (several logits, full
  hessian; the original used a column-pivoting QR, equal up to a per-leaf constant added to every
  class logit, which the softmax ignores); ties go to the lower feature id, then the lower
  bucket, then missing-left; a split's gain is ``best - parent - tree_complexity``;
- nodes whose hessian norm is below ``min_node_weight`` are not split; pre-pruning drops negative
  gains; a layer where nothing split is attempted again; a tree is finalized after ``max_depth``
  grown layers and post-pruned bottom-up (negative-gain splits whose children are leaves);
- children get ``parent value + learning_rate * contribution``; ``CenterBias`` puts a Newton
  step into the first tree's root until it moves by less than 1% of itself.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["Ensemble", "weights_and_gains", "aggregate_stats", "best_splits", "PRUNING_MODES"]

PRUNING_MODES = ("none", "pre", "post")
_EPS = 1e-15
_MIN_DELTA_FOR_CENTER_BIAS = 0.01


def weights_and_gains(g: tf.Tensor, h: tf.Tensor, l1: float, l2: float):
    """(leaf weights ``[..., K]``, gains ``[...]``) for gradient sums ``g [..., K]`` and hessian
    sums ``h [..., K*K]`` (full hessian; ``[..., 1]`` for one logit): ``CalculateWeightsAndGains``."""
    k = g.shape[-1]
    if k == 1:
        g1, h1 = g[..., 0], h[..., 0]
        if l1 > 0:
            g_l1 = tf.where(g1 > l1, g1 - l1, tf.where(g1 < -l1, g1 + l1, tf.zeros_like(g1)))
            zero = tf.abs(g1) <= l1
        else:
            g_l1, zero = g1, tf.zeros_like(g1, tf.bool)
        denom = h1 + l2
        ok = tf.logical_and(denom > _EPS, tf.logical_not(zero))
        w = tf.where(ok, -g_l1 / tf.where(ok, denom, tf.ones_like(denom)), tf.zeros_like(g1))
        return w[..., tf.newaxis], tf.where(ok, -g_l1 * w, tf.zeros_like(g1))
    matrix = tf.reshape(h, tf.concat([tf.shape(h)[:-1], [k, k]], 0)) + l2 * tf.eye(k)
    w = -tf.linalg.matvec(tf.linalg.pinv(matrix), g)
    return w, -tf.reduce_sum(g * w, axis=-1)


def aggregate_stats(node_pos: tf.Tensor, grads: tf.Tensor, hess: tf.Tensor,
                    buckets: tf.Tensor, width: int, num_buckets: int) -> tf.Tensor:
    """``AggregateStats`` for one group of features: ``[width, F, num_buckets + 1, S]`` sums of
    ``[grads, hess]`` per (layer position, feature, bucket); examples whose ``node_pos`` is
    outside ``[0, width)`` are left out; bucket ``-1`` (and anything past ``num_buckets``) is
    the missing bucket ``num_buckets``."""
    n_features = buckets.shape[1]
    stats_dim = grads.shape[1] + hess.shape[1]
    size = width * n_features * (num_buckets + 1)
    bucket = tf.where(buckets < 0, num_buckets, tf.minimum(buckets, num_buckets))
    inside = tf.logical_and(node_pos >= 0, node_pos < width)
    seg = (node_pos[:, tf.newaxis] * n_features + tf.range(n_features)[tf.newaxis, :]) * (
        num_buckets + 1) + bucket
    seg = tf.where(inside[:, tf.newaxis], seg, size)
    data = tf.concat([grads, hess], axis=1)
    data = tf.broadcast_to(data[:, tf.newaxis, :], [tf.shape(data)[0], n_features, stats_dim])
    sums = tf.math.unsorted_segment_sum(tf.reshape(data, [-1, stats_dim]),
                                        tf.reshape(seg, [-1]), size + 1)
    return tf.reshape(sums[:size], [width, n_features, num_buckets + 1, stats_dim])


def best_splits(stats: tf.Tensor, feature_ids, logits_dim: int, hp) -> dict:
    """``CalculateBestFeatureSplitV2`` (inequality splits) for one group: per layer position
    the best split's ``gain`` (parent gain and tree complexity removed), ``feature``,
    ``threshold``, ``left``/``right`` contributions and whether the node can split at all."""
    n_features, n_buckets = stats.shape[1], stats.shape[2] - 1
    g_all, h_all = stats[..., :logits_dim], stats[..., logits_dim:]
    total_g = tf.reduce_sum(g_all[:, 0], axis=1)
    total_h = tf.reduce_sum(h_all[:, 0], axis=1)
    splittable = tf.norm(total_h, axis=-1) >= hp.min_node_weight
    _, parent_gain = weights_and_gains(total_g, total_h, hp.l1, hp.l2)
    feat_g, feat_h = tf.reduce_sum(g_all, axis=2), tf.reduce_sum(h_all, axis=2)  # [W, F, S]
    cum_g = tf.cumsum(g_all[:, :, :n_buckets], axis=2)
    cum_h = tf.cumsum(h_all[:, :, :n_buckets], axis=2)
    miss_g, miss_h = g_all[:, :, n_buckets:], h_all[:, :, n_buckets:]
    # [W, F, B, 2, S]: missing values on the left (0), then on the right (1)
    left_g = tf.stack([cum_g + miss_g, cum_g], axis=3)
    left_h = tf.stack([cum_h + miss_h, cum_h], axis=3)
    right_g = feat_g[:, :, tf.newaxis, tf.newaxis, :] - left_g
    right_h = feat_h[:, :, tf.newaxis, tf.newaxis, :] - left_h
    w_left, gain_left = weights_and_gains(left_g, left_h, hp.l1, hp.l2)
    w_right, gain_right = weights_and_gains(right_g, right_h, hp.l1, hp.l2)
    width = tf.shape(stats)[0]
    gains = tf.reshape(gain_left + gain_right, [width, -1])  # (feature, bucket, missing) order
    best = tf.reduce_max(gains, axis=1, keepdims=True)
    count = n_features * n_buckets * 2
    index = tf.reduce_min(tf.where(gains >= best, tf.range(count)[tf.newaxis, :], count), axis=1)
    feature = index // (n_buckets * 2)
    bucket = (index // 2) % n_buckets
    pick = tf.stack([tf.range(width), index], axis=1)
    w_left = tf.gather_nd(tf.reshape(w_left, [width, count, logits_dim]), pick)
    w_right = tf.gather_nd(tf.reshape(w_right, [width, count, logits_dim]), pick)
    return {"gain": best[:, 0] - parent_gain - hp.tree_complexity,
            "feature": tf.gather(tf.constant(list(feature_ids), tf.int32), feature),
            "threshold": tf.cast(bucket, tf.int32), "left": w_left, "right": w_right,
            "splittable": splittable}


def _combine(candidates: list[dict]) -> dict:
    """The best split per node over the groups (``UpdateEnsembleV2``'s reduce: the larger
    gain, ties to the lower feature id)."""
    best = candidates[0]
    for other in candidates[1:]:
        take = tf.logical_or(other["gain"] > best["gain"], tf.logical_and(
            tf.equal(other["gain"], best["gain"]), other["feature"] < best["feature"]))
        best = {k: tf.where(take[:, tf.newaxis] if best[k].shape.rank == 2 else take,
                            other[k], best[k]) for k in best if k != "splittable"} | {
            "splittable": best["splittable"]}
    return best


class Ensemble(tf.Module):
    """The ensemble's variables and the ops reading and growing them (built in a model_fn:
    the engine's store hands every trace the same variables)."""

    def __init__(self, n_trees: int, max_depth: int, logits_dim: int) -> None:
        super().__init__(name="boosted_trees")
        self.n_trees, self.max_depth, self.logits_dim = n_trees, max_depth, logits_dim
        self.capacity = n_trees + 1
        self.nodes = 2 ** (max_depth + 1) - 1
        shape = [self.capacity, self.nodes]

        def var(value, name):
            return tf.Variable(value, trainable=False, name=name)

        self.feature = var(np.full(shape, -1, np.int32), "node_feature")
        self.threshold = var(np.zeros(shape, np.int32), "node_threshold")
        self.value = var(np.zeros(shape + [logits_dim], np.float32), "node_value")
        self.gain = var(np.zeros(shape, np.float32), "node_gain")
        self.exists = var(np.zeros(shape, bool), "node_exists")
        self.num_trees = var(np.int32(0), "num_trees")
        self.layers_grown = var(np.zeros([self.capacity], np.int32), "num_layers_grown")
        self.finalized = var(np.zeros([self.capacity], bool), "tree_is_finalized")
        self.layers_attempted = var(np.int32(0), "num_layers_attempted")
        self.current_layer = var(np.int32(0), "last_layer_depth")

    # -- prediction ---------------------------------------------------------------------------
    def leaves(self, buckets: tf.Tensor) -> tf.Tensor:
        """The leaf each example reaches in every tree: ``[batch, T]`` node ids."""
        offsets = tf.range(self.capacity) * self.nodes
        feature = tf.reshape(self.feature, [-1])
        threshold = tf.reshape(self.threshold, [-1])
        node = tf.zeros(tf.stack([tf.shape(buckets)[0], self.capacity]), tf.int32)
        for _ in range(self.max_depth):
            flat = node + offsets
            f = tf.gather(feature, flat)
            x = tf.gather(buckets, tf.maximum(f, 0), batch_dims=1)
            child = tf.where(x <= tf.gather(threshold, flat), 2 * node + 1, 2 * node + 2)
            node = tf.where(f >= 0, child, node)
        return node

    def logits(self, buckets: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(logits ``[batch, K]``: the sum of every tree's leaf value, leaves ``[batch, T]``)."""
        node = self.leaves(buckets)
        flat = node + tf.range(self.capacity) * self.nodes
        values = tf.gather(tf.reshape(self.value, [-1, self.logits_dim]), flat)
        return tf.reduce_sum(values, axis=1), node

    # -- state --------------------------------------------------------------------------------
    def num_finalized(self) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(self.finalized, tf.int32))

    def done(self) -> tf.Tensor:
        """tf.estimator's stopping rule: ``n_trees`` finalized trees, or more than
        ``2 * n_trees * max_depth`` layers attempted."""
        return tf.logical_or(self.num_finalized() >= self.n_trees,
                             self.layers_attempted > 2 * self.n_trees * self.max_depth)

    def current_tree(self) -> tf.Tensor:
        return tf.maximum(self.num_trees - 1, 0)

    def _add_tree(self, tree: tf.Tensor, root_value: tf.Tensor) -> list:
        return [self.exists.scatter_nd_update([[tree, 0]], [True]),
                self.value.scatter_nd_update([[tree, 0]], [root_value]),
                self.num_trees.assign(tree + 1)]

    # -- center bias ----------------------------------------------------------------------------
    def center_bias(self, mean_grads: tf.Tensor, mean_hess: tf.Tensor, l1: float,
                    l2: float) -> tf.Tensor:
        """``CenterBias``: a Newton step into the first tree's root; True while it keeps
        moving by more than 1%."""
        step, _ = weights_and_gains(mean_grads, mean_hess, l1, l2)
        step = step[0]

        def first():
            with tf.control_dependencies(self._add_tree(tf.constant(0), step)):
                return tf.constant(True)

        def again():
            current = self.value[0, 0]
            keep = tf.abs(step[0] / current[0]) > _MIN_DELTA_FOR_CENTER_BIAS
            with tf.control_dependencies([self.value.scatter_nd_update([[0, 0]],
                                                                       [current + step])]):
                return tf.identity(keep)

        return tf.cond(tf.equal(self.num_trees, 0), first, again)

    # -- growing --------------------------------------------------------------------------------
    def layer_positions(self, leaves: tf.Tensor) -> tf.Tensor:
        """Each example's position in the layer being grown (its leaf in the current tree
        minus the layer's first node id): ``[batch]``, in ``[0, 2^depth)`` when it is there."""
        node = tf.gather(leaves, self.current_tree(), axis=1)
        return node - (2 ** self.current_layer - 1)

    def grow(self, candidates: list[dict], hp) -> tf.Tensor:
        """``UpdateEnsembleV2`` with the per-group best splits of the current layer."""
        best = _combine(candidates)
        width = best["gain"].shape[0]
        ops = [self.layers_attempted.assign_add(1)]
        with tf.control_dependencies(ops):
            start = tf.cond(tf.equal(self.num_trees, 0),
                            lambda: self._new_first_tree(), lambda: tf.constant(0))
        with tf.control_dependencies([start]):
            tree = self.current_tree()
            depth = self.current_layer.read_value()
            first = 2 ** depth - 1
            nodes = first + tf.range(width)
            in_layer = tf.range(width) < 2 ** depth
            safe = tf.minimum(nodes, self.nodes - 1)
            rows = tf.fill([width], tree)
            index = tf.stack([rows, safe], axis=1)
            split = tf.logical_and(tf.logical_and(in_layer, tf.gather_nd(self.exists, index)),
                                   best["splittable"])
            if hp.pruning_mode == "pre":
                split = tf.logical_and(split, best["gain"] >= 0)
        return tf.cond(tf.reduce_any(split),
                       lambda: self._split(tree, depth, index, split, best, hp),
                       lambda: tf.constant(False))

    def _new_first_tree(self) -> tf.Tensor:
        with tf.control_dependencies(self._add_tree(tf.constant(0),
                                                    tf.zeros([self.logits_dim]))):
            return tf.constant(0)

    def _split(self, tree, depth, index, split, best, hp) -> tf.Tensor:
        at = tf.boolean_mask(index, split)
        parent = tf.gather_nd(self.value, at)
        left = tf.stack([at[:, 0], 2 * at[:, 1] + 1], axis=1)
        right = tf.stack([at[:, 0], 2 * at[:, 1] + 2], axis=1)
        children = tf.concat([left, right], axis=0)
        lr = hp.learning_rate
        ops = [
            self.feature.scatter_nd_update(at, tf.boolean_mask(best["feature"], split)),
            self.threshold.scatter_nd_update(at, tf.boolean_mask(best["threshold"], split)),
            self.gain.scatter_nd_update(at, tf.boolean_mask(best["gain"], split)),
            self.exists.scatter_nd_update(children, tf.ones([tf.shape(children)[0]], tf.bool)),
            self.value.scatter_nd_update(children, tf.concat([
                parent + lr * tf.boolean_mask(best["left"], split),
                parent + lr * tf.boolean_mask(best["right"], split)], axis=0)),
            self.layers_grown.scatter_nd_add([[tree]], [1]),
        ]
        with tf.control_dependencies(ops):
            grown = self.layers_grown[tree]
            return tf.cond(grown >= self.max_depth, lambda: self._finalize(tree, hp),
                           lambda: self._next_layer(depth))

    def _next_layer(self, depth) -> tf.Tensor:
        with tf.control_dependencies([self.current_layer.assign(depth + 1)]):
            return tf.constant(True)

    def _finalize(self, tree, hp) -> tf.Tensor:
        ops = [self.finalized.scatter_nd_update([[tree]], [True])]
        if hp.pruning_mode == "post":
            with tf.control_dependencies(ops):
                ops = self._post_prune(tree)
        with tf.control_dependencies(ops):
            ops = self._add_tree(tree + 1, tf.zeros([self.logits_dim]))
            ops.append(self.current_layer.assign(0))
        with tf.control_dependencies(ops):
            return tf.constant(True)

    def _post_prune(self, tree) -> list:
        """Bottom-up: a split with negative gain whose children are leaves becomes a leaf
        again (its value is the leaf value it had)."""
        feature = tf.gather(self.feature, tree)
        exists = tf.gather(self.exists, tree)
        gain = tf.gather(self.gain, tree)
        for depth in range(self.max_depth - 1, -1, -1):
            nodes = np.arange(2 ** depth - 1, 2 ** (depth + 1) - 1)
            f = tf.gather(feature, nodes)
            leaf_children = tf.logical_and(tf.gather(feature, 2 * nodes + 1) < 0,
                                           tf.gather(feature, 2 * nodes + 2) < 0)
            prune = tf.logical_and(tf.logical_and(f >= 0, tf.gather(gain, nodes) < 0),
                                   leaf_children)
            feature = tf.tensor_scatter_nd_update(feature, nodes[:, None],
                                                  tf.where(prune, -1, f))
            for child in (2 * nodes + 1, 2 * nodes + 2):
                exists = tf.tensor_scatter_nd_update(
                    exists, child[:, None],
                    tf.logical_and(tf.gather(exists, child), tf.logical_not(prune)))
        return [self.feature.scatter_nd_update([[tree]], [feature]),
                self.exists.scatter_nd_update([[tree]], [exists])]
