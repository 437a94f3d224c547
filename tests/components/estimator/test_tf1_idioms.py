"""TF 1 idioms inside a model_fn, as tf.estimator users wrote them (issue 12): the global step
(``get_global_step``/``get_or_create_global_step``, stepped by a ``tf.compat.v1.train``
optimizer's ``minimize(global_step=...)``), ``tf.compat.v1.train.*Optimizer``,
``tf.compat.v1.trainable_variables()``/``global_variables()``/``get_collection``,
``tf.compat.v1.summary``, ``tf.compat.v1.losses``, learning-rate schedules on the global step,
``train_op_fn`` in heads and ``tf.estimator.export``'s names; idioms that cannot work on
TF 2.21 fail at the first trace naming the call and its replacement."""

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as tf_estimator  # tf.estimator
from estflow.estimator import SessionRunArgs
from estflow.estimator import SessionRunHook
from estflow.estimator import export

fc = tf_estimator.feature_column  # tf.feature_column
ModeKeys = tf_estimator.ModeKeys

R = np.random.RandomState(0)
N = 512
X1 = R.randn(N, 1).astype("float32")
X2 = R.randn(N, 1).astype("float32")
COLOR = R.choice([b"red", b"green", b"blue"], size=(N, 1))
Y = ((X1 + X2 + (COLOR == b"red")) > 0.5).astype("int64")[:, 0]
CLASSIC_COLUMNS = [
    fc.numeric_column("x1"), fc.numeric_column("x2"),
    fc.indicator_column(fc.categorical_column_with_vocabulary_list(
        "color", ["red", "green", "blue"]))]


def _quiet(_message):
    pass


def _features(rows=slice(None)):
    return {"x1": X1[rows], "x2": X2[rows], "color": COLOR[rows]}


def _train_input_fn():
    return tf.data.Dataset.from_tensor_slices((_features(), Y)).repeat().batch(32)


def _eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((_features(), Y)).batch(128)


def _examples(rows):
    out = []
    for i in range(rows):
        feature = {
            "x1": tf.train.Feature(float_list=tf.train.FloatList(value=[X1[i, 0]])),
            "x2": tf.train.Feature(float_list=tf.train.FloatList(value=[X2[i, 0]])),
            "color": tf.train.Feature(bytes_list=tf.train.BytesList(value=[COLOR[i, 0]]))}
        out.append(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
    return tf.constant(out)


def _scalars(directory: str) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of the TensorBoard events in ``directory`` (not recursive)."""
    out: dict[str, dict[int, float]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.metadata.plugin_data.plugin_name == "scalars":
                    number = float(tf.make_ndarray(value.tensor))
                else:
                    number = float("nan")  # histograms & co.: present, no single value
                out.setdefault(value.tag, {})[int(event.step)] = number
    return out


# -- the classic custom Estimator (the TF 1 guides' shape) ------------------------------------
SEEN: dict[str, list] = {}


def classic_model_fn(features, labels, mode, params):
    """Written as the TF 1 custom-Estimator guide taught it; only the layer calls are Keras
    (``tf.compat.v1.layers`` do not exist with Keras 3) and the columns this package's."""
    net = fc.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = keras.layers.Dense(units, activation=tf.nn.relu)(net)
        net = keras.layers.BatchNormalization()(net, training=mode == ModeKeys.TRAIN)
    logits = keras.layers.Dense(params["n_classes"])(net)
    predicted_classes = tf.argmax(logits, 1)
    if mode == ModeKeys.PREDICT:
        predictions = {"class_ids": predicted_classes[:, tf.newaxis],
                       "probabilities": tf.nn.softmax(logits), "logits": logits}
        return tf_estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=predicted_classes,
                                             name="acc_op")
    tf.compat.v1.summary.scalar("accuracy", accuracy[1])
    if mode == ModeKeys.EVAL:
        return tf_estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    global_step = tf.compat.v1.train.get_or_create_global_step()
    learning_rate = tf.compat.v1.train.exponential_decay(
        params["learning_rate"], global_step, decay_steps=10, decay_rate=0.5)
    tf.compat.v1.summary.scalar("learning_rate", learning_rate)
    SEEN["trainable"] = [v.name for v in tf.compat.v1.trainable_variables()]
    SEEN["global"] = [v.name for v in tf.compat.v1.global_variables()]
    SEEN["global_step"] = global_step
    optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate)
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = optimizer.minimize(loss, global_step=global_step)
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


CLASSIC_PARAMS = {"feature_columns": CLASSIC_COLUMNS, "hidden_units": [16, 8], "n_classes": 2,
                  "learning_rate": 0.5}


