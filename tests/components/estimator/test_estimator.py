"""The Estimator engine on real TF training steps over tiny in-memory data.

Both model_fn styles, resume with optimizer state, restore, NaN handling, evaluation metrics,
seeds, warm start, hooks; no tf.Transform here (see test_estimator_premade / test_train).
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from estflow.estimator import NanLossError
from estflow.estimator import TrainHook
from estflow.estimator import export
from estflow.estimator import parsing_serving_input_receiver_fn
from estflow.estimator.run_config import RunConfig

CONFIG = ef.RunConfig(save_checkpoints_steps=10, save_summary_steps=10,
                      log_step_count_steps=10, steps_per_loop=5, keep_checkpoint_max=3)


def _data(n=256, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(n, 2).astype("float32")
    y = (x[:, :1] + 0.5 * x[:, 1:] > 0).astype("float32")
    return x, y


X, Y = _data()


def input_fn(batch=32):
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(
        batch, drop_remainder=True)


def whole_batch_input_fn():
    """Every step sees the same batch: training is then a pure function of state."""
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(len(X)).repeat()


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(100)


def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices({"x": X[:10]}).batch(4)


def keras_model_fn(features, labels, mode, params):
    """Estimator style: Keras layers built inside, the model_fn applies its own gradients."""
    hidden = keras.layers.Dense(8, activation="relu")
    out = keras.layers.Dense(1)
    logits = out(hidden(features["x"]))
    predictions = {"logits": logits, "probability": tf.sigmoid(logits)}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == ModeKeys.EVAL:
        accuracy = keras.metrics.BinaryAccuracy(name="accuracy")
        accuracy.update_state(labels, predictions["probability"])
        return EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    optimizer = keras.optimizers.Adam(params["learning_rate"])
    variables = hidden.trainable_variables + out.trainable_variables
    train_op = optimizer.apply_gradients(zip(tf.gradients(loss, variables), variables, strict=True))
    return EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=predictions)


def optimizer_model_fn(features, labels, mode, params, config):
    """estflow style: plain variables, the engine applies the returned optimizer."""
    assert isinstance(config, RunConfig)  # the engine's, even when given the dsl declaration
    assert config.model_dir
    w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
    b = tf.Variable(lambda: tf.zeros([1]), name="b")
    logits = tf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = keras.optimizers.Adagrad(params.get("learning_rate", 0.5))
    return EstimatorSpec(mode, loss=loss, optimizer=optimizer if mode == ModeKeys.TRAIN else None)


class Recorder(TrainHook):
    def __init__(self, stop_at=None):
        self.begin_step = None
        self.begin_values = None
        self.losses = []
        self.stop_at = stop_at

    def begin(self, global_step, variables):
        self.begin_step = global_step
        self.begin_values = {k: v.numpy().copy() for k, v in variables.items()}

    def after_loop(self, global_step, loss):
        self.losses.append((global_step, loss))
        return self.stop_at is not None and global_step >= self.stop_at


def _estimator(model_fn, path, params=None, config=CONFIG, **kw):
    return Estimator(model_fn, str(path), config, params, progress=lambda m: None, **kw)


@pytest.mark.parametrize("model_fn,params", [(keras_model_fn, {"learning_rate": 0.05}),
                                             (optimizer_model_fn, {"learning_rate": 0.5})],
                         ids=["train_op", "optimizer"])
def test_both_model_fn_styles_train_and_loss_falls(tmp_path, model_fn, params):
    est = _estimator(model_fn, tmp_path, params)
    hook = Recorder()
    est.train(input_fn, max_steps=60, hooks=[hook])
    steps = [s for s, _ in hook.losses]
    assert steps == list(range(5, 65, 5))  # one report per loop of steps_per_loop
    first, last = hook.losses[0][1], hook.losses[-1][1]
    assert last < first * 0.8
    assert est.global_step == 60
    assert os.path.basename(est.latest_checkpoint()) == "model.ckpt-60"
    assert est.evaluate(eval_input_fn)["loss"] < first


def test_evaluate_reports_metrics_and_resets_them_between_calls(tmp_path):
    est = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    est.train(input_fn, steps=40)
    first = est.evaluate(eval_input_fn)
    second = est.evaluate(eval_input_fn)
    assert set(first) == {"accuracy", "loss", "global_step"}
    assert first == second  # metric accumulators start from zero every time
    assert first["global_step"] == 40
    assert 0.7 < first["accuracy"] <= 1.0
    assert os.path.isdir(tmp_path / "eval")  # TensorBoard scalars
    names = est.get_variable_names()
    assert not [n for n in names if "accuracy" in n or "total" in n]  # metrics not saved


def test_resume_starts_at_saved_step_with_saved_variables(tmp_path):
    first = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    first.train(input_fn, max_steps=20)
    saved = {k: v.numpy().copy() for k, v in first.variables().items()}

    second = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    assert second.global_step == 20
    hook = Recorder()
    second.train(input_fn, max_steps=40, hooks=[hook])
    assert hook.begin_step == 20
    assert hook.losses[0][0] == 25
    assert set(hook.begin_values) == set(saved)
    for name, value in saved.items():
        np.testing.assert_array_equal(hook.begin_values[name], value, err_msg=name)
        if name != "global_step":
            np.testing.assert_array_equal(second.get_variable_value(name) * 0 + value, value)
    assert second.global_step == 40
    # max_steps is a total: asking again for 40 does nothing.
    again = Recorder()
    second.train(input_fn, max_steps=40, hooks=[again])
    assert again.losses == [] and second.global_step == 40


@pytest.mark.parametrize("model_fn,params", [(keras_model_fn, {"learning_rate": 0.05}),
                                             (optimizer_model_fn, {"learning_rate": 0.5})],
                         ids=["train_op", "optimizer"])
def test_resumed_training_equals_uninterrupted_training(tmp_path, model_fn, params):
    """Optimizer state (Adam/Adagrad slots, iterations) survives the restart exactly."""
    straight = _estimator(model_fn, tmp_path / "straight", params)
    straight.train(whole_batch_input_fn, max_steps=30)
    _estimator(model_fn, tmp_path / "resumed", params).train(whole_batch_input_fn, max_steps=15)
    resumed = _estimator(model_fn, tmp_path / "resumed", params)
    resumed.train(whole_batch_input_fn, max_steps=30)
    a, b = straight.variables(), resumed.variables()
    assert set(a) == set(b)
    for name in a:
        np.testing.assert_allclose(a[name].numpy(), b[name].numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_fresh_estimator_restores_and_predicts_the_same(tmp_path):
    trained = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    trained.train(input_fn, max_steps=30)
    expected = list(trained.predict(predict_input_fn))
    fresh = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    got = list(fresh.predict(predict_input_fn))
    assert len(got) == len(expected) == 10
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g["logits"], e["logits"], rtol=1e-6)
    batches = list(fresh.predict(predict_input_fn, predict_keys=["probability"],
                                 yield_single_examples=False))
    assert [b["probability"].shape for b in batches] == [(4, 1), (4, 1), (2, 1)]
    with pytest.raises(ValueError, match="nope"):
        list(fresh.predict(predict_input_fn, predict_keys=["nope"]))


def test_predict_from_an_older_checkpoint_then_back_to_latest(tmp_path):
    est = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    est.train(input_fn, max_steps=30)
    older = str(tmp_path / "model.ckpt-10")
    old = next(est.predict(predict_input_fn, checkpoint_path=older))["logits"]
    latest = next(est.predict(predict_input_fn))["logits"]
    assert not np.allclose(old, latest)
    assert est.evaluate(eval_input_fn, checkpoint_path=older)["global_step"] == 10
    assert next(est.predict(predict_input_fn))["logits"] == pytest.approx(latest)


def nan_input_fn(nan_batch=8):
    """Batch ``nan_batch`` (1-based step number) has NaN features."""
    x = np.tile(X[:32], (20, 1))
    x[(nan_batch - 1) * 32:nan_batch * 32] = np.nan
    y = np.tile(Y[:32], (20, 1))
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(32)


def test_nan_loss_names_the_step_and_is_not_checkpointed(tmp_path):
    config = ef.RunConfig(save_checkpoints_steps=5, steps_per_loop=5, save_summary_steps=5,
                          log_step_count_steps=5)
    est = _estimator(optimizer_model_fn, tmp_path, {"learning_rate": 0.5}, config=config)
    with pytest.raises(NanLossError, match="global step 8") as err:
        est.train(nan_input_fn, max_steps=20)
    assert err.value.step == 8
    assert os.path.basename(est.latest_checkpoint()) == "model.ckpt-5"
    for name in est.get_variable_names():
        assert np.all(np.isfinite(est.get_variable_value(name)))
    # The in-memory state rolled back to the checkpoint: training can go on from step 5.
    assert est.global_step == 5
    assert all(np.all(np.isfinite(v.numpy())) for v in est.variables().values())


def test_training_stops_when_the_input_ends(tmp_path):
    est = _estimator(optimizer_model_fn, tmp_path)
    data = lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32)  # noqa: E731
    est.train(data, steps=100)
    assert est.global_step == 8  # 256 examples / 32
    assert os.path.basename(est.latest_checkpoint()) == "model.ckpt-8"


def test_hook_can_stop_training(tmp_path):
    est = _estimator(optimizer_model_fn, tmp_path)
    est.train(input_fn, max_steps=100, hooks=[Recorder(stop_at=15)])
    assert est.global_step == 15
    assert os.path.basename(est.latest_checkpoint()) == "model.ckpt-15"


def test_checkpoints_on_cadence_keep_max_and_tensorboard_events(tmp_path):
    est = _estimator(optimizer_model_fn, tmp_path)
    lines = []
    est._progress = lines.append
    est.train(input_fn, max_steps=50)
    kept = sorted(int(p.split("-")[-1].split(".")[0]) for p in os.listdir(tmp_path)
                  if p.startswith("model.ckpt-") and p.endswith(".index"))
    assert kept == [30, 40, 50]  # keep_checkpoint_max=3 of 10, 20, ..., 50
    assert any(p.startswith("events.out.tfevents") for p in os.listdir(tmp_path))
    assert _summary_steps(tmp_path) == {tag: [10, 20, 30, 40, 50] for tag in
                                        ("loss", "global_step/sec", "examples/sec")}
    logged = [line for line in lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in logged] == [f"step {s}" for s in (10, 20, 30, 40, 50)]
    assert all("examples/s" in line and "loss" in line for line in logged)


def _summary_steps(log_dir) -> dict[str, list[int]]:
    """TensorBoard scalars in ``log_dir``'s event files: {tag: [steps]}."""
    from tensorflow.core.util import event_pb2

    steps: dict[str, list[int]] = {}
    for name in sorted(os.listdir(log_dir)):
        if not name.startswith("events.out.tfevents"):
            continue
        for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    return steps


