"""``train_and_evaluate`` with its ``TrainSpec`` and ``EvalSpec`` (tf.estimator's).

Local mode (no cluster, or a cluster without an ``evaluator`` task): one ``Estimator.train``
call runs the whole schedule. Evaluation hangs on checkpoints (a saving listener, as in
tf.estimator): after a checkpoint is saved, the model is evaluated on ``EvalSpec.input_fn`` if
``start_delay_secs`` have passed since training started (first evaluation) or
``throttle_secs`` since the previous evaluation started; the final checkpoint is always
evaluated. Every evaluation writes its scalars for TensorBoard beside training's events
(``model_dir/eval``, or ``model_dir/eval_<name>``: TensorBoard on ``model_dir`` draws both) and
is followed by the exporters (``model_dir/export/<name>/``), given the evaluation's result. The checkpoint cadence comes from the RunConfig
(``save_checkpoints_steps`` or ``save_checkpoints_secs``): no checkpoint, no evaluation. Under
a multi-worker strategy only the chief evaluates and exports; other workers just train.

Distributed mode, by this process's task (``RunConfig.cluster``, parsed from TF_CONFIG):

- ``chief`` / ``worker``: train; when the cluster has an ``evaluator`` task, no evaluation
  here (that task does it), as in tf.estimator;
- ``evaluator``: wait ``start_delay_secs``, then evaluate every new checkpoint in
  ``model_dir`` (at most one per ``throttle_secs``; only the newest when several appeared
  meanwhile), run the exporters after each, and return once a checkpoint at
  ``TrainSpec.max_steps`` was evaluated (with ``max_steps=None`` it runs until stopped);
- ``ps`` (and a parameter-server strategy's ``worker``): serve the chief until stopped.

These specs hold live objects (input_fns, hooks, exporters). Pipelines declare the
serialisable :class:`estflow.dsl.TrainSpec` / :class:`estflow.dsl.EvalSpec` instead, which the
train step turns into these.

Example::

    train_spec = TrainSpec(train_input_fn, max_steps=10_000)
    eval_spec = EvalSpec(eval_input_fn, steps=100, throttle_secs=60,
                         exporters=[LatestExporter("latest", serving_input_receiver_fn)])
    metrics, exports = train_and_evaluate(estimator, train_spec, eval_spec)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from estflow.estimator import distribute
from estflow.estimator._engine.driver import as_hooks
from estflow.estimator._engine.driver import as_listeners
from estflow.estimator._engine.session_hooks import CheckpointSaverListener
from estflow.estimator.estimator import Estimator
from estflow.estimator.exporters import Exporter

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate"]

_log = logging.getLogger("estflow.estimator")


def _callable(input_fn: Any) -> None:
    if not callable(input_fn):
        raise TypeError(f"Expected input_fn to be callable; received {type(input_fn).__name__}")


def _exporters(exporters) -> tuple:
    if exporters is None:
        return ()
    if isinstance(exporters, Exporter):
        exporters = (exporters,)
    exporters = tuple(exporters)
    names = [getattr(e, "name", None) for e in exporters]
    for i, exporter in enumerate(exporters):
        if not isinstance(exporter, Exporter):
            raise TypeError(f"Expected exporters[{i}] to be an Exporter; received "
                            f"{type(exporter).__name__}")
        if not isinstance(exporter.name, str) or not exporter.name:
            raise ValueError(f"Expected every exporter to have a non-empty name; received "
                             f"{names}")
    if len(set(names)) != len(names):
        raise ValueError(f"Expected exporters with unique names; received {names}")
    return exporters


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """The training half of ``train_and_evaluate``.

    Args:
        input_fn: the training input_fn (its dataset should repeat: ``max_steps`` is the only
            stop condition tf.estimator supported; an ending input ends training too).
        max_steps: the global step to train to (None: until the input ends).
        hooks: training hooks (:mod:`.hooks`).
        saving_listeners: :class:`CheckpointSaverListener` objects.

    Example:
        >>> TrainSpec(lambda: None, max_steps=100).max_steps
        100
    """

    input_fn: Callable
    max_steps: int | None = None
    hooks: tuple = ()
    saving_listeners: tuple = ()

    def __post_init__(self) -> None:
        _callable(self.input_fn)
        if isinstance(self.max_steps, float) and math.isfinite(self.max_steps):  # (examples *
            # epochs) / batch_size: tf.estimator trained until the global step reached it
            object.__setattr__(self, "max_steps", math.ceil(self.max_steps))
        if self.max_steps is not None and (isinstance(self.max_steps, bool)
                                           or not isinstance(self.max_steps, int)
                                           or self.max_steps <= 0):
            raise ValueError(f"Must specify max_steps > 0, given: {self.max_steps!r}")
        object.__setattr__(self, "hooks", as_hooks(self.hooks, "TrainSpec.hooks"))
        object.__setattr__(self, "saving_listeners", as_listeners(self.saving_listeners))


@dataclasses.dataclass(frozen=True)
class EvalSpec:
    """The evaluation (and export) half of ``train_and_evaluate``.

    Args:
        input_fn: the evaluation input_fn.
        steps: batches per evaluation (None: the whole input).
        name: evaluation name: results go to ``model_dir/eval_<name>`` (``eval`` when None).
        hooks: evaluation hooks.
        exporters: an :class:`Exporter` or a sequence of them, run after each evaluation.
        start_delay_secs: no evaluation before this many seconds of training (the final one
            excepted).
        throttle_secs: no evaluation until this many seconds after the previous one started
            (the final one excepted).

    Example:
        >>> EvalSpec(lambda: None, throttle_secs=0).steps
        100
    """

    input_fn: Callable
    steps: int | None = 100
    name: str | None = None
    hooks: tuple = ()
    exporters: Any = None
    start_delay_secs: float = 120
    throttle_secs: float = 600

    def __post_init__(self) -> None:
        _callable(self.input_fn)
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps <= 0):
            raise ValueError(f"Must specify steps > 0, given: {self.steps!r}")
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"`name` must be string, given: {self.name!r}")
        for field in ("start_delay_secs", "throttle_secs"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Must specify {field} >= 0, given: {value!r}")
        object.__setattr__(self, "hooks", as_hooks(self.hooks, "EvalSpec.hooks"))
        object.__setattr__(self, "exporters", _exporters(self.exporters))


class _Evaluations(CheckpointSaverListener):
    """Evaluates (and exports) after checkpoints, throttled; always after the last one."""

    def __init__(self, estimator: Estimator, spec: EvalSpec, max_steps: int | None) -> None:
        self._estimator = estimator
        self._spec = spec
        self._max_steps = max_steps
        self.eval_result: dict | None = None
        self.export_results: list = []
        self._started = time.monotonic()
        self._last_start: float | None = None
        self._last_step: int | None = None

    def begin(self) -> None:
        self._started = time.monotonic()

    def after_save(self, session, global_step_value: int) -> None:
        now = time.monotonic()
        due = (now - self._started >= self._spec.start_delay_secs if self._last_start is None
               else now - self._last_start >= self._spec.throttle_secs)
        if due:
            self.evaluate(global_step_value)
        else:
            _log.info("skipping the evaluation of step %d (throttle_secs=%s, "
                      "start_delay_secs=%s)", global_step_value, self._spec.throttle_secs,
                      self._spec.start_delay_secs)

    def end(self, session, global_step_value: int) -> None:
        if global_step_value != self._last_step:
            self.evaluate(global_step_value)

    def evaluate(self, step: int, checkpoint: str | None = None) -> None:
        """Evaluate ``checkpoint`` (default: the latest, of ``step``), then run the
        exporters."""
        estimator, spec = self._estimator, self._spec
        self._last_start, self._last_step = time.monotonic(), step
        checkpoint = checkpoint or estimator.latest_checkpoint()
        if checkpoint is None:  # training stopped before its first checkpoint
            return
        self.eval_result = estimator.evaluate(spec.input_fn, steps=spec.steps, hooks=spec.hooks,
                                              checkpoint_path=checkpoint, name=spec.name)
        _log.info("Saving dict for global step %d: %s", self.eval_result["global_step"],
                  ", ".join(f"{k} = {v}" for k, v in sorted(self.eval_result.items())))
        final = self._max_steps is not None and self.eval_result["global_step"] >= \
            self._max_steps
        base = os.path.join(estimator.model_dir, "export")
        self.export_results = [
            exporter.export(estimator, os.path.join(base, exporter.name), checkpoint,
                            self.eval_result, final)
            for exporter in spec.exporters]


def train_and_evaluate(estimator: Estimator, train_spec: TrainSpec,
                       eval_spec: EvalSpec) -> tuple[dict | None, list]:
    """Train ``estimator`` per ``train_spec``, evaluating and exporting per ``eval_spec`` (see
    the module docstring for when).

    Returns:
        ``(eval_result, export_results)``: the last evaluation's metrics and what each
        exporter returned after it (export paths, or None for skipped exports).

    Raises:
        TypeError: an argument has the wrong type.
    """
    if not isinstance(estimator, Estimator):
        raise TypeError(f"Expected estimator to be an Estimator; received "
                        f"{type(estimator).__name__}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"Expected train_spec to be a TrainSpec; received "
                        f"{type(train_spec).__name__}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"Expected eval_spec to be an EvalSpec; received "
                        f"{type(eval_spec).__name__}")
    config = estimator.config
    cluster = config.cluster if isinstance(config.cluster, distribute.ClusterSpec) else None
    strategy = config.train_distribute
    role = distribute.task_role(strategy if isinstance(strategy, str) else None, cluster)
    evaluations = _Evaluations(estimator, eval_spec, train_spec.max_steps)
    if role == "serve":
        distribute.serve(cluster)  # returns only if the server stops
        return None, []
    if role == "evaluate":
        return _evaluate_continuously(evaluations, estimator, eval_spec, train_spec.max_steps)
    evaluates_here = config.is_chief and not (cluster and cluster.jobs.get("evaluator"))
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                    max_steps=train_spec.max_steps,
                    saving_listeners=train_spec.saving_listeners
                    + ((evaluations,) if evaluates_here else ()))
    if evaluates_here and evaluations.eval_result is None:  # nothing trained: at max_steps
        evaluations.evaluate(estimator.global_step)
    return evaluations.eval_result, evaluations.export_results


def _step_of(checkpoint: str) -> int:
    return int(tf.train.load_variable(checkpoint, "global_step/.ATTRIBUTES/VARIABLE_VALUE"))


def _evaluate_continuously(evaluations: _Evaluations, estimator: Estimator, spec: EvalSpec,
                           max_steps: int | None) -> tuple[dict | None, list]:
    """The evaluator task: every new checkpoint of the chief's model_dir, until max_steps."""
    progress = estimator._progress  # noqa: SLF001 (the Estimator's own progress sink)
    if spec.start_delay_secs:
        progress(f"evaluator: waiting start_delay_secs={spec.start_delay_secs}s")
        time.sleep(spec.start_delay_secs)
    progress(f"evaluator: watching {estimator.model_dir} for checkpoints"
             + (f" up to step {max_steps}" if max_steps is not None else ""))
    for checkpoint in tf.train.checkpoints_iterator(estimator.model_dir,
                                                    min_interval_secs=spec.throttle_secs):
        step = _step_of(checkpoint)  # the newest when it was yielded: older ones are skipped
        evaluations.evaluate(step, checkpoint)
        progress(f"evaluator: step {step}: " + ", ".join(
            f"{k}={v:.4g}" for k, v in (evaluations.eval_result or {}).items()
            if isinstance(v, float)))
        if max_steps is not None and step >= max_steps:
            break
    return evaluations.eval_result, evaluations.export_results
