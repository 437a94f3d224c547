"""Distribution in the engine: TF_CONFIG parsing, strategy selection, and real training under
MirroredStrategy over 2 logical CPU devices in this process.

Logical devices can only be configured before TensorFlow starts its runtime, so this module
configures them when it is imported. If something started the runtime earlier (another test
module run first in the same process), the MirroredStrategy tests re-run themselves in a fresh
Python process instead.
"""

import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import distribute
from estflow.estimator import model_fn_for
from estflow.estimator import parsing_serving_input_receiver_fn
from estflow.estimator.distribute import ClusterSpec
from estflow.estimator.distribute import DistributeError
from estflow.estimator.distribute import TaskInfo
from tests.components.estimator._devices import configure_two_cpus
from tests.components.estimator._models import logistic_model_fn as model_fn

TWO_CPUS = configure_two_cpus()

CONFIG = dict(save_checkpoints_steps=10, save_summary_steps=10, log_step_count_steps=10,
              steps_per_loop=5)
R = np.random.RandomState(0)
X = R.randn(256, 2).astype("float32")
Y = (X[:, :1] + 0.5 * X[:, 1:] > 0).astype("float32")


def whole_batch_input_fn():
    """Every step sees all 256 rows (128 per replica): a step is a pure function of state."""
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(len(X)).repeat()


def make_train_op_model_fn():
    """Estimator style under a strategy: one optimizer object for every call (each replica's
    trace must apply the same one) and the loss averaged over replicas before gradients."""
    optimizers = []

    def train_op_model_fn(features, labels, mode):
        hidden = keras.layers.Dense(4, activation="relu")
        out = keras.layers.Dense(1)
        logits = out(hidden(features["x"]))
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits))
        if not optimizers:
            optimizers.append(keras.optimizers.Adam(0.05))
        replica = tf.distribute.get_replica_context()
        scaled = loss / replica.num_replicas_in_sync if replica else loss
        variables = hidden.trainable_variables + out.trainable_variables
        train_op = optimizers[0].apply_gradients(
            zip(tf.gradients(scaled, variables), variables, strict=True))
        return EstimatorSpec(mode, loss=loss, train_op=train_op)

    return train_op_model_fn


def _estimator(fn, model_dir=None, **config):
    return Estimator(fn, model_dir or tempfile.mkdtemp(), ef.RunConfig(**CONFIG, **config),
                     progress=lambda m: None)


def _checkpoint_values(est):
    return {name: est.get_variable_value(name) for name in est.get_variable_names()}


def _assert_same_checkpoints(a, b, atol=1e-5):
    va, vb = _checkpoint_values(a), _checkpoint_values(b)
    assert set(va) == set(vb)
    for name in va:
        np.testing.assert_allclose(np.asarray(va[name], float), np.asarray(vb[name], float),
                                   atol=atol, err_msg=name)


def _fresh_process_unless_two_cpus(test):
    """Run ``test`` here when 2 logical CPUs are configured, else in a new interpreter."""

    def wrapper(*args, **kwargs):
        if TWO_CPUS:
            return test(*args, **kwargs)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"{__file__}::{test.__name__}"], capture_output=True, text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    wrapper.__name__ = test.__name__
    wrapper.__doc__ = test.__doc__
    return wrapper


# -- TF_CONFIG --------------------------------------------------------------------------------
def test_parse_tf_config_reads_cluster_and_task():
    spec = distribute.parse_tf_config(
        '{"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"], '
        '"evaluator": ["h:5"]}, "task": {"type": "worker", "index": 1}}')
    assert spec.task == TaskInfo("worker", 1)
    assert spec.jobs["worker"] == ("h:2", "h:3")
    assert spec.num_training_workers == 3 and spec.has_ps and not spec.is_chief
    assert "evaluator" not in spec.training_cluster().as_dict()  # not a training task


def test_worker_zero_is_chief_without_a_chief_job():
    workers = {"worker": ("h:1", "h:2")}
    assert ClusterSpec(workers, TaskInfo("worker", 0)).is_chief
    assert not ClusterSpec(workers, TaskInfo("worker", 1)).is_chief
    assert not ClusterSpec({"chief": ("h:0",), **workers}, TaskInfo("worker", 0)).is_chief