def test_same_seed_same_initial_variables(tmp_path):
    values = []
    for name in ("a", "b"):
        est = _estimator(keras_model_fn, tmp_path / name, {"learning_rate": 0.05})
        est.train(whole_batch_input_fn, max_steps=1)
        values.append({k: v.numpy() for k, v in est.variables().items()})
    for name in values[0]:
        np.testing.assert_array_equal(values[0][name], values[1][name], err_msg=name)


def test_warm_start_copies_model_variables_only(tmp_path):
    source = _estimator(optimizer_model_fn, tmp_path / "source")
    source.train(input_fn, max_steps=20)
    warm = _estimator(optimizer_model_fn, tmp_path / "warm", warm_start_from=tmp_path / "source")
    hook = Recorder()
    warm.train(input_fn, steps=5, hooks=[hook])
    assert hook.begin_step == 0
    for name, value in source.variables().items():
        if name.startswith("store/model/"):
            np.testing.assert_array_equal(hook.begin_values[name], value.numpy())


def test_model_fn_contract_errors(tmp_path):
    def no_spec(features, labels, mode, params):
        return {"loss": 1}

    with pytest.raises(TypeError, match="must return an estflow.dsl.EstimatorSpec"):
        _estimator(no_spec, tmp_path / "a").train(input_fn, steps=1)
    with pytest.raises(ValueError, match="must include features argument"):
        Estimator(lambda feats, labels, mode: None)  # tf.estimator binds by name
    with pytest.raises(ValueError, match="does not include params argument"):
        Estimator(lambda features, labels, mode: None, params={"a": 1})

    def missing_train_op(features, labels, mode, params):
        w = tf.Variable(lambda: tf.zeros([2, 1]), name="w")
        logits = tf.matmul(features["x"], w)
        return EstimatorSpec(mode, predictions={"logits": logits},
                             loss=tf.reduce_mean(logits))

    with pytest.raises(ef.DslError, match="mode='train'"):
        _estimator(missing_train_op, tmp_path / "b").train(input_fn, steps=1)


