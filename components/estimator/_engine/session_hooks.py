"""The hook contract (tf.estimator's ``SessionRunHook``, ``SessionRunArgs``, ...) on TF 2.

What hooks see, and when, is described in :mod:`.hooks`; the built-in hooks live there too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

__all__ = ["NanLossError", "NanLossDuringTrainingError", "SessionRunArgs", "SessionRunValues",
           "SessionRunContext", "SessionRunHook", "LossWatcher", "CheckpointSaverListener",
           "TrainHook", "TrainHookAdapter", "graph_name"]

class NanLossError(RuntimeError):
    """Training produced a non-finite loss; nothing from that loop was checkpointed.

    Attributes:
        step: the global step whose loss (or watched tensor) was not finite.
        restored: the checkpoint the in-memory state was rolled back to (None: none existed).
    """

    def __init__(self, step: int, restored: str | None = None, tensor: str = "loss") -> None:
        self.step = step
        self.restored = restored
        self.tensor = tensor
        where = (f"in-memory state rolled back to {restored}" if restored else
                 "no checkpoint to roll back to")
        what = "loss" if tensor == "loss" else f"value of {tensor!r}"
        super().__init__(f"NaN {what} during training at global step {step} (the latest "
                         f"checkpoint does not contain it; {where})")


NanLossDuringTrainingError = NanLossError  # tf.estimator's name


@dataclasses.dataclass(frozen=True)
class SessionRunArgs:
    """What a hook asks for before a loop: ``fetches``, a name, a callable, or a
    list/tuple/dict of them (see the module docstring). ``tf.compat.v1.train.SessionRunArgs``
    with names as fetches is accepted too."""

    fetches: Any = None


@dataclasses.dataclass(frozen=True)
class SessionRunValues:
    """What a hook gets after a loop.

    Args:
        results: the fetches' values (numpy), structured like the fetches.
        global_step: the global step after the loop.
        steps: the number of steps the loop ran.
    """

    results: Any
    global_step: int
    steps: int


class SessionRunContext:
    """Shared by the hooks of one loop: ``request_stop()`` ends training after this loop.

    Args:
        original_args: the merged fetches of all hooks for this loop.
        session: the :class:`HookSession`-like view of the run (``run``, ``global_step``).
    """

    def __init__(self, original_args: SessionRunArgs, session: Any) -> None:
        self.original_args = original_args
        self.session = session
        self._stop = False
        self._rollback = False

    def request_stop(self) -> None:
        """Stop after this loop (the engine still saves the final checkpoint)."""
        self._stop = True

    def request_rollback(self) -> None:
        """estflow: stop, and do not save the state this loop produced; the in-memory state
        goes back to the latest checkpoint (what :class:`NanTensorHook` uses)."""
        self._stop = True
        self._rollback = True

    @property
    def stop_requested(self) -> bool:
        return self._stop

    @property
    def rollback_requested(self) -> bool:
        return self._rollback


class SessionRunHook:
    """Base class of training, evaluation and prediction hooks (tf.estimator's contract).

    Example:
        >>> class CountLoops(SessionRunHook):
        ...     def begin(self):
        ...         self.loops = 0
        ...     def after_run(self, run_context, run_values):
        ...         self.loops += 1
        >>> hook = CountLoops(); hook.begin(); hook.after_run(None, None); hook.loops
        1
    """

    def begin(self) -> None:
        """Once per call, before the first loop."""

    def after_create_session(self, session, coord) -> None:
        """After ``begin``, with the run's session view (``coord`` is always None)."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Before each loop; return ``SessionRunArgs(fetches)`` to receive values."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """After each loop; ``run_context.request_stop()`` ends the run."""

    def end(self, session) -> None:
        """Once, after the run (and after the final checkpoint when training)."""

    def next_boundary(self, global_step: int) -> int | None:
        """estflow: the next global step (> ``global_step``) at which a loop must end so this
        hook sees it; None (default) lets loops run ``steps_per_loop`` steps."""
        return None


class LossWatcher(SessionRunHook):
    """A hook the engine tells when its in-graph guard stops a loop at a non-finite loss
    (:class:`~estflow.estimator.hooks.NanTensorHook` is one): the engine lives
    below the public hooks and knows them only by this contract.

    Attributes:
        watches_loss: whether the hook watches the loss (and so hears of its NaN).
        fail_on_nan_loss: raise :class:`NanLossError` (True) or stop without raising.
    """

    watches_loss: bool = False
    fail_on_nan_loss: bool = True

    def on_nan(self, run_context: SessionRunContext, step: int) -> None:
        """A non-finite value at ``step``: raise, or ``run_context.request_rollback()``."""
        raise NanLossError(step)


def graph_name(fetch):
    """A fetch as the engine takes it: a tensor of a traced model_fn (a graph tensor, which
    outlives its trace) as its name (``"dense/BiasAdd:0"``), resolved in the trace that
    returns it; anything else as it is."""
    return fetch.name if tf.is_symbolic_tensor(fetch) else fetch


class CheckpointSaverListener:
    """Called around every checkpoint ``Estimator.train`` saves (``saving_listeners``)."""

    def begin(self) -> None:
        """Once per ``train`` call, before the first loop."""

    def before_save(self, session, global_step_value: int) -> None:
        """Right before a checkpoint of ``global_step_value`` is written."""

    def after_save(self, session, global_step_value: int) -> bool | None:
        """Right after it is written; return True to stop training."""

    def end(self, session, global_step_value: int) -> None:
        """After the final checkpoint of the ``train`` call."""


class TrainHook:
    """estflow's simple loop hook: ``begin(global_step, variables)``, ``after_loop(global_step,
    loss)`` (return True to stop) and ``end(global_step)``; run at loop boundaries like every
    hook. Prefer :class:`SessionRunHook` for code ported from tf.estimator."""

    def begin(self, global_step: int, variables: Mapping[str, tf.Variable]) -> None:
        """Before the first loop, after restoring: the step and the live variables by name."""

    def after_loop(self, global_step: int, loss: float) -> bool | None:
        """After each loop, with the loss of its last step."""

    def end(self, global_step: int) -> None:
        """After the final checkpoint."""


class TrainHookAdapter(SessionRunHook):
    """Runs a :class:`TrainHook` as a :class:`SessionRunHook`."""

    def __init__(self, hook: TrainHook) -> None:
        self.hook = hook

    def after_create_session(self, session, coord) -> None:
        self.hook.begin(session.global_step, session.variables())

    def before_run(self, run_context):
        return SessionRunArgs("loss")

    def after_run(self, run_context, run_values) -> None:
        if self.hook.after_loop(run_values.global_step, float(run_values.results)):
            run_context.request_stop()

    def end(self, session) -> None:
        self.hook.end(session.global_step)
