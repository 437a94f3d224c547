"""The engine-owned variable store: AUTO_REUSE for model_fns traced many times.

A model_fn builds its layers (and so asks for its variables) every time a ``tf.function``
traces it: once per mode, again on a retrace, again for the export. Inside
:meth:`VariableStore.scope` a ``tf.variable_creator_scope`` answers each request:

- the first time, by creating the variable eagerly (under ``tf.init_scope()``) and keeping it;
- afterwards, by handing the kept variable back.

Requests are keyed by their *order within one trace*, not by name: Keras auto-names layers
(``dense``, ``dense_1``, ...) with process-wide counters that grow per trace, so names are not
stable; the order in which a deterministic model_fn asks is. Three groups keep the key space
stable across modes and processes:

- ``model``: what the *first* trace of the model_fn creates (it *establishes* the store), in
  whatever mode the Estimator is first used: TRAIN when it trains first (tf.estimator never
  called a model_fn in PREDICT mode to train, and TF 1 model_fns that compute their loss from
  the labels unconditionally need not support it), EVAL when it evaluates first, PREDICT for
  ``predict`` or an export (and for ``evaluate`` under an ``eval_distribute`` strategy that
  training does not use: the model's variables are training's). Every later trace matches its requests against this list in
  order, by ``(name, dtype, trainable)``, skipping list entries and requests that do not match
  (a PREDICT trace skips what only TRAIN created).
- ``train``: optimizer state created inside the model_fn: what a Keras or
  ``tf.compat.v1.train`` optimizer creates (its iteration count, learning rate, slots; the
  ``tf.compat.v1.train`` ones under ``tf.init_scope()``), and whatever a later TRAIN trace
  creates that the model does not have. Checkpointed with the model, by order (slot names
  follow Keras' auto-named layer paths, which are not stable).
- locals: metric accumulators (Keras and tf_keras metrics create ``ON_READ``/``SUM`` variables)
  and whatever a later EVAL/PREDICT trace creates. Never checkpointed; :meth:`reset_locals`
  puts them back to their initial values (each evaluate starts from zero).

Checkpoint keys are ``store/model/NNN_<name>`` (the position in ``model`` and the variable's
base name) and ``store/train/NNN``. A store established in a process whose model_dir already
has a checkpoint (a new process evaluating, predicting, exporting or resuming) takes its
``model`` positions from that checkpoint (:class:`VariableStore`'s ``template``): each
variable gets the key of the next checkpoint entry with its name, dtype and shape, and entries
the first trace does not create (what only TRAIN creates, when the first trace is EVAL) stay
open for a later trace to fill. So the keys are the same whichever mode a process starts with.

Every variable handed out is also registered in the TF 1 collections of the model_fn call
(``tf.compat.v1.trainable_variables()`` & co., :mod:`.tf1`), and variables created under
``tf.init_scope()`` inside the call (``tf.compat.v1.train`` optimizer slots) come here too.

Under a ``tf.distribute`` strategy (see :mod:`.distribute`) the first trace runs inside the
strategy's scope: a variable created here is a distributed one (mirrored on every replica, or
placed on a parameter server), and every replica's trace of the model_fn gets that same
variable back. (Replicas trace one after the other; one that starts while the first replica's
establishing trace is paused in a ``merge_call`` matches what that trace has created so far.)
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading

import keras
import tensorflow as tf

from estflow.estimator._engine import tf1

__all__ = ["VariableStore", "checkpoint_template"]

_log = logging.getLogger("estflow.estimator")
_SUFFIX = re.compile(r":\d+$")
_MODEL_KEY = re.compile(r"^store/model/(\d+)_(.+)/\.ATTRIBUTES/VARIABLE_VALUE$")
_TRAIN = "train"
_OPTIMIZERS = (keras.optimizers.Optimizer, tf.compat.v1.train.Optimizer)
_OPTIMIZER_FRAMES = 40  # how far up the stack an optimizer's method may be


def _base_name(name) -> str:
    """``"dnn/hiddenlayer_0/kernel:0"`` -> ``"kernel"``: the part no name scope changes."""
    return _SUFFIX.sub("", str(name or "Variable")).rsplit("/", 1)[-1]


def _is_metric(kwargs: dict) -> bool:
    sync = kwargs.get("synchronization")
    agg = kwargs.get("aggregation")
    return (sync == tf.VariableSynchronization.ON_READ
            and agg == tf.VariableAggregation.SUM)


def _lift_initial_value(kwargs: dict) -> dict:
    """A graph-tensor initial value (Keras 3 optimizers' ``iteration``) cannot leave the trace;
    lift it to a constant when it is one."""
    value = kwargs.get("initial_value")
    if tf.is_tensor(value) and not isinstance(value, tf.Variable) and not tf.executing_eagerly():
        static = tf.get_static_value(value)
        if static is None:
            raise ValueError(f"variable {kwargs.get('name')!r} is initialised from a value "
                             "computed in the traced model_fn; use a constant or an "
                             "initializer callable")
        kwargs = dict(kwargs, initial_value=static)
    return kwargs


def _signature(kwargs: dict) -> tuple:
    """(base name, dtype or None when not given, trainable) of a variable request."""
    dtype = kwargs.get("dtype")
    trainable = kwargs.get("trainable")
    if trainable is None:  # tf.Variable's default: trainable unless ON_READ
        trainable = kwargs.get("synchronization") != tf.VariableSynchronization.ON_READ
    return (_base_name(kwargs.get("name")), tf.as_dtype(dtype).name if dtype else None,
            bool(trainable))


def _components(var) -> tuple:
    """The per-device copies of a distributed variable (MirroredVariable, SyncOnReadVariable);
    empty for a plain variable."""
    values = getattr(var, "values", None)
    return tuple(values) if isinstance(values, (tuple, list)) else ()


def _matches(var: tf.Variable, want: tuple, with_name: bool = True) -> bool:
    name, dtype, trainable = want
    return ((not with_name or _base_name(var.name) == name)
            and (dtype is None or var.dtype.name == dtype) and bool(var.trainable) == trainable)


class _Slot:
    """A position of the ``model`` group: its variable, or, while open, what the checkpoint
    this store was established against holds there (name, dtype, shape)."""

    __slots__ = ("index", "name", "dtype", "shape", "var", "pending")

    def __init__(self, index: int | None, name: str, dtype: str | None, shape, var=None,
                 pending: bool = False) -> None:
        self.index = index  # None until the establishing trace ends (new positions)
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.var = var
        self.pending = pending  # created by the establishing trace now running

    @property
    def key(self) -> str:
        return f"{self.index:03d}_{self.name}"

    def accepts(self, want: tuple) -> bool:
        """Whether a request with signature ``want`` may take this position."""
        if self.var is not None:
            return _matches(self.var, want)
        name, dtype, _ = want
        return name == self.name and (dtype is None or dtype == self.dtype)


class _Untracked:
    """Bookkeeping kept out of checkpoints (a plain object: tf.Module does not look inside)."""

    def __init__(self) -> None:
        self.slots: list[_Slot] = []  # the model group's positions, in order
        self.train: list[tf.Variable] = []  # the train group, in order
        self.by_mode: dict[str, list[tf.Variable]] = {}  # locals per mode
        self.initial: dict[int, object] = {}  # local variable id -> initial value
        self.active: list[_Trace] = []  # the model_fn calls in progress, first first
        self.creating = threading.local()  # .on: inside _new (its next_creator)


def checkpoint_template(path: str | None) -> list[tuple[int, str, str, tuple]]:
    """``(position, name, dtype, shape)`` of the ``store/model/`` entries of checkpoint
    ``path`` (empty without one), in position order."""
    if not path:
        return []
    reader = tf.train.load_checkpoint(path)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    entries = []
    for key, shape in shapes.items():
        match = _MODEL_KEY.match(key)
        if match:
            entries.append((int(match.group(1)), match.group(2), dtypes[key].name,
                            tuple(shape)))
    return sorted(entries)


class VariableStore(tf.Module):
    """Every variable the model_fn creates, in stable, checkpointable groups.

    ``model`` and ``train`` are tracked, locals are not. Checkpoint keys are
    ``store/model/<NNN>_<name>`` (position and the variable's base name, e.g.
    ``store/model/000_kernel``) and ``store/train/<NNN>``.

    Args:
        template: returns the checkpoint entries the first trace aligns the ``model``
            positions with (:func:`checkpoint_template` of the model_dir's latest checkpoint;
            none when None).
    """

    def __init__(self, template=None) -> None:
        super().__init__(name="store")
        self.model: dict[str, tf.Variable] = {}
        self.train: dict[str, tf.Variable] = {}
        self._untracked = _Untracked()
        self._template = template
        self._established = False
        self._establishing: _Trace | None = None

    @property
    def established(self) -> bool:
        """True once a first trace has defined the model variables."""
        return self._established

    def tracked_count(self) -> int:
        return len(self.model_variables()) + len(self._untracked.train)

    def model_variables(self) -> list[tf.Variable]:
        return [slot.var for slot in self._untracked.slots if slot.var is not None]

    def named_variables(self) -> dict[str, tf.Variable]:
        """Tracked variables by the names checkpoints give them (``store/model/000_kernel``)."""
        named = {f"store/model/{k}": v for k, v in self.model.items()}
        named.update({f"store/train/{k}": v for k, v in self.train.items()})
        return named

    def ordered(self, variables) -> list[tf.Variable]:
        """``variables`` deduplicated, in store order (so optimizer slots, built in this order,
        get the same checkpoint keys in every process).

        A per-device component of a distributed variable (what a ``GradientTape`` watches when
        the model runs in cross-replica context) stands for the stored variable it belongs to:
        optimizers must build their slots for the distributed variable, not for one copy."""
        stored = self.model_variables() + self._untracked.train
        owners = {}
        for v in stored:
            owners[id(v)] = v
            owners.update({id(c): v for c in _components(v)})
        unique = list({id(v): v for v in (owners.get(id(v), v) for v in variables)}.values())
        index = {id(v): (0, i, "") for i, v in enumerate(self.model_variables())}
        index.update({id(v): (1, i, "") for i, v in enumerate(self._untracked.train)})
        return sorted(unique, key=lambda v: index.get(id(v), (2, 0, v.name)))

    @contextlib.contextmanager
    def scope(self, mode: str, *, global_step: tf.Variable | None = None, summaries=None):
        """Route variable creation in a model_fn call (made while tracing) to the store, and
        give the call tf.estimator's TF 1 graph state (:mod:`.tf1`): fresh collections holding
        the variables it gets and ``global_step``; summaries inside ``summaries`` (a context
        manager, :func:`.tf1.summaries`), else dropped. Yields the call's :class:`_Trace`.

        The first call establishes the store (module docstring); if it fails, what it created
        is forgotten. Variables created under ``tf.init_scope()`` inside the call (the slots of
        a ``tf.compat.v1.train`` optimizer) come to the store too."""
        establish = not self._established and self._establishing is None
        graph = tf1.ModelFnGraph(global_step)
        trace = _Trace(self, mode, establish, graph.register)
        if establish:
            self._begin(trace)
        ok = False
        self._untracked.active.append(trace)
        try:
            with contextlib.ExitStack() as stack:
                current = tf.compat.v1.get_default_graph()
                with tf.init_scope():
                    if tf.compat.v1.get_default_graph() is not current:
                        stack.enter_context(tf.variable_creator_scope(trace.outer_creator))
                stack.enter_context(tf.variable_creator_scope(trace.creator))
                stack.enter_context(graph)
                stack.enter_context(summaries if summaries is not None else tf1.muted())
                stack.enter_context(tf1.optimizer_semantics(mode))
                yield trace
            ok = True
        finally:
            self._untracked.active.remove(trace)
            if establish:
                self._end(trace, ok)

    @contextlib.contextmanager
    def cross_replica_scope(self):
        """Around ``strategy.run`` of a model_fn step: variables created in cross-replica
        context while a model_fn call is in progress (a ``tf.compat.v1.train`` optimizer
        creates its slots in ``merge_call``, which a MirroredStrategy runs on the calling
        thread, outside the replicas' threads) come to the store as that call's (the first
        replica's, whose optimizer's ``merge_call`` runs) requests."""
        with contextlib.ExitStack() as stack:
            current = tf.compat.v1.get_default_graph()
            with tf.init_scope():
                if tf.compat.v1.get_default_graph() is not current:
                    stack.enter_context(tf.variable_creator_scope(self._cross_replica))
            stack.enter_context(tf.variable_creator_scope(self._cross_replica))
            yield

    def _cross_replica(self, next_creator, **kwargs):
        active = self._untracked.active
        if not active or getattr(self._untracked.creating, "on", False):
            return next_creator(**kwargs)  # no call in progress, or the store creating
        return active[0].outer_creator(next_creator, **kwargs)

    def reset_locals(self, mode: str) -> None:
        """Assign each local variable of ``mode`` its initial value (metrics back to zero)."""
        for var in self.local_variables(mode):
            var.assign(self._untracked.initial[id(var)])

    def local_variables(self, mode: str) -> list[tf.Variable]:
        by_mode = self._untracked.by_mode
        return list(by_mode.get(mode, ())) + list(by_mode.get(f"metric:{mode}", ()))

    # -- establishing -----------------------------------------------------------------------
    def _begin(self, trace: _Trace) -> None:
        self._establishing = trace
        if not self._untracked.slots and self._template is not None:
            self._untracked.slots = [_Slot(i, name, dtype, shape)
                                     for i, name, dtype, shape in self._template()]

    def _end(self, trace: _Trace, ok: bool) -> None:
        """Finish the establishing ``trace``: give new positions their keys (``ok``), or forget
        what it created."""
        self._establishing = None
        slots = self._untracked.slots
        if not ok:
            self._untracked.slots = [s for s in slots if not s.pending]
            for slot in self._untracked.slots:
                if id(slot.var) in trace.created:
                    slot.var = None
            self._untracked.train = [v for v in self._untracked.train
                                     if id(v) not in trace.created]
            return
        start = max((s.index for s in slots if s.index is not None), default=-1) + 1
        for slot in slots:
            if slot.pending:
                slot.index, slot.pending = start, False
                start += 1
        for slot in slots:
            if slot.var is not None:
                self.model[slot.key] = slot.var
        train, self._untracked.train = self._untracked.train, []
        for var in train:
            self._add_train(var)
        self._established = True

    # -- creation (called by _Trace) --------------------------------------------------------
    def _new(self, next_creator, kwargs: dict) -> tf.Variable:
        kwargs = _lift_initial_value(kwargs)  # in the trace's graph, before leaving it
        # Created eagerly and initialised now: nothing for an enclosing tf.function to lift,
        # so it need not trace itself a second time "because variables were created".
        kwargs["experimental_enable_variable_lifting"] = False
        # A TF 1 caching device (tf.compat.v1.nn.dynamic_rnn sets ``lambda op: op.device`` on
        # its scope inside a while loop) places reads, a speed hint; eagerly it is an error.
        if callable(kwargs.get("caching_device")):
            kwargs["caching_device"] = None
        creating = self._untracked.creating
        previous, creating.on = getattr(creating, "on", False), True
        try:
            with tf.init_scope():
                return next_creator(**kwargs)
        finally:
            creating.on = previous

    def _fill(self, slot: _Slot, var: tf.Variable) -> None:
        slot.var = var
        if not slot.pending and slot.index is not None and self._established:
            self.model[slot.key] = var

    def _add_train(self, var: tf.Variable) -> None:
        # Order only: names here are not stable (Keras names optimizer slots after the
        # auto-named layer path, e.g. "dense_36_kernel_momentum").
        self.train[f"{len(self._untracked.train):03d}"] = var
        self._untracked.train.append(var)

    def _add_local(self, mode: str, var: tf.Variable) -> None:
        self._untracked.by_mode.setdefault(mode, []).append(var)
        with tf.init_scope():
            self._untracked.initial[id(var)] = var.read_value()


class _Trace:
    """Per-trace cursor state: which stored variable answers the next request."""

    def __init__(self, store: VariableStore, mode: str, establish: bool,
                 register=lambda var, kwargs, local=False: None) -> None:
        self.store = store
        self.mode = mode
        self.establish = establish
        self.register = register  # TF 1 collections (tf1.ModelFnGraph.register)
        self.cursor = 0  # the next model position a request may take
        self.extra = 0
        self.metric = 0
        self.created: set[int] = set()  # establishing: ids of the variables it created

    def creator(self, next_creator, **kwargs):
        var, local = self._answer(next_creator, kwargs, outer=False)
        self.register(var, kwargs, local)
        return var

    def outer_creator(self, next_creator, **kwargs):
        """Requests made under ``tf.init_scope()`` inside the call."""
        var, local = self._answer(next_creator, kwargs, outer=True)
        self.register(var, kwargs, local)
        return var

    def _answer(self, next_creator, kwargs, outer: bool) -> tuple[tf.Variable, bool]:
        """(the variable for this request, whether it is a local)."""
        if _is_metric(kwargs):
            return self._local(next_creator, kwargs, f"metric:{self.mode}", self.metric,
                               "metric"), True
        optimizer = _in_optimizer()
        if self.establish and not (optimizer and self.mode != _TRAIN):
            var = self.store._new(next_creator, kwargs)
            self.created.add(id(var))
            if (outer or optimizer) and self.mode == _TRAIN:  # optimizer state
                self.store._untracked.train.append(var)
            else:
                self._place(var)
            return var, False
        var = None if optimizer else self._match(next_creator, kwargs)
        if var is not None:
            return var, False
        if self.mode == _TRAIN:
            return self._train_extra(next_creator, kwargs), False
        _log.debug("model_fn created %r in mode %r only; it is not checkpointed",
                   kwargs.get("name"), self.mode)
        return self._local(next_creator, kwargs, self.mode, self.extra, "extra"), False

    def _place(self, var: tf.Variable) -> None:
        """Establishing: the open checkpoint position for ``var`` at or after the cursor, else
        a new position."""
        slots = self.store._untracked.slots
        want = (_base_name(var.name), var.dtype.name, bool(var.trainable))
        for i in range(self.cursor, len(slots)):
            slot = slots[i]
            if slot.var is None and slot.accepts(want) and _same_shape(slot, var):
                self.store._fill(slot, var)
                self.cursor = i + 1
                return
        slots.append(_Slot(None, want[0], want[1], tuple(var.shape), var, pending=True))
        self.cursor = len(slots)

    def _match(self, next_creator, kwargs) -> tf.Variable | None:
        """The model variable for a request of a later trace: the first position at or after
        the cursor that accepts it (an open one gets a new variable, if its shape fits)."""
        slots = self.store._untracked.slots
        want = _signature(kwargs)
        created = None
        for i in range(self.cursor, len(slots)):
            slot = slots[i]
            if not slot.accepts(want):
                continue
            if slot.var is None:
                if created is None:
                    created = self.store._new(next_creator, kwargs)
                if not _same_shape(slot, created):
                    continue
                self.store._fill(slot, created)
            self.cursor = i + 1
            return slot.var
        return None

    def _train_extra(self, next_creator, kwargs):
        index, self.extra = self.extra, self.extra + 1
        existing = self.store._untracked.train
        if index < len(existing):
            return _checked(existing[index], kwargs, "train")
        var = self.store._new(next_creator, kwargs)
        self.store._add_train(var)
        return var

    def _local(self, next_creator, kwargs, key: str, index: int, counter: str):
        setattr(self, counter, index + 1)
        existing = self.store._untracked.by_mode.get(key, [])
        if index < len(existing):
            return _checked(existing[index], kwargs, key)
        var = self.store._new(next_creator, kwargs)
        self.store._add_local(key, var)
        return var


def _in_optimizer() -> bool:
    """Whether a Keras or ``tf.compat.v1.train`` optimizer is creating the variable being
    requested (one of its methods is on the stack): its iteration count, learning rate and
    slots, created in the model_fn (``keras.optimizers.Adam(...)`` built there, its
    ``apply_gradients`` in a train_op), are optimizer state, whose names (the layer path of
    each slot's variable) are not stable."""
    frame = sys._getframe(2)
    for _ in range(_OPTIMIZER_FRAMES):
        if frame is None:
            return False
        owner = frame.f_locals.get("self")
        if owner is not None and isinstance(owner, _optimizer_classes()):
            return True
        frame = frame.f_back
    return False


def _optimizer_classes() -> tuple:
    """Keras 3 and ``tf.compat.v1.train`` optimizers, and tf_keras' (Keras 2: what
    ``tf.keras`` is once a library such as tensorflow_transform imported it) when loaded."""
    tf_keras = sys.modules.get("tf_keras")
    if tf_keras is None:
        return _OPTIMIZERS
    legacy = getattr(getattr(tf_keras, "optimizers", None), "legacy", None)
    extra = tuple(cls for cls in (getattr(tf_keras.optimizers, "Optimizer", None),
                                  getattr(legacy, "Optimizer", None)) if isinstance(cls, type))
    return _OPTIMIZERS + extra


def _same_shape(slot: _Slot, var: tf.Variable) -> bool:
    return slot.shape is None or tuple(slot.shape) == tuple(var.shape)


def _checked(var: tf.Variable, kwargs: dict, group: str) -> tf.Variable:
    want = _signature(kwargs)
    if not _matches(var, want, with_name=False):
        raise ValueError(
            f"model_fn asked for variable {want[0]!r} ({want[1]}, trainable={want[2]}) where an "
            f"earlier trace created {var.name!r} ({var.dtype.name}, trainable={var.trainable}) "
            f"in group {group!r}: a model_fn must create its variables in the same order every "
            "time it is called in a mode")
    return var