def test_evaluate_or_predict_without_checkpoint_fails_clearly(tmp_path):
    est = _estimator(keras_model_fn, tmp_path, {"learning_rate": 0.05})
    with pytest.raises(ValueError, match="Could not find trained model"):
        est.evaluate(eval_input_fn)
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        est.train(input_fn, steps=1, max_steps=1)


def test_export_saved_model_serves_like_predict(tmp_path):
    est = _estimator(keras_model_fn, tmp_path / "model", {"learning_rate": 0.05})
    est.train(input_fn, max_steps=20)
    receiver = parsing_serving_input_receiver_fn({"x": tf.io.FixedLenFeature([2], tf.float32)})
    exported = est.export_saved_model(tmp_path / "export", receiver)
    assert isinstance(exported, bytes)  # tf.estimator's type: programs call .decode() on it
    path = exported.decode("utf-8")
    assert os.path.dirname(path) == str(tmp_path / "export")
    assert os.path.basename(path).isdigit()  # <export_dir_base>/<timestamp>
    examples = [tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
        float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in X[:10]]
    served = tf.saved_model.load(path).signatures["serving_default"](
        examples=tf.constant(examples))
    expected = np.concatenate([p["logits"][None] for p in est.predict(predict_input_fn)])
    np.testing.assert_allclose(served["logits"].numpy(), expected, rtol=1e-6)
    assert set(served) == {"logits", "probability"}


