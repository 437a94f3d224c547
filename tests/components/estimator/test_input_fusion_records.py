"""A per-record parse moved after ``batch`` (input_fusion's rewrite 2).

``TFRecordDataset(files).map(parse_single_example)...batch(b)`` is read as
``TFRecordDataset(files)...batch(b).map(vectorised parse)``: every pipeline rewritten must
yield the same batches (the same examples in the same order, seeded shuffles included, over
several passes), with the same element_spec; every pipeline where that is not certain is left
as built. Real tf.data on both sides, compared element by element.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator._engine import calls
from estflow.estimator._engine.input_fusion import batch_first
from estflow.estimator.run_config import RunConfig
from tests.components.estimator.test_input_fusion import _assert_same
from tests.components.estimator.test_input_fusion import _elements

ROWS, SHARDS = 37, 3
SPEC = {"num": tf.io.FixedLenFeature([2], tf.float32),
        "cat": tf.io.FixedLenFeature([1], tf.string),
        "opt": tf.io.FixedLenFeature([1], tf.int64, default_value=[-1]),
        "label": tf.io.FixedLenFeature([1], tf.int64)}


def _example(i: int) -> bytes:
    feature = {
        "num": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5, -i / 3])),
        "cat": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"c{i % 5}".encode()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
    }
    if i % 3:  # some records lack "opt": its default fills in
        feature["opt"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    paths = []
    for shard in range(SHARDS):
        path = str(root / f"part-{shard}.tfrecord.gz")
        with tf.io.TFRecordWriter(path, options) as writer:
            for i in range(shard, ROWS, SHARDS):
                writer.write(_example(i))
        paths.append(path)
    return paths


def parse(record):  # the tutorials' shape: features and the label popped out
    features = tf.io.parse_single_example(record, SPEC)
    label = features.pop("label")
    return features, label


def parse_more(record):  # casts, arithmetic and reshapes around the parse
    features = tf.io.parse_single_example(record, SPEC)
    features["num"] = features["num"] * 2.0 + 1.0
    label = tf.reshape(tf.cast(features.pop("label"), tf.float32), [])
    return features, label


def _unordered():
    options = tf.data.Options()
    options.deterministic = False
    return options


def records(files):
    return tf.data.TFRecordDataset(files, compression_type="GZIP")




def _rewrites(original):
    rewritten, changed = batch_first(original)
    assert changed
    assert rewritten is not original
    return rewritten


@pytest.mark.parametrize("make, count", [
    # the tutorial: parse, shuffle, repeat, batch, prefetch (parallel map)
    (lambda f: records(f).map(parse, num_parallel_calls=tf.data.AUTOTUNE).shuffle(
        16, seed=7).repeat().batch(5, drop_remainder=True).prefetch(tf.data.AUTOTUNE), 30),
    (lambda f: records(f).map(parse).batch(4), 10),                    # last batch short
    (lambda f: records(f).map(parse).batch(4, drop_remainder=True), 9),
    (lambda f: records(f).map(parse).repeat(2).batch(8), 10),          # batches straddle passes
    (lambda f: records(f).map(parse).shuffle(100, seed=3).repeat(3).batch(16), 7),
    (lambda f: records(f).map(parse).shuffle(8, seed=1, reshuffle_each_iteration=False)
     .repeat(2).batch(6), 13),
    (lambda f: records(f).map(parse).skip(3).take(20).batch(6).repeat(2), 8),
    (lambda f: records(f).map(parse_more).repeat().batch(7).shuffle(4, seed=2).prefetch(1), 30),
    (lambda f: records(f).shuffle(10, seed=5).map(parse).repeat().batch(9), 30),  # shuffle first
    (lambda f: records(f).shuffle(10, seed=5).map(parse).prefetch(3).repeat(2).batch(9), 9),
    (lambda f: records(f).map(parse).batch(5).with_options(tf.data.Options()), 8),
])
def test_rewritten_pipelines_yield_the_same_batches(files, make, count):
    # two builds: a shuffle that reshuffles each iteration gives each new iterator of one
    # dataset object a new order; an input_fn's dataset is iterated once, rewritten or not
    assert _assert_same(make(files), _rewrites(make(files)), limit=30) == count


def test_the_parse_runs_once_per_batch_after_batch(files):
    rewritten = _rewrites(records(files).map(parse).shuffle(8, seed=1).batch(4).prefetch(2))
    kinds = []
    node = rewritten
    while hasattr(node, "_input_dataset"):
        kinds.append(type(node).__name__)
        node = node._input_dataset
    assert kinds == ["_PrefetchDataset", "_ParallelMapDataset", "_BatchDataset",
                     "_ShuffleDataset"]
    assert type(node).__name__ == "TFRecordDatasetV2"


@pytest.mark.parametrize("parallel, deterministic, expected", [
    (None, None, "true"),            # a sequential map is in order: its batch parse too
    (tf.data.AUTOTUNE, None, "default"),  # as the dataset's options say
    (tf.data.AUTOTUNE, True, "true"),
    (tf.data.AUTOTUNE, False, "false"),
])
def test_the_batch_parse_keeps_the_maps_order(files, parallel, deterministic, expected):
    original = records(files).map(parse, num_parallel_calls=parallel,
                                  deterministic=deterministic).batch(4).with_options(_unordered())
    rewritten = _rewrites(original)
    assert type(rewritten._input_dataset).__name__ == "_ParallelMapDataset"
    assert rewritten._input_dataset._deterministic == expected


def test_an_unseeded_shuffle_keeps_its_randomness(files):
    """Without a seed the order is random either way; the rewrite holds the same examples."""
    original = records(files).map(parse).shuffle(50).batch(ROWS)
    rewritten = _rewrites(original)
    rows = [np.sort(_elements(d, 1)[0][1][:, 0]) for d in (original, rewritten)]
    np.testing.assert_array_equal(*rows)


def test_options_are_kept(files):
    options = tf.data.Options()
    options.threading.private_threadpool_size = 2
    original = records(files).map(parse).batch(4).with_options(options)
    assert _rewrites(original).options().threading.private_threadpool_size == 2


def test_csv_lines_are_decoded_per_batch(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("".join(f"{i},{i * 0.25},k{i % 3}\n" for i in range(23)))

    def decode(line):
        a, b, c = tf.io.decode_csv(line, [[0], [0.0], [""]])
        return {"b": b, "c": c}, a

    def make():
        return tf.data.TextLineDataset(str(path)).map(decode).shuffle(9, seed=4).repeat(
            2).batch(5)

    assert _assert_same(make(), _rewrites(make()), limit=30) == 10


def test_in_memory_records_are_read_batch_first_too():
    serialized = [_example(i) for i in range(11)]
    original = tf.data.Dataset.from_tensor_slices(serialized).map(parse).repeat().batch(
        4).prefetch(1)
    rewritten = _rewrites(original)
    assert _assert_same(original, rewritten, 12) == 12  # no shuffle: one build will do
    node = rewritten._input_dataset._input_dataset  # below prefetch, map: no row slicing left
    assert type(node).__name__ == "_MapDataset"  # the gather per batch


def _random(record):
    features, label = parse(record)
    return features, label + tf.random.uniform([], 0, 2, tf.int64)


def _sparse(record):
    return tf.io.parse_single_example(record, {"num": tf.io.VarLenFeature(tf.float32)})


def _variable_length(record):  # batch() of these fails where parse_example would pad
    return tf.io.parse_single_example(record, {"num": tf.io.FixedLenSequenceFeature(
        [], tf.float32, allow_missing=True)})


def _float_maths(record):
    features, label = parse(record)
    return tf.math.exp(features["num"]), label


def _python(record):
    return tf.py_function(lambda r: len(r.numpy()), [record], tf.int64)


@pytest.mark.parametrize("make", [
    lambda f: records(f).map(_random).batch(4),                         # random per record
    lambda f: records(f).map(_sparse).batch(4),                         # sparse output
    lambda f: records(f).map(_variable_length).batch(4),                # unknown shape
    lambda f: records(f).map(_float_maths).batch(4),                    # rounding may differ
    lambda f: records(f).map(_python).batch(4),                         # Python code
    lambda f: records(f).map(parse).filter(lambda x, y: y[0] > 0).batch(4),  # content-based
    lambda f: records(f).map(parse).cache().batch(4),
    lambda f: records(f).map(parse).batch(4).map(lambda x, y: (x, y + 1)),  # work after batch
    lambda f: records(f).map(parse).padded_batch(4),
    lambda f: records(f).batch(4).map(lambda r: tf.io.parse_example(r, SPEC)),  # already batched
    lambda f: records(f).map(parse),                                    # never batched
])
def test_other_pipelines_are_left_as_they_are(files, make):
    original = make(files)
    rewritten, changed = batch_first(original)
    assert not changed
    assert rewritten is original


def test_a_batch_size_only_known_at_run_time_is_left_as_it_is(files):
    @tf.function
    def build(n):
        _, changed = batch_first(records(files).map(parse).batch(n))
        return changed

    assert not build(tf.constant(3, tf.int64))


# -- property: generated pipeline shapes ------------------------------------------------------

_BETWEEN = st.lists(st.one_of(
    st.tuples(st.just("shuffle"), st.integers(1, 50), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("repeat"), st.sampled_from([None, 1, 2, 3])),
    st.tuples(st.just("take"), st.integers(0, 60)),
    st.tuples(st.just("skip"), st.integers(0, 10)),
    st.tuples(st.just("prefetch"), st.sampled_from([1, 2, tf.data.AUTOTUNE]))), max_size=4)
_AFTER = st.lists(st.one_of(
    st.tuples(st.just("shuffle"), st.integers(1, 5), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("repeat"), st.sampled_from([None, 2])),
    st.tuples(st.just("take"), st.integers(0, 12)),
    st.tuples(st.just("skip"), st.integers(0, 3)),
    st.tuples(st.just("prefetch"), st.sampled_from([1, tf.data.AUTOTUNE]))), max_size=3)


def _apply(dataset, steps):
    for name, *args in steps:
        if name == "shuffle":
            dataset = dataset.shuffle(args[0], seed=args[1], reshuffle_each_iteration=args[2])
        else:
            dataset = getattr(dataset, name)(*args)
    return dataset


@settings(max_examples=int(os.environ.get("ESTFLOW_HYPOTHESIS_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(before=st.booleans(), between=_BETWEEN, size=st.integers(1, 12), drop=st.booleans(),
       after=_AFTER, parallel=st.booleans(), fn=st.sampled_from([parse, parse_more]))
def test_generated_pipelines_yield_the_same_batches(files, before, between, size, drop, after,
                                                    parallel, fn):
    def make():
        base = records(files).shuffle(7, seed=11) if before else records(files)
        mapped = base.map(fn, num_parallel_calls=tf.data.AUTOTUNE if parallel else None)
        return _apply(_apply(mapped, between).batch(size, drop_remainder=drop), after)

    _assert_same(make(), _rewrites(make()), limit=25)


# -- training on the rewritten input is training on the original ------------------------------

def _model_fn(features, labels, mode):
    x = tf.concat([features["num"], tf.cast(features["opt"], tf.float32)], 1)
    logits = keras.layers.Dense(1, kernel_initializer="ones")(x)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.square(logits - tf.cast(labels, tf.float32)))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.001))


def _train(files, tmp_path, name, optimize_input):
    config = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None,
                       steps_per_loop=7, optimize_input=optimize_input)
    est = Estimator(_model_fn, str(tmp_path / name), config, progress=lambda m: None)
    est.train(lambda: records(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE).shuffle(
        16, seed=3).repeat().batch(5, drop_remainder=True).prefetch(2), max_steps=23)
    return {k: v.numpy() for k, v in est.variables().items()}


def test_training_on_the_rewritten_input_equals_training_on_the_original(files, tmp_path,
                                                                         monkeypatch):
    """23 SGD steps over shuffled, parsed records: the same batches in the same order give
    bit-identical variables; any change of order or content would not."""
    seen = []

    def spy(dataset):
        out, changed = batch_first(dataset)
        seen.append(changed)
        return out, changed

    monkeypatch.setattr(calls, "batch_first", spy)
    fused = _train(files, tmp_path, "fused", True)
    assert seen == [True]  # the engine trained on the rewritten dataset
    plain = _train(files, tmp_path, "plain", False)
    assert seen == [True]
    assert fused.keys() == plain.keys()
    assert int(fused["global_step"]) == 23
    for name in fused:
        np.testing.assert_array_equal(fused[name], plain[name], err_msg=name)
