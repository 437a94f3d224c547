"""``RunConfig(eval_distribute=...)``: evaluation under MirroredStrategy over 2 logical CPU
devices in this process equals single-device evaluation of the same checkpoint (loss, Keras
metrics, a weighted metric, short last batches), with or without ``train_distribute``; what is
not supported is refused naming ``eval_distribute``.

Logical devices can only be configured before TensorFlow starts its runtime, so this module
configures them when it is imported (as test_distribute.py does). If something started the
runtime earlier, the MirroredStrategy tests re-run themselves in a fresh Python process.
"""

import functools
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import SessionRunArgs
from estflow.estimator import SessionRunHook
from estflow.estimator import distribute
from estflow.estimator.distribute import DistributeError
from estflow.estimator.run_config import RunConfig
from tests.components.estimator._devices import configure_two_cpus

TWO_CPUS = configure_two_cpus()
_CHILD = "ESTFLOW_EVAL_DISTRIBUTE_CHILD"

R = np.random.RandomState(7)
N = 203  # batches of 64: 64, 64, 64, 11 (short: 11 < 2 replicas x 32)
X = R.randn(N, 2).astype("float32")
Y = ((X[:, :1] - X[:, 1:] + 0.7 * R.randn(N, 1)) > 0).astype("float32")  # noisy: acc < 1
WEIGHT = R.uniform(0.1, 2.0, size=(N, 1)).astype("float32")
CONFIG = dict(save_checkpoints_steps=None, save_checkpoints_secs=None, steps_per_loop=10)
REPLICAS: list[int] = []  # num_replicas_in_sync of every EVAL trace of model_fn


def model_fn(features, labels, mode):
    logits = keras.layers.Dense(1)(features["x"])
    probability = tf.sigmoid(logits)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"probability": probability})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == ModeKeys.EVAL:
        REPLICAS.append(tf.distribute.get_replica_context().num_replicas_in_sync)
        accuracy = keras.metrics.BinaryAccuracy()
        accuracy.update_state(labels, probability)
        auc = keras.metrics.AUC()
        auc.update_state(labels, probability)
        weighted = keras.metrics.Mean()
        weighted.update_state(probability, sample_weight=features["weight"])
        return EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": accuracy, "auc": auc, "weighted_probability": weighted})
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.Adagrad(0.3))


def tf1_model_fn(features, labels, mode):
    spec = model_fn(features, labels, mode)
    if mode != ModeKeys.EVAL:
        return spec
    return EstimatorSpec(mode, loss=spec.loss, eval_metric_ops={
        "label_mean": tf.compat.v1.metrics.mean(labels)})


def _input(batch, repeat=False):
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X, "weight": WEIGHT}, Y))
        return dataset.repeat().batch(batch) if repeat else dataset.batch(batch)
    return input_fn


def _estimator(model_dir, fn=model_fn, **config):
    return Estimator(fn, model_dir, RunConfig(**CONFIG, **config), progress=lambda m: None)


@functools.cache
def _trained_dir() -> str:
    """A model_dir trained on one device (once per process)."""
    model_dir = tempfile.mkdtemp()
    _estimator(model_dir).train(_input(32, repeat=True), max_steps=30)
    return model_dir


def _assert_same_results(distributed, single):
    assert set(distributed) == set(single) == {
        "accuracy", "auc", "weighted_probability", "loss", "global_step"}
    assert distributed["global_step"] == single["global_step"]
    for name in ("accuracy", "auc", "weighted_probability", "loss"):
        assert distributed[name] == pytest.approx(single[name], rel=1e-5, abs=1e-6), name


def _in_two_cpu_process(test, always_fresh=False):
    """Run ``test`` here when 2 logical CPUs are configured (and ``always_fresh`` is False or
    this is that fresh process), else in a new interpreter."""

    @functools.wraps(test)
    def wrapper():
        if TWO_CPUS and (not always_fresh or os.environ.get(_CHILD)):
            return test()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"{__file__}::{test.__name__}"], capture_output=True, text=True,
            env={**os.environ, _CHILD: "1"},
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert " passed" in result.stdout, result.stdout[-3000:]

    return wrapper


# -- MirroredStrategy over 2 logical CPUs ------------------------------------------------------
@_in_two_cpu_process
def test_mirrored_evaluation_equals_single_device_with_short_batches():
    """Batches of 64 (the last has 11 rows) and of 1 (one replica empty at every batch)."""
    model_dir = _trained_dir()
    for batch in (64, 1):
        single = _estimator(model_dir).evaluate(_input(batch))
        REPLICAS.clear()
        distributed = _estimator(model_dir, eval_distribute="mirrored").evaluate(_input(batch))
        assert REPLICAS and set(REPLICAS) == {2}  # the model_fn ran per replica
        assert 0.6 < single["accuracy"] < 1.0 and 0.6 < single["auc"] < 1.0
        _assert_same_results(distributed, single)
    # a second evaluation starts from zero, also across replicas
    est = _estimator(model_dir, eval_distribute="mirrored")
    first = est.evaluate(lambda: _input(64)().take(1))
    assert first == pytest.approx(_estimator(model_dir).evaluate(_input(64), steps=1))
    _assert_same_results(est.evaluate(_input(64)), _estimator(model_dir).evaluate(_input(64)))


