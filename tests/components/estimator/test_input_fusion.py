"""Batch-first reading of in-memory input (components/estimator/_engine/input_fusion.py).

The rewrite must be exact: every pipeline it takes yields the same batches, in the same order,
with the same element_spec as tf.data's own slice-then-batch; every pipeline it cannot prove
equal is left untouched. Real tf.data on both sides, compared element by element.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator._engine.input_fusion import batch_first
from estflow.estimator.run_config import RunConfig

R = np.random.RandomState(0)
X = {"num": R.randn(10, 1).astype("float32"),
     "text": np.array([f"row{i}".encode() for i in range(10)]),
     "cube": R.randn(10, 2, 3)}
Y = np.arange(10, dtype=np.int64)
slices = tf.data.Dataset.from_tensor_slices


def _elements(dataset, limit=45):
    return list(itertools.islice(dataset.as_numpy_iterator(), limit))


def _assert_same(original, rewritten, limit=45):
    assert rewritten.element_spec == original.element_spec
    a, b = _elements(original, limit), _elements(rewritten, limit)
    assert len(a) == len(b)
    for left, right in zip(a, b, strict=True):
        tf.nest.map_structure(np.testing.assert_array_equal, left, right)
    return len(a)


@pytest.mark.parametrize("make, count", [
    (lambda: slices((X, Y)).repeat().batch(4, drop_remainder=True).prefetch(2), 45),
    (lambda: slices((X, Y)).repeat().batch(4), 45),            # batches straddle passes
    (lambda: slices((X, Y)).batch(4), 3),                      # last batch short
    (lambda: slices((X, Y)).batch(4, drop_remainder=True), 2),
    (lambda: slices((X, Y)).repeat(3).batch(4), 8),            # 30 rows -> 7 full + 2
    (lambda: slices((X, Y)).batch(4).repeat(2), 6),            # short batch in each pass
    (lambda: slices(X).repeat(2).batch(3).repeat(2).prefetch(1), 14),
    (lambda: slices(Y).batch(10), 1),
    (lambda: slices((X, Y)).batch(64), 1),                     # batch larger than the data
])
def test_rewritten_pipelines_yield_the_same_batches(make, count):
    original = make()
    rewritten, changed = batch_first(original)
    assert changed
    assert rewritten is not original
    assert _assert_same(original, rewritten) == count


def test_options_are_kept():
    options = tf.data.Options()
    options.deterministic = False
    options.threading.private_threadpool_size = 3
    original = slices((X, Y)).repeat().batch(4).with_options(options)
    rewritten, changed = batch_first(original)
    assert changed
    assert rewritten.options().threading.private_threadpool_size == 3
    assert rewritten.options().deterministic is False
    _assert_same(original, rewritten)


@pytest.mark.parametrize("make", [
    lambda: slices((X, Y)).shuffle(4, seed=1).batch(4),                 # order is random
    lambda: slices((X, Y)).batch(4).map(lambda x, y: (x, y + 1)),       # work after batch
    lambda: slices((X, Y)).map(                                         # random work
        lambda x, y: (x, y + tf.random.uniform([], 0, 2, tf.int64))).batch(4),
    lambda: slices((X, Y)).take(5).batch(2),
    lambda: slices({"s": tf.sparse.from_dense([[1, 0], [0, 2]])}).batch(2),  # sparse rows
    lambda: tf.data.Dataset.range(10).batch(3),                         # not in memory
    lambda: slices((X, Y)),                                             # never batched
])
def test_other_pipelines_are_left_as_they_are(make):
    original = make()
    rewritten, changed = batch_first(original)
    assert not changed
    assert rewritten is original


def test_a_count_only_known_at_run_time_is_left_as_it_is():
    @tf.function
    def build(n):
        dataset, changed = batch_first(slices(Y).batch(n))
        return dataset.cardinality(), changed

    _, changed = build(tf.constant(3, tf.int64))
    assert not changed


def _model_fn(features, labels, mode):
    logits = keras.layers.Dense(1, kernel_initializer="ones")(
        tf.concat([features["num"], tf.cast(features["cube"][:, :, 0], tf.float32)], 1))
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.square(logits[:, 0] - tf.cast(labels, tf.float32)))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.01))


def _train(tmp_path, name, optimize_input):
    config = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None,
                       steps_per_loop=7, optimize_input=optimize_input)
    est = Estimator(_model_fn, str(tmp_path / name), config, progress=lambda m: None)
    est.train(lambda: slices((X, Y)).repeat().batch(4), max_steps=23)
    return {k: v.numpy() for k, v in est.variables().items()}


def test_training_on_the_rewritten_input_equals_training_on_the_original(tmp_path):
    """23 SGD steps over batches that straddle passes: the same batches in the same order
    give bit-identical variables; any change of order or content would not."""
    fused, plain = _train(tmp_path, "fused", True), _train(tmp_path, "plain", False)
    assert fused.keys() == plain.keys()
    assert int(fused["global_step"]) == 23
    for name in fused:
        np.testing.assert_array_equal(fused[name], plain[name], err_msg=name)


def test_optimize_input_must_be_a_bool():
    with pytest.raises(ValueError, match="optimize_input.*True or False.*'yes'"):
        RunConfig(optimize_input="yes")