def test_classic_custom_estimator_trains_evaluates_restores_and_serves(tmp_path):
    model_dir = str(tmp_path / "model")
    config = tf_estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=30,
                                    save_summary_steps=10, steps_per_loop=10)
    est = tf_estimator.Estimator(classic_model_fn, params=CLASSIC_PARAMS, config=config,
                                 progress=_quiet)
    receiver_fn = export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(CLASSIC_COLUMNS))
    metrics, exports = tf_estimator.train_and_evaluate(
        est, tf_estimator.TrainSpec(_train_input_fn, max_steps=60),
        tf_estimator.EvalSpec(_eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0,
                              exporters=[tf_estimator.LatestExporter("latest", receiver_fn)]))

    # the global step is the engine's: minimize(global_step=) did not count twice
    assert est.global_step == 60 and metrics["global_step"] == 60
    assert SEEN["global_step"].dtype == tf.int64 and SEEN["global_step"].shape == ()
    # the model_fn saw its variables: 3 dense layers (kernel, bias), 2 batch norms (gamma, beta)
    assert len(SEEN["trainable"]) == 10
    assert len(SEEN["global"]) == 10 + 4 + 1  # + moving mean/variance x2 + global step
    # the learning rate decayed on the global step: its summary at step s was computed at the
    # start of step s (global step s - 1)
    scalars = _scalars(model_dir)
    assert sorted(scalars["learning_rate"]) == [10, 20, 30, 40, 50, 60]
    for step, value in scalars["learning_rate"].items():
        assert value == pytest.approx(0.5 * 0.5 ** ((step - 1) / 10), rel=1e-5)
    assert set(scalars["accuracy"]) == {10, 20, 30, 40, 50, 60}
    assert scalars["loss"][60] < scalars["loss"][10]
    assert metrics["accuracy"] > 0.85
    # batch norm's moving averages moved (Keras 3 updates them in the call: no UPDATE_OPS)
    moving = [n for n in est.get_variable_names() if n.endswith("moving_mean")]
    assert moving and np.abs(est.get_variable_value(moving[0])).sum() > 0

    # the checkpoint restores: the Adagrad accumulators are in it, and training resumes
    names = est.get_variable_names()
    assert sum(n.startswith("store/train/") for n in names) == 10
    resumed = tf_estimator.Estimator(classic_model_fn, params=CLASSIC_PARAMS, config=config,
                                     progress=_quiet)
    assert resumed.global_step == 60
    assert resumed.evaluate(_eval_input_fn)["loss"] == pytest.approx(metrics["loss"], rel=1e-5)
    resumed.train(_train_input_fn, steps=10)
    assert resumed.global_step == 70
    assert resumed.get_variable_names() == names
    assert _scalars(model_dir)["learning_rate"][70] == pytest.approx(0.5 * 0.5 ** 6.9, rel=1e-5)

    # the export (build_parsing_serving_input_receiver_fn) serves what predict returns
    assert len(exports) == 1  # the last evaluation's export, of the checkpoint at step 60
    served = tf.saved_model.load(exports[0]).signatures["serving_default"](
        examples=_examples(8))
    expected = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        _features(slice(0, 8))).batch(8), checkpoint_path=f"{model_dir}/model.ckpt-60"))
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               [p["probabilities"] for p in expected], rtol=1e-5)


# -- the global step ----------------------------------------------------------------------------
class _EveryStep(SessionRunHook):
    """Fetches ``names`` (model_fn tensors) at every step."""

    def __init__(self, names):
        self.names = names
        self.rows = []

    def next_boundary(self, global_step):
        return global_step + 1

    def before_run(self, run_context):
        return SessionRunArgs({**{n: n for n in self.names}, "after": "global_step"})

    def after_run(self, run_context, run_values):
        self.rows.append(run_values.results)


def _linear_input_fn():
    x = R.randn(256, 2).astype("float32")
    y = (x[:, :1] - x[:, 1:] > 0).astype("float32")
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(32)


