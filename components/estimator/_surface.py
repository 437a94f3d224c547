"""The rest of ``tf.estimator`` 2.15's top-level names: ``BaselineEstimator``,
``classifier_parse_example_spec``/``regressor_parse_example_spec``, ``SecondOrStepTimer``, and
the TF 1 session hooks the engine has no use for (``CheckpointSaverHook``, ``SummarySaverHook``,
``ProfilerHook``, ``FeedFnHook``, ``FinalOpsHook``, ``GlobalStepWaiterHook``), which raise at
construction naming what does their job here (:mod:`._unavailable`).

All are exported by ``estflow.estimator`` under tf.estimator's names.
"""

from __future__ import annotations

import time

import tensorflow as tf

from estflow.estimator._engine.session_hooks import SessionRunHook
from estflow.estimator._premade.model_fns import BASELINE_LEARNING_RATE
from estflow.estimator._premade.model_fns import baseline_part
from estflow.estimator._unavailable import unavailable_class
from estflow.estimator.canned import _Canned
from estflow.estimator.canned import _given_head
from estflow.estimator.canned import _optimizer
from estflow.estimator.canned import _weight_key
from estflow.estimator.feature_column import make_parse_example_spec

__all__ = ["BaselineEstimator", "classifier_parse_example_spec", "regressor_parse_example_spec",
           "SecondOrStepTimer", "CheckpointSaverHook", "SummarySaverHook", "ProfilerHook",
           "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook"]


class BaselineEstimator(_Canned):
    """tf.estimator.BaselineEstimator: one bias per logit under the given ``head`` (what
    ``BaselineClassifier``/``BaselineRegressor`` are with their own heads)."""

    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, *,
                 progress=None) -> None:
        head = _given_head(head, type(self).__name__)
        weight = _weight_key(getattr(head, "weight_column", None))
        parts = [baseline_part(weight, _optimizer(optimizer, BASELINE_LEARNING_RATE,
                                                  "optimizer"))]
        super().__init__(head, parts, model_dir, config, None, progress)


def _with_label(feature_columns, label_key: str, label_spec, weight_column) -> dict:
    if not isinstance(label_key, str):
        raise ValueError(f"label_key: expected a string; received {label_key!r}")
    spec = make_parse_example_spec(feature_columns)
    if label_key in spec:
        raise ValueError(f"label_key: {label_key!r} is also a feature column's key; the "
                         f"columns' keys are {sorted(spec)}")
    spec[label_key] = label_spec
    weight = _weight_key(weight_column)
    if weight is not None and weight not in spec:
        spec[weight] = tf.io.FixedLenFeature([1], tf.float32, default_value=0.0)
    return spec


def classifier_parse_example_spec(feature_columns, label_key: str, label_dtype=tf.int64,
                                  label_default=None, weight_column=None) -> dict:
    """tf.estimator.classifier_parse_example_spec: the columns' parse spec plus the label's
    (``FixedLenFeature([1], label_dtype, label_default)``) and the weight's."""
    return _with_label(feature_columns, label_key,
                       tf.io.FixedLenFeature([1], label_dtype, default_value=label_default),
                       weight_column)


def regressor_parse_example_spec(feature_columns, label_key: str, label_dtype=tf.float32,
                                 label_default=None, label_dimension=1,
                                 weight_column=None) -> dict:
    """tf.estimator.regressor_parse_example_spec: the columns' parse spec plus the label's
    (``FixedLenFeature([label_dimension], label_dtype, label_default)``) and the weight's."""
    return _with_label(feature_columns, label_key,
                       tf.io.FixedLenFeature([label_dimension], label_dtype,
                                             default_value=label_default),
                       weight_column)


class SecondOrStepTimer:
    """tf.estimator.SecondOrStepTimer: triggers every ``every_secs`` seconds or every
    ``every_steps`` steps (exactly one of them), for hooks that keep their own cadence."""

    def __init__(self, every_secs=None, every_steps=None) -> None:
        if (every_secs is None) == (every_steps is None):
            raise ValueError("Expected exactly one of every_secs and every_steps; received "
                             f"every_secs={every_secs!r}, every_steps={every_steps!r}")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        self._last_time = None
        self._last_step = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int):
        """Record a trigger at ``step``: (seconds, steps) since the previous one, or
        (None, None) the first time."""
        now = time.time()
        elapsed = (None, None) if self._last_time is None else \
            (now - self._last_time, step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self):
        return self._last_step


_CHECKPOINTS = ("RunConfig(save_checkpoints_steps=... or save_checkpoints_secs=...): the engine "
                "saves checkpoints itself; a CheckpointSaverListener in "
                "train(saving_listeners=[...]) runs code around each save")
CheckpointSaverHook = unavailable_class("estimator.CheckpointSaverHook", _CHECKPOINTS,
                                        (SessionRunHook,))
SummarySaverHook = unavailable_class(
    "estimator.SummarySaverHook", "RunConfig(save_summary_steps=...): the engine writes the "
    "loss and step-rate summaries itself", (SessionRunHook,))
ProfilerHook = unavailable_class(
    "estimator.ProfilerHook", "tf.profiler.experimental.start(logdir) before "
    "estimator.train(...) and tf.profiler.experimental.stop() after it", (SessionRunHook,))
FeedFnHook = unavailable_class(
    "estimator.FeedFnHook", "an input_fn returning a tf.data.Dataset (TF 2 has no feed_dict)",
    (SessionRunHook,))
FinalOpsHook = unavailable_class(
    "estimator.FinalOpsHook", "estimator.get_variable_value(name) or evaluate()'s metrics "
    "after train() returns", (SessionRunHook,))
GlobalStepWaiterHook = unavailable_class(
    "estimator.GlobalStepWaiterHook", "RunConfig(train_distribute="
    "tf.distribute.MultiWorkerMirroredStrategy()): workers train in step, none waits for the "
    "chief's global step", (SessionRunHook,))
