"""TF 1 idioms inside a model_fn: the graph world tf.estimator gave every model_fn call.

tf.estimator built a fresh ``tf.Graph`` for each model_fn call, with a global step in it; TF 1
code inside model_fns reads that graph's collections. The engine calls the model_fn while a
``tf.function`` traces (a ``FuncGraph``), so it recreates that world for the call
(:class:`ModelFnGraph`):

- **collections start empty** (``GLOBAL_VARIABLES``, ``TRAINABLE_VARIABLES``, ``UPDATE_OPS``,
  ``LOSSES``, ``SUMMARIES``, ..., and the ``tf.compat.v1.get_variable`` / ``variable_scope``
  stores) and are put back when the call returns: nothing leaks between traces, modes or
  Estimators (``GLOBAL_VARIABLES``/``TRAINABLE_VARIABLES`` of a ``FuncGraph`` are the
  process-wide default graph's lists);
- **every variable the store hands out is registered** as TF 1 graph mode registered it
  (``GLOBAL_VARIABLES``, plus ``TRAINABLE_VARIABLES`` when trainable, or the ``collections``
  a ``tf.compat.v1`` creation asks for; metric accumulators in ``LOCAL_VARIABLES``), so
  ``tf.compat.v1.trainable_variables()`` and ``tf.compat.v1.train.*Optimizer.minimize(loss)``
  (which reads that collection) see the model;
- **names start at the graph's root**, not inside the engine's loop (``while/cond/``): op
  names, hence the names hooks fetch, and summary tags are those tf.estimator gave;
- **the global step is in ``GLOBAL_STEP``**: ``tf.compat.v1.train.get_global_step()`` and
  ``get_or_create_global_step()`` return it. In TRAIN mode it is the trainer's per-step copy
  of the engine's step (``Trainer``): it holds the step when the step starts, so learning-rate
  schedules read the right value, and an optimizer's ``minimize(global_step=...)`` may
  assign-add it; the engine counts the step itself, exactly once.

Outside TRAIN, applying gradients does nothing (:func:`optimizer_semantics`): a ``train_op`` a
model_fn builds in every mode does not train during ``evaluate``/``predict``; a Keras
optimizer's ``apply_gradients`` returns a tensor, which ``tf.group`` takes.

Summaries: ``tf.compat.v1.summary.*`` (and ``tf.summary.*``) inside a TRAIN model_fn go to
model_dir's event file at every ``save_summary_steps``-th step (:func:`summaries`); in EVAL
and PREDICT they are dropped (:func:`muted`), as tf.estimator's evaluation ignored them.

TF 1 idioms that cannot work on TF 2.21 with Keras 3 fail at the first trace with an error
naming the call and its replacement (:func:`explain`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading

import tensorflow as tf

__all__ = ["ModelFnGraph", "summaries", "muted", "explain", "is_v1_optimizer",
           "optimizer_semantics", "scaffold_checkpoint"]

_KEYS = tf.compat.v1.GraphKeys
# tf.compat.v1.get_variable's variable store and variable_scope's name counters (internal
# collection keys of tensorflow/python/ops/variable_scope.py); fresh per call as in TF 1.
_VARIABLE_STORES = (("__variable_store",), ("__varscope",))


def _collection_keys() -> list:
    keys = [value for name, value in vars(_KEYS).items()
            if name.isupper() and isinstance(value, str)]
    return sorted(set(keys)) + list(_VARIABLE_STORES)


# Collections inside open model_fn calls: id(collection list) -> [[call, contents before it]]
_OPEN: dict[int, list[list]] = {}
_OPEN_LOCK = threading.Lock()


class ModelFnGraph:
    """The TF 1 graph state of one model_fn call (module docstring): enter it in the graph
    the model_fn runs in, around the call.

    Args:
        global_step: the variable ``tf.compat.v1.train.get_global_step()`` returns (None:
            none, as in a model_fn called outside an Estimator).
    """

    def __init__(self, global_step: tf.Variable | None) -> None:
        self._global_step = global_step
        self._graph = None
        self._root = None
        self._saved: dict = {}

    def __enter__(self) -> ModelFnGraph:
        self._graph = tf.compat.v1.get_default_graph()
        keys = set(_collection_keys()) | set(self._graph.get_all_collection_keys())
        with _OPEN_LOCK:
            for key in keys:
                ref = self._graph.get_collection_ref(key)
                self._saved[key] = ref
                _OPEN.setdefault(id(ref), []).append([self, list(ref)])
                del ref[:]
        if self._global_step is not None:
            self._add(self._global_step, (_KEYS.GLOBAL_VARIABLES, _KEYS.GLOBAL_STEP))
        self._root = self._graph.name_scope(None)  # the engine's loop scopes are not its
        self._root.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        """Put each collection back as it was before the call. Calls may overlap without
        nesting (a MirroredStrategy's replicas trace one after the other, but a replica paused
        in ``merge_call`` is still inside its call when the next one starts, and several
        graphs share the process-wide variable collections): the contents from before the
        first call come back when the last one ends."""
        self._root.__exit__(*exc)
        graph, self._graph = self._graph, None
        with _OPEN_LOCK:
            for ref in self._saved.values():
                stack = _OPEN[id(ref)]
                i = next(j for j, entry in enumerate(stack) if entry[0] is self)
                if i == len(stack) - 1:
                    ref[:] = stack[i][1]
                else:  # a later call is still open: it restores what this one found
                    stack[i + 1][1] = stack[i][1]
                del stack[i]
                if not stack:
                    del _OPEN[id(ref)]
            for key in set(graph.get_all_collection_keys()) - set(self._saved):
                ref = graph.get_collection_ref(key)  # created during the call
                if id(ref) not in _OPEN:
                    del ref[:]
        self._saved = {}

    def register(self, var, kwargs: dict, local: bool = False) -> None:
        """Put a variable the store handed to the model_fn in its TF 1 collections.

        Args:
            var: the variable.
            kwargs: the creation request (``collections`` of a ``tf.compat.v1`` request are
                honoured).
            local: a metric accumulator or another variable kept out of checkpoints.
        """
        if self._graph is None:
            return
        collections = kwargs.get("collections")
        if collections is None:
            collections = [_KEYS.LOCAL_VARIABLES if local else _KEYS.GLOBAL_VARIABLES]
        collections = list(collections)
        if getattr(var, "trainable", False) and _KEYS.TRAINABLE_VARIABLES not in collections:
            collections.append(_KEYS.TRAINABLE_VARIABLES)
        self._add(var, collections)

    def _add(self, var, collections) -> None:
        for key in collections:
            ref = self._graph.get_collection_ref(key)
            if not any(v is var for v in ref):
                ref.append(var)


_NOOP_WRITER = tf.summary.create_noop_writer()


def _as_default(writer, step):
    """``writer`` as the default writer, also for a no-op writer (whose own ``as_default``
    sets nothing, so ``tf.compat.v1.summary`` would warn about a missing writer)."""
    return tf.summary.SummaryWriter.as_default(writer, step)


@contextlib.contextmanager
def summaries(writer, step: tf.Tensor, every: int | None):
    """Inside a TRAIN model_fn call: summaries go to ``writer`` at ``step`` (the step count
    once this step is done), recorded when ``step`` is a multiple of ``every``. (The writer is
    not flushed at the end of the call, which ``as_default`` would do on every step: the
    engine flushes it when ``train`` ends.)"""
    if writer is None or not every:
        with muted():
            yield
        return
    record = tf.equal(tf.math.floormod(step, tf.cast(every, step.dtype)), 0)
    context = _as_default(writer, step)
    context.__enter__()
    try:
        with tf.summary.record_if(record):
            yield
    finally:
        _as_default(_NOOP_WRITER, None).__enter__()  # what the exit below flushes
        context.__exit__(None, None, None)


@contextlib.contextmanager
def muted():
    """Summaries are dropped (and ``tf.compat.v1.summary`` does not warn about a missing
    writer)."""
    with _as_default(_NOOP_WRITER, 0), tf.summary.record_if(False):
        yield


_CALL = threading.local()  # optimizer_semantics(): per thread (replicas trace in their own)


@contextlib.contextmanager
def optimizer_semantics(mode: str):
    """Around a model_fn call: optimizers behave as tf.estimator's model_fns saw them.

    - Outside TRAIN, applying gradients does nothing. A TF 1 model_fn may build its
      ``train_op`` in every mode (``optimizer.minimize(loss, global_step=...)`` before
      ``return EstimatorSpec(mode, loss=loss, train_op=train_op)``); tf.estimator never ran it
      outside TRAIN. In a ``tf.function`` every stateful op runs, so there
      ``tf.compat.v1.train`` optimizers' ``apply_gradients`` (hence ``minimize``) return a
      no-op and Keras optimizers' ``apply`` (hence ``apply_gradients``) applies nothing: no
      weight, slot or global step moves during ``evaluate``/``predict``.
    - A Keras 3 optimizer's ``apply_gradients`` returns its iteration count as a tensor (Keras 3
      returns the variable), as tf.keras' returned an op or tensor: ``tf.group(
      optimizer.apply_gradients(...), ...)`` works as a ``train_op``.
    """
    _patch_optimizers()
    previous = getattr(_CALL, "mode", None)
    _CALL.mode = mode
    try:
        yield
    finally:
        _CALL.mode = previous


def _mode() -> str | None:
    return getattr(_CALL, "mode", None)


def _inert() -> bool:
    mode = _mode()
    return mode is not None and mode != "train"


_PATCHED: list = []


def _patch_optimizers() -> None:
    """Install, once, the wrappers :func:`optimizer_semantics` switches on (outside a model_fn
    call they call the original methods unchanged)."""
    if _PATCHED:
        return
    import keras  # noqa: PLC0415 (only when a model_fn runs)

    v1 = tf.compat.v1.train.Optimizer
    v1_apply = v1.apply_gradients

    def apply_gradients_v1(self, grads_and_vars, global_step=None, name=None):
        if _inert():
            return tf.no_op(name=name or "inert_train_op")
        # Adam and Adadelta keep their rate in _lr, the other TF 1 optimizers in _learning_rate.
        attr = "_learning_rate" if hasattr(self, "_learning_rate") else "_lr"
        schedule = getattr(self, "_estflow_schedule", getattr(self, attr, None))
        if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            # A TF 1 decay `estflow migrate` made a Keras schedule: the TF 1 optimizer calls a
            # callable rate with no argument; the schedule wants the step TF 1's decay read.
            step = global_step if global_step is not None else \
                tf.compat.v1.train.get_global_step()
            self._estflow_schedule = schedule
            setattr(self, attr, lambda: schedule(step))
        return v1_apply(self, grads_and_vars, global_step=global_step, name=name)

    base = keras.optimizers.Optimizer
    keras_apply, keras_apply_gradients = base.apply, base.apply_gradients

    def apply(self, grads, trainable_variables=None):
        if _inert():
            return None
        return keras_apply(self, grads, trainable_variables)

    def apply_gradients(self, grads_and_vars):
        result = keras_apply_gradients(self, grads_and_vars)
        if _mode() is None or tf.executing_eagerly():
            return result
        return tf.convert_to_tensor(result)

    for wrapper, original in ((apply_gradients_v1, v1_apply), (apply, keras_apply),
                              (apply_gradients, keras_apply_gradients)):
        functools.update_wrapper(wrapper, original)
    v1.apply_gradients = apply_gradients_v1
    base.apply, base.apply_gradients = apply, apply_gradients
    _PATCHED.append(True)


_SCAFFOLD_FIELDS = ("init_op", "init_feed_dict", "init_fn", "ready_op",
                    "ready_for_local_init_op", "local_init_op", "local_init_feed_dict",
                    "summary_op")


def scaffold_checkpoint(scaffold) -> tf.train.Checkpoint | None:
    """The ``tf.train.Checkpoint`` a TRAIN spec's ``scaffold`` asks the Estimator to save
    (``tf.compat.v1.train.Scaffold(saver=tf.train.Checkpoint(step=..., net=...))``, tf.estimator's
    way to write object-based checkpoints), or None.

    Raises:
        TypeError: ``scaffold`` is not a ``tf.compat.v1.train.Scaffold``.
        ValueError: it sets what the engine does itself (initialisation, readiness, summary
            ops) or a ``tf.compat.v1.train.Saver``.
    """
    if scaffold is None:
        return None
    if not isinstance(scaffold, tf.compat.v1.train.Scaffold):
        raise TypeError("Expected EstimatorSpec(scaffold=...) to be a "
                        f"tf.compat.v1.train.Scaffold; received {type(scaffold).__name__}")
    given = [name for name in _SCAFFOLD_FIELDS
             if getattr(scaffold, f"_{name}", None) is not None
             or name == "init_fn" and getattr(scaffold, "_user_init_fn", None) is not None]
    saver = scaffold.saver
    if given or (saver is not None and not isinstance(saver, tf.train.Checkpoint)):
        what = given + ([f"saver={type(saver).__name__}"] if saver is not None and not
                        isinstance(saver, tf.train.Checkpoint) else [])
        raise ValueError(
            f"EstimatorSpec(scaffold=Scaffold({', '.join(what)})): the Estimator initialises, "
            "restores and saves the model's variables itself, with no session to run ops in; "
            "it takes a Scaffold whose only field is saver=tf.train.Checkpoint(...) (its "
            "objects are then saved in every checkpoint, so that Checkpoint can restore them). "
            "Remove the other fields (put initial values in the variables' initializers; a "
            "warm start is Estimator(warm_start_from=...))")
    return saver


def is_v1_optimizer(value) -> bool:
    """A ``tf.compat.v1.train.Optimizer`` (Adagrad, Adam, Ftrl, GradientDescent, Momentum,
    RMSProp, ProximalAdagrad, ProximalGradientDescent, ...)."""
    return isinstance(value, tf.compat.v1.train.Optimizer)


_V1_LAYERS = {
    "batch_normalization": "keras.layers.BatchNormalization(momentum=0.99)(x, training="
                           "mode == ModeKeys.TRAIN) (its moving averages update in the call: "
                           "no UPDATE_OPS to run)",
    "dropout": "keras.layers.Dropout(rate)(x, training=mode == ModeKeys.TRAIN)",
    "dense": "keras.layers.Dense(units, activation=...)(x)",
    "conv1d": "keras.layers.Conv1D", "conv2d": "keras.layers.Conv2D",
    "conv3d": "keras.layers.Conv3D", "flatten": "keras.layers.Flatten()(x)",
    "max_pooling1d": "keras.layers.MaxPooling1D", "max_pooling2d": "keras.layers.MaxPooling2D",
    "average_pooling1d": "keras.layers.AveragePooling1D",
    "average_pooling2d": "keras.layers.AveragePooling2D",
}
# TF 1 RNN cells (tf.compat.v1.nn.rnn_cell.*, which Keras 3 stubs out under the same error as
# the layers): the Keras cell to build and wrap in keras.layers.RNN.
_V1_CELLS = {
    "BasicLSTMCell": "LSTMCell", "LSTMCell": "LSTMCell", "LayerNormBasicLSTMCell": "LSTMCell",
    "GRUCell": "GRUCell", "BasicRNNCell": "SimpleRNNCell", "RNNCell": "SimpleRNNCell",
}
_LEGACY_LAYER = re.compile(r"^`(\w+)` is not available with Keras 3\.$")
_NO_SETTER = re.compile(r"property '(\w+)' of '(\w+)' object has no setter")
_MISSING = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _cell_message(name: str) -> str:
    if name == "MultiRNNCell":
        keras_cell = "keras.layers.StackedRNNCells([cell, ...])"
    else:
        keras_cell = f"keras.layers.{_V1_CELLS.get(name, 'LSTMCell')}(units)"
    return (f"tf.compat.v1.nn.rnn_cell.{name} is not available on TF 2.21 (Keras 3 has no TF 1 "
            f"RNN cells): build {keras_cell} once and run it with keras.layers.RNN(cell, "
            "return_sequences=..., return_state=...)(inputs) in place of tf.nn.dynamic_rnn "
            "(an LSTM's state comes back as [h, c], not an LSTMStateTuple)")


def explain(error: BaseException) -> BaseException | None:
    """An error of ``error``'s type naming the TF 1 call behind it (raised by a model_fn) and
    what to use instead on TF 2.21; None when ``error`` is not one of those."""
    text = str(error)
    if isinstance(error, AttributeError):
        match = _LEGACY_LAYER.match(text)
        if match:
            name = match.group(1)
            if name.endswith("Cell") or name == "MultiRNNCell":
                return AttributeError(_cell_message(name))
            replacement = _V1_LAYERS.get(name) or f"keras.layers.{_camel(name)}"
            return AttributeError(
                f"tf.compat.v1.layers.{name} is not available on TF 2.21 (Keras 3 has no TF 1 "
                f"layers): use {replacement} inside the model_fn; the Estimator keeps its "
                "variables (one set for every mode, checkpointed) and registers them in "
                "tf.compat.v1.trainable_variables()")
        match = _NO_SETTER.search(text)
        if match and match.group(1) == "iterations":
            return AttributeError(
                f"{match.group(2)}.iterations cannot be set (`optimizer.iterations = "
                "tf.compat.v1.train.get_or_create_global_step()`, tf.keras 2.15's way to make a "
                "Keras optimizer step the global step): Keras 3 optimizers count their own "
                "iterations and the Estimator steps the global step itself, once per step. "
                "Remove the assignment; read the step with "
                "tf.compat.v1.train.get_global_step()")
        match = _MISSING.search(text)
        if match and match.group(2) == "DenseFeatures":
            return AttributeError(
                "tf.keras.layers.DenseFeatures does not exist in Keras 3: use "
                "estflow.estimator.feature_column.DenseFeatures(columns)(features) "
                "(or feature_column.input_layer(features, columns)) with this package's "
                "feature columns")
    if isinstance(error, ImportError) and "keras.optimizers.legacy" in text:
        return ImportError(
            "tf.keras.optimizers.legacy.* does not exist in Keras 3: use the Keras 3 optimizer "
            "(keras.optimizers.Adagrad(...), passed as optimizer= to a head or an "
            "EstimatorSpec: the engine applies it) or a tf.compat.v1.train optimizer "
            "(tf.compat.v1.train.AdagradOptimizer(...).minimize(loss, global_step=...))")
    return None
