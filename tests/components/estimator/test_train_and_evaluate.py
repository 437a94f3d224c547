"""train_and_evaluate (throttled evaluations after checkpoints, exporters, final evaluation),
TrainSpec/EvalSpec/RunConfig validation, checkpoint cadence and early stopping."""

import json
import os
import threading
import time

import pytest

import estflow.dsl as ef
from estflow.estimator import EvalSpec
from estflow.estimator import LatestExporter
from estflow.estimator import RunConfig
from estflow.estimator import SessionRunHook
from estflow.estimator import TrainSpec
from estflow.estimator import early_stopping
from estflow.estimator import stop_if_higher_hook
from estflow.estimator import stop_if_lower_hook
from estflow.estimator import stop_if_no_decrease_hook
from estflow.estimator import stop_if_no_increase_hook
from estflow.estimator import train_and_evaluate
from estflow.estimator._engine.reporting import write_scalars
from estflow.estimator.distribute import parse_tf_config
from estflow.estimator.hooks import SessionRunContext
from estflow.estimator.hooks import SessionRunValues
from tests.components.estimator import _hook_fixtures as fx


def evaluated_steps(est, name=None):
    return list(early_stopping.read_eval_metrics(est.eval_dir(name)))


def test_evaluates_after_each_checkpoint_and_exports(tmp_path):
    est = fx.estimator(tmp_path)
    exporter = LatestExporter("latest", fx.receiver_fn, exports_to_keep=2)
    result, exports = train_and_evaluate(
        est, TrainSpec(fx.train_input_fn, max_steps=30),
        EvalSpec(fx.eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0,
                 exporters=exporter))
    assert result["global_step"] == 30 and set(result) == {"accuracy", "loss", "global_step"}
    assert evaluated_steps(est) == [10, 20, 30]
    assert len(exports) == 1 and os.path.isdir(exports[0]) and isinstance(exports[0], bytes)
    kept = os.listdir(tmp_path / "export" / "latest")
    assert len(kept) == 2 and os.path.basename(os.fsdecode(exports[0])) in kept


def test_throttle_and_start_delay_skip_intermediate_evaluations(tmp_path):
    throttled = fx.estimator(tmp_path / "throttled")
    train_and_evaluate(throttled, TrainSpec(fx.train_input_fn, max_steps=30),
                       EvalSpec(fx.eval_input_fn, name="holdout", start_delay_secs=0,
                                throttle_secs=600))
    assert evaluated_steps(throttled, "holdout") == [10, 30]  # first, then the final one
    delayed = fx.estimator(tmp_path / "delayed")
    result, exports = train_and_evaluate(delayed, TrainSpec(fx.train_input_fn, max_steps=30),
                                         EvalSpec(fx.eval_input_fn, start_delay_secs=600))
    assert evaluated_steps(delayed) == [30] and result["global_step"] == 30
    assert exports == []


def test_already_trained_model_is_still_evaluated(tmp_path):
    est = fx.estimator(tmp_path)
    est.train(fx.train_input_fn, max_steps=20)
    result, _ = train_and_evaluate(est, TrainSpec(fx.train_input_fn, max_steps=20),
                                   EvalSpec(fx.eval_input_fn))
    assert result["global_step"] == 20


def test_train_hooks_and_saving_listeners_from_the_spec_run(tmp_path):
    class Count(SessionRunHook):
        loops = 0

        def after_run(self, run_context, run_values):
            Count.loops += 1

    est = fx.estimator(tmp_path)
    train_and_evaluate(est, TrainSpec(fx.train_input_fn, max_steps=20, hooks=[Count()]),
                       EvalSpec(fx.eval_input_fn, throttle_secs=0, start_delay_secs=0))
    assert Count.loops == 4