def _step_model_fn(features, labels, mode):
    logits = keras.layers.Dense(1)(features["x"])
    global_step = tf.compat.v1.train.get_global_step()
    assert global_step is not None
    assert tf.compat.v1.train.get_or_create_global_step() is global_step
    if mode == ModeKeys.PREDICT:
        return tf_estimator.EstimatorSpec(mode, predictions={
            "logits": logits, "step": tf.fill(tf.shape(logits), global_step)})
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    if mode == ModeKeys.EVAL:
        return tf_estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "step": tf.compat.v1.metrics.mean(tf.cast(global_step, tf.float32))})
    tf.identity(global_step, name="step_seen")
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=global_step)
    with tf.control_dependencies([train_op]):
        tf.identity(global_step.read_value(), name="step_after_minimize")
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_global_step_in_every_mode_is_the_engines_step(tmp_path):
    est = tf_estimator.Estimator(_step_model_fn, model_dir=str(tmp_path), progress=_quiet)
    est.train(_linear_input_fn, steps=5)
    hook = _EveryStep(["step_seen", "step_after_minimize"])
    est.train(_linear_input_fn, steps=4, hooks=[hook])
    assert est.global_step == 9
    # each step saw the step count when it started; minimize(global_step=) stepped it once
    assert [int(r["step_seen"]) for r in hook.rows] == [5, 6, 7, 8]
    assert [int(r["step_after_minimize"]) for r in hook.rows] == [6, 7, 8, 9]
    assert [int(r["after"]) for r in hook.rows] == [6, 7, 8, 9]
    assert est.evaluate(_linear_input_fn, steps=2)["step"] == 9.0
    first = next(est.predict(lambda: _linear_input_fn().map(lambda f, y: f).take(1)))
    assert int(first["step"][0]) == 9


def test_create_global_step_in_a_model_fn_says_it_exists(tmp_path):
    def model_fn(features, labels, mode):
        tf.compat.v1.train.create_global_step()
        return _step_model_fn(features, labels, mode)

    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path), progress=_quiet)
    with pytest.raises(ValueError, match='"global_step" already exists'):
        est.train(_linear_input_fn, steps=1)


# -- collections ------------------------------------------------------------------------------
def test_collections_hold_the_model_fns_variables_fresh_on_every_call(tmp_path):
    seen = []

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
        b = tf.compat.v1.get_variable("b", [1], initializer=tf.zeros_initializer())
        logits = tf.matmul(features["x"], w) + b
        if mode == ModeKeys.PREDICT:
            return tf_estimator.EstimatorSpec(mode, predictions={"logits": logits})
        tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
        tf.compat.v1.losses.add_loss(0.01 * tf.reduce_sum(tf.square(w)))
        tf.identity(tf.norm(w), name="w_norm")
        loss = tf.compat.v1.losses.get_total_loss()
        seen.append((mode, [v.name for v in tf.compat.v1.trainable_variables()],
                     [v.name for v in tf.compat.v1.global_variables()],
                     len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)),
                     len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP))))
        if mode == ModeKeys.EVAL:
            return tf_estimator.EstimatorSpec(mode, loss=loss)
        train_op = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss)  # no var_list
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path), progress=_quiet)
    est.train(_linear_input_fn, steps=3)
    est.train(_linear_input_fn, steps=2, hooks=[_EveryStep(["w_norm"])])  # 2 more calls
    est.evaluate(_linear_input_fn, steps=1)
    assert est.global_step == 5
    assert [mode for mode, *_ in seen] == ["train"] * 3 + ["eval"]
    for mode, trainable, global_vars, losses, steps in seen:
        assert [n.split(":")[0].rsplit("/", 1)[-1] for n in trainable] == ["w", "b"], mode
        assert len(global_vars) == 3 and steps == 1 and losses == 2, mode
    # Adam's slots and beta powers were created once, in the checkpoint
    assert sum(n.startswith("store/train/") for n in est.get_variable_names()) == 6
    graph = tf.compat.v1.get_default_graph()  # nothing leaked into the process's graph
    for key in (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,
                tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, tf.compat.v1.GraphKeys.GLOBAL_STEP,
                tf.compat.v1.GraphKeys.LOSSES):
        assert graph.get_collection(key) == []


# -- summaries --------------------------------------------------------------------------------
def test_v1_summaries_land_in_model_dir_every_save_summary_steps(tmp_path):
    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(1)(features["x"])
        if mode == ModeKeys.PREDICT:
            return tf_estimator.EstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
        tf.compat.v1.summary.scalar("my_loss", loss)
        tf.compat.v1.summary.histogram("logits", logits)
        if mode == ModeKeys.EVAL:
            return tf_estimator.EstimatorSpec(mode, loss=loss)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))

    config = tf_estimator.RunConfig(model_dir=str(tmp_path), save_summary_steps=5,
                                    steps_per_loop=5)
    est = tf_estimator.Estimator(model_fn, config=config, progress=_quiet)
    est.train(_linear_input_fn, steps=10)
    est.train(_linear_input_fn, steps=5)  # the loop, traced once, writes on
    est.evaluate(_linear_input_fn, steps=2)
    scalars = _scalars(str(tmp_path))
    assert sorted(scalars["my_loss"]) == [5, 10, 15]
    assert sorted(scalars["logits"]) == [5, 10, 15]  # the histogram
    assert scalars["my_loss"][15] == pytest.approx(scalars["loss"][15], rel=0.5)
    assert set(_scalars(est.eval_dir())) == {"loss"}  # EVAL: model_fn summaries are dropped


