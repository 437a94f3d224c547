"""The train step evaluates while it trains (train_and_evaluate with the declared EvalSpec):
eval events beside the train events, throttling by start_delay_secs/throttle_secs, progress
lines and train.json rows per evaluation."""

import json
import shutil
from pathlib import Path

import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components.train import __main__ as train
from estflow.components.train import evaluation
from estflow.dsl.contracts import Files
from tests.components import _train_fixtures as fx


@pytest.fixture(scope="session")
def transformed_dir(tmp_path_factory):
    return fx.transformed(tmp_path_factory)


def scalars(folder: Path) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of the scalar summaries in a directory's own event files."""
    found: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("events.out.tfevents*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = (value.simple_value if value.HasField("simple_value")
                          else float(tf.make_ndarray(value.tensor)))
                found.setdefault(value.tag, {})[event.step] = number
    return found


def _run(transformed_dir, out, **eval_fields):
    pipeline = fx.pipeline(eval=ef.EvalSpec(**eval_fields),
                           run_config=ef.RunConfig(save_checkpoints_steps=20,
                                                   save_summary_steps=10,
                                                   log_step_count_steps=20, steps_per_loop=10))
    lines = []
    result = train.run(pipeline, transformed_dir, out, progress=lines.append)
    return result, lines


def test_every_checkpoint_is_evaluated_without_throttle_and_events_sit_beside_train(
        transformed_dir, tmp_path):
    result, lines = _run(transformed_dir, tmp_path, start_delay_secs=0, throttle_secs=0)
    checkpoints = tmp_path / Files.CHECKPOINTS
    evaluated = scalars(checkpoints / "eval")
    assert sorted(evaluated["loss"]) == [20, 40, 60]
    assert all(v > 0 for v in evaluated["loss"].values())
    assert "accuracy" in evaluated and "auc" in evaluated
    trained = scalars(checkpoints)  # training's own events, the directory TensorBoard reads
    assert "loss" in trained and max(trained["loss"]) >= 50
    shown = [line for line in lines if line.startswith("evaluation at step")]
    assert [line.split(":")[0] for line in shown] == [
        "evaluation at step 20", "evaluation at step 40", "evaluation at step 60"]
    assert "average_loss=" in shown[0] and "auc=" in shown[0] and shown[-1].endswith("(final)")
    assert " loss=" not in shown[0]  # tf.estimator's mean of batch losses: train.json, TensorBoard
    written = json.loads((tmp_path / Files.TRAIN_RESULT).read_text())
    assert [row["step"] for row in written["evaluations"]] == [20, 40, 60]
    assert written["evaluations"][-1]["metrics"]["loss"] == pytest.approx(
        evaluated["loss"][60], rel=1e-5)
    # train.json's paths are relative to the model artifact (it moves: a cache entry, a bucket)
    assert written["eval_dir"] == f"{Files.CHECKPOINTS}/eval"
    assert (tmp_path / f"{written['checkpoint']}.index").is_file()
    assert written["eval_seconds"] > 0 and result["global_step"] == 60


def test_a_long_start_delay_evaluates_only_the_final_checkpoint(transformed_dir, tmp_path):
    result, lines = _run(transformed_dir, tmp_path, start_delay_secs=3600, throttle_secs=0)
    assert sorted(scalars(tmp_path / Files.CHECKPOINTS / "eval")["loss"]) == [60]
    assert [row["step"] for row in result["evaluations"]] == [60]
    assert sum(line.startswith("evaluation at step") for line in lines) == 1


def test_a_named_evaluation_writes_to_eval_name(transformed_dir, tmp_path):
    result, _ = _run(transformed_dir, tmp_path, name="holdout")
    checkpoints = tmp_path / Files.CHECKPOINTS
    assert sorted(scalars(checkpoints / "eval_holdout")["loss"]) == [60]  # defaults: final only
    assert not (checkpoints / "eval").exists()
    assert result["eval_dir"] == str(checkpoints / "eval_holdout")


def test_without_an_eval_split_training_still_runs(transformed_dir, tmp_path):
    copy = tmp_path / "transformed"
    for item in Path(transformed_dir).iterdir():
        if item.name != Files.TRANSFORMED_EVAL:
            target = copy / item.name
            if item.is_dir():
                shutil.copytree(item, target)
            else:
                copy.mkdir(parents=True, exist_ok=True)
                target.write_bytes(item.read_bytes())
    lines = []
    result = train.run(fx.pipeline(), copy, tmp_path / "model", progress=lines.append)
    assert result["global_step"] == 60 and result["evaluations"] == []
    assert any("no eval split" in line for line in lines)


def test_the_evaluation_line_shows_average_loss_else_the_model_fns_loss():
    """The line shows what the evaluate step and thresholds call ``average_loss`` (the mean over
    the examples), not tf.estimator's ``loss`` (the mean of batch losses), unless the model_fn
    reports no ``average_loss``."""
    metrics = {"loss": 0.4801, "average_loss": 0.2225, "accuracy": 0.9589, "global_step": 1000}
    assert evaluation.shown(metrics) == "average_loss=0.2225, accuracy=0.9589"
    assert evaluation.shown({"loss": 0.4801, "rmse": 1.5}) == "loss=0.4801, rmse=1.5"
    assert evaluation.shown({"loss": 0.4801}) == "loss=0.4801"
