"""Runs hooks, saving listeners and checkpoints around the engine's loops (``train``), and hooks
around evaluation chunks and prediction batches.

The contract hooks see is documented in :mod:`.hooks`; this module implements it:
:class:`HookSession` is the ``session`` hooks get, :class:`HookRunner` calls a list of hooks
around one "run" (a training loop, an evaluation chunk, a prediction batch) and resolves their
fetches, :class:`TrainDriver` is the training loop of one ``Estimator.train`` call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from estflow.estimator._engine.reporting import Reporter
from estflow.estimator._engine.reporting import crosses
from estflow.estimator._engine.session_hooks import LossWatcher
from estflow.estimator._engine.session_hooks import NanLossError
from estflow.estimator._engine.session_hooks import SessionRunArgs
from estflow.estimator._engine.session_hooks import SessionRunContext
from estflow.estimator._engine.session_hooks import SessionRunHook
from estflow.estimator._engine.session_hooks import SessionRunValues
from estflow.estimator._engine.session_hooks import TrainHook
from estflow.estimator._engine.session_hooks import TrainHookAdapter
from estflow.estimator._engine.session_hooks import graph_name

__all__ = ["HookSession", "HookRunner", "TrainDriver", "LoopEngine", "as_hooks",
           "as_listeners"]


def _numpy(value):
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.numpy()
    return value


def as_hooks(hooks, where: str = "hooks") -> tuple:
    """Validated hooks: :class:`SessionRunHook` (ours or ``tf.compat.v1.train``'s, whose
    fetches must then be names) or :class:`TrainHook` (wrapped)."""
    out = []
    for i, hook in enumerate(hooks or ()):
        if isinstance(hook, TrainHook):
            out.append(TrainHookAdapter(hook))
        elif isinstance(hook, (SessionRunHook, tf.compat.v1.train.SessionRunHook)):
            out.append(hook)
        else:
            raise TypeError(f"Expected {where}[{i}] to be a SessionRunHook (or TrainHook) "
                            f"instance; received {type(hook).__name__}")
    return tuple(out)


def as_listeners(listeners) -> tuple:
    out = tuple(listeners or ())
    for i, listener in enumerate(out):
        if not callable(getattr(listener, "after_save", None)):
            raise TypeError(f"Expected saving_listeners[{i}] to be a CheckpointSaverListener "
                            f"instance; received {type(listener).__name__}")
    return out


class HookSession:
    """The ``session`` hooks get: ``run(fetches)`` evaluates names of variables,
    ``"global_step"`` and callables now; ``global_step`` and ``variables()`` read the state."""

    def __init__(self, global_step: tf.Variable,
                 variables: Callable[[], Mapping[str, tf.Variable]]) -> None:
        self._global_step = global_step
        self._variables = variables

    @property
    def global_step(self) -> int:
        return int(self._global_step.numpy())

    def variables(self) -> dict[str, tf.Variable]:
        """The live checkpointed variables by checkpoint name (``store/model/000_kernel``)."""
        return dict(self._variables())

    def run(self, fetches, values: Mapping[str, Any] | None = None):
        """Values of ``fetches`` (numpy), from ``values`` (what the last run produced) or the
        current state."""
        values = values or {}
        names: dict | None = None

        def one(fetch):
            nonlocal names
            if isinstance(fetch, str):
                if fetch in values:
                    return _numpy(values[fetch])
                if fetch == "global_step":
                    return self.global_step
                names = names if names is not None else self.variables()
                if fetch in names:
                    return names[fetch].numpy()
                raise ValueError(
                    f"Expected a fetch name among {sorted(values)}, 'global_step' or a variable "
                    f"name (Estimator.get_variable_names()); received {fetch!r}")
            if isinstance(fetch, tf.Variable) or tf.is_tensor(fetch):
                return _numpy(fetch)
            if callable(fetch):
                return _numpy(fetch())
            raise TypeError(f"Expected a fetch to be a name, a callable or a variable; "
                            f"received {type(fetch).__name__}")

        return None if fetches is None else tf.nest.map_structure(one, fetches)

    def graph_names(self, fetches, local: Sequence[str]) -> set[str]:
        """Names in ``fetches`` that are neither ``local`` values, ``"global_step"`` nor
        variable names: tensors the model_fn must return from inside the loop."""
        strings = [f for f in tf.nest.flatten(fetches) if isinstance(f, str)]
        unknown = {f for f in strings if f not in local and f != "global_step"}
        return unknown - set(self.variables()) if unknown else set()


def _fetches_of(args) -> Any:
    if args is None:
        return None
    if getattr(args, "feed_dict", None) or getattr(args, "options", None):
        raise ValueError("SessionRunArgs feed_dict/options have no meaning without a session; "
                         "received non-empty ones")
    fetches = args.fetches
    return None if fetches is None else tf.nest.map_structure(graph_name, fetches)


class HookRunner:
    """Calls ``hooks`` around runs and hands them their fetches' values."""

    def __init__(self, hooks: Sequence, session: HookSession) -> None:
        self.hooks = tuple(hooks)
        self.session = session
        self._fetches: list = []

    def begin(self) -> None:
        for hook in self.hooks:
            hook.begin()
        for hook in self.hooks:
            hook.after_create_session(self.session, None)

    def before(self) -> SessionRunContext:
        context = SessionRunContext(SessionRunArgs(), self.session)
        self._fetches = [_fetches_of(hook.before_run(context)) for hook in self.hooks]
        context.original_args = SessionRunArgs(list(self._fetches))
        return context

    def graph_names(self, local: Sequence[str]) -> tuple[str, ...]:
        names: set[str] = set()
        for fetches in self._fetches:
            if fetches is not None:
                names |= self.session.graph_names(fetches, local)
        return tuple(sorted(names))

    def after(self, context: SessionRunContext, values: Mapping[str, Any], steps: int) -> None:
        if not self.hooks:  # the hook-free path reads nothing more from the device
            return
        step = self.session.global_step
        for hook, fetches in zip(self.hooks, self._fetches, strict=True):
            results = self.session.run(fetches, values)
            hook.after_run(context, SessionRunValues(results, step, steps))

    def boundary(self, step: int) -> int | None:
        """The nearest step after ``step`` some hook needs a loop to end at."""
        wanted = [getattr(h, "next_boundary", lambda s: None)(step) for h in self.hooks]
        wanted = [b for b in wanted if b is not None and b > step]
        return min(wanted) if wanted else None

    def end(self) -> None:
        for hook in self.hooks:
            hook.end(self.session)