# -- tf.compat.v1.train optimizers --------------------------------------------------------------
V1_OPTIMIZERS = {
    "Adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.5),
    "Adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-2),
    "Adam": lambda: tf.compat.v1.train.AdamOptimizer(0.1),
    "Ftrl": lambda: tf.compat.v1.train.FtrlOptimizer(0.5),
    "GradientDescent": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.5),
    "Momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.2, momentum=0.9),
    "RMSProp": lambda: tf.compat.v1.train.RMSPropOptimizer(0.05),
    "ProximalAdagrad": lambda: tf.compat.v1.train.ProximalAdagradOptimizer(0.5),
    "ProximalGradientDescent": lambda: tf.compat.v1.train.ProximalGradientDescentOptimizer(0.5),
}


def _v1_model_fn(features, labels, mode, params):
    w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.zeros_initializer())
    logits = tf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return tf_estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    if mode == ModeKeys.EVAL:
        return tf_estimator.EstimatorSpec(mode, loss=loss)
    optimizer = V1_OPTIMIZERS[params["optimizer"]]()
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _fixed_input_fn():
    x = np.random.RandomState(1).randn(256, 2).astype("float32")
    y = (x[:, :1] - x[:, 1:] > 0).astype("float32")
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(32)


@pytest.mark.parametrize("name", sorted(V1_OPTIMIZERS))
def test_each_v1_optimizer_trains_and_resumes_from_its_checkpoint(tmp_path, name):
    """Training 20 + 10 steps in one Estimator equals 20 steps, a new Estimator restoring the
    checkpoint (slots included), then 10 more."""

    def make(directory):
        return tf_estimator.Estimator(_v1_model_fn, model_dir=str(tmp_path / directory),
                                      params={"optimizer": name}, progress=_quiet)

    straight = make("a")
    straight.train(_fixed_input_fn, steps=20)
    straight.train(_fixed_input_fn, steps=10)
    make("b").train(_fixed_input_fn, steps=20)
    resumed = make("b")
    resumed.train(_fixed_input_fn, steps=10)
    assert straight.global_step == resumed.global_step == 30
    names = straight.get_variable_names()
    assert names == resumed.get_variable_names()
    for var in names:
        np.testing.assert_allclose(resumed.get_variable_value(var),
                                   straight.get_variable_value(var), rtol=1e-5, atol=1e-6)
    assert straight.evaluate(_fixed_input_fn, steps=4)["loss"] < 0.5  # from log(2) = 0.69


# -- heads ----------------------------------------------------------------------------------
def _head_model_fn(features, labels, mode, params):
    logits = keras.layers.Dense(1)(features["x"])
    head = tf_estimator.BinaryClassHead()
    if params["style"] == "train_op_fn":
        return head.create_estimator_spec(
            features, mode, logits, labels,
            train_op_fn=lambda loss: tf.compat.v1.train.AdagradOptimizer(0.5).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step()))
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=tf.compat.v1.train.FtrlOptimizer(0.5))


@pytest.mark.parametrize("style", ["train_op_fn", "v1_optimizer"])
def test_heads_train_with_a_v1_train_op_fn_or_optimizer(tmp_path, style):
    est = tf_estimator.Estimator(_head_model_fn, model_dir=str(tmp_path),
                                 params={"style": style}, progress=_quiet)
    est.train(_fixed_input_fn, steps=30)
    assert est.global_step == 30
    metrics = est.evaluate(_fixed_input_fn, steps=4)
    assert metrics["accuracy"] > 0.9 and metrics["loss"] < 0.5
    assert any(n.startswith("store/train/") for n in est.get_variable_names())  # the slots


# -- idioms that cannot work on TF 2.21: the first trace names the call and the replacement --
def _failing_model_fn(features, labels, mode, params):
    x = features["x"]
    what = params["what"]
    if what == "v1_dense":
        x = tf.compat.v1.layers.dense(x, 4)
    elif what == "v1_batch_norm":
        x = tf.compat.v1.layers.batch_normalization(x, training=mode == ModeKeys.TRAIN)
    elif what == "dense_features":
        x = tf.keras.layers.DenseFeatures([])(features)
    logits = keras.layers.Dense(1)(x)
    if mode == ModeKeys.PREDICT:
        return tf_estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    if what == "legacy_optimizer":
        optimizer = tf.keras.optimizers.legacy.Adagrad(0.1)
    else:
        optimizer = keras.optimizers.Adagrad(0.1)
        optimizer.iterations = tf.compat.v1.train.get_or_create_global_step()
    return tf_estimator.EstimatorSpec(mode, loss=loss, optimizer=optimizer)


