"""Evaluation while training: the engine's ``EvalSpec`` for the declared one, and a recorder
that turns each evaluation into a progress line and a ``train.json`` row."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from estflow.components.train.inputs import eval_input_fn
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import training
from estflow.estimator.exporters import Exporter

__all__ = ["KEY_METRICS", "EvalRecorder", "eval_name", "eval_spec", "shown"]

KEY_METRICS = ("auc", "accuracy", "rmse")  # the first one present is shown, after the loss


def eval_name(pipeline: Pipeline) -> str | None:
    """The engine's evaluation name: None for the default ``eval`` (``checkpoints/eval``, as
    tf.estimator's unnamed evaluations), else the declared one (``checkpoints/eval_<name>``)."""
    return None if pipeline.eval.name == "eval" else pipeline.eval.name


class EvalRecorder(Exporter):
    """Runs after each evaluation during training (an exporter that exports nothing): a
    progress line (step, :func:`shown`), a ``train.json`` row (step, metrics) and the
    evaluation's time (so examples/s counts training only)."""

    name = "estflow_evaluations"

    def __init__(self, progress: Callable[[str], None]) -> None:
        self._progress = progress
        self.rows: list[dict] = []
        self.seconds = 0.0  # the evaluations' wall time, input and tracing included
        self._began: float | None = None

    def timed(self, input_fn: Callable) -> Callable:
        """``input_fn``, noting when an evaluation starts (it calls the input_fn first)."""

        def eval_input_fn():
            self._began = time.monotonic()
            return input_fn()

        return eval_input_fn

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        metrics = {k: float(v) for k, v in eval_result.items()
                   if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                   and k != "global_step"}
        if self._began is not None:
            self.seconds += time.monotonic() - self._began
            self._began = None
        step = int(eval_result["global_step"])
        self.rows.append({"step": step, "metrics": metrics})
        self._progress(f"evaluation at step {step}: {shown(metrics)}"
                       + (" (final)" if is_the_final_export else ""))
        return None


def shown(metrics: dict[str, float]) -> str:
    """What an evaluation's progress line shows: ``average_loss`` (the mean over the eval
    examples, what the evaluate step and a threshold call ``average_loss``) and the first
    :data:`KEY_METRICS` present. tf.estimator's ``loss`` (the mean of the eval batches'
    losses, in ``train.json`` and TensorBoard) is shown only for a model_fn that reports no
    ``average_loss``."""
    loss = "average_loss" if "average_loss" in metrics else "loss"
    key = next((k for k in KEY_METRICS if k in metrics), None)
    return ", ".join(f"{name}={metrics[name]:.4g}" for name in (loss, key)
                     if name is not None and name in metrics)


def eval_spec(pipeline: Pipeline, transformed: Path, tft_output, recorder: EvalRecorder,
               progress: Callable[[str], None]) -> training.EvalSpec | None:
    """The engine's EvalSpec for the declared one (None, with a progress line, when the
    transform output has no eval split)."""
    if not tf.io.gfile.glob(str(transformed / Files.TRANSFORMED_EVAL / "*.tfrecord.gz")):
        progress(f"no eval split in {transformed}: training without evaluations")
        return None
    declared = pipeline.eval
    return training.EvalSpec(recorder.timed(eval_input_fn(pipeline, transformed, tft_output)),
                             steps=declared.steps, name=eval_name(pipeline),
                             exporters=(recorder,),
                             start_delay_secs=declared.start_delay_secs,
                             throttle_secs=declared.throttle_secs)


