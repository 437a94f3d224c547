"""Warm start from what is served (TrainSpec.warm_start): the export carries the training
checkpoint, a push publishes it with the version, and the next run's model starts from it;
without a served version (or a served checkpoint) training starts from scratch, saying so."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components import push
from estflow.components._io import model_repo
from estflow.components.train import __main__ as train
from estflow.components.train import warm_start
from estflow.components.train.inputs import read_transform
from estflow.dsl.contracts import Files
from estflow.estimator import Estimator
from estflow.estimator.run_config import RunConfig
from tests.components import _train_fixtures as fx


@pytest.fixture(scope="session")
def transformed_dir(tmp_path_factory):
    return fx.transformed(tmp_path_factory)


def _pipeline(base, warm_start=None, max_steps=60):
    return fx.pipeline(train=ef.TrainSpec(max_steps=max_steps, batch_size=16, shuffle_buffer=64,
                                          warm_start=warm_start),
                       push=ef.PushTarget(str(base), "m"))


@pytest.fixture(scope="module")
def served(transformed_dir, tmp_path_factory):
    """A first run (nothing served yet) pushed as version 1."""
    root = tmp_path_factory.mktemp("served")
    base = root / "serving"
    lines = []
    result = train.run(_pipeline(base, ef.WarmStart()), transformed_dir, root / "run1",
                       progress=lines.append)
    version = push.push_directory(root / "run1" / Files.EXPORT, base / "m", version=1)
    return base, version, result, lines


def test_first_run_trains_from_scratch_and_the_export_carries_its_checkpoint(served):
    base, version, result, lines = served
    assert any("no version is served" in line and "training from scratch" in line
               for line in lines)
    assert not any("warm-started variables" in line for line in lines)
    assert result["warm_start"] == {"version": None, "reason": "no served version"}
    carried = version / model_repo.SERVED_CHECKPOINT
    assert tf.train.latest_checkpoint(str(carried)).endswith("model.ckpt-60")
    assert (version / "saved_model.pb").exists()


def test_second_run_starts_from_the_served_checkpoint(served, transformed_dir, tmp_path):
    base, version, first, _ = served
    lines = []
    result = train.run(_pipeline(base, ef.WarmStart()), transformed_dir, tmp_path,
                       progress=lines.append)
    carried = tf.train.latest_checkpoint(str(version / model_repo.SERVED_CHECKPOINT))
    assert f"warm start: from served version 1 ({carried})" in lines
    assert f"warm-started variables from {carried}" in lines
    assert result["warm_start"] == {"version": 1, "path": str(version), "checkpoint": carried}
    assert result["global_step"] == 60  # the step counts from 0 again
    cold = train.run(_pipeline(base), transformed_dir, tmp_path / "cold")
    # the first loop's loss continues from the served model, not from an untrained one
    assert result["first_loss"] < cold["first_loss"] - 0.05
    assert abs(result["first_loss"] - first["final_loss"]) < abs(
        cold["first_loss"] - first["final_loss"])


def _initial_values(pipeline, transformed_dir, model_dir, lines):
    """The model's variables right after warm start (before any step), as train.run builds
    the Estimator."""
    _, cardinalities = read_transform(transformed_dir)
    model_fn, params = train.model_fn_of(pipeline.model, cardinalities)
    settings = warm_start.resolve(pipeline, model_dir, lines.append).settings
    est = Estimator(model_fn, model_dir, RunConfig.from_dsl(pipeline.run_config), params,
                    warm_start_from=settings, progress=lines.append)
    seen = {}

    class Snapshot(tf.compat.v1.train.SessionRunHook):
        def after_create_session(self, session, coord):
            seen.update({n: v.numpy().copy() for n, v in session.variables().items()})

    tft_output, _ = read_transform(transformed_dir)
    est.train(train.make_input_fn(str(transformed_dir / Files.TRANSFORMED_TRAIN / "*.gz"),
                                  tft_output.transformed_feature_spec(), "label", 16),
              hooks=[Snapshot()], steps=1)
    return seen


def test_initial_variables_equal_the_served_checkpoint(served, transformed_dir, tmp_path):
    base, version, _, _ = served
    carried = tf.train.latest_checkpoint(str(version / model_repo.SERVED_CHECKPOINT))
    seen = _initial_values(_pipeline(base, ef.WarmStart()), transformed_dir, tmp_path, [])
    model = [n for n in seen if n.startswith("store/model/")]
    assert len(model) >= 4
    for name in model:
        np.testing.assert_array_equal(
            seen[name], tf.train.load_variable(carried, name + "/.ATTRIBUTES/VARIABLE_VALUE"))
    cold = _initial_values(_pipeline(base), transformed_dir, tmp_path / "cold", [])
    assert not all(np.array_equal(cold[n], seen[n]) for n in model)


def test_optimizer_state_is_carried_when_declared(served, transformed_dir, tmp_path):
    base, version, _, _ = served
    carried = tf.train.latest_checkpoint(str(version / model_repo.SERVED_CHECKPOINT))
    seen = _initial_values(_pipeline(base, ef.WarmStart(optimizer_state=True)),
                           transformed_dir, tmp_path, [])
    reader = tf.train.load_checkpoint(carried)
    slots = [k for k in reader.get_variable_to_shape_map()
             if k.startswith("optimizers/") and k.endswith("VARIABLE_VALUE")
             and reader.get_tensor(k).size > 1]
    assert slots  # Adagrad accumulators of the served model
    later = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
    # accumulators only grow: one step after the warm start they are >= the served ones
    # (a cold start's are near their initial value, far below)
    for key in slots:
        assert np.all(later.get_tensor(key) >= reader.get_tensor(key) - 1e-6), key
    assert any(n.startswith("store/model/") for n in seen)


def test_a_served_version_without_a_checkpoint_trains_from_scratch(served, transformed_dir,
                                                                   tmp_path):
    _, version, _, _ = served
    base = tmp_path / "serving"
    bare = tmp_path / "bare"
    shutil.copytree(version, bare)
    shutil.rmtree(bare / model_repo.SERVED_CHECKPOINT)
    push.push_directory(bare, base / "m", version=3)
    lines = []
    result = train.run(_pipeline(base, ef.WarmStart(), max_steps=20), transformed_dir,
                       tmp_path / "model", progress=lines.append)
    assert any("served version 3" in line and "carries no training checkpoint" in line
               for line in lines)
    assert result["warm_start"]["reason"] == "no checkpoint in the served version"
    assert not any("warm-started variables" in line for line in lines)


def test_a_model_dir_with_its_own_checkpoint_resumes_instead(served, transformed_dir,
                                                             tmp_path):
    base, _, _, _ = served
    train.run(_pipeline(base, ef.WarmStart(), max_steps=20), transformed_dir, tmp_path)
    lines = []
    result = train.run(_pipeline(base, ef.WarmStart(), max_steps=40), transformed_dir,
                       tmp_path, progress=lines.append)
    assert any("has a checkpoint of its own" in line for line in lines)
    assert result["warm_start"]["reason"] == "resumed from the model_dir"
    assert json.loads((tmp_path / Files.TRAIN_RESULT).read_text())["global_step"] == 40