# The idioms whose failure depends on tf.keras being Keras 3, as in a user's process. Once
# tensorflow_transform is imported (other test modules do), it sets TF_USE_LEGACY_KERAS=1 and
# tf.keras and tf.compat.v1.layers are tf_keras' (Keras 2), where they still work: these are
# checked in a fresh interpreter without TF_USE_LEGACY_KERAS (as tests/compat/test_corpus.py
# runs its programs), whatever this process imported.
KERAS3_IDIOMS = ("v1_dense", "v1_batch_norm", "dense_features", "legacy_optimizer")


def _first_train(what: str, model_dir: str) -> dict:
    """What the first ``train`` of ``_failing_model_fn`` raises (``None``: nothing), and whether
    it left a checkpoint."""
    est = tf_estimator.Estimator(_failing_model_fn, model_dir=model_dir,
                                 params={"what": what}, progress=_quiet)
    raised = None
    try:
        est.train(_fixed_input_fn, steps=5)
    except Exception as e:  # noqa: BLE001  (reported to the test, which checks type and text)
        raised = {"types": [c.__name__ for c in type(e).__mro__], "message": str(e)}
    return {"raised": raised, "checkpoint": est.latest_checkpoint()}


def _child_main(out: str, directory: str) -> None:
    """The fresh interpreter's side: each Keras 3 idiom's first train, written to ``out``."""
    results = {what: _first_train(what, os.path.join(directory, what)) for what in KERAS3_IDIOMS}
    results["tf.keras"] = tf.keras.__name__  # Keras 3's: keras._tf_keras.keras
    Path(out).write_text(json.dumps(results))


@pytest.fixture(scope="module")
def keras3_first_trains(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("keras3_idioms")
    out = directory / "results.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    code = ("import sys; from tests.components.estimator.test_tf1_idioms import _child_main; "
            "_child_main(sys.argv[1], sys.argv[2])")
    proc = subprocess.run([sys.executable, "-c", code, str(out), str(directory)], env=env,
                          cwd=Path(__file__).resolve().parents[3], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise AssertionError(f"the Keras 3 process failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    results = json.loads(out.read_text())
    assert results.pop("tf.keras").startswith("keras."), "tf.keras is not Keras 3 there"
    return results


@pytest.mark.parametrize("what, error, message", [
    ("v1_dense", AttributeError, r"tf\.compat\.v1\.layers\.dense .*keras\.layers\.Dense"),
    ("v1_batch_norm", AttributeError,
     r"tf\.compat\.v1\.layers\.batch_normalization .*keras\.layers\.BatchNormalization"),
    ("dense_features", AttributeError,
     r"tf\.keras\.layers\.DenseFeatures .*feature_column\.DenseFeatures"),
    ("legacy_optimizer", ImportError,
     r"tf\.keras\.optimizers\.legacy.*keras\.optimizers\.Adagrad"),
    ("iterations", AttributeError,
     r"Adagrad\.iterations cannot be set .*Remove the assignment"),
])
def test_an_idiom_that_cannot_work_fails_at_the_first_trace(request, tmp_path, what, error,
                                                            message):
    if what in KERAS3_IDIOMS:
        result = request.getfixturevalue("keras3_first_trains")[what]
    else:  # fails the same under either Keras: checked in this process
        result = _first_train(what, str(tmp_path))
    raised = result["raised"]
    assert raised is not None, f"{what}: the first train raised nothing"
    assert error.__name__ in raised["types"], f"{what}: {raised}"
    assert re.search(message, raised["message"]), f"{what}: {raised['message']!r}"
    assert result["checkpoint"] is None


def test_tf_feature_column_tables_cannot_be_exported_and_the_error_says_why(tmp_path):
    color = tf.feature_column.categorical_column_with_vocabulary_list("color", ["a", "b"])
    columns = [tf.feature_column.indicator_column(color)]

    def model_fn(features, labels, mode):
        net = tf.compat.v1.feature_column.input_layer(features, columns)
        logits = keras.layers.Dense(1)(net)
        return tf_estimator.BinaryClassHead().create_estimator_spec(
            features, mode, logits, labels, optimizer=tf.compat.v1.train.AdagradOptimizer(0.5))

    def input_fn():
        colors = np.array([[b"a"], [b"b"]] * 16)
        return tf.data.Dataset.from_tensor_slices(
            ({"color": colors}, (colors == b"a").astype("int64"))).repeat().batch(8)

    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path / "m"), progress=_quiet)
    est.train(input_fn, steps=20)  # training and evaluation work
    assert est.evaluate(input_fn, steps=2)["accuracy"] == 1.0
    with pytest.raises(ValueError, match=r"lookup table.*estflow\.estimator\."
                                         r"feature_column"):
        est.export_saved_model(str(tmp_path / "export"), export.build_parsing_serving_input_receiver_fn(
            tf.feature_column.make_parse_example_spec(columns)))


