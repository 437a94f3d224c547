"""Hooks on the engine's loops: call order and loop boundaries, fetches (loss, variables,
model_fn tensors, callables), the built-in hooks, saving listeners, spec hooks, evaluate and
predict hooks. Real training steps on tiny in-memory data."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.estimator import CheckpointSaverListener
from estflow.estimator import EstimatorSpec
from estflow.estimator import LoggingTensorHook
from estflow.estimator import NanLossError
from estflow.estimator import NanTensorHook
from estflow.estimator import SessionRunArgs
from estflow.estimator import SessionRunHook
from estflow.estimator import StepCounterHook
from estflow.estimator import StopAtStepHook
from estflow.estimator._engine.reporting import read_scalars
from tests.components.estimator import _hook_fixtures as fx


class Recorder(SessionRunHook):
    """Records every call; fetches ``fetches`` before each loop."""

    def __init__(self, fetches=None, every_step=False, stop_at=None):
        self.fetches = fetches
        self.every_step = every_step
        self.stop_at = stop_at
        self.calls = []
        self.values = []

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append(("session", session.global_step))

    def before_run(self, run_context):
        self.calls.append("before")
        return SessionRunArgs(self.fetches) if self.fetches is not None else None

    def after_run(self, run_context, run_values):
        self.calls.append(("after", run_values.global_step, run_values.steps))
        self.values.append(run_values.results)
        if self.stop_at is not None and run_values.global_step >= self.stop_at:
            run_context.request_stop()

    def end(self, session):
        self.calls.append(("end", session.global_step))

    def next_boundary(self, global_step):
        return global_step + 1 if self.every_step else None

    def boundaries(self):
        return [c[1] for c in self.calls if isinstance(c, tuple) and c[0] == "after"]


def test_hooks_run_at_loop_boundaries_cut_at_checkpoints_and_target(tmp_path):
    hook = Recorder()
    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, hooks=[hook], max_steps=23)
    assert hook.calls[:2] == ["begin", ("session", 0)]
    assert hook.boundaries() == [5, 10, 15, 20, 23]  # steps_per_loop=5, target 23
    assert [c[2] for c in hook.calls if c[0] == "after"] == [5, 5, 5, 5, 3]
    assert hook.calls[-1] == ("end", 23)
    assert fx.checkpoint_steps(tmp_path) == [10, 20, 23]
    assert est._trainer.fetch_loop.experimental_get_tracing_count() == 0  # fast path only


def test_fetches_loss_variables_model_fn_tensors_and_callables(tmp_path):
    est = fx.estimator(tmp_path)
    hook = Recorder({"loss": "loss", "double": "double_loss", "logits": "logits",
                     "step": "global_step", "w": "store/model/000_w",
                     "lr": lambda: tf.constant(0.25)})
    est.train(fx.train_input_fn, hooks=[hook], max_steps=10)
    first, last = hook.values
    assert first["step"] == 5 and last["step"] == 10
    for values in hook.values:
        assert values["double"] == pytest.approx(2 * values["loss"], rel=1e-6)
        assert values["logits"].shape == (32, 1)
        assert values["lr"] == pytest.approx(0.25)
    np.testing.assert_array_equal(last["w"], est.variables()["store/model/000_w"].numpy())


def test_fetching_model_fn_tensors_trains_exactly_like_the_fast_path(tmp_path):
    plain = fx.estimator(tmp_path / "plain")
    plain.train(fx.whole_batch_input_fn, max_steps=12)
    fetching = fx.estimator(tmp_path / "fetching")
    fetching.train(fx.whole_batch_input_fn, hooks=[Recorder(["logits", "double_loss"])],
                   max_steps=12)
    for name, var in plain.variables().items():
        np.testing.assert_allclose(var.numpy(), fetching.variables()[name].numpy(), rtol=1e-6,
                                   err_msg=name)


def test_unknown_fetch_names_the_name_and_rolls_back(tmp_path):
    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, max_steps=10)
    with pytest.raises(ValueError, match="'no_such_tensor'"):
        est.train(fx.train_input_fn, hooks=[Recorder("no_such_tensor")], max_steps=20)
    assert est.global_step == 10  # nothing unsaved survives the error


def test_a_hook_needing_every_step_makes_loops_of_one(tmp_path):
    hook = Recorder("loss", every_step=True)
    fx.estimator(tmp_path).train(fx.train_input_fn, hooks=[hook], max_steps=7)
    assert hook.boundaries() == [1, 2, 3, 4, 5, 6, 7]


def test_hook_request_stop_and_saving_listener_calls(tmp_path):
    class Listener(CheckpointSaverListener):
        def __init__(self, stop_at=None):
            self.calls, self.stop_at = [], stop_at

        def begin(self):
            self.calls.append("begin")

        def before_save(self, session, global_step_value):
            self.calls.append(("before", global_step_value))

        def after_save(self, session, global_step_value):
            self.calls.append(("after", global_step_value))
            return global_step_value == self.stop_at

        def end(self, session, global_step_value):
            self.calls.append(("end", global_step_value))

    listener = Listener()
    est = fx.estimator(tmp_path / "a")
    est.train(fx.train_input_fn, hooks=[Recorder(stop_at=15)], max_steps=100,
              saving_listeners=[listener])
    assert est.global_step == 15
    assert listener.calls == ["begin", ("before", 10), ("after", 10), ("before", 15),
                              ("after", 15), ("end", 15)]
    stopper = Listener(stop_at=20)
    fx.estimator(tmp_path / "b").train(fx.train_input_fn, max_steps=100,
                                       saving_listeners=[stopper])
    assert stopper.calls[-1] == ("end", 20)
    assert fx.checkpoint_steps(tmp_path / "b") == [10, 20]


def test_logging_tensor_hook_every_n_iter_and_at_end(tmp_path, caplog):
    hook = LoggingTensorHook({"loss": "loss", "step": "global_step"}, every_n_iter=10,
                             at_end=True)
    with caplog.at_level(logging.INFO, logger="estflow.hooks"):
        fx.estimator(tmp_path).train(fx.train_input_fn, hooks=[hook], max_steps=25)
    lines = [r.getMessage() for r in caplog.records if r.name == "estflow.hooks"]
    assert [line.split("step = ")[1].split()[0] for line in lines] == ["10", "20", "25"]
    assert all(line.startswith("loss = ") for line in lines)
    custom = LoggingTensorHook(["loss"], every_n_iter=7,
                               formatter=lambda v: f"custom {v['loss']:.3f}")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="estflow.hooks"):
        fx.estimator(tmp_path / "b").train(fx.train_input_fn, hooks=[custom], max_steps=14)
    assert [r.getMessage()[:7] for r in caplog.records if r.name == "estflow.hooks"] == [
        "custom "] * 2


def test_logging_tensor_hook_validation():
    with pytest.raises(ValueError, match="every_n_iter"):
        LoggingTensorHook(["loss"])
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        LoggingTensorHook(["loss"], every_n_iter=1, every_n_secs=1)
    with pytest.raises(ValueError, match="every_n_iter > 0"):
        LoggingTensorHook(["loss"], every_n_iter=0)
    with pytest.raises(TypeError, match="dict"):
        LoggingTensorHook("loss", every_n_iter=1)


def test_stop_at_step_hook_num_steps_and_last_step(tmp_path):
    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, hooks=[StopAtStepHook(num_steps=7)])
    assert est.global_step == 7 and fx.checkpoint_steps(tmp_path) == [7]
    est.train(fx.train_input_fn, hooks=[StopAtStepHook(num_steps=7)])  # relative to start
    assert est.global_step == 14
    est.train(fx.train_input_fn, hooks=[StopAtStepHook(last_step=18)], steps=100)
    assert est.global_step == 18
    with pytest.raises(ValueError, match="exactly one of num_steps and last_step"):
        StopAtStepHook()


def nan_input_fn(nan_step=13):
    x = np.tile(fx.X[:32], (40, 1))
    x[(nan_step - 1) * 32:nan_step * 32] = np.nan
    y = np.tile(fx.Y[:32], (40, 1))
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(32)


def test_nan_tensor_hook_fails_naming_the_step_without_a_corrupt_checkpoint(tmp_path):
    est = fx.estimator(tmp_path)
    with pytest.raises(NanLossError, match="global step 13") as err:
        est.train(nan_input_fn, hooks=[NanTensorHook("loss")], max_steps=30)
    assert err.value.step == 13 and err.value.restored.endswith("model.ckpt-10")
    assert fx.checkpoint_steps(tmp_path) == [10]
    assert est.global_step == 10
    assert all(np.isfinite(v.numpy()).all() for v in est.variables().values())


def test_nan_tensor_hook_can_stop_without_failing(tmp_path, caplog):
    est = fx.estimator(tmp_path)
    with caplog.at_level(logging.WARNING, logger="estflow.hooks"):
        est.train(nan_input_fn, hooks=[NanTensorHook("loss", fail_on_nan_loss=False)],
                  max_steps=30)
    assert "global step 13" in caplog.text
    assert est.global_step == 10 and fx.checkpoint_steps(tmp_path) == [10]
    assert all(np.isfinite(est.get_variable_value(n)).all() for n in est.get_variable_names())


def test_nan_tensor_hook_on_another_tensor(tmp_path):
    est = fx.estimator(tmp_path)
    with pytest.raises(NanLossError, match="global step 5"):
        est.train(fx.train_input_fn, hooks=[NanTensorHook(lambda: np.nan)], max_steps=10)
    assert est.latest_checkpoint() is None


def test_step_counter_hook_writes_steps_per_second(tmp_path):
    out = tmp_path / "counter"
    hook = StepCounterHook(every_n_steps=10, output_dir=str(out))
    fx.estimator(tmp_path / "m").train(fx.train_input_fn, hooks=[hook], max_steps=30)
    scalars = read_scalars(str(out / f) for f in os.listdir(out))
    assert sorted(scalars) == [10, 20, 30]
    assert all(v["global_step/sec"] > 0 for v in scalars.values())


def test_spec_hooks_run_in_train_evaluate_and_predict(tmp_path):
    events = []

    class Tagged(SessionRunHook):
        def __init__(self, tag, fetch):
            self.tag, self.fetch = tag, fetch

        def before_run(self, run_context):
            return SessionRunArgs(self.fetch)

        def after_run(self, run_context, run_values):
            events.append((self.tag, np.shape(run_values.results)))

    fn = fx.make_model_fn({"train": lambda: [Tagged("train", "double_loss")],
                           "eval": lambda: [Tagged("eval", "accuracy")],
                           "predict": lambda: [Tagged("predict", "logits")]})
    est = fx.estimator(tmp_path, fn=fn)
    est.train(fx.train_input_fn, max_steps=10)
    est.evaluate(fx.eval_input_fn)
    list(est.predict(fx.predict_input_fn))
    assert [e for e in events if e[0] == "train"] == [("train", ())] * 2
    assert [e for e in events if e[0] == "eval"] == [("eval", ())] * 3  # 11 batches / 5
    assert [e for e in events if e[0] == "predict"] == [
        ("predict", (4, 1)), ("predict", (4, 1)), ("predict", (2, 1))]


def test_evaluate_and_predict_hooks_can_stop_early(tmp_path):
    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, max_steps=20)
    full = est.evaluate(fx.eval_input_fn)
    hook = Recorder({"loss": "loss", "accuracy": "accuracy", "step": "global_step"},
                    stop_at=0)
    partial = est.evaluate(fx.eval_input_fn, hooks=[hook])
    assert hook.values[0]["step"] == 20
    assert hook.values[0]["loss"] == pytest.approx(partial["loss"])
    assert partial["loss"] != pytest.approx(full["loss"])  # 5 of 11 batches
    stopper = Recorder({"logits": "logits"}, stop_at=0)
    got = list(est.predict(fx.predict_input_fn, hooks=[stopper], yield_single_examples=False))
    assert len(got) == 1 and stopper.values[0]["logits"].shape == (4, 1)


def test_tf_compat_v1_hooks_with_named_fetches_and_type_errors(tmp_path):
    class V1Hook(tf.compat.v1.train.SessionRunHook):
        losses = []

        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(["loss", "global_step"])

        def after_run(self, run_context, run_values):
            self.losses.append(run_values.results)

    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, hooks=[V1Hook()], max_steps=10)
    assert [step for _, step in V1Hook.losses] == [5, 10]
    with pytest.raises(TypeError, match=r"hooks\[0\] to be a SessionRunHook"):
        est.train(fx.train_input_fn, hooks=[object()], max_steps=20)


def test_estimator_spec_hook_fields_are_validated():
    loss = tf.constant(1.0)
    spec = EstimatorSpec("eval", loss=loss, evaluation_hooks=[StopAtStepHook(last_step=1)])
    assert isinstance(spec.evaluation_hooks, tuple) and spec.training_hooks == ()
    with pytest.raises(ef.DslError) as err:
        EstimatorSpec("eval", loss=loss, evaluation_hooks=[object()])
    assert err.value.path == "evaluation_hooks[0]" and "SessionRunHook" in str(err.value)