def test_a_second_estimator_on_the_same_model_dir_sees_newer_checkpoints(tmp_path):
    """As tf.estimator re-read the latest checkpoint on every call: an Estimator object that
    already evaluated once evaluates, predicts and resumes from what another writer (another
    object here; the chief of a distributed run in production) saved since."""
    writer = Estimator(keras_model_fn, str(tmp_path), CONFIG, params={"learning_rate": 0.1},
                       progress=lambda m: None)
    reader = Estimator(keras_model_fn, str(tmp_path), CONFIG, params={"learning_rate": 0.1},
                       progress=lambda m: None)
    writer.train(input_fn, max_steps=10)
    assert reader.evaluate(eval_input_fn)["global_step"] == 10
    writer.train(input_fn, max_steps=30)
    again = reader.evaluate(eval_input_fn)
    assert again["global_step"] == 30
    assert again == writer.evaluate(eval_input_fn)
    first = next(reader.predict(predict_input_fn))
    np.testing.assert_allclose(first["logits"], next(writer.predict(predict_input_fn))["logits"])
    old = os.path.join(str(tmp_path), "model.ckpt-10")
    assert reader.evaluate(eval_input_fn, checkpoint_path=old)["global_step"] == 10
    assert reader.evaluate(eval_input_fn)["global_step"] == 30  # back to the latest
    reader.train(input_fn, max_steps=40)  # resumes from 30, not from its stale 10
    assert reader.global_step == 40 and writer.get_variable_value("global_step") == 40


