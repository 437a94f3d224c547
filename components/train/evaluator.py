"""The evaluator task of a distributed training run: it evaluates the chief's checkpoints as
they come, in place of the evaluation while training (:mod:`.evaluation`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from estflow.components._runtime import entry
from estflow.components.train import evaluation
from estflow.components.train.inputs import TrainStepError
from estflow.components.train.inputs import eval_input_fn
from estflow.components.train.inputs import read_transform
from estflow.components.train.step import model_fn_of
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import Estimator

__all__ = ["evaluate_checkpoints"]


def evaluate_checkpoints(pipeline: Pipeline, transformed_dir: str | os.PathLike,
                         model_dir: str | os.PathLike,
                         progress: Callable[[str], None] | None = None, *,
                         timeout_secs: float = 3600) -> dict[str, Any]:
    """The evaluator task of a distributed run: evaluate each new checkpoint in
    ``OUT_DIR/checkpoints`` on the eval split (at most every ``eval.throttle_secs``; scalars
    for TensorBoard under ``checkpoints/eval``, or ``eval_<name>``, as when the chief
    evaluates) until one reaches ``train.max_steps``.

    Raises:
        TrainStepError: no new checkpoint came for ``timeout_secs``.
    """
    progress = progress or entry.Progress("train evaluator")
    transformed = Path(transformed_dir)
    tft_output, cardinalities = read_transform(transformed)
    model_fn, params = model_fn_of(pipeline.model, cardinalities)
    config = dataclasses.replace(pipeline.run_config, train_distribute=None, cluster=None)
    checkpoints = str(Path(model_dir) / Files.CHECKPOINTS)
    estimator = Estimator(model_fn, checkpoints, config, params, progress=progress)
    input_fn = eval_input_fn(pipeline, transformed, tft_output)
    for path in tf.train.checkpoints_iterator(checkpoints, timeout=timeout_secs,
                                              min_interval_secs=pipeline.eval.throttle_secs):
        metrics = estimator.evaluate(input_fn, steps=pipeline.eval.steps, checkpoint_path=path,
                                     name=evaluation.eval_name(pipeline))
        progress(f"evaluated {path}: {evaluation.shown(metrics)}")
        if metrics["global_step"] >= pipeline.train.max_steps:
            return metrics
    raise TrainStepError(f"evaluator: no new checkpoint in {checkpoints} for {timeout_secs}s")
