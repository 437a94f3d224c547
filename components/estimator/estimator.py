"""``Estimator``: tf.estimator's programming model on TF 2 (model_fn, train/evaluate/predict,
checkpoints in a model_dir, export).

How it works (DESIGN.md, "The Estimator engine on TF2"): the model_fn is only ever called while
a ``tf.function`` traces, inside a variable store scope giving AUTO_REUSE semantics
(:mod:`._store`); one ``tf.train.Checkpoint`` holds the store, the global step and the engine's
optimizers. Before anything else the engine traces the model_fn once in PREDICT mode: what it
creates there is *the model* (shared by every mode, what exports carry).

The model_fn is traced as tf.estimator ran it, in graph mode without AutoGraph: Python
control flow runs once, at trace time (branch on ``mode``, not on tensor values; use
``tf.cond``/``tf.while_loop`` for those), and errors it raises keep their type.

State lives in memory between calls and is saved to ``model_dir`` every
``save_checkpoints_steps`` and at the end of ``train``; a new Estimator on the same model_dir
restores the latest checkpoint and resumes from its global step, optimizer state included.

Example::

    import estflow.dsl as ef
    from estflow.components.estimator import Estimator, model_fn_for

    est = Estimator(model_fn_for(ef.DNNClassifier((64, 32), ("x",)), cardinalities={}),
                    model_dir="/tmp/m", config=ef.RunConfig(steps_per_loop=100))
    est.train(train_input_fn, max_steps=1000)      # resumes if /tmp/m has checkpoints
    metrics = est.evaluate(eval_input_fn)          # {"accuracy": ..., "loss": ..., ...}
    for p in est.predict(predict_input_fn): ...
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from estflow.components.estimator import export as export_lib
from estflow.components.estimator._calls import ModelFn
from estflow.components.estimator._calls import call_input_fn
from estflow.components.estimator._calls import split_element
from estflow.components.estimator._evaluation import Evaluator
from estflow.components.estimator._evaluation import Predictor
from estflow.components.estimator._reporting import Reporter
from estflow.components.estimator._reporting import crosses
from estflow.components.estimator._reporting import print_progress
from estflow.components.estimator._reporting import write_scalars
from estflow.components.estimator._store import VariableStore
from estflow.components.estimator._training import Optimizers
from estflow.components.estimator._training import Trainer
from estflow.dsl.model_fn import ModeKeys
from estflow.dsl.specs import RunConfig

__all__ = ["Estimator", "TrainHook", "NanLossError"]

_CKPT_NAME = "model.ckpt"
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


class NanLossError(RuntimeError):
    """Training produced a non-finite loss; nothing from that loop was checkpointed."""

    def __init__(self, step: int, restored: str | None) -> None:
        self.step = step
        where = (f"in-memory state rolled back to {restored}" if restored else
                 "no checkpoint to roll back to")
        super().__init__(f"NaN loss during training at global step {step} (the latest "
                         f"checkpoint does not contain it; {where})")


class TrainHook:
    """Called at training-loop boundaries (every ``steps_per_loop`` steps), not per step.

    Override what you need; ``after_loop`` returning True stops training (and checkpoints).
    """

    def begin(self, global_step: int, variables: Mapping[str, tf.Variable]) -> None:
        """Before the first loop, after restoring: the step and the live variables by name."""

    def after_loop(self, global_step: int, loss: float) -> bool | None:
        """After each loop, with the loss of its last step."""

    def end(self, global_step: int) -> None:
        """After the final checkpoint."""


class Estimator:
    """Trains, evaluates, predicts with and exports a model defined by a ``model_fn``.

    Args:
        model_fn: ``model_fn(features, labels, mode[, params][, config]) -> EstimatorSpec``.
        model_dir: checkpoints and TensorBoard events; a temporary directory when None.
        config: :class:`estflow.dsl.RunConfig` (checkpoint/summary/log cadence, seed,
            ``steps_per_loop``). ``tf_random_seed`` seeds Python, NumPy, TensorFlow and Keras
            (``keras.utils.set_random_seed``, process-wide) right before the model's variables
            are first created, so initialisation is reproducible.
        params: hyperparameters for the model_fn (and the input_fns that name ``params``).
        warm_start_from: a checkpoint file or directory whose model variables initialise a
            model_dir that has no checkpoint yet.
        progress: receives progress lines (default: print, flushed).
    """

    def __init__(self, model_fn: Callable, model_dir: str | os.PathLike | None = None,
                 config: RunConfig | None = None, params: dict | None = None,
                 warm_start_from: str | os.PathLike | None = None, *,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = config or RunConfig()
        self.model_dir = str(model_dir) if model_dir else tempfile.mkdtemp(prefix="estflow_")
        self.params = dict(params or {})
        self._model_fn = ModelFn(model_fn, self.params, self.config)
        self._warm_start_from = str(warm_start_from) if warm_start_from else None
        self._progress = progress or print_progress
        self._store = VariableStore()
        with tf.init_scope():
            self._global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name="global_step")
        self._optimizers = Optimizers()
        self._checkpoint = tf.train.Checkpoint(store=self._store, global_step=self._global_step,
                                               optimizers=self._optimizers)
        self._manager = tf.train.CheckpointManager(
            self._checkpoint, self.model_dir, max_to_keep=self.config.keep_checkpoint_max,
            checkpoint_name=_CKPT_NAME)
        self._trainer = Trainer(self._store, self._model_fn, self._global_step, self._optimizers)
        self._evaluator = Evaluator(self._store, self._model_fn)
        self._predictor = Predictor(self.predictions)
        self._synced = -1  # tracked-variable count at the last restore; -1: never restored
        self._warm_started = False

    # -- checkpoints -----------------------------------------------------------------------
    def latest_checkpoint(self) -> str | None:
        """Path prefix of the newest checkpoint in ``model_dir`` (None if there is none)."""
        return tf.train.latest_checkpoint(self.model_dir)

    def get_variable_names(self) -> list[str]:
        """Names of the variables in the latest checkpoint (``store/model/000_kernel``, ...)."""
        return sorted(name[:-len(_VALUE_SUFFIX)]
                      for name, _ in tf.train.list_variables(self._require_checkpoint())
                      if name.endswith(_VALUE_SUFFIX))

    def get_variable_value(self, name: str) -> np.ndarray:
        """The value of variable ``name`` in the latest checkpoint."""
        return tf.train.load_variable(self._require_checkpoint(), name + _VALUE_SUFFIX)

    @property
    def global_step(self) -> int:
        """The global step of the in-memory state (restored from model_dir once built)."""
        if self._synced < 0:
            latest = self.latest_checkpoint()
            return int(tf.train.load_variable(latest, "global_step" + _VALUE_SUFFIX)) \
                if latest else 0
        return int(self._global_step.numpy())

    def variables(self) -> dict[str, tf.Variable]:
        """The live checkpointed model variables by checkpoint name, plus ``global_step``."""
        return {**self._store.named_variables(), "global_step": self._global_step}

    def _require_checkpoint(self, path: str | None = None) -> str:
        path = path or self.latest_checkpoint()
        if path is None:
            raise ValueError(f"Could not find trained model in model_dir: {self.model_dir}")
        return path

    def _tracked_count(self) -> int:
        return self._store.tracked_count() + sum(
            len(opt.variables) for opt in self._optimizers.optimizers)

    def _sync(self) -> None:
        """Restore variables created since the last restore: from the latest checkpoint, or
        warm start a model_dir without one. In-memory state equals the latest checkpoint
        between calls, so re-reading it is safe."""
        count = self._tracked_count()
        if count == self._synced:
            return
        latest = self.latest_checkpoint()
        if latest:
            self._checkpoint.read(latest).expect_partial()
        elif self._warm_start_from and not self._warm_started:
            self._warm_start()
        self._synced = count

    def _warm_start(self) -> None:
        path = self._warm_start_from
        if os.path.isdir(path):
            path = self._require_checkpoint(tf.train.latest_checkpoint(path))
        view = tf.Module()
        view.model = self._store.model  # same checkpoint keys as the store: store/model/...
        tf.train.Checkpoint(store=view).read(path).expect_partial()
        self._warm_started = True
        self._progress(f"warm-started model variables from {path}")

    @contextlib.contextmanager
    def _weights(self, checkpoint_path: str | None):
        """Run with the weights of ``checkpoint_path`` (default: the latest)."""
        latest = self.latest_checkpoint()
        self._require_checkpoint(checkpoint_path or latest)
        self._sync()
        swap = checkpoint_path is not None and checkpoint_path != latest
        if swap:
            self._checkpoint.read(checkpoint_path).expect_partial()
        try:
            yield
        finally:
            if swap and latest:
                self._checkpoint.read(latest).expect_partial()

    # -- the model in PREDICT mode -----------------------------------------------------------
    def predictions(self, features) -> Any:
        """The model_fn's ``predictions`` for ``features`` with this Estimator's variables.

        Call it inside a ``tf.function`` (an export signature, a custom loop); the first call
        ever defines the model's variables.
        """
        establish = not self._store.established
        if establish and self.config.tf_random_seed is not None:
            keras.utils.set_random_seed(self.config.tf_random_seed)
        with self._store.scope(ModeKeys.PREDICT, establish=establish):
            spec = self._model_fn(features, None, ModeKeys.PREDICT)
        return spec.predictions

    def _establish(self, element_spec) -> None:
        if not self._store.established:
            features_spec, _ = split_element(element_spec)
            tf.function(self.predictions, autograph=False).get_concrete_function(
                features_spec)

    # -- train -------------------------------------------------------------------------------
    def train(self, input_fn: Callable, steps: int | None = None, max_steps: int | None = None,
              hooks: Sequence[TrainHook] | None = None) -> Estimator:
        """Train on ``input_fn``'s dataset for ``steps`` more steps, up to global step
        ``max_steps``, or until the input ends; checkpoint on the way and at the end.

        Raises:
            NanLossError: a step produced a non-finite loss (that state is not saved).
        """
        _check_steps(steps, max_steps)
        hooks = tuple(hooks or ())
        if max_steps is not None and self.global_step >= max_steps:
            self._progress(f"skipping training: global step {self.global_step} >= max_steps "
                           f"{max_steps}")
            return self
        dataset = call_input_fn(input_fn, self.params, self.config)
        self._establish(dataset.element_spec)
        iterator = iter(dataset)
        self._trainer.loop.get_concrete_function(iterator, tf.TensorSpec([], tf.int64))
        self._sync()
        start = int(self._global_step.numpy())
        target = max_steps if max_steps is not None else (start + steps if steps else None)
        for hook in hooks:
            hook.begin(start, self.variables())
        self._progress(f"training from global step {start}"
                       + (f" to {target}" if target is not None else " until the input ends"))
        reporter = Reporter(self.model_dir, self.config.save_summary_steps,
                            self.config.log_step_count_steps, self._progress, start)
        try:
            step = self._run_loops(iterator, start, target, reporter, hooks)
        finally:
            reporter.close()
        for hook in hooks:
            hook.end(step)
        return self

    def _run_loops(self, iterator: Iterator, step: int, target: int | None,
                   reporter: Reporter, hooks: Sequence[TrainHook]) -> int:
        saved = step
        while target is None or step < target:
            size = self._loop_size(step, target)
            ran, loss, examples, finite = self._trainer.loop(iterator, tf.constant(size, tf.int64))
            before, step = step, int(self._global_step.numpy())
            if not bool(finite):
                self._on_nan(step)
            loss = float(loss)
            reporter.loop_done(before, step, loss, int(examples))
            if crosses(before, step, self.config.save_checkpoints_steps):
                saved = self._save(step)
            stop = any([bool(hook.after_loop(step, loss)) for hook in hooks])
            if stop or int(ran) < size:  # a hook asked to stop, or the input ended
                break
        if saved != step:
            self._save(step)
        return step

    def _loop_size(self, step: int, target: int | None) -> int:
        """Steps for the next loop: ``steps_per_loop``, cut at the target and at checkpoint
        boundaries (so checkpoints land exactly on multiples of save_checkpoints_steps)."""
        every = self.config.save_checkpoints_steps
        size = min(self.config.steps_per_loop, every - step % every)
        return size if target is None else min(size, target - step)

    def _save(self, step: int) -> int:
        path = self._manager.save(checkpoint_number=step)
        self._synced = self._tracked_count()
        self._progress(f"saved checkpoint {path}")
        return step

    def _on_nan(self, step: int) -> None:
        latest = self.latest_checkpoint()
        if latest:
            self._checkpoint.read(latest).expect_partial()
        raise NanLossError(step, latest)

    # -- evaluate / predict --------------------------------------------------------------------
    def evaluate(self, input_fn: Callable, steps: int | None = None,
                 checkpoint_path: str | None = None, name: str | None = None) -> dict[str, Any]:
        """Metrics of the model over ``input_fn``'s dataset (``steps`` batches, or all of it):
        the model_fn's ``eval_metric_ops``, the mean ``loss`` and ``global_step``. Scalars are
        also written for TensorBoard under ``model_dir/eval`` (``eval_<name>``)."""
        dataset = call_input_fn(input_fn, self.params, self.config)
        if steps is not None:
            dataset = dataset.take(steps)
        self._establish(dataset.element_spec)
        with self._weights(checkpoint_path):
            results = self._evaluator.evaluate(dataset)
            step = int(self._global_step.numpy())
        results["global_step"] = step
        log_dir = os.path.join(self.model_dir, f"eval_{name}" if name else "eval")
        write_scalars(log_dir, step, {k: v for k, v in results.items()
                                      if isinstance(v, (int, float)) and k != "global_step"})
        return results

    def predict(self, input_fn: Callable, predict_keys: Sequence[str] | None = None,
                checkpoint_path: str | None = None,
                yield_single_examples: bool = True) -> Iterator[Any]:
        """Yield predictions for ``input_fn``'s features (one dict per example, or per batch
        with ``yield_single_examples=False``), as numpy values."""
        dataset = call_input_fn(input_fn, self.params, self.config)
        self._establish(dataset.element_spec)
        with self._weights(checkpoint_path):
            for element in dataset:
                features, _ = split_element(element)
                outputs = _select(self._predictor(features), predict_keys)
                yield from _unbatch(outputs, yield_single_examples)

    # -- export ----------------------------------------------------------------------------
    def export_saved_model(self, export_dir_base: str | os.PathLike,
                           serving_input_receiver_fn: Callable[[], Any],
                           checkpoint_path: str | None = None) -> str:
        """Export a SavedModel with a ``serving_default`` signature (receiver inputs ->
        predictions) to a new timestamped directory under ``export_dir_base``; returns it."""
        return export_lib.export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                                             checkpoint_path)

    def weights(self, checkpoint_path: str | None = None):
        """Context manager: the in-memory variables hold ``checkpoint_path``'s (default: the
        latest checkpoint's) values inside it. Used by exports."""
        return self._weights(checkpoint_path)

    def serving_variables(self) -> list[tf.Variable]:
        """Variables a PREDICT-mode graph reads: the model (not optimizer state) and locals."""
        return self._store.model_variables() + self._store.local_variables(ModeKeys.PREDICT)


def _check_steps(steps: int | None, max_steps: int | None) -> None:
    if steps is not None and max_steps is not None:
        raise ValueError("Can not provide both steps and max_steps.")
    for name, value in (("steps", steps), ("max_steps", max_steps)):
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ValueError(f"Must specify {name} > 0, given: {value!r}")


def _select(outputs, keys: Sequence[str] | None):
    if keys is None:
        return outputs
    if not isinstance(outputs, Mapping):
        raise ValueError("predict_keys given, but the model_fn's predictions are not a dict")
    missing = [k for k in keys if k not in outputs]
    if missing:
        raise ValueError(f"Expected to find {missing} in predictions; available: "
                         f"{sorted(outputs)}")
    return {k: outputs[k] for k in keys}


def _unbatch(outputs, single: bool):
    values = tf.nest.map_structure(lambda t: t.numpy(), outputs)
    if not single:
        yield values
        return
    size = len(tf.nest.flatten(values)[0])
    for i in range(size):
        yield tf.nest.map_structure(lambda v, i=i: v[i], values)
