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

- ``model``: what the model_fn creates in PREDICT mode (the network). The engine traces PREDICT
  first (``establish=True``); TRAIN and EVAL traces then match their requests against this
  list in order, by ``(name, dtype, trainable)``, skipping requests that do not match.
- ``train``: what only TRAIN creates (an optimizer built inside the model_fn, a dropout seed
  state created only when training). Checkpointed with the model.
- locals: metric accumulators (Keras and tf_keras metrics create ``ON_READ``/``SUM`` variables)
  and whatever only EVAL/PREDICT creates. Never checkpointed; :meth:`reset_locals` puts them back
  to their initial values (each evaluate starts from zero).

Every variable handed out is also registered in the TF 1 collections of the model_fn call
(``tf.compat.v1.trainable_variables()`` & co., :mod:`.tf1`), and variables created under
``tf.init_scope()`` inside the call (``tf.compat.v1.train`` optimizer slots) come here too.

Under a ``tf.distribute`` strategy (see :mod:`.distribute`) the first trace runs inside the
strategy's scope: a variable created here is a distributed one (mirrored on every replica, or
placed on a parameter server), and every replica's trace of the model_fn gets that same
variable back.
"""

from __future__ import annotations

import contextlib
import logging
import re

import tensorflow as tf

from estflow.components.estimator._engine import tf1

__all__ = ["VariableStore"]

_log = logging.getLogger("estflow.estimator")
_SUFFIX = re.compile(r":\d+$")
_TRAIN = "train"


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


class _Untracked:
    """Bookkeeping kept out of checkpoints (a plain object: tf.Module does not look inside)."""

    def __init__(self) -> None:
        self.model: list[tf.Variable] = []  # the tracked groups again, as ordered lists
        self.train: list[tf.Variable] = []
        self.by_mode: dict[str, list[tf.Variable]] = {}  # locals per mode
        self.initial: dict[int, object] = {}  # local variable id -> initial value


class VariableStore(tf.Module):
    """Every variable the model_fn creates, in stable, checkpointable groups.

    ``model`` and ``train`` are tracked, locals are not. Checkpoint keys are
    ``store/model/<NNN>_<name>`` (creation order and the variable's base name, e.g.
    ``store/model/000_kernel``) and ``store/train/<NNN>``.
    """

    def __init__(self) -> None:
        super().__init__(name="store")
        self.model: dict[str, tf.Variable] = {}
        self.train: dict[str, tf.Variable] = {}
        self._untracked = _Untracked()
        self._established = False

    @property
    def established(self) -> bool:
        """True once a PREDICT trace has defined the model variables."""
        return self._established

    def tracked_count(self) -> int:
        return len(self._untracked.model) + len(self._untracked.train)

    def model_variables(self) -> list[tf.Variable]:
        return list(self._untracked.model)

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
        owners = {}
        for v in self._untracked.model + self._untracked.train:
            owners[id(v)] = v
            owners.update({id(c): v for c in _components(v)})
        unique = list({id(v): v for v in (owners.get(id(v), v) for v in variables)}.values())
        index = {id(v): (0, i, "") for i, v in enumerate(self._untracked.model)}
        index.update({id(v): (1, i, "") for i, v in enumerate(self._untracked.train)})
        return sorted(unique, key=lambda v: index.get(id(v), (2, 0, v.name)))

    @contextlib.contextmanager
    def scope(self, mode: str, establish: bool = False, *,
              global_step: tf.Variable | None = None, summaries=None):
        """Route variable creation in a model_fn call (made while tracing) to the store, and
        give the call tf.estimator's TF 1 graph state (:mod:`.tf1`): fresh collections holding
        the variables it gets and ``global_step``; summaries inside ``summaries`` (a context
        manager, :func:`.tf1.summaries`), else dropped.

        Variables created under ``tf.init_scope()`` inside the call (the slots of a
        ``tf.compat.v1.train`` optimizer) come to the store too."""
        graph = tf1.ModelFnGraph(global_step)
        trace = _Trace(self, mode, establish, graph.register)
        with contextlib.ExitStack() as stack:
            current = tf.compat.v1.get_default_graph()
            with tf.init_scope():
                if tf.compat.v1.get_default_graph() is not current:
                    stack.enter_context(tf.variable_creator_scope(trace.creator))
            stack.enter_context(tf.variable_creator_scope(trace.creator))
            stack.enter_context(graph)
            stack.enter_context(summaries if summaries is not None else tf1.muted())
            yield
        if establish:
            self._established = True

    def reset_locals(self, mode: str) -> None:
        """Assign each local variable of ``mode`` its initial value (metrics back to zero)."""
        for var in self.local_variables(mode):
            var.assign(self._untracked.initial[id(var)])

    def local_variables(self, mode: str) -> list[tf.Variable]:
        by_mode = self._untracked.by_mode
        return list(by_mode.get(mode, ())) + list(by_mode.get(f"metric:{mode}", ()))

    # -- creation (called by _Trace) --------------------------------------------------------
    def _new(self, next_creator, kwargs: dict) -> tf.Variable:
        kwargs = _lift_initial_value(kwargs)  # in the trace's graph, before leaving it
        # Created eagerly and initialised now: nothing for an enclosing tf.function to lift,
        # so it need not trace itself a second time "because variables were created".
        kwargs["experimental_enable_variable_lifting"] = False
        with tf.init_scope():
            return next_creator(**kwargs)

    def _add_model(self, var: tf.Variable) -> None:
        self.model[f"{len(self._untracked.model):03d}_{_base_name(var.name)}"] = var
        self._untracked.model.append(var)

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
        self.model_cursor = 0
        self.extra = 0
        self.metric = 0

    def creator(self, next_creator, **kwargs):
        var, local = self._answer(next_creator, kwargs)
        self.register(var, kwargs, local)
        return var

    def _answer(self, next_creator, kwargs) -> tuple[tf.Variable, bool]:
        """(the variable for this request, whether it is a local)."""
        if _is_metric(kwargs):
            return self._local(next_creator, kwargs, f"metric:{self.mode}", self.metric,
                               "metric"), True
        if self.establish:
            var = self.store._new(next_creator, kwargs)
            self.store._add_model(var)
            return var, False
        model = self.store._untracked.model
        if self.model_cursor < len(model) and _matches(model[self.model_cursor],
                                                       _signature(kwargs)):
            self.model_cursor += 1
            return model[self.model_cursor - 1], False
        if self.mode == _TRAIN:
            return self._train_extra(next_creator, kwargs), False
        _log.debug("model_fn created %r in mode %r only; it is not checkpointed",
                   kwargs.get("name"), self.mode)
        return self._local(next_creator, kwargs, self.mode, self.extra, "extra"), False

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


def _checked(var: tf.Variable, kwargs: dict, group: str) -> tf.Variable:
    want = _signature(kwargs)
    if not _matches(var, want, with_name=False):
        raise ValueError(
            f"model_fn asked for variable {want[0]!r} ({want[1]}, trainable={want[2]}) where an "
            f"earlier trace created {var.name!r} ({var.dtype.name}, trainable={var.trainable}) "
            f"in group {group!r}: a model_fn must create its variables in the same order every "
            "time it is called in a mode")
    return var