# -- tf.estimator.export names ------------------------------------------------------------------
def _raw_model_fn(features, labels, mode):
    x = features if isinstance(features, tf.Tensor) else features["x"]
    logits = keras.layers.Dense(1)(x)
    return tf_estimator.BinaryClassHead().create_estimator_spec(
        {}, mode, logits, labels, optimizer=keras.optimizers.Adagrad(0.5))


def _tf1_receiver_fn():
    serialized = tf.compat.v1.placeholder(dtype=tf.string, shape=[None],
                                          name="input_example_tensor")
    features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([2], tf.float32)})
    return export.ServingInputReceiver(features, {"examples": serialized})


def _tf1_tensor_receiver_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 2])
    return export.TensorServingInputReceiver(x, {"x": x})


def _x_examples(x):
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString()
        for row in x])


@pytest.mark.parametrize("receiver", ["parsing", "raw", "tf1_parsing", "tf1_tensor"])
def test_tf_estimator_export_receivers_serve(tmp_path, receiver):
    est = tf_estimator.Estimator(_raw_model_fn, model_dir=str(tmp_path / "m"), progress=_quiet)
    est.train(_fixed_input_fn, steps=5)
    x = np.array([[0.5, -1.0], [-2.0, 1.0]], "float32")
    fns = {
        "parsing": export.build_parsing_serving_input_receiver_fn(
            {"x": tf.io.FixedLenFeature([2], tf.float32)}),
        "raw": export.build_raw_serving_input_receiver_fn({"x": tf.TensorSpec([1, 2])}),
        "tf1_parsing": _tf1_receiver_fn,
        "tf1_tensor": _tf1_tensor_receiver_fn,
    }
    loaded = tf.saved_model.load(est.export_saved_model(str(tmp_path / "e"), fns[receiver]))
    predict = loaded.signatures["predict"]
    inputs = ({"examples": _x_examples(x)} if "parsing" in receiver
              else {"x": tf.constant(x)})
    served = predict(**inputs)["logistic"].numpy()
    expected = [p["logistic"] for p in est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(2))]
    np.testing.assert_allclose(served, expected, rtol=1e-5)


def test_tf_estimator_export_names_exist():
    for name in ("build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn",
                 "ServingInputReceiver", "TensorServingInputReceiver", "PredictOutput",
                 "ClassificationOutput", "RegressionOutput"):
        assert name in export.__all__ and getattr(export, name)
    assert export.build_parsing_serving_input_receiver_fn(
        {"x": tf.io.FixedLenFeature([1], tf.float32)}, default_batch_size=4)().receiver_specs[
        "examples"].shape == (4,)
    with pytest.raises(ValueError, match="receiver_tensors_alternatives"):
        export.ServingInputReceiver({"x": 1}, {"x": 1}, {"alt": {}})


# -- the TF 1 migration guide's model_fns (issue 12): train never traces PREDICT -------------
# (``keras.`` where the guide writes ``tf.keras.``: once tensorflow_transform is imported in the
# process, as other test modules do, ``tf.keras`` is tf_keras, Keras 2)
def _guide_model_fn(seen):
    """The migration guide's model_fn: the loss from the labels and the train_op built in every
    mode (tf.estimator never called it in PREDICT to train, nor ran train_op outside TRAIN)."""

    def model_fn(features, labels, mode):
        seen.append(mode)
        logits = keras.layers.Dense(1)(features["x"])
        loss = tf.compat.v1.losses.mean_squared_error(labels=labels, predictions=logits)
        optimizer = tf.compat.v1.train.AdagradOptimizer(0.05)
        train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def _regression_input_fn(batch=4):
    x = np.arange(24, dtype="float32").reshape(12, 2) / 10
    return lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x.sum(1, keepdims=True))).batch(
        batch)