def test_early_stopping_inside_train_and_evaluate(tmp_path):
    est = fx.estimator(tmp_path)
    hook = stop_if_higher_hook(est, "accuracy", 0.5, run_every_secs=None, run_every_steps=1)
    result, _ = train_and_evaluate(est, TrainSpec(fx.train_input_fn, max_steps=200,
                                                  hooks=[hook]),
                                   EvalSpec(fx.eval_input_fn, throttle_secs=0,
                                            start_delay_secs=0))
    # Evaluated at the step-10 checkpoint; the hook sees it after the next loop and stops.
    assert result["global_step"] == 15
    assert evaluated_steps(est) == [10, 15]


def _check(hook, step=100):
    context = SessionRunContext(None, None)
    hook.begin()
    hook.after_run(context, SessionRunValues(None, step, 1))
    return context.stop_requested


@pytest.mark.parametrize("losses,max_steps,stop", [
    ([0.5, 0.4, 0.45, 0.46, 0.47], 30, True),   # best at 20, no decrease through 50
    ([0.5, 0.4, 0.45, 0.46, 0.47], 40, False),
    ([0.5, 0.4, 0.3, 0.2, 0.1], 10, False),
])
def test_stop_if_no_decrease_reads_the_eval_dir(tmp_path, losses, max_steps, stop):
    est = fx.estimator(tmp_path)
    for i, loss in enumerate(losses):
        write_scalars(est.eval_dir(), 10 * (i + 1), {"loss": loss, "accuracy": 1 - loss})
    hook = stop_if_no_decrease_hook(est, "loss", max_steps, run_every_secs=60)
    assert _check(hook) is stop
    increase = stop_if_no_increase_hook(est, "accuracy", max_steps, run_every_secs=60)
    assert _check(increase) is stop


def test_threshold_hooks_min_steps_and_missing_metric(tmp_path):
    est = fx.estimator(tmp_path)
    for step, loss in ((10, 0.6), (20, 0.3)):
        write_scalars(est.eval_dir(), step, {"loss": loss})
    assert _check(stop_if_lower_hook(est, "loss", 0.4))
    assert not _check(stop_if_lower_hook(est, "loss", 0.4, min_steps=30))
    assert not _check(stop_if_higher_hook(est, "loss", 0.7))
    with pytest.raises(ValueError, match="'auc'.*has \\['loss'\\]"):
        _check(stop_if_higher_hook(est, "auc", 0.7))
    with pytest.raises(ValueError, match="exactly one of run_every_secs and run_every_steps"):
        stop_if_lower_hook(est, "loss", 0.4, run_every_secs=None)


def test_train_spec_takes_a_float_max_steps_as_tf_estimator_did():
    # Trainers compute it by division ((examples * epochs) / batch_size); tf.estimator trained
    # until the global step reached it, so a fraction rounds up.
    assert TrainSpec(fx.train_input_fn, max_steps=24000.0).max_steps == 24000
    assert TrainSpec(fx.train_input_fn, max_steps=120.5).max_steps == 121
    with pytest.raises(ValueError, match="max_steps > 0"):
        TrainSpec(fx.train_input_fn, max_steps=True)


def test_spec_validation_errors(tmp_path):
    with pytest.raises(ValueError, match="max_steps > 0"):
        TrainSpec(fx.train_input_fn, max_steps=0)
    with pytest.raises(TypeError, match="input_fn to be callable"):
        TrainSpec("not a function")
    with pytest.raises(ValueError, match="steps > 0"):
        EvalSpec(fx.eval_input_fn, steps=0)
    with pytest.raises(ValueError, match="throttle_secs >= 0"):
        EvalSpec(fx.eval_input_fn, throttle_secs=-1)
    with pytest.raises(ValueError, match="unique names"):
        EvalSpec(fx.eval_input_fn, exporters=[LatestExporter("a", fx.receiver_fn),
                                              LatestExporter("a", fx.receiver_fn)])
    with pytest.raises(TypeError, match="eval_spec to be an EvalSpec"):
        train_and_evaluate(fx.estimator(tmp_path), TrainSpec(fx.train_input_fn), None)


