"""``Estimator``: tf.estimator's programming model on TF 2 (model_fn, train/evaluate/predict,
checkpoints in a model_dir, export).

How it works (docs/pages/architecture.md, "The Estimator engine on TF 2"): the model_fn is
only ever called while a ``tf.function`` traces, inside a variable store scope giving AUTO_REUSE semantics
(:mod:`._store`); one ``tf.train.Checkpoint`` holds the store, the global step and the engine's
optimizers. What the model_fn's first trace creates, in the mode the Estimator is first used in
(TRAIN to train: as tf.estimator, training never calls the model_fn in PREDICT mode), is *the
model*, shared by every mode and carried by exports; optimizer state stays apart.

The model_fn is traced as tf.estimator ran it, in graph mode without AutoGraph: Python
control flow runs once, at trace time (branch on ``mode``, not on tensor values; use
``tf.cond``/``tf.while_loop`` for those), and errors it raises keep their type. TF 1 code in it
sees tf.estimator's graph world (:mod:`._engine.tf1`): the global step, collections,
``tf.compat.v1.train`` optimizers, ``tf.compat.v1.summary`` into model_dir.

State lives in memory between calls and is saved to ``model_dir`` every
``save_checkpoints_steps`` (or ``save_checkpoints_secs``) and at the end of ``train``; a new
Estimator on the same model_dir restores the latest checkpoint and resumes from its global
step, optimizer state included. Between calls the in-memory state equals the latest
checkpoint: a failed ``train`` rolls it back. Hooks and saving listeners run at loop
boundaries (:mod:`.hooks`, :mod:`._driver`).

Example::

    import estflow.dsl as ef
    from estflow.estimator import Estimator, model_fn_for

    est = Estimator(model_fn_for(ef.DNNClassifier((64, 32), ("x",)), cardinalities={}),
                    model_dir="/tmp/m", config=ef.RunConfig(steps_per_loop=100))
    est.train(train_input_fn, max_steps=1000)      # resumes if /tmp/m has checkpoints
    metrics = est.evaluate(eval_input_fn)          # {"accuracy": ..., "loss": ..., ...}
    for p in est.predict(predict_input_fn): ...
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from estflow.dsl import specs as dsl_specs
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator import export as export_lib
from estflow.estimator._engine import tf1
from estflow.estimator._engine.calls import ModelFn
from estflow.estimator._engine.calls import call_input_fn
from estflow.estimator._engine.calls import split_element
from estflow.estimator._engine.driver import HookRunner
from estflow.estimator._engine.driver import HookSession
from estflow.estimator._engine.driver import LoopEngine
from estflow.estimator._engine.driver import TrainDriver
from estflow.estimator._engine.driver import as_hooks
from estflow.estimator._engine.driver import as_listeners
from estflow.estimator._engine.evaluation import Evaluator
from estflow.estimator._engine.evaluation import Predictor
from estflow.estimator._engine.evaluation import select_keys
from estflow.estimator._engine.evaluation import unbatch
from estflow.estimator._engine.loop import Optimizers
from estflow.estimator._engine.loop import Trainer
from estflow.estimator._engine.reporting import Reporter
from estflow.estimator._engine.reporting import print_progress
from estflow.estimator._engine.reporting import write_scalars
from estflow.estimator._engine.session_hooks import NanLossError
from estflow.estimator._engine.session_hooks import TrainHook
from estflow.estimator._engine.store import VariableStore
from estflow.estimator._engine.store import checkpoint_template
from estflow.estimator.distribute import Distribution
from estflow.estimator.run_config import RunConfig
from estflow.estimator.run_config import as_run_config
from estflow.estimator.warm_starting import WarmStartSettings
from estflow.estimator.warm_starting import as_settings
from estflow.estimator.warm_starting import warm_start

__all__ = ["Estimator", "TrainHook", "NanLossError"]

_CKPT_NAME = "model.ckpt"
_OWN_CHILDREN = ("store", "global_step", "optimizers")
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


class Estimator:
    """Trains, evaluates, predicts with and exports a model defined by a ``model_fn``.

    Args:
        model_fn: ``model_fn(features, labels, mode[, params][, config]) -> EstimatorSpec``.
        model_dir: checkpoints and TensorBoard events; ``config.model_dir``, else a temporary
            directory, when None.
        config: a :class:`RunConfig` (tf.estimator's fields) or an :class:`estflow.dsl.RunConfig`
            declaration; ``self.config`` (what a model_fn naming ``config`` receives) is always
            the former, with ``model_dir`` filled in. ``tf_random_seed`` seeds Python, NumPy,
            TensorFlow and Keras (``keras.utils.set_random_seed``, process-wide) right before
            the model's variables are first created, so initialisation is reproducible.
        params: hyperparameters for the model_fn (and the input_fns that name ``params``): a
            dict, or an HParams-like object (``tf.contrib.training.HParams``'s attribute
            access), passed as given (a fresh copy on every call).
        warm_start_from: a checkpoint, a directory (a model_dir) or a
            :class:`WarmStartSettings`: initialises a model_dir without a checkpoint when
            training first starts (trainable model variables by default).
        progress: receives progress lines (default: print, flushed).
    """

    def __init__(self, model_fn: Callable, model_dir: str | os.PathLike | None = None,
                 config: RunConfig | dsl_specs.RunConfig | None = None,
                 params: Mapping | Any | None = None,
                 warm_start_from: str | os.PathLike | WarmStartSettings | None = None, *,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = as_run_config(config, model_dir)
        self.model_dir = self.config.model_dir
        # a dict is copied; an HParams-like object (attributes, ``.values()``) is kept as given
        self.params = dict(params or {}) if params is None or isinstance(params, Mapping) \
            else params
        self._model_fn = ModelFn(model_fn, self.params, self.config)
        self._warm_start_from = as_settings(warm_start_from)
        self._progress = progress or print_progress
        # the model's checkpoint keys follow the model_dir's checkpoint, if there is one
        self._store = VariableStore(template=lambda: checkpoint_template(
            self.latest_checkpoint()))
        # distribution (distribute.py): config.train_distribute, or the active strategy scope.
        self._distribution = Distribution.of(self.config)
        with tf.init_scope(), self._distribution.scope():
            self._global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name="global_step")
        # TF 1 idioms: get_global_step() in a PREDICT model_fn, a copy of the step set at each
        # call (a train_op built in every mode must not move the step; exports carry it)
        with tf.init_scope():
            self._predict_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                             name="global_step")
        self._optimizers = Optimizers()
        self._checkpoint = tf.train.Checkpoint(store=self._store, global_step=self._global_step,
                                               optimizers=self._optimizers)
        # distribution: only the chief writes model_dir; other workers save to scratch.
        self._manager = tf.train.CheckpointManager(
            self._checkpoint, self._distribution.write_dir(self.model_dir),
            max_to_keep=self.config.keep_checkpoint_max or None, checkpoint_name=_CKPT_NAME,
            keep_checkpoint_every_n_hours=self.config.keep_checkpoint_every_n_hours)
        self._writer = None  # the TensorBoard writer of training (see _summary_writer)
        self._trainer = Trainer(self._store, self._model_fn, self._global_step, self._optimizers,
                                self._distribution, summary_writer=self._summary_writer,
                                summary_steps=self.config.save_summary_steps)
        # distribution: config.eval_distribute (None: evaluate on one device).
        self._evaluator = Evaluator(self._store, self._model_fn,
                                    Distribution.for_eval(self.config, self._distribution),
                                    self._global_step)
        self._predictor = Predictor(self.predictions)
        self._synced = -1  # tracked-variable count at the last restore; -1: never restored
        self._holds: str | None = None  # the checkpoint in-memory state equals (None: none)
        self._warm_started = False
        self._prediction_hooks: tuple = ()  # hooks: from the model_fn's PREDICT spec
        self._scaffold_adopted = False  # a TRAIN spec's scaffold saver joined the checkpoint

    @property
    def model_fn(self) -> Callable:
        """The model_fn bound to ``params`` and ``config`` (tf.estimator's property):
        ``model_fn(features, labels, mode, config=None) -> EstimatorSpec`` (``config`` is
        accepted for tf.estimator's signature; the bound one is used)."""
        def model_fn(features, labels, mode, config=None):
            del config
            return self._model_fn(features, labels, mode)
        return model_fn

    @property
    def warm_start_from(self) -> WarmStartSettings | None:
        """The warm start given to the constructor (a :class:`WarmStartSettings`)."""
        return self._warm_start_from

    @property
    def progress(self) -> Callable[[str], None]:
        """What receives this Estimator's progress lines."""
        return self._progress

    # -- checkpoints -----------------------------------------------------------------------
    def latest_checkpoint(self) -> str | None:
        """Path prefix of the newest checkpoint in ``model_dir`` (None if there is none)."""
        return tf.train.latest_checkpoint(self.model_dir)

    def eval_dir(self, name: str | None = None) -> str:
        """Where ``evaluate(name=...)`` writes its results (TensorBoard scalars, read back by
        early stopping and ``BestExporter``): ``model_dir/eval`` or ``model_dir/eval_<name>``."""
        return os.path.join(self.model_dir, f"eval_{name}" if name else "eval")

    def get_variable_names(self) -> list[str]:
        """Names of the variables in the latest checkpoint: ``store/model/NNN_<name>`` (the
        model, in creation order), ``store/train/NNN`` (optimizer state of the model_fn),
        ``optimizers/...`` (the engine's optimizer state), ``global_step``; see
        :mod:`.warm_starting`. A premade Estimator's model variables are also listed under
        tf.estimator's names (``dnn/hiddenlayer_0/kernel``, ``linear/linear_model/x/weights``)."""
        names = self._own_variable_names()
        return names + sorted(self._variable_aliases(names))

    def get_variable_value(self, name: str) -> np.ndarray:
        """The value of variable ``name`` (or its tf.estimator name) in the latest checkpoint."""
        if not name.startswith(("store/", "optimizers/", "global_step")):
            name = self._variable_aliases(self._own_variable_names()).get(name, name)
        return tf.train.load_variable(self._require_checkpoint(), name + _VALUE_SUFFIX)

    def _own_variable_names(self) -> list[str]:
        return sorted(name[:-len(_VALUE_SUFFIX)]
                      for name, _ in tf.train.list_variables(self._require_checkpoint())
                      if name.endswith(_VALUE_SUFFIX))

    def _variable_aliases(self, names: list[str]) -> dict[str, str]:
        """``{other name: checkpoint name}`` (premade Estimators: tf.estimator's names)."""
        del names
        return {}

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
            self._holds = latest
        elif self._warm_start_from and not self._warm_started:
            self._warm_start()
        self._synced = count

    def _refresh(self) -> None:
        """Load the latest checkpoint when another writer (another process: the chief of a
        distributed run, a second Estimator on the same model_dir) saved one after the state
        this object holds, as tf.estimator re-read it on every call. A non-chief worker keeps
        its in-memory state: the chief's checkpoint of it may not be written yet."""
        if not self._distribution.is_chief:
            return
        latest = self.latest_checkpoint()
        if latest and latest != self._holds:
            self._checkpoint.read(latest).expect_partial()
            self._holds = latest

    def _warm_start(self) -> None:
        path = warm_start(self.variables(), self._warm_start_from, self._optimizers)
        self._warm_started = True
        self._progress(f"warm-started variables from {path}")

    def _require_weights(self, checkpoint_path: str | None) -> None:
        """Fail unless there are weights to run with (see :meth:`_weights`)."""
        # distribution: a non-chief worker that trained holds the state in memory; the chief's
        # checkpoint of it may not be written yet.
        if checkpoint_path or self._distribution.is_chief or self._synced < 0:
            self._require_checkpoint(checkpoint_path or self.latest_checkpoint())

    @contextlib.contextmanager
    def _weights(self, checkpoint_path: str | None):
        """Run with the weights of ``checkpoint_path`` (default: the latest)."""
        latest = self.latest_checkpoint()
        self._require_weights(checkpoint_path)
        self._sync()
        self._refresh()
        swap = checkpoint_path is not None and checkpoint_path != self._holds
        if swap:
            self._checkpoint.read(checkpoint_path).expect_partial()
        try:
            yield
        finally:
            back = self._holds or latest
            if swap and back:
                self._checkpoint.read(back).expect_partial()

    # -- the model in PREDICT mode -----------------------------------------------------------
    def predictions(self, features) -> Any:
        """The model_fn's ``predictions`` for ``features`` with this Estimator's variables.

        Call it inside a ``tf.function`` (an export signature, a custom loop); the first call
        ever defines the model's variables.
        """
        return self.predict_spec(features).predictions

    def predict_spec(self, features) -> EstimatorSpec:
        """The model_fn's PREDICT ``EstimatorSpec`` for ``features`` (inside a
        ``tf.function``; see :meth:`predictions`): its ``export_outputs`` feed the export."""
        self._seed_first_trace()
        self._predict_step.assign(self._global_step)
        with self._store.scope(ModeKeys.PREDICT, global_step=self._predict_step):
            spec = self._model_fn(features, None, ModeKeys.PREDICT)
        self._prediction_hooks = spec.prediction_hooks  # hooks: the latest PREDICT trace's
        return spec

    def _seed_first_trace(self) -> None:
        """``tf_random_seed`` seeds the initial values: right before the first trace."""
        if not self._store.established and self.config.tf_random_seed is not None:
            keras.utils.set_random_seed(self.config.tf_random_seed)

    def _establish(self, element_spec) -> None:
        """Trace the model_fn once in PREDICT mode (not run), in the training distribution's
        scope, when no trace has created the model's variables yet: for :meth:`predict`, and
        for :meth:`evaluate` when evaluation does not run under training's strategy (the
        model's variables are training's: distributed by its strategy, or plain)."""
        if not self._store.established:
            features_spec, _ = split_element(element_spec)
            self._seed_first_trace()
            with self._distribution.scope():  # distribution: model variables are distributed
                tf.function(self.predictions, autograph=False).get_concrete_function(
                    features_spec)

    # -- train -------------------------------------------------------------------------------
    def train(self, input_fn: Callable, hooks: Sequence | None = None, steps: int | None = None,
              max_steps: int | None = None,
              saving_listeners: Sequence | None = None) -> Estimator:
        """Train on ``input_fn``'s dataset for ``steps`` more steps, up to global step
        ``max_steps``, until the input ends or until a hook stops it; checkpoint on the way
        and at the end. ``hooks`` (and the model_fn's ``training_hooks``) and
        ``saving_listeners`` run at loop boundaries, see :mod:`.hooks`.

        Raises:
            NanLossError: a step produced a non-finite loss (that state is not saved).
        """
        steps, max_steps = _check_steps(steps, max_steps)
        hooks, listeners = as_hooks(hooks), as_listeners(saving_listeners)
        if max_steps is not None and self.global_step >= max_steps:
            self._progress(f"skipping training: global step {self.global_step} >= max_steps "
                           f"{max_steps}")
            return self
        dataset = call_input_fn(input_fn, self.params, self.config, ModeKeys.TRAIN,
                                self._distribution.input_context())
        # The first TRAIN trace creates the model's variables (never a PREDICT trace: as in
        # tf.estimator, training calls the model_fn in TRAIN mode only).
        self._seed_first_trace()
        # distribution: variables and slots first (one traced step), then the distributed
        # input.
        self._trainer.build(dataset.element_spec)
        iterator = self._distribution.iterator(dataset)
        self._distribution.trace(self._trainer.loop, iterator)
        self._adopt_scaffold(self._trainer.scaffold)
        self._sync()
        self._refresh()  # another writer's newer checkpoint, if any
        start = int(self._global_step.numpy())
        target = max_steps if max_steps is not None else (start + steps if steps else None)
        runner = self._train_runner(hooks)
        runner.begin()
        self._progress(f"training from global step {start}"
                       + (f" to {target}" if target is not None else " until the input ends"))
        reporter = Reporter(self._summary_writer(), self.config.save_summary_steps,
                            self.config.log_step_count_steps, self._progress, start)
        engine = LoopEngine(lambda size, names: self._run_loop(iterator, size, names),
                            self._save, self._rollback, self.config, self._progress)
        try:
            TrainDriver(engine, runner, listeners, reporter, target).run(start)
        finally:
            reporter.close()
            self._distribution.cleanup()  # distribution: a non-chief's scratch summaries
        runner.end()
        return self

    def _adopt_scaffold(self, scaffold) -> None:
        """``EstimatorSpec(scaffold=Scaffold(saver=tf.train.Checkpoint(**objects)))`` (TRAIN):
        the objects join this Estimator's checkpoint under their names, at its root, so that
        ``tf.train.Checkpoint(**objects).restore(latest)`` restores them, as with
        tf.estimator's object-based saver. The model_fn's global step (``step=
        tf.compat.v1.train.get_global_step()``) is saved as the Estimator's."""
        checkpoint = tf1.scaffold_checkpoint(scaffold)
        if checkpoint is None or self._scaffold_adopted:
            return
        for name, obj in checkpoint._trackable_children(  # noqa: SLF001 (no public listing)
                save_type="checkpoint").items():
            if name == "save_counter":
                continue
            if name in _OWN_CHILDREN:
                raise ValueError(f"EstimatorSpec(scaffold=Scaffold(saver=tf.train.Checkpoint("
                                 f"{name}=...))): {name!r} is a name of the Estimator's own "
                                 f"checkpoint ({', '.join(_OWN_CHILDREN)}); use another name")
            if obj is self._trainer.step_view:
                obj = self._global_step
            setattr(self._checkpoint, name, obj)
        self._scaffold_adopted = True

    def _summary_writer(self) -> tf.summary.SummaryWriter:
        """The writer of training's TensorBoard events in model_dir: the engine's scalars
        (loss, steps/sec) and the model_fn's summaries, one per Estimator (the training loop
        holds it once traced)."""
        if self._writer is None:
            with tf.init_scope():
                self._writer = tf.summary.create_file_writer(
                    self._distribution.write_dir(self.model_dir))
        return self._writer

    def _session(self) -> HookSession:
        return HookSession(self._global_step, self.variables)

    def _train_runner(self, hooks: tuple) -> HookRunner:
        """``hooks`` plus the training_hooks (and, on the chief, training_chief_hooks) of the
        model_fn's latest TRAIN trace."""
        chief_hooks, spec_hooks = self._trainer.spec_hooks
        if self._distribution.is_chief:
            spec_hooks = spec_hooks + chief_hooks
        return HookRunner(hooks + as_hooks(spec_hooks, "training_hooks"), self._session())

    def _run_loop(self, iterator, size: int, names: tuple[str, ...]) -> tuple:
        """One training loop of ``size`` steps: (ran, loss, examples, finite, {name: value of
        each model_fn tensor hooks fetch, at the last step}); see :mod:`.hooks`."""
        if not names:
            return (*self._distribution.run_loop(  # distribution
                self._trainer.loop, iterator, size), {})
        if isinstance(self._distribution.strategy, tf.distribute.ParameterServerStrategy):
            raise ValueError("Hooks cannot fetch model_fn tensors under ParameterServerStrategy "
                             f"(workers run the steps); received fetches {list(names)}; fetch "
                             "'loss', 'global_step' or variable names instead")
        with self._distribution.scope():
            *head, fetched = self._trainer.fetch_loop(iterator, tf.constant(size, tf.int64),
                                                      names)
        return (*(value.numpy() for value in head), fetched)

    def _save(self, step: int) -> int:
        path = self._manager.save(checkpoint_number=step)
        self._synced = self._tracked_count()
        self._holds = path
        if not self._distribution.is_chief:  # distribution: every worker saves, chief keeps
            self._distribution.cleanup()
            path = f"{path} (non-chief worker: discarded)"
        self._progress(f"saved checkpoint {path}")
        return step

    def _rollback(self) -> str | None:
        """Put the in-memory state back to the latest checkpoint (what the engine does when
        training fails: between calls in-memory state equals the latest checkpoint)."""
        latest = self.latest_checkpoint()
        if latest:
            self._checkpoint.read(latest).expect_partial()
            self._holds = latest
        return latest

    # -- evaluate / predict --------------------------------------------------------------------
    def evaluate(self, input_fn: Callable, steps: int | None = None,
                 hooks: Sequence | None = None, checkpoint_path: str | None = None,
                 name: str | None = None) -> dict[str, Any]:
        """Metrics of the model over ``input_fn``'s dataset (``steps`` batches, or all of it):
        the model_fn's ``eval_metric_ops``, the mean ``loss`` and ``global_step``. Scalars are
        also written for TensorBoard to :meth:`eval_dir` (early stopping and ``BestExporter``
        read them back). ``hooks`` (and the model_fn's ``evaluation_hooks``) run around chunks
        of ``steps_per_loop`` batches and may fetch ``"loss"`` (the mean so far), metric
        names, ``"global_step"``, variable names and callables."""
        hooks = as_hooks(hooks)
        dataset = call_input_fn(input_fn, self.params, self.config, ModeKeys.EVAL,
                                self._evaluator.distribution.input_context())
        if steps is not None:
            dataset = dataset.take(_whole_steps("steps", steps))
        self._require_weights(checkpoint_path)
        if self._evaluator.distribution.strategy is not self._distribution.strategy:
            self._establish(dataset.element_spec)
        iterator = self._evaluator.prepare(dataset)  # traced: variables exist, then restored
        with self._weights(checkpoint_path):
            results = self._evaluator.evaluate(iterator, hooks, self._session(),
                                               self.config.steps_per_loop)
            step = int(self._global_step.numpy())
        results["global_step"] = step
        write_scalars(self.eval_dir(name), step, {
            k: v for k, v in results.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "global_step"})
        return results

    def predict(self, input_fn: Callable, predict_keys: Sequence[str] | None = None,
                hooks: Sequence | None = None, checkpoint_path: str | None = None,
                yield_single_examples: bool = True) -> Iterator[Any]:
        """Yield predictions for ``input_fn``'s features (one dict per example, or per batch
        with ``yield_single_examples=False``), as numpy values. ``hooks`` (and the model_fn's
        ``prediction_hooks``) run around each batch and may fetch prediction keys."""
        hooks = as_hooks(hooks)
        dataset = call_input_fn(input_fn, self.params, self.config, ModeKeys.PREDICT)
        self._require_weights(checkpoint_path)
        self._establish(dataset.element_spec)
        self._predictor.prepare(dataset.element_spec)  # hooks: the spec's prediction_hooks
        with self._weights(checkpoint_path):
            hooks += as_hooks(self._prediction_hooks, "prediction_hooks")
            batches = self._predictor.batches(dataset, HookRunner(hooks, self._session()))
            for outputs in batches:
                yield from unbatch(select_keys(outputs, predict_keys), yield_single_examples)

    # -- export ----------------------------------------------------------------------------
    def export_saved_model(self, export_dir_base: str | os.PathLike,
                           serving_input_receiver_fn: Callable[[], Any], assets_extra=None,
                           as_text: bool = False, checkpoint_path: str | None = None,
                           experimental_mode: str = ModeKeys.PREDICT) -> bytes:
        """Export a SavedModel to a new timestamped directory under ``export_dir_base``;
        returns its path as ``bytes``, as tf.estimator did (``os.fsdecode(path)`` for a
        ``str``). Signatures: the model_fn's PREDICT ``export_outputs`` (heads and premade
        Estimators: ``serving_default``/``classification`` or ``regression``, and
        ``predict``), else ``serving_default`` returning all predictions (see
        :mod:`.export`). ``assets_extra`` (``{path under assets.extra/: source file}``) are
        copied in; ``as_text`` is warned about and not applied (TF 2 writes a binary
        ``saved_model.pb``); ``experimental_mode`` must be PREDICT (serving signatures only).
        """
        if experimental_mode != ModeKeys.PREDICT:
            raise ValueError(f"export_saved_model(experimental_mode={experimental_mode!r}): "
                             "estflow exports the PREDICT (serving) graph only; TRAIN and EVAL "
                             "graphs are not exported (train() and evaluate() run them)")
        if as_text:
            warnings.warn("export_saved_model(as_text=True) is not applied: estflow writes a "
                          "binary saved_model.pb", stacklevel=2)
        path = export_lib.export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                                             checkpoint_path, progress=self._progress)
        export_lib.copy_assets_extra(path, assets_extra)
        return os.fsencode(path)

    def export_savedmodel(self, export_dir_base: str | os.PathLike,
                          serving_input_receiver_fn: Callable[[], Any], assets_extra=None,
                          as_text: bool = False, checkpoint_path: str | None = None,
                          strip_default_attrs: bool = False) -> bytes:
        """TF 1's name (``tf.compat.v1.estimator.Estimator``) of :meth:`export_saved_model`,
        returning the path as bytes as it did. ``strip_default_attrs`` is what TF 2 always
        does."""
        del strip_default_attrs
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn,
                                       assets_extra=assets_extra, as_text=as_text,
                                       checkpoint_path=checkpoint_path)

    def experimental_export_all_saved_models(self, export_dir_base: str | os.PathLike,
                                             input_receiver_fn_map: Mapping[str, Callable],
                                             assets_extra=None, as_text: bool = False,
                                             checkpoint_path: str | None = None) -> bytes:
        """tf.estimator's export of one SavedModel per mode: here the PREDICT receiver only
        (``{ModeKeys.PREDICT: serving_input_receiver_fn}``), as :meth:`export_saved_model`;
        returns the path as bytes.

        Raises:
            ValueError: the map has TRAIN or EVAL receivers (estflow exports serving graphs
                only) or no PREDICT one.
        """
        modes = set(input_receiver_fn_map or {})
        if modes != {ModeKeys.PREDICT}:
            raise ValueError("experimental_export_all_saved_models: estflow exports the "
                             "PREDICT (serving) graph only; expected input_receiver_fn_map="
                             "{ModeKeys.PREDICT: serving_input_receiver_fn}, received modes "
                             f"{sorted(modes)}")
        return self.export_saved_model(export_dir_base,
                                       input_receiver_fn_map[ModeKeys.PREDICT],
                                       assets_extra=assets_extra, as_text=as_text,
                                       checkpoint_path=checkpoint_path)

    def weights(self, checkpoint_path: str | None = None):
        """Context manager: the in-memory variables hold ``checkpoint_path``'s (default: the
        latest checkpoint's) values inside it. Used by exports."""
        return self._weights(checkpoint_path)

    def serving_variables(self) -> list[tf.Variable]:
        """Variables a PREDICT-mode graph reads: the model (not optimizer state), locals and
        the global step."""
        return (self._store.model_variables() + self._store.local_variables(ModeKeys.PREDICT)
                + [self._global_step, self._predict_step])  # a PREDICT model_fn's step


def _check_steps(steps: int | None, max_steps: int | None) -> tuple[int | None, int | None]:
    """``steps`` and ``max_steps`` as whole numbers (None stays None)."""
    if steps is not None and max_steps is not None:
        raise ValueError("Can not provide both steps and max_steps.")
    return (None if steps is None else _whole_steps("steps", steps),
            None if max_steps is None else _whole_steps("max_steps", max_steps))


def _whole_steps(name: str, value) -> int:
    """A step count; a float (``steps / periods`` in TF 1 tutorials) rounds up, as
    tf.estimator's ``global_step >= start + steps`` stop did."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"Must specify {name} > 0, given: {value!r}")
    return int(math.ceil(value))
