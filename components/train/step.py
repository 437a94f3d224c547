"""The train step in one process: train the model to ``train.max_steps`` (evaluating on the
eval split meanwhile), export the serving model, write ``train.json`` (:func:`run`); and the
model_fn a declaration trains with (:func:`model_fn_of`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from estflow.components._io import leftovers
from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import entry
from estflow.components.train import evaluation
from estflow.components.train import warm_start
from estflow.components.train.export import export_serving_model
from estflow.components.train.inputs import make_input_fn
from estflow.components.train.inputs import read_transform
from estflow.dsl import models as m
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import Estimator
from estflow.estimator import TrainHook
from estflow.estimator import distribute
from estflow.estimator import model_fn_for
from estflow.estimator import training
from estflow.estimator.run_config import RunConfig

__all__ = ["run", "model_fn_of"]


def model_fn_of(model, cardinalities: dict[str, int]) -> tuple[Callable, dict]:
    """(model_fn, params): a premade declaration's model_fn, or a CustomModel's resolved one."""
    if isinstance(model, m.CustomModel):
        return model.checked_model_fn(entry.resolve(model.model_fn)), dict(model.params)
    return model_fn_for(model, cardinalities), {}


class _LastLoss(TrainHook):
    """The loss after the first and the last training loop (a warm start shows in the first:
    near the served model's loss rather than an untrained model's)."""

    def __init__(self) -> None:
        self.loss: float | None = None
        self.first_loss: float | None = None
        self.start: int | None = None

    def begin(self, global_step, variables) -> None:
        self.start = global_step

    def after_loop(self, global_step, loss) -> None:
        if self.first_loss is None:
            self.first_loss = loss
        self.loss = loss


def run(pipeline: Pipeline, transformed_dir: str | os.PathLike, model_dir: str | os.PathLike,
        progress: Callable[[str], None] | None = None, *,
        cluster: distribute.ClusterSpec | None = None,
        strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Train ``pipeline.model`` to ``pipeline.train.max_steps`` and export it.

    Args:
        cluster: this process's task (parsed from TF_CONFIG by :func:`main`); None: one process.
        strategy: the strategy to train under (default: ``run_config.train_distribute``'s).
            In a multi-worker run every worker calls this; only the chief writes
            ``model_dir`` (other workers write their checkpoints and export to a scratch
            directory that is deleted).

    Returns:
        The summary also written to ``OUT_DIR/train.json`` (by the chief).
    """
    progress = progress or entry.Progress("train")
    transformed, out = Path(transformed_dir), Path(model_dir)
    for leftover in leftovers.clean_temporary_exports(out):  # a killed run's, when resumed
        progress(f"removed {leftover.name}, a temporary export a stopped run left")
    tft_output, cardinalities = read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    # distribution: the engine config carries the strategy object and the cluster.
    changes = {"cluster": cluster, **({"train_distribute": strategy} if strategy else {})}
    config = RunConfig.from_dsl(pipeline.run_config, **changes)
    warm = warm_start.resolve(pipeline, out / Files.CHECKPOINTS, progress)
    estimator = Estimator(model_fn, out / Files.CHECKPOINTS, config, params,
                          warm_start_from=warm.settings, progress=progress)
    if not config.is_chief:  # distribution: every worker exports; a non-chief's is discarded
        scratch = Path(tempfile.mkdtemp(prefix="estflow-train-"))
        try:
            return _train_and_export(pipeline, estimator, transformed, tft_output, scratch,
                                     progress, chief=False)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return _train_and_export(pipeline, estimator, transformed, tft_output, out, progress,
                             warm=warm)


def _train_and_export(pipeline: Pipeline, estimator: Estimator, transformed: Path, tft_output,
                      out: Path, progress: Callable[[str], None], chief: bool = True,
                      warm: warm_start.WarmStart | None = None) -> dict:
    """Train (evaluating on the eval split meanwhile), export to ``out/export``, summarise
    (in ``out/train.json`` on the chief)."""
    spec = pipeline.train
    input_fn = make_input_fn(str(transformed / Files.TRANSFORMED_TRAIN / "*.tfrecord.gz"),
                             tft_output.transformed_feature_spec(), pipeline.label.name,
                             spec.batch_size, shuffle_buffer=spec.shuffle_buffer,
                             seed=pipeline.run_config.tf_random_seed)
    hook = _LastLoss()
    evaluations = evaluation.EvalRecorder(progress)
    eval_spec = evaluation.eval_spec(pipeline, transformed, tft_output, evaluations, progress)
    start = time.monotonic()
    if eval_spec is None:
        estimator.train(input_fn, max_steps=spec.max_steps, hooks=[hook])
    else:
        training.train_and_evaluate(
            estimator, training.TrainSpec(input_fn, max_steps=spec.max_steps, hooks=(hook,)),
            eval_spec)
    train_seconds = time.monotonic() - start - evaluations.seconds
    step = estimator.global_step
    export_dir = export_serving_model(estimator, tft_output, pipeline, out / Files.EXPORT)
    if not chief:
        progress(f"trained to step {step}; the chief writes the model (non-chief worker)")
        return {"global_step": step, "final_loss": hook.loss}
    progress(f"exported the serving model to {export_dir}")
    examples = (step - hook.start) * spec.batch_size if hook.start is not None else 0
    result = {"global_step": step, "final_loss": hook.loss, "first_loss": hook.first_loss,
              "examples": examples,
              "examples_per_sec": round(examples / train_seconds, 1) if examples else None,
              "train_seconds": round(train_seconds, 3),
              "eval_seconds": round(evaluations.seconds, 3),
              "elapsed_seconds": round(time.monotonic() - start, 3),
              "checkpoint": estimator.latest_checkpoint(),
              "checkpoint_dir": str(out / Files.CHECKPOINTS),
              "tensorboard_dir": str(out / Files.CHECKPOINTS),
              "eval_dir": estimator.eval_dir(evaluation.eval_name(pipeline)) if eval_spec else None,
              "evaluations": evaluations.rows,
              "warm_start": warm.record if warm else None,
              "export_dir": str(export_dir), "model": type(pipeline.model).__name__}
    write_json(out / Files.TRAIN_RESULT, _relative_paths(result, out))
    return result


_PATH_KEYS = ("checkpoint", "checkpoint_dir", "tensorboard_dir", "eval_dir", "export_dir")


def _relative_paths(result: dict[str, Any], out: Path) -> dict[str, Any]:
    """``result`` as ``train.json`` keeps it: its paths relative to ``out`` (the model
    artifact), so that they still hold once the artifact has moved (the local step cache writes
    it under a temporary name; a pipeline reads it from a bucket)."""
    kept = dict(result)
    for key in _PATH_KEYS:
        if kept.get(key):
            kept[key] = os.path.relpath(kept[key], out)
    return kept