@_in_two_cpu_process
def test_train_and_evaluate_under_one_mirrored_strategy():
    model_dir = tempfile.mkdtemp()
    est = _estimator(model_dir, train_distribute="mirrored", eval_distribute="mirrored")
    est.train(_input(32, repeat=True), max_steps=20)
    assert isinstance(est.variables()["store/model/000_kernel"],
                      tf.distribute.DistributedValues)  # trained distributed
    REPLICAS.clear()
    distributed = est.evaluate(_input(64))
    assert set(REPLICAS) == {2}
    single = _estimator(model_dir).evaluate(_input(64))  # restores the same checkpoint
    assert single["global_step"] == 20
    _assert_same_results(distributed, single)
    # a fresh Estimator, both strategies set, evaluates the checkpoint
    fresh = _estimator(model_dir, train_distribute="mirrored", eval_distribute="mirrored")
    _assert_same_results(fresh.evaluate(_input(64)), single)
    # train_distribute alone: evaluation stays on one device
    REPLICAS.clear()
    _assert_same_results(_estimator(model_dir, train_distribute="mirrored").evaluate(
        _input(64)), single)
    assert set(REPLICAS) == {1}


@functools.partial(_in_two_cpu_process, always_fresh=True)
def test_a_mirrored_strategy_instance_for_evaluation_only():
    """A MirroredStrategy the program built (the only one in its process: instances clash in
    TF's collective executor, see distribute.py), for evaluation only; the same Estimator then
    trains on one device and evaluates again."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model_dir = _trained_dir()
    est = _estimator(model_dir, eval_distribute=strategy)
    REPLICAS.clear()
    distributed = est.evaluate(_input(64))
    assert set(REPLICAS) == {2}
    _assert_same_results(distributed, _estimator(model_dir).evaluate(_input(64)))
    assert not isinstance(est.variables()["store/model/000_kernel"],
                          tf.distribute.DistributedValues)
    est.train(_input(32, repeat=True), max_steps=40)
    after = est.evaluate(_input(64))
    assert after["global_step"] == 40
    _assert_same_results(after, _estimator(model_dir).evaluate(_input(64)))


@_in_two_cpu_process
def test_evaluation_hooks_under_mirrored_see_the_running_results():
    class Fetch(SessionRunHook):
        def __init__(self):
            self.seen = []

        def before_run(self, run_context):
            return SessionRunArgs({"loss": "loss", "accuracy": "accuracy"})

        def after_run(self, run_context, run_values):
            self.seen.append(run_values.results)

    model_dir = _trained_dir()
    hook = Fetch()
    est = Estimator(model_fn, model_dir, RunConfig(**{**CONFIG, "steps_per_loop": 2},
                                                   eval_distribute="mirrored"),
                    progress=lambda m: None)
    results = est.evaluate(_input(64), hooks=[hook])
    assert len(hook.seen) == 3  # chunks of 2 batches: 2, 2, then none left
    first_two = _estimator(model_dir).evaluate(_input(64), steps=2)
    assert hook.seen[0]["loss"] == pytest.approx(first_two["loss"], rel=1e-5)
    assert hook.seen[0]["accuracy"] == pytest.approx(first_two["accuracy"], rel=1e-5)
    assert hook.seen[-1] == pytest.approx({"loss": results["loss"],
                                           "accuracy": results["accuracy"]})
    _assert_same_results(results, _estimator(model_dir).evaluate(_input(64)))


# -- one device, and what is refused -----------------------------------------------------------
def test_one_device_strategy_evaluation_equals_plain():
    model_dir = _trained_dir()
    strategy = tf.distribute.OneDeviceStrategy(tf.config.list_logical_devices("CPU")[-1].name)
    REPLICAS.clear()
    distributed = _estimator(model_dir, eval_distribute=strategy).evaluate(_input(64))
    assert set(REPLICAS) == {1}
    _assert_same_results(distributed, _estimator(model_dir).evaluate(_input(64)))


@pytest.mark.parametrize("value", ["multi_worker_mirrored", "parameter_server", "tpu", "nccl"])
def test_unsupported_eval_distribute_names_are_refused(value):
    with pytest.raises(DistributeError) as info:
        _estimator(tempfile.mkdtemp(), eval_distribute=value)
    message = str(info.value)
    assert f"eval_distribute={value!r}" in message
    assert "'mirrored'" in message and "MirroredStrategy" in message


def test_an_unsupported_strategy_object_is_refused():
    with pytest.raises(DistributeError, match=r"eval_distribute=_DefaultDistributionStrategy"):
        distribute.eval_strategy_for(tf.distribute.get_strategy())


def test_a_strategy_other_than_the_training_one_is_refused():
    device = tf.config.list_logical_devices("CPU")[0].name
    train = tf.distribute.OneDeviceStrategy(device)
    with pytest.raises(DistributeError,
                       match="eval_distribute=OneDeviceStrategy.* instance is not the strategy"):
        _estimator(tempfile.mkdtemp(), train_distribute=train,
                   eval_distribute=tf.distribute.OneDeviceStrategy(device))
    assert distribute.eval_strategy_for(train, train) is train


def test_tf1_metric_pairs_are_refused_under_eval_distribute():
    model_dir = _trained_dir()
    plain = _estimator(model_dir, fn=tf1_model_fn).evaluate(_input(64))
    assert plain["label_mean"] == pytest.approx(float(Y.mean()), rel=1e-6)  # fine on one device
    strategy = tf.distribute.OneDeviceStrategy(tf.config.list_logical_devices("CPU")[0].name)
    est = _estimator(model_dir, fn=tf1_model_fn, eval_distribute=strategy)
    with pytest.raises(DistributeError, match=r"eval_metric_ops\['label_mean'\].*TF 1"):
        est.evaluate(_input(64))