def test_the_training_loop_is_traced_once(tmp_path):
    """Variables the model_fn and the optimizer create are made eagerly by the store, so the
    loop's tf.function need not trace a second time to lift them (a full model_fn trace)."""
    est = Estimator(keras_model_fn, str(tmp_path), CONFIG, params={"learning_rate": 0.1},
                    progress=lambda m: None)
    est.train(input_fn, max_steps=20)
    assert est._trainer.loop.experimental_get_tracing_count() == 1
    est.train(input_fn, max_steps=40)  # a new input, same element spec: no retrace
    assert est._trainer.loop.experimental_get_tracing_count() == 1


def test_the_training_loop_is_traced_once_with_engine_applied_optimizer_slots(tmp_path):
    from estflow.estimator import DNNClassifier
    from estflow.estimator import feature_column as fc

    est = DNNClassifier([4], [fc.numeric_column("x", shape=(2,))], model_dir=str(tmp_path),
                        config=RunConfig(steps_per_loop=5, save_checkpoints_steps=None,
                                         save_checkpoints_secs=None), progress=lambda m: None)
    est.train(input_fn, max_steps=10)
    assert est._trainer.loop.experimental_get_tracing_count() == 1
    assert est.get_variable_value("global_step") == 10


def _export_outputs_model_fn(features, labels, mode, params):
    """tf.estimator style: the PREDICT spec names its export signatures."""
    from estflow.estimator import export

    logits = keras.layers.Dense(1)(features["x"])
    probability = tf.sigmoid(logits)
    if mode == ModeKeys.PREDICT:
        kind = params["kind"]
        outputs = ({"serving_default": export.PredictOutput({"p": probability}),
                    "logits": export.PredictOutput(logits)} if kind == "predict"
                   else {"serving_default": "not an output"})
        return EstimatorSpec(mode, predictions={"probability": probability, "logits": logits},
                             export_outputs=outputs)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.1))


def test_export_outputs_of_a_custom_model_fn_name_the_signatures(tmp_path):
    est = Estimator(_export_outputs_model_fn, str(tmp_path / "m"), CONFIG,
                    params={"kind": "predict"}, progress=lambda m: None)
    est.train(input_fn, max_steps=5)
    path = est.export_saved_model(str(tmp_path / "export"), fx_receiver_fn)
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {"serving_default", "logits"}
    examples = _examples(X[:4])
    served = loaded.signatures["serving_default"](examples=examples)
    assert set(served) == {"p"}  # only what the PredictOutput names
    logits = loaded.signatures["logits"](examples=examples)["output"].numpy()  # 2.15's name
    np.testing.assert_allclose(served["p"].numpy(), 1 / (1 + np.exp(-logits)), rtol=1e-5)
    bad = Estimator(_export_outputs_model_fn, str(tmp_path / "m"), CONFIG,
                    params={"kind": "bad"}, progress=lambda m: None)
    with pytest.raises(TypeError, match=r"export_outputs values.*'serving_default': 'str'"):
        bad.export_saved_model(str(tmp_path / "bad"), fx_receiver_fn)


def _single_tensor_model_fn(features, labels, mode, params):
    """``predictions`` one tensor; ``export_outputs`` as ``params["export"]`` says."""
    from estflow.estimator import export

    logits = keras.layers.Dense(1)(features["x"])
    if mode == ModeKeys.PREDICT:
        outputs = {"none": None,
                   "one, another key": {"scores": export.PredictOutput(logits)},
                   "two, no default": {"a": export.PredictOutput(logits),
                                       "b": export.PredictOutput({"l": logits})}}
        return EstimatorSpec(mode, predictions=logits,
                             export_outputs=outputs[params["export"]])
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    return EstimatorSpec(mode, loss=loss, optimizer=keras.optimizers.SGD(0.1))