def test_train_traces_only_train_and_evaluate_does_not_run_the_train_op(tmp_path):
    seen = []
    est = tf_estimator.Estimator(_guide_model_fn(seen), model_dir=str(tmp_path),
                                 progress=_quiet)
    est.train(_regression_input_fn(), steps=3)
    assert seen and set(seen) == {ModeKeys.TRAIN}
    trained = {k: v.numpy().copy() for k, v in est.variables().items()}
    first = est.evaluate(_regression_input_fn())
    assert ModeKeys.PREDICT not in seen
    # the train_op the model_fn built in EVAL did not run: no weight, slot or step moved
    assert first["global_step"] == est.global_step == 3
    for name, value in est.variables().items():
        np.testing.assert_array_equal(value.numpy(), trained[name], err_msg=name)
    assert est.evaluate(_regression_input_fn()) == pytest.approx(first)
    # a fresh Estimator on the model_dir evaluates first: EVAL creates the model, restored
    fresh_seen = []
    fresh = tf_estimator.Estimator(_guide_model_fn(fresh_seen), model_dir=str(tmp_path),
                                   progress=_quiet)
    assert fresh.evaluate(_regression_input_fn()) == pytest.approx(first)
    assert set(fresh_seen) == {ModeKeys.EVAL}
    fresh.train(_regression_input_fn(), steps=2)
    assert fresh.get_variable_names() == est.get_variable_names()
    assert fresh.global_step == 5


def test_a_one_element_loss_is_a_scalar_as_in_tf_estimator(tmp_path):
    """The guide's per-example loss at batch size 1 (shape [None])."""

    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(2)(features["x"])
        loss = tf.compat.v1.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits)
        train_op = tf.compat.v1.train.AdagradOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    x = np.arange(6, dtype="float32").reshape(3, 2)
    input_fn = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        ({"x": x}, np.array([0, 0, 1]))).batch(1)
    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path), progress=_quiet)
    est.train(input_fn)
    metrics = est.evaluate(input_fn)
    assert metrics["global_step"] == 3 and np.isfinite(metrics["loss"])


def test_hooks_take_tensors_of_the_model_fn_as_tf_estimator_did(tmp_path, caplog):
    """The guide's LoggingTensorHook(tensors=[tf.identity(dense.weights[0]), ...]) and
    {tag: loss tensor}: fetched by graph name at the loop's last step, tagged by it."""

    def model_fn(features, labels, mode):
        dense = keras.layers.Dense(1)
        logits = dense(features["x"])
        loss = tf.compat.v1.losses.mean_squared_error(labels=labels, predictions=logits)
        train_op = tf.compat.v1.train.AdagradOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        kernel, bias = tf.identity(dense.weights[0]), tf.identity(dense.weights[1])
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[
            tf_estimator.StopAtStepHook(num_steps=2),
            tf_estimator.LoggingTensorHook(tensors=[kernel, bias], every_n_iter=1),
            tf_estimator.LoggingTensorHook({"the loss": loss}, every_n_iter=1)])

    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path), progress=_quiet)
    with caplog.at_level("INFO", logger="estflow.hooks"):
        est.train(_regression_input_fn(1))
    assert est.global_step == 2
    kernels = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Identity:0")]
    assert len(kernels) == 2
    for message in kernels:  # "Identity:0 = [[k0] [k1]], Identity_1:0 = [b]": kernel, bias
        kernel, bias = message.split(" (")[0].split(", Identity_1:0 = ")  # (N sec) after
        assert len(re.findall(r"-?\d+\.\d+", kernel)) == 2
        assert len(re.findall(r"-?\d+\.\d+", bias)) == 1
    losses = [r.getMessage() for r in caplog.records if r.getMessage().startswith("the loss")]
    assert len(losses) == 2


