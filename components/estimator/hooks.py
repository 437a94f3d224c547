"""Training hooks: tf.estimator's ``SessionRunHook`` contract on TF 2 and the engine's loops.

TF 2 has no session. The engine runs ``steps_per_loop`` training steps inside one
``tf.function`` call (a *loop*), and hooks run at loop boundaries:

- ``begin()`` once per ``train``/``evaluate``/``predict`` call, after the model's variables
  exist and the latest checkpoint is restored; then ``after_create_session(session, None)``.
- ``before_run(run_context)`` before each loop; it may return ``SessionRunArgs(fetches)``.
- ``after_run(run_context, run_values)`` after it: ``run_values.results`` has the fetches'
  values (numpy) at the *end of the loop*, ``run_values.global_step`` the step reached and
  ``run_values.steps`` how many steps the loop ran.
- ``end(session)`` once, after the final checkpoint.

Fetches (a name, a callable, or a list/tuple/dict of them) are resolved as follows:

- ``"loss"``: the loss of the loop's last step (free: the loop returns it anyway);
- ``"global_step"`` and checkpoint variable names (``Estimator.get_variable_names()``, e.g.
  ``"store/model/000_kernel"``): read after the loop;
- any other name: a tensor of the model_fn in TRAIN mode, taken at the loop's last step: a key
  of its ``predictions`` dict, or a tensor it named (``tf.identity(x, name="my_tensor")``,
  ``"my_tensor"`` or ``"my_tensor:0"``; names inside the model_fn's name scopes, as in TF 1
  graphs). The engine then runs the loop's last step outside its ``tf.while_loop`` so it can
  return them: no extra steps, one extra trace of the model_fn;
- a callable: called with no arguments after the loop (``lambda: optimizer.learning_rate``).

Under a distribution strategy ``"loss"`` is the mean over replicas and a model_fn tensor is
one replica's value (its share of the global batch).

Loop size and hooks: a loop is ``steps_per_loop`` steps, cut short at the target step, at
checkpoint steps, and at ``hook.next_boundary(global_step)`` for every hook (estflow's
extension: the global step the hook needs to see exactly). Hooks that need no particular step
(the default) cost nothing; a hook that returns ``global_step + 1`` sees every step and makes
the loop size 1 (a Python round trip per step: ~15% slower for a real model, several times
slower for a tiny one). Without hooks the loop is exactly the hook-free fast path.

Example::

    from estflow.estimator import hooks

    logging_hook = hooks.LoggingTensorHook({"loss": "loss", "step": "global_step"},
                                           every_n_iter=100)
    est.train(input_fn, hooks=[logging_hook, hooks.StopAtStepHook(num_steps=1000)])
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from estflow.estimator._engine.session_hooks import CheckpointSaverListener
from estflow.estimator._engine.session_hooks import LossWatcher
from estflow.estimator._engine.session_hooks import NanLossDuringTrainingError
from estflow.estimator._engine.session_hooks import NanLossError
from estflow.estimator._engine.session_hooks import SessionRunArgs
from estflow.estimator._engine.session_hooks import SessionRunContext
from estflow.estimator._engine.session_hooks import SessionRunHook
from estflow.estimator._engine.session_hooks import SessionRunValues
from estflow.estimator._engine.session_hooks import TrainHook
from estflow.estimator._engine.session_hooks import graph_name

__all__ = ["NanLossError", "NanLossDuringTrainingError", "SessionRunArgs", "SessionRunValues",
           "SessionRunContext", "SessionRunHook", "CheckpointSaverListener", "TrainHook",
           "LoggingTensorHook", "StopAtStepHook", "NanTensorHook", "StepCounterHook"]

_log = logging.getLogger("estflow.hooks")


class _Cadence:
    """Every N global steps (when a loop crosses a multiple of N) or every N seconds."""

    def __init__(self, every_steps: int | None, every_secs: float | None) -> None:
        self.every_steps = every_steps
        self.every_secs = every_secs
        self.last_time: float | None = None

    def due(self, before: int, after: int) -> bool:
        if self.every_steps:
            return after // self.every_steps > before // self.every_steps
        now = time.monotonic()
        return self.last_time is None or now - self.last_time >= self.every_secs

    def fired(self) -> float | None:
        """Record a firing; seconds since the previous one (None the first time)."""
        now = time.monotonic()
        elapsed = None if self.last_time is None else now - self.last_time
        self.last_time = now
        return elapsed

    def next_multiple(self, step: int) -> int | None:
        return (step // self.every_steps + 1) * self.every_steps if self.every_steps else None


def _check_cadence(every_n_steps, every_n_secs, steps_name: str, required: bool) -> None:
    if every_n_steps is not None and every_n_secs is not None:
        raise ValueError(f"Expected exactly one of {steps_name} and every_n_secs; received "
                         f"{steps_name}={every_n_steps}, every_n_secs={every_n_secs}")
    if required and every_n_steps is None and every_n_secs is None:
        raise ValueError(f"Expected one of {steps_name} or every_n_secs; received neither")
    if every_n_steps is not None and (not isinstance(every_n_steps, int) or every_n_steps <= 0):
        raise ValueError(f"Expected {steps_name} > 0; received {every_n_steps!r}")
    if every_n_secs is not None and every_n_secs <= 0:
        raise ValueError(f"Expected every_n_secs > 0; received {every_n_secs!r}")


def _default_format(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{tag} = {value}" for tag, value in values.items())


class LoggingTensorHook(SessionRunHook):
    """Logs tensors (INFO, logger ``estflow.hooks``) every N steps, every N seconds, at end.

    Args:
        tensors: ``{tag: fetch}`` or a list of fetch names (tags = names); see the module
            docstring for what a fetch can be.
        every_n_iter: log when the global step reaches a multiple of N (loops end there).
        every_n_secs: log at the first loop boundary N seconds after the last log.
        at_end: also log the last values when the run ends.
        formatter: ``{tag: value} -> str``.

    Example:
        >>> hook = LoggingTensorHook(["loss"], every_n_iter=100)
        >>> hook.next_boundary(250)
        300
    """

    def __init__(self, tensors, every_n_iter: int | None = None,
                 every_n_secs: float | None = None, at_end: bool = False,
                 formatter: Callable[[dict], str] | None = None) -> None:
        _check_cadence(every_n_iter, every_n_secs, "every_n_iter", required=not at_end)
        if isinstance(tensors, str) or not isinstance(tensors, (Mapping, list, tuple)):
            raise TypeError("Expected tensors to be a dict {tag: fetch} or a list of fetch "
                            f"names; received {type(tensors).__name__}")
        # tensors of the model_fn (TF 1 style, `tensors=[tf.identity(x)]`) are fetched by their
        # graph names, and tagged with them, as tf.estimator did
        if isinstance(tensors, Mapping):
            self.tensors = {tag: graph_name(t) for tag, t in tensors.items()}
        else:
            self.tensors = {graph_name(t): graph_name(t) for t in tensors}
        self._cadence = _Cadence(every_n_iter, every_n_secs)
        self._at_end = at_end
        self._every = every_n_iter is not None or every_n_secs is not None
        self._formatter = formatter or _default_format
        self._last: dict | None = None
        self._step = 0

    def begin(self) -> None:
        self._last, self._cadence.last_time = None, None

    def after_create_session(self, session, coord) -> None:
        self._step = session.global_step

    def next_boundary(self, global_step: int) -> int | None:
        return self._cadence.next_multiple(global_step)

    def before_run(self, run_context):
        return SessionRunArgs(self.tensors)

    def after_run(self, run_context, run_values) -> None:
        before, self._step = self._step, run_values.global_step
        self._last = run_values.results
        if self._every and self._cadence.due(before, self._step):
            elapsed = self._cadence.fired()
            self._emit(self._last, elapsed)

    def end(self, session) -> None:
        if self._at_end and self._last is not None:
            self._emit(self._last, None)

    def _emit(self, values: dict, elapsed: float | None) -> None:
        line = self._formatter(values)
        if elapsed is not None and self._formatter is _default_format:
            line += f" ({elapsed:.3f} sec)"
        _log.info("%s", line)


class StopAtStepHook(SessionRunHook):
    """Stops training at a global step: ``num_steps`` after the step training starts from, or
    at ``last_step``. Loops end exactly there.

    Example:
        >>> StopAtStepHook(last_step=120).next_boundary(100)
        120
    """

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if (num_steps is None) == (last_step is None):
            raise ValueError("Expected exactly one of num_steps and last_step; received "
                             f"num_steps={num_steps}, last_step={last_step}")
        for name, value in (("num_steps", num_steps), ("last_step", last_step)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"Expected {name} >= 0; received {value!r}")
        self._num_steps = num_steps
        self._last_step = last_step

    def after_create_session(self, session, coord) -> None:
        if self._num_steps is not None:
            self._last_step = session.global_step + self._num_steps

    def next_boundary(self, global_step: int) -> int | None:
        return self._last_step if self._last_step and self._last_step > global_step else None

    def after_run(self, run_context, run_values) -> None:
        if run_values.global_step >= self._last_step:
            run_context.request_stop()


class NanTensorHook(LossWatcher):
    """Fails (raises :class:`NanLossError`) or stops when a tensor, the loss by default, is
    not finite at a loop boundary. Either way nothing from that loop is checkpointed and the
    in-memory state goes back to the latest checkpoint.

    The engine's own NaN guard already ends every loop at the first non-finite loss (naming
    the step); this hook adds ``fail_on_nan_loss=False`` (stop without raising) and watching
    other tensors.

    Args:
        loss_tensor: the fetch to watch (default ``"loss"``).
        fail_on_nan_loss: raise (True) or log a warning and stop (False).
    """

    def __init__(self, loss_tensor: Any = "loss", fail_on_nan_loss: bool = True) -> None:
        self.loss_tensor = loss_tensor
        self.fail_on_nan_loss = bool(fail_on_nan_loss)

    @property
    def watches_loss(self) -> bool:
        return self.loss_tensor == "loss"

    def before_run(self, run_context):
        return SessionRunArgs(self.loss_tensor)

    def after_run(self, run_context, run_values) -> None:
        if np.all(np.isfinite(np.asarray(run_values.results, dtype=np.float64))):
            return
        self.on_nan(run_context, run_values.global_step)

    def on_nan(self, run_context, step: int) -> None:
        """What to do about a non-finite value at ``step`` (also called by the engine's guard
        when this hook watches the loss)."""
        name = self.loss_tensor if isinstance(self.loss_tensor, str) else "watched tensor"
        if self.fail_on_nan_loss:
            raise NanLossError(step, tensor=name)
        _log.warning("NaN %s at global step %d: stopping training without saving that state "
                     "(fail_on_nan_loss=False)", name, step)
        run_context.request_rollback()


class StepCounterHook(SessionRunHook):
    """Logs ``global_step/sec`` (and writes it to ``output_dir`` for TensorBoard) every N steps
    or seconds, measured between loop boundaries.

    Args:
        every_n_steps: when the global step crosses a multiple of N.
        every_n_secs: at the first loop boundary N seconds after the previous report.
        output_dir: write a ``global_step/sec`` scalar there (None: log only).
        summary_writer: a ``tf.summary`` writer to use instead of ``output_dir``.
    """

    def __init__(self, every_n_steps: int | None = 100, every_n_secs: float | None = None,
                 output_dir: str | None = None, summary_writer=None) -> None:
        if every_n_secs is not None and every_n_steps == 100:
            every_n_steps = None  # the default gives way to an explicit every_n_secs
        _check_cadence(every_n_steps, every_n_secs, "every_n_steps", required=True)
        self._cadence = _Cadence(every_n_steps, every_n_secs)
        self._output_dir = output_dir
        self._writer = summary_writer
        self._last_step: int | None = None
        self._step = 0

    def begin(self) -> None:
        if self._writer is None and self._output_dir:
            self._writer = tf.summary.create_file_writer(self._output_dir)
        self._cadence.last_time = None

    def after_create_session(self, session, coord) -> None:
        self._step = self._last_step = session.global_step
        self._cadence.fired()

    def after_run(self, run_context, run_values) -> None:
        before, self._step = self._step, run_values.global_step
        if not self._cadence.due(before, self._step):
            return
        elapsed = self._cadence.fired()
        if elapsed and self._step > self._last_step:
            rate = (self._step - self._last_step) / elapsed
            _log.info("global_step/sec: %g", rate)
            if self._writer is not None and math.isfinite(rate):
                with self._writer.as_default(step=self._step):
                    tf.summary.scalar("global_step/sec", rate)
                self._writer.flush()
        self._last_step = self._step