def test_signature_names_of_single_tensor_predictions_and_default_outputs(tmp_path):
    """tf.estimator 2.15's names (tests/compat/test_surface.py checks them against its record):
    a lone tensor is served as ``output``; one ``export_outputs`` entry under another key is
    ``serving_default`` too; several with none named so are refused."""
    est = Estimator(_single_tensor_model_fn, str(tmp_path / "m"), CONFIG,
                    params={"export": "none"}, progress=lambda m: None)
    est.train(input_fn, max_steps=5)
    path = est.export_saved_model(str(tmp_path / "export"), fx_receiver_fn)
    served = tf.saved_model.load(path).signatures["serving_default"](examples=_examples(X[:4]))
    assert set(served) == {"output"}
    expected = [p for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"x": X[:4]}).batch(4))]
    np.testing.assert_allclose(served["output"].numpy(), np.stack(expected), rtol=1e-5)
    other = Estimator(_single_tensor_model_fn, str(tmp_path / "m"), CONFIG,
                      params={"export": "one, another key"}, progress=lambda m: None)
    loaded = tf.saved_model.load(other.export_saved_model(str(tmp_path / "e2"), fx_receiver_fn))
    assert set(loaded.signatures) == {"serving_default", "scores"}
    assert set(loaded.signatures["serving_default"](examples=_examples(X[:4]))) == {"output"}
    two = Estimator(_single_tensor_model_fn, str(tmp_path / "m"), CONFIG,
                    params={"export": "two, no default"}, progress=lambda m: None)
    with pytest.raises(ValueError, match=r"none of them is specified as the default.*\['a', "
                                         r"'b'\]"):
        two.export_saved_model(str(tmp_path / "e3"), fx_receiver_fn)


def fx_receiver_fn():
    return parsing_serving_input_receiver_fn({"x": tf.io.FixedLenFeature([2], tf.float32)})()


def _examples(rows):
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=list(map(float, r))))}))
        .SerializeToString() for r in rows])


# -- which trace creates the model (issue 12: training never traces PREDICT) ----------------
def _train_only_first(modes):
    """TRAIN creates a variable before the model's (a Keras Dropout's seed state, built in
    TRAIN only) and a Keras optimizer inside the model_fn: a PREDICT or EVAL trace asks for
    the model's variables only, in another order of positions."""
    return lambda features, labels, mode: _train_only_first_model_fn(features, labels, mode,
                                                                     modes)


def _train_only_first_model_fn(features, labels, mode, modes):
    modes.append(mode)
    x = features["x"]
    if mode == ModeKeys.TRAIN:
        x = keras.layers.Dropout(0.1, seed=1)(x, training=True)
    hidden = keras.layers.Dense(4, activation="relu")
    out = keras.layers.Dense(1)
    logits = out(hidden(x))
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == ModeKeys.EVAL:
        return EstimatorSpec(mode, loss=loss)
    optimizer = keras.optimizers.Adam(0.05)
    variables = hidden.trainable_variables + out.trainable_variables
    train_op = optimizer.apply_gradients(zip(tf.gradients(loss, variables), variables,
                                             strict=True))
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_the_first_trace_creates_the_model_and_checkpoint_keys_do_not_depend_on_it(tmp_path):
    trained_modes = []
    est = _estimator(_train_only_first(trained_modes), tmp_path / "m")
    est.train(input_fn, steps=20)
    assert set(trained_modes) == {ModeKeys.TRAIN}  # no PREDICT trace to train
    names = est.get_variable_names()
    model = sorted(n for n in names if n.startswith("store/model/"))
    # the seed state (TRAIN only) is a model position; the optimizer's state is not the model
    assert [n.rsplit("_", 1)[-1] for n in model] == ["state", "kernel", "bias", "kernel", "bias"]
    assert sum(n.startswith("store/train/") for n in names) == 2 + 2 * 4  # iteration, lr, slots
    expected = [p["logits"] for p in est.predict(predict_input_fn)]
    evaluated = est.evaluate(eval_input_fn)

    # new processes start with predict, evaluate or an export: the first trace takes its keys
    # from the checkpoint, so every variable is restored
    fresh_ones = []
    for first in ("predict", "evaluate", "export"):
        modes = []
        fresh = _estimator(_train_only_first(modes), tmp_path / "m")
        fresh_ones.append(fresh)
        if first == "predict":
            got = [p["logits"] for p in fresh.predict(predict_input_fn)]
            np.testing.assert_allclose(got, expected, rtol=1e-6)
        elif first == "evaluate":
            assert fresh.evaluate(eval_input_fn)["loss"] == pytest.approx(evaluated["loss"])
        else:
            export = fresh.export_saved_model(tmp_path / f"export_{first}", fx_receiver_fn)
            served = tf.saved_model.load(export).signatures["serving_default"](
                examples=_examples(X[:10]))["logits"].numpy()
            np.testing.assert_allclose(served, np.stack(expected), rtol=1e-5, atol=1e-6)
        assert ModeKeys.TRAIN not in modes
    # ... and their training goes on from the latest checkpoint, with the same keys
    for i, fresh in enumerate(fresh_ones):
        fresh.train(input_fn, steps=5)
        assert fresh.get_variable_names() == names
        assert fresh.global_step == 20 + 5 * (i + 1)