@pytest.mark.parametrize("text", [None, "", "  ", "{}", '{"environment": "cloud"}'])
def test_no_tf_config_means_no_cluster(text):
    assert distribute.parse_tf_config(text) is None


@pytest.mark.parametrize("text, needle", [
    ("not json", "expected JSON"),
    ('{"cluster": {"worker": ["h:1"]}}', "`task`"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}', "0 <= index < 1"),
    ('{"cluster": {"boss": ["h:1"]}, "task": {"type": "boss", "index": 0}}', "'boss'"),
    ('{"cluster": {"worker": ["nohost"]}, "task": {"type": "worker", "index": 0}}', "host:port"),
])
def test_bad_tf_config_names_what_was_expected(text, needle):
    with pytest.raises(DistributeError, match="expected") as info:
        distribute.parse_tf_config(text)
    assert needle in str(info.value)


def test_default_strategy_follows_the_cluster():
    two = ClusterSpec({"worker": ("h:1", "h:2")}, TaskInfo("worker", 0))
    one = ClusterSpec({"worker": ("h:1",)}, TaskInfo("worker", 0))
    ps = ClusterSpec({"chief": ("h:0",), "worker": ("h:1",), "ps": ("h:2",)},
                     TaskInfo("ps", 0))
    assert distribute.strategy_name(None, None) is None
    assert distribute.strategy_name(None, one) is None
    assert distribute.strategy_name(None, two) == "multi_worker_mirrored"
    assert distribute.strategy_name(None, ps) == "parameter_server"
    assert distribute.task_role(None, ps) == "serve"
    assert distribute.task_role(None, ClusterSpec(ps.jobs, TaskInfo("worker", 0))) == "serve"
    assert distribute.task_role(None, ClusterSpec(ps.jobs, TaskInfo("chief", 0))) == "train"
    assert distribute.task_role("multi_worker_mirrored", two) == "train"
    evaluator = ClusterSpec({**two.jobs, "evaluator": ("h:9",)}, TaskInfo("evaluator", 0))
    assert distribute.task_role(None, evaluator) == "evaluate"
    # The evaluator is outside the training cluster: no multi-worker strategy (which would
    # try to join the workers' collectives) for an Estimator built there.
    assert distribute.strategy_for("multi_worker_mirrored", evaluator) is None
    assert distribute.strategy_for(None, evaluator) is None


@pytest.mark.parametrize("name, cluster, needle", [
    ("nccl", None, "expected one of"),
    ("mirrored", ClusterSpec({"worker": ("h:1", "h:2")}, TaskInfo("worker", 0)),
     "runs in one process"),
    ("multi_worker_mirrored", ClusterSpec({"worker": ("h:1",), "ps": ("h:2",)},
                                          TaskInfo("worker", 0)), "expected 'parameter_server'"),
    ("parameter_server", None, "needs a TF_CONFIG cluster"),
    ("parameter_server", ClusterSpec({"chief": ("h:0",), "worker": ("h:1",), "ps": ("h:2",)},
                                     TaskInfo("worker", 0)), "should serve()"),
])
def test_strategy_for_refuses_what_cannot_work(name, cluster, needle):
    with pytest.raises(DistributeError) as info:
        distribute.strategy_for(name, cluster)
    assert needle in str(info.value)


def test_tpu_is_selected_and_fails_clearly_without_a_tpu():
    with pytest.raises(DistributeError, match="train_distribute='tpu' needs a TPU"):
        distribute.strategy_for("tpu")


def test_no_strategy_is_the_plain_path():
    assert distribute.strategy_for(None) is None
    plain = distribute.Distribution()
    assert plain.is_chief and plain.num_replicas == 1
    assert plain.write_dir("/m") == "/m"


def test_a_strategy_object_is_used_as_is():
    strategy = tf.distribute.get_strategy()  # the default strategy is a Strategy too
    assert distribute.strategy_for(strategy) is strategy