def test_run_config_checkpoint_cadence_fields():
    assert RunConfig().save_checkpoints_secs == 600
    assert RunConfig(save_checkpoints_steps=5).save_checkpoints_secs is None
    with pytest.raises(ValueError, match="mutually exclusive.*save_checkpoints_steps=5, "
                                         "save_checkpoints_secs=60"):
        RunConfig(save_checkpoints_steps=5, save_checkpoints_secs=60)
    assert RunConfig(save_checkpoints_steps=5).replace(
        save_checkpoints_secs=30).save_checkpoints_steps is None
    with pytest.raises(ValueError, match="steps_per_loop"):
        RunConfig(steps_per_loop=0)
    declared = ef.RunConfig(save_checkpoints_steps=7, steps_per_loop=3, tf_random_seed=1,
                            eval_distribute="mirrored")
    engine = RunConfig.from_dsl(declared)
    assert (engine.save_checkpoints_steps, engine.save_checkpoints_secs,
            engine.steps_per_loop, engine.tf_random_seed,
            engine.eval_distribute) == (7, None, 3, 1, "mirrored")
    assert engine.is_chief and engine.task_type == "worker" and engine.num_ps_replicas == 0


def test_estimator_config_model_dir_and_secs_cadence(tmp_path):
    config = RunConfig(model_dir=str(tmp_path / "a"), save_checkpoints_secs=1e-6,
                       steps_per_loop=4, keep_checkpoint_max=None)
    est = fx.estimator(None, config=config)
    assert est.model_dir == str(tmp_path / "a") and est.config.model_dir == est.model_dir
    with pytest.raises(ValueError, match="different values"):
        fx.estimator(tmp_path / "b", config=config)

    class Slow(SessionRunHook):
        def after_run(self, run_context, run_values):
            time.sleep(0.001)

    est.train(fx.train_input_fn, hooks=[Slow()], max_steps=12)
    assert fx.checkpoint_steps(est.model_dir) == [4, 8, 12]  # every loop boundary
    both_none = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None,
                          steps_per_loop=4)
    final_only = fx.estimator(tmp_path / "c", config=both_none)
    final_only.train(fx.train_input_fn, max_steps=12)
    assert fx.checkpoint_steps(tmp_path / "c") == [12]


def _cluster(task_type):
    return parse_tf_config(json.dumps({
        "cluster": {"chief": ["localhost:1"], "evaluator": ["localhost:2"]},
        "task": {"type": task_type, "index": 0}}))


def test_distributed_roles_chief_trains_and_the_evaluator_task_evaluates(tmp_path):
    """TF_CONFIG with an evaluator task: the chief only trains; the evaluator (here a thread
    of this process, sharing model_dir as pods share a bucket; no server is needed, it only
    reads checkpoints) evaluates new checkpoints and exports until max_steps."""
    base = RunConfig(save_checkpoints_steps=10, save_summary_steps=10, steps_per_loop=5)
    chief = fx.estimator(tmp_path, config=base.replace(save_checkpoints_steps=10,
                                                       cluster=_cluster("chief")))
    evaluator = fx.estimator(tmp_path, config=base.replace(save_checkpoints_steps=10,
                                                           cluster=_cluster("evaluator")))
    eval_spec = EvalSpec(fx.eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0,
                         exporters=LatestExporter("latest", fx.receiver_fn))
    train_spec = TrainSpec(fx.train_input_fn, max_steps=30)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(
        result=train_and_evaluate(evaluator, train_spec, eval_spec)), daemon=True)
    thread.start()
    assert train_and_evaluate(chief, train_spec, eval_spec) == (None, [])
    thread.join(timeout=180)
    assert not thread.is_alive(), "the evaluator did not stop at max_steps"
    result, exports = out["result"]
    assert result["global_step"] == 30
    assert evaluated_steps(evaluator)[-1] == 30
    assert len(exports) == 1 and os.path.isdir(exports[0])