def test_a_failed_first_trace_leaves_no_variables_behind(tmp_path):
    calls = []

    def model_fn(features, labels, mode, params, config):
        calls.append(mode)
        spec = optimizer_model_fn(features, labels, mode, params, config)
        if len(calls) == 1:
            raise RuntimeError("the first call fails after creating the model's variables")
        return spec

    est = _estimator(model_fn, tmp_path / "a", {"learning_rate": 0.5})
    with pytest.raises(RuntimeError, match="first call fails"):
        est.train(input_fn, steps=3)
    est.train(input_fn, steps=3)
    clean = _estimator(optimizer_model_fn, tmp_path / "b", {"learning_rate": 0.5})
    clean.train(input_fn, steps=3)
    assert est.get_variable_names() == clean.get_variable_names()
    assert sorted(est.variables()) == sorted(clean.variables())


def test_input_fn_arguments_are_passed_by_name_as_tf_estimator_did(tmp_path):
    """``input_fn(mode, params, config, input_context=None)``: mode per call; params, config;
    input_context only under a distribution strategy (none here: the default stays)."""
    seen = []

    def any_input_fn(mode, params, config, input_context="default"):
        seen.append((mode, params["learning_rate"], config.model_dir, input_context))
        if mode == ModeKeys.PREDICT:
            return predict_input_fn()
        return input_fn() if mode == ModeKeys.TRAIN else eval_input_fn()

    est = _estimator(optimizer_model_fn, tmp_path, {"learning_rate": 0.5})
    est.train(any_input_fn, steps=2)
    est.evaluate(any_input_fn)
    list(est.predict(any_input_fn))
    assert seen == [(mode, 0.5, str(tmp_path), "default")
                    for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)]


def test_features_without_a_batch_dimension_train_and_export(tmp_path):
    """The SavedModel migration guide: ``Dataset.from_tensors({'input': 3.})`` (one example
    per step, no batch dimension) and a raw receiver from a scalar, as tf.estimator took."""

    def model_fn(features, labels, mode):
        output = features["input"] + 2
        step = tf.compat.v1.train.get_global_step()
        return EstimatorSpec(mode, predictions=output, train_op=step.assign_add(1),
                             loss=tf.constant(0.), export_outputs={
                                 "serving_default": export.PredictOutput({"output": output})})

    est = Estimator(model_fn, str(tmp_path / "m"), progress=lambda m: None)
    est.train(lambda: tf.data.Dataset.from_tensors({"input": 3.}), steps=1)
    assert est.global_step == 1
    path = est.export_saved_model(
        tmp_path / "export", export.build_raw_serving_input_receiver_fn(
            {"input": tf.constant(3.)}))
    serve = tf.saved_model.load(path).signatures["serving_default"]
    assert serve.structured_input_signature[1]["input"].shape.as_list() == [None]
    np.testing.assert_allclose(serve(input=tf.constant([1., 5.]))["output"], [3., 7.])