# -- MirroredStrategy over 2 logical CPUs -----------------------------------------------------
@_fresh_process_unless_two_cpus
def test_mirrored_training_equals_single_device_training():
    """2 replicas x 128 rows with averaged gradients = 1 device x 256 rows, optimizer state
    included."""
    single = _estimator(model_fn)
    single.train(whole_batch_input_fn, max_steps=20)
    mirrored = _estimator(model_fn, train_distribute="mirrored")
    mirrored.train(whole_batch_input_fn, max_steps=20)
    assert isinstance(mirrored.variables()["store/model/000_w"], tf.distribute.DistributedValues)
    assert mirrored.global_step == 20
    _assert_same_checkpoints(single, mirrored)
    assert any(name.startswith("optimizers/") for name in mirrored.get_variable_names())


@_fresh_process_unless_two_cpus
def test_mirrored_resumes_and_exports():
    model_dir = tempfile.mkdtemp()
    _estimator(model_fn, model_dir, train_distribute="mirrored").train(
        whole_batch_input_fn, max_steps=10)
    resumed = _estimator(model_fn, model_dir, train_distribute="mirrored")
    resumed.train(whole_batch_input_fn, max_steps=20)
    straight = _estimator(model_fn)
    straight.train(whole_batch_input_fn, max_steps=20)
    _assert_same_checkpoints(straight, resumed)  # slots were restored, not rebuilt
    export = resumed.export_saved_model(tempfile.mkdtemp(), parsing_serving_input_receiver_fn(
        {"x": tf.io.FixedLenFeature([2], tf.float32)}))
    examples = [tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
        float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in X[:4]]
    served = tf.saved_model.load(export).signatures["serving_default"](
        examples=tf.constant(examples))["logits"].numpy()
    predicted = [p["logits"] for p in resumed.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"x": X[:4]}).batch(4))]
    np.testing.assert_allclose(served, np.stack(predicted), atol=1e-6)


@_fresh_process_unless_two_cpus
def test_estimator_built_under_a_strategy_scope_trains_under_it():
    # The process's MirroredStrategy (a second instance's collectives would clash with it).
    strategy = distribute.strategy_for("mirrored")
    assert strategy is distribute.strategy_for("mirrored")
    with strategy.scope():
        est = _estimator(model_fn)
    with pytest.raises(DistributeError, match="built under a MirroredStrategy scope"):
        with strategy.scope():
            _estimator(model_fn, train_distribute="multi_worker_mirrored")
    est.train(whole_batch_input_fn, max_steps=10)
    single = _estimator(model_fn)
    single.train(whole_batch_input_fn, max_steps=10)
    _assert_same_checkpoints(single, est)


@_fresh_process_unless_two_cpus
def test_estimator_style_train_op_under_mirrored():
    single = _estimator(make_train_op_model_fn())
    single.train(whole_batch_input_fn, max_steps=10)
    mirrored = _estimator(make_train_op_model_fn(), train_distribute="mirrored")
    mirrored.train(whole_batch_input_fn, max_steps=10)
    _assert_same_checkpoints(single, mirrored, atol=1e-4)


def _v1_model_fn(features, labels, mode, params):
    """TF 1 style: get_variable, the global step, a decayed learning rate, a summary and a
    tf.compat.v1.train optimizer's minimize(global_step=)."""
    w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
    logits = tf.matmul(features["x"], w)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    global_step = tf.compat.v1.train.get_global_step()
    learning_rate = tf.compat.v1.train.exponential_decay(0.5, global_step, 5, 0.5)
    tf.compat.v1.summary.scalar("learning_rate", learning_rate)
    optimizer = getattr(tf.compat.v1.train, params["optimizer"])(learning_rate)
    return EstimatorSpec(mode, loss=loss,
                         train_op=optimizer.minimize(loss, global_step=global_step))


