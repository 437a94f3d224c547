"""Early stopping: training hooks that stop when evaluation results say so (tf.estimator's
``early_stopping`` module).

The hooks read the results ``Estimator.evaluate`` writes to ``estimator.eval_dir()``
(TensorBoard event files; one scalar per metric at the evaluated global step), so they work
with ``train_and_evaluate`` (evaluations happen between training loops) and with evaluations
run by another process on the same model_dir. They check at loop boundaries, every
``run_every_secs`` seconds or every ``run_every_steps`` steps, and request a stop; training
then saves its final checkpoint (and ``train_and_evaluate`` evaluates it) as usual.

Example::

    hook = stop_if_no_decrease_hook(estimator, "loss", max_steps_without_decrease=1000,
                                    run_every_secs=None, run_every_steps=100)
    train_and_evaluate(estimator, TrainSpec(train_input_fn, max_steps=100_000, hooks=[hook]),
                       EvalSpec(eval_input_fn, throttle_secs=0))
"""

from __future__ import annotations

import glob
import logging
import operator
import os
import time
from collections.abc import Callable

from estflow.estimator._engine.reporting import read_scalars
from estflow.estimator._engine.session_hooks import SessionRunHook

__all__ = ["make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook",
           "stop_if_no_increase_hook", "stop_if_no_decrease_hook", "read_eval_metrics"]

_log = logging.getLogger("estflow.estimator")


def read_eval_metrics(eval_dir: str) -> dict[int, dict[str, float]]:
    """``{global step: {metric: value}}``, sorted by step, from the event files in
    ``eval_dir`` (empty when it does not exist yet)."""
    return read_scalars(glob.glob(os.path.join(eval_dir, "events.out.tfevents.*")))


class _StopOnPredicateHook(SessionRunHook):
    """Requests a stop when ``should_stop_fn()`` is True, checked every N secs or steps."""

    def __init__(self, should_stop_fn: Callable[[], bool], run_every_secs: float | None,
                 run_every_steps: int | None) -> None:
        self._should_stop_fn = should_stop_fn
        self._every_secs = run_every_secs
        self._every_steps = run_every_steps
        self._last_step: int | None = None
        self._last_time: float | None = None

    def begin(self) -> None:
        self._last_step = self._last_time = None

    def after_run(self, run_context, run_values) -> None:
        step, now = run_values.global_step, time.monotonic()
        if self._last_step is not None and (
                (self._every_steps and step < self._last_step + self._every_steps)
                or (self._every_secs and now - self._last_time < self._every_secs)):
            return
        self._last_step, self._last_time = step, now
        if self._should_stop_fn():
            _log.info("early stopping requested at global step %d", step)
            run_context.request_stop()


def make_early_stopping_hook(estimator, should_stop_fn: Callable[[], bool],
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None) -> SessionRunHook:
    """A hook that stops training when ``should_stop_fn()`` returns True.

    Args:
        estimator: the Estimator being trained.
        should_stop_fn: no arguments, returns whether to stop.
        run_every_secs: check at the first loop boundary this many seconds after the last
            check (the first boundary always checks).
        run_every_steps: check every this many steps instead.

    Raises:
        ValueError: both or neither cadence is given, or a cadence is not positive.
    """
    if not callable(should_stop_fn):
        raise TypeError(f"Expected should_stop_fn to be callable; received "
                        f"{type(should_stop_fn).__name__}")
    if (run_every_secs is None) == (run_every_steps is None):
        raise ValueError("Expected exactly one of run_every_secs and run_every_steps; "
                         f"received run_every_secs={run_every_secs}, "
                         f"run_every_steps={run_every_steps}")
    every = run_every_secs if run_every_secs is not None else run_every_steps
    if every <= 0:
        raise ValueError(f"Expected a positive check cadence; received {every!r}")
    if not getattr(estimator.config, "is_chief", True):
        raise NotImplementedError("early stopping runs on the chief only; this process is "
                                  f"task {estimator.config.task_type}:{estimator.config.task_id}")
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)


def _metric(metrics: dict, name: str, step: int, eval_dir: str) -> float:
    if name not in metrics:
        raise ValueError(f"Expected metric {name!r} in the evaluation of step {step} in "
                         f"{eval_dir}; it has {sorted(metrics)}")
    return metrics[name]


def _threshold_hook(estimator, metric_name, threshold, higher, eval_dir, min_steps,
                    run_every_secs, run_every_steps) -> SessionRunHook:
    eval_dir = eval_dir or estimator.eval_dir()
    beyond = operator.gt if higher else operator.lt

    def should_stop() -> bool:
        for step, metrics in read_eval_metrics(eval_dir).items():
            value = _metric(metrics, metric_name, step, eval_dir)
            if step >= min_steps and beyond(value, threshold):
                _log.info("at step %d, %s = %s is %s the threshold %s", step, metric_name,
                          value, "above" if higher else "below", threshold)
                return True
        return False

    return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def _no_improvement_hook(estimator, metric_name, max_steps, higher, eval_dir, min_steps,
                         run_every_secs, run_every_steps) -> SessionRunHook:
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher else operator.lt

    def should_stop() -> bool:
        best = best_step = None
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            value = _metric(metrics, metric_name, step, eval_dir)
            if best is None or better(value, best):
                best, best_step = value, step
            if step - best_step >= max_steps:
                _log.info("no %s in %s for %d steps (max %d)",
                          "increase" if higher else "decrease", metric_name, step - best_step,
                          max_steps)
                return True
        return False

    return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name: str, threshold: float,
                        eval_dir: str | None = None, min_steps: int = 0,
                        run_every_secs: float | None = 60,
                        run_every_steps: int | None = None) -> SessionRunHook:
    """Stop once ``metric_name`` of an evaluation at step >= ``min_steps`` is above
    ``threshold`` (``eval_dir`` defaults to ``estimator.eval_dir()``)."""
    return _threshold_hook(estimator, metric_name, threshold, True, eval_dir, min_steps,
                           run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name: str, threshold: float,
                       eval_dir: str | None = None, min_steps: int = 0,
                       run_every_secs: float | None = 60,
                       run_every_steps: int | None = None) -> SessionRunHook:
    """Stop once ``metric_name`` of an evaluation at step >= ``min_steps`` is below
    ``threshold``."""
    return _threshold_hook(estimator, metric_name, threshold, False, eval_dir, min_steps,
                           run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name: str, max_steps_without_increase: int,
                             eval_dir: str | None = None, min_steps: int = 0,
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None) -> SessionRunHook:
    """Stop when ``metric_name`` has not increased over its best for
    ``max_steps_without_increase`` global steps (evaluations before ``min_steps`` ignored)."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_increase, True,
                                eval_dir, min_steps, run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name: str, max_steps_without_decrease: int,
                             eval_dir: str | None = None, min_steps: int = 0,
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None) -> SessionRunHook:
    """Stop when ``metric_name`` has not decreased below its best for
    ``max_steps_without_decrease`` global steps (evaluations before ``min_steps`` ignored).

    Example:
        >>> import tempfile
        >>> from estflow.estimator import Estimator
        >>> est = Estimator(lambda features, labels, mode: None, tempfile.mkdtemp(),
        ...                 progress=lambda line: None)
        >>> hook = stop_if_no_decrease_hook(est, "loss", 100, run_every_secs=None,
        ...                                 run_every_steps=10)
        >>> type(hook).__name__
        '_StopOnPredicateHook'
    """
    return _no_improvement_hook(estimator, metric_name, max_steps_without_decrease, False,
                                eval_dir, min_steps, run_every_secs, run_every_steps)