@dataclasses.dataclass
class LoopEngine:
    """What the driver needs from the Estimator.

    Args:
        run_loop: ``(steps, fetch names) -> (steps run, last loss, examples, loss finite,
            {name: tensor})``.
        save: write a checkpoint of the current state at this step; returns its path.
        rollback: restore the latest checkpoint into memory; returns it (None: none exists).
        config: the engine RunConfig (checkpoint cadence, ``steps_per_loop``).
        progress: receives progress lines.
    """

    run_loop: Callable[[int, tuple], tuple]
    save: Callable[[int], str]
    rollback: Callable[[], str | None]
    config: Any
    progress: Callable[[str], None]


class TrainDriver:
    """The loops of one ``train`` call: sizes, hooks, checkpoint cadence, listeners, NaN."""

    def __init__(self, engine: LoopEngine, runner: HookRunner, listeners: Sequence,
                 reporter: Reporter, target: int | None) -> None:
        self.engine = engine
        self.runner = runner
        self.listeners = tuple(listeners)
        self.reporter = reporter
        self.target = target
        self._last_save = time.monotonic()

    @property
    def session(self) -> HookSession:
        return self.runner.session

    def run(self, step: int) -> int:
        """Train from ``step``; returns the final global step. Any error rolls the in-memory
        state back to the latest checkpoint before it propagates (nothing unsaved survives)."""
        try:
            return self._run(step)
        except NanLossError as err:
            restored = self.engine.rollback()
            raise NanLossError(err.step, restored, err.tensor) from None
        except BaseException:
            self.engine.rollback()
            raise

    def _run(self, step: int) -> int:
        for listener in self.listeners:
            listener.begin()
        saved, stop = step, False
        while not stop and (self.target is None or step < self.target):
            size = self._loop_size(step)
            context = self.runner.before()
            names = self.runner.graph_names(("loss",))
            ran, loss, examples, finite, fetched = self.engine.run_loop(size, names)
            before, step = step, self.session.global_step
            if not bool(finite):
                return self._on_nan(context, step)
            loss = float(loss)
            self.reporter.loop_done(before, step, loss, int(examples))
            self.runner.after(context, {"loss": loss, **fetched}, int(ran))
            if context.rollback_requested:
                self.engine.rollback()
                return self._finish(self.session.global_step)
            stop = context.stop_requested or int(ran) < size
            if self._save_due(before, step):
                saved, stop = step, self._save(step) or stop
        if saved != step:
            self._save(step)
        return self._finish(step)

    def _finish(self, step: int) -> int:
        for listener in self.listeners:
            listener.end(self.session, step)
        return step

    def _loop_size(self, step: int) -> int:
        """``steps_per_loop``, cut at the target, at checkpoint steps (so checkpoints land
        exactly on multiples of save_checkpoints_steps) and at the hooks' boundaries."""
        config = self.engine.config
        size = config.steps_per_loop
        if self.target is not None:
            size = min(size, self.target - step)
        every = config.save_checkpoints_steps
        if every:
            size = min(size, every - step % every)
        boundary = self.runner.boundary(step)
        return size if boundary is None else min(size, boundary - step)

    def _save_due(self, before: int, step: int) -> bool:
        config = self.engine.config
        if config.save_checkpoints_steps:
            return crosses(before, step, config.save_checkpoints_steps)
        secs = config.save_checkpoints_secs
        return bool(secs) and time.monotonic() - self._last_save >= secs

    def _save(self, step: int) -> bool:
        """Checkpoint ``step``, calling the listeners; True when one asks to stop."""
        for listener in self.listeners:
            listener.before_save(self.session, step)
        self.engine.save(step)
        self._last_save = time.monotonic()
        stops = [bool(listener.after_save(self.session, step)) for listener in self.listeners]
        return any(stops)

    def _on_nan(self, context: SessionRunContext, step: int) -> int:
        """The loop stopped at a non-finite loss (inside the graph, at ``step``)."""
        tolerant = [h for h in self.runner.hooks if isinstance(h, LossWatcher)
                    and h.watches_loss]
        if not tolerant or any(h.fail_on_nan_loss for h in tolerant):
            raise NanLossError(step)
        tolerant[0].on_nan(context, step)
        restored = self.engine.rollback()
        self.engine.progress(f"NaN loss at global step {step}: stopped; in-memory state is "
                             f"the latest checkpoint ({restored})")
        return self._finish(self.session.global_step)