@_fresh_process_unless_two_cpus
def test_v1_idioms_under_mirrored_equal_single_device():
    """The global step, its schedule and a slot-less v1 optimizer (its loss scaled for the mean
    over replicas, as under tf.estimator)."""
    params = {"optimizer": "GradientDescentOptimizer"}
    single = Estimator(_v1_model_fn, tempfile.mkdtemp(), ef.RunConfig(**CONFIG), params=params,
                       progress=lambda m: None)
    single.train(whole_batch_input_fn, max_steps=10)
    mirrored = Estimator(_v1_model_fn, tempfile.mkdtemp(),
                         ef.RunConfig(**CONFIG, train_distribute="mirrored"), params=params,
                         progress=lambda m: None)
    mirrored.train(whole_batch_input_fn, max_steps=10)
    assert mirrored.global_step == 10
    _assert_same_checkpoints(single, mirrored)


@_fresh_process_unless_two_cpus
def test_v1_optimizer_slots_under_mirrored_equal_single_device():
    """A tf.compat.v1.train optimizer creates its slots in merge_call (cross-replica context,
    on the calling thread): they come to the store, are mirrored and checkpointed, and each
    trace gets them back (the migration guide's MirroredStrategy + AdagradOptimizer)."""
    for optimizer in ("AdamOptimizer", "AdagradOptimizer"):
        _check_v1_optimizer_under_mirrored(optimizer)


def _check_v1_optimizer_under_mirrored(optimizer):
    params = {"optimizer": optimizer}
    single = Estimator(_v1_model_fn, tempfile.mkdtemp(), ef.RunConfig(**CONFIG), params=params,
                       progress=lambda m: None)
    single.train(whole_batch_input_fn, max_steps=10)
    mirrored = Estimator(_v1_model_fn, tempfile.mkdtemp(),
                         ef.RunConfig(**CONFIG, train_distribute="mirrored"), params=params,
                         progress=lambda m: None)
    mirrored.train(whole_batch_input_fn, max_steps=10)
    assert mirrored.global_step == 10
    slots = [n for n in mirrored.get_variable_names() if n.startswith("store/train/")]
    assert slots and all(isinstance(mirrored.variables()[n], tf.distribute.DistributedValues)
                         for n in slots)
    _assert_same_checkpoints(single, mirrored)
    mirrored.train(whole_batch_input_fn, max_steps=15)  # a new trace gets the same slots
    single.train(whole_batch_input_fn, max_steps=15)
    _assert_same_checkpoints(single, mirrored)


@_fresh_process_unless_two_cpus
def test_premade_dnn_with_batch_norm_under_mirrored():
    """Batch norm's moving statistics are ON_READ variables (averaged over replicas)."""
    model = ef.DNNClassifier((8,), ("x", "z"), batch_norm=True, dropout=0.1)
    features = {"x": X[:, 0], "z": X[:, 1]}
    est = _estimator(model_fn_for(model, {}), train_distribute="mirrored")
    est.train(lambda: tf.data.Dataset.from_tensor_slices((features, Y)).repeat().batch(64),
              max_steps=200)
    metrics = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((features, Y)).batch(64))
    assert metrics["global_step"] == 200
    assert metrics["accuracy"] > 0.75  # a single device reaches ~0.84 here
    moving = [n for n in est.get_variable_names() if n.endswith("moving_mean")]
    assert moving and np.abs(est.get_variable_value(moving[0])).sum() > 0  # updated, saved


@_fresh_process_unless_two_cpus
def test_input_fn_gets_an_input_context_under_a_strategy():
    """tf.estimator passed ``input_context`` under a strategy: here one pipeline (the global
    batch, which the engine splits), so ``dataset.shard(ctx.num_input_pipelines,
    ctx.input_pipeline_id)`` keeps all of it."""
    contexts = []

    def input_fn(mode, input_context=None):
        contexts.append((mode, input_context))
        dataset = whole_batch_input_fn()
        if input_context:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        return dataset

    single = _estimator(model_fn)
    single.train(whole_batch_input_fn, max_steps=5)
    mirrored = _estimator(model_fn, train_distribute="mirrored")
    mirrored.train(input_fn, max_steps=5)
    (mode, context), = contexts
    assert mode == ModeKeys.TRAIN
    assert (context.num_input_pipelines, context.input_pipeline_id,
            context.num_replicas_in_sync) == (1, 0, 2)
    _assert_same_checkpoints(single, mirrored)