def test_object_checkpoint_scaffold_saves_its_objects(tmp_path):
    """The guide's EstimatorSpec(scaffold=Scaffold(saver=tf.train.Checkpoint(step=global step,
    optimizer=opt, net=net))): a tf.train.Checkpoint of those objects restores the
    Estimator's checkpoints; train_op=tf.group(opt.apply_gradients(...), ...) with a Keras 3
    optimizer (whose apply_gradients returns a variable) works."""

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = keras.layers.Dense(5)

        def call(self, x):
            return self.l1(x)

    def model_fn(features, labels, mode):
        net = Net()
        opt = keras.optimizers.Adam(0.1)
        ckpt = tf.train.Checkpoint(step=tf.compat.v1.train.get_global_step(), optimizer=opt,
                                   net=net)
        with tf.GradientTape() as tape:
            output = net(features["x"])
            loss = tf.reduce_mean(tf.abs(output - features["y"]))
        variables = net.trainable_variables
        gradients = tape.gradient(loss, variables)
        return tf_estimator.EstimatorSpec(
            mode, loss=loss,
            train_op=tf.group(opt.apply_gradients(zip(gradients, variables, strict=True)),
                              ckpt.step.assign_add(1)),
            scaffold=tf.compat.v1.train.Scaffold(saver=ckpt))

    def toy_dataset():
        inputs = tf.range(10.)[:, None]
        labels = inputs * 5. + tf.range(5.)[None, :]
        return tf.data.Dataset.from_tensor_slices(dict(x=inputs, y=labels)).repeat().batch(2)

    est = tf_estimator.Estimator(model_fn, str(tmp_path), progress=_quiet)
    est.train(toy_dataset, steps=10)
    trained = {k: v.numpy().copy() for k, v in est.variables().items()}
    assert est.evaluate(toy_dataset, steps=3)["global_step"] == 10
    for name, value in est.variables().items():  # the Keras train_op did not run in EVAL
        np.testing.assert_array_equal(value.numpy(), trained[name], err_msg=name)
    net, opt = Net(), keras.optimizers.Adam(0.1)
    net(tf.zeros([1, 1]))
    ckpt = tf.train.Checkpoint(step=tf.Variable(1, dtype=tf.int64), optimizer=opt, net=net)
    ckpt.restore(tf.train.latest_checkpoint(str(tmp_path))).assert_existing_objects_matched()
    assert ckpt.step.numpy() == 10
    np.testing.assert_array_equal(net.l1.kernel.numpy(),
                                  est.variables()["store/model/000_kernel"].numpy())
    # a new Estimator resumes from it
    resumed = tf_estimator.Estimator(model_fn, str(tmp_path), progress=_quiet)
    resumed.train(toy_dataset, steps=2)
    assert resumed.global_step == 12


def test_scaffold_fields_the_engine_does_itself_are_refused(tmp_path):
    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(1)(features["x"])
        loss = tf.reduce_mean(tf.square(logits - labels))
        return tf_estimator.EstimatorSpec(
            mode, loss=loss, optimizer=keras.optimizers.SGD(0.1),
            scaffold=tf.compat.v1.train.Scaffold(init_fn=lambda scaffold, session: None))

    est = tf_estimator.Estimator(model_fn, str(tmp_path), progress=_quiet)
    with pytest.raises(ValueError, match=r"Scaffold\(init_fn\).*saver=tf.train.Checkpoint"):
        est.train(_regression_input_fn(), steps=1)


def test_tf1_optimizer_takes_a_keras_schedule_as_its_learning_rate(tmp_path):
    """``estflow migrate`` turns ``tf.compat.v1.train.exponential_decay(lr, global_step)`` into a
    Keras ``ExponentialDecay``; a ``tf.compat.v1.train`` optimizer given it (tensorflow/tpu's
    mnist_tpu.py) calls it at the global step, as it called TF 1's decayed rate."""
    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(2)(tf.concat([features["x1"], features["x2"]], 1))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        schedule = keras.optimizers.schedules.ExponentialDecay(
            initial_learning_rate=0.5, decay_steps=1, decay_rate=0.5)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=schedule)
        train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
        return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    est = tf_estimator.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    est.train(_train_input_fn, steps=3)
    assert est.get_variable_value("global_step") == 3


@pytest.mark.parametrize("name, keras_cell", [("BasicLSTMCell", "keras.layers.LSTMCell"),
                                              ("GRUCell", "keras.layers.GRUCell"),
                                              ("MultiRNNCell", "keras.layers.StackedRNNCells")])
def test_a_tf1_rnn_cell_is_explained_as_a_keras_cell_in_an_rnn_layer(name, keras_cell):
    """TF 1 RNN cells (eisenjulian/nlp_estimator_tutorial's LSTM section builds
    tf.nn.rnn_cell.BasicLSTMCell) fail on Keras 3 with its layer stub's error; the engine's
    explanation names a Keras cell that exists, run by keras.layers.RNN."""
    from estflow.estimator._engine import tf1

    # Keras 3's stub error for the cell (as TF 2.21 raises it; built here because a test process
    # that imported tf.Transform runs tf.keras as Keras 2, where the cells still exist)
    explained = tf1.explain(AttributeError(f"`{name}` is not available with Keras 3."))
    assert explained is not None
    assert f"tf.compat.v1.nn.rnn_cell.{name}" in str(explained)
    assert keras_cell in str(explained) and "keras.layers.RNN(" in str(explained)
    assert hasattr(keras.layers, keras_cell.rsplit(".", 1)[1])
