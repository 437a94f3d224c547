"""The training loop: ``steps_per_loop`` steps inside one ``tf.function`` call.

One call runs a ``tf.while_loop`` over the input iterator; Python sees the global step, the
last loss and the example count once per loop, never per step (a per-step Python round trip
costs ~15% against Keras ``fit``). The loop stops early, inside the graph, at the end of the
input or at the first non-finite loss. ``fetch_loop`` is the same loop for hooks that fetch
model_fn tensors (:mod:`.hooks`): its last step runs after the ``tf.while_loop``, where those
tensors can be returned.

A model_fn trains in one of two styles:

- Estimator style: it applies its own gradients and returns ``train_op`` (e.g. a
  ``tf.compat.v1.train`` optimizer's ``minimize(loss, global_step=...)``);
- estflow style: it returns ``optimizer`` (or ``(optimizer, variables)`` pairs) and the engine
  takes the gradients of ``loss`` and applies them. The engine keeps the Keras optimizer
  objects of the first trace (``Optimizers``), builds their slots eagerly, outside the trace,
  and checkpoints them; optimizers constructed by later traces of the model_fn are ignored. A
  ``tf.compat.v1.train`` optimizer is applied as TF 1 did, ``minimize`` inside the model_fn's
  store scope (each trace's object; its slots are store variables).

Either way the global step moves once per step, here. The model_fn's TF 1 global step
(:mod:`.tf1`) is a per-step copy, so a train_op stepping it does not count twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator._engine import tf1
from estflow.estimator._engine.calls import ModelFn
from estflow.estimator._engine.calls import scalar_loss
from estflow.estimator._engine.calls import split_element
from estflow.estimator._engine.store import VariableStore
from estflow.estimator._fc.inputs import batch_size
from estflow.estimator.distribute import Distribution

__all__ = ["Optimizers", "Trainer", "examples_in", "summed_repeats"]


class Optimizers(tf.Module):
    """The optimizers the engine applies (estflow style), tracked for checkpoints."""

    def __init__(self) -> None:
        super().__init__(name="optimizers")
        self.optimizers: list = []

    def adopt(self, candidates: Sequence) -> list:
        """The kept optimizers: ``candidates`` on the first call, the first ones afterwards."""
        if not self.optimizers:
            with tf.init_scope():
                for opt in candidates:
                    self.optimizers.append(opt)
        if len(candidates) != len(self.optimizers) or any(
                type(a) is not type(b) for a, b in zip(candidates, self.optimizers, strict=False)):
            raise ValueError("model_fn returned different optimizers on different calls: "
                             f"{[type(o).__name__ for o in self.optimizers]} then "
                             f"{[type(o).__name__ for o in candidates]}")
        return list(self.optimizers)


def _as_tf_variable(var):
    """A Keras 3 variable wraps a tf.Variable (``.value``); the store holds the latter."""
    return var if isinstance(var, tf.Variable) else getattr(var, "value", var)


def _pairs(optimizer) -> list[tuple]:
    if hasattr(optimizer, "apply_gradients"):
        return [(optimizer, None)]
    return [(opt, [_as_tf_variable(v) for v in variables]) for opt, variables in optimizer]


def _minimize_v1(pairs: list[tuple], loss, store: VariableStore) -> None:
    """Apply ``tf.compat.v1.train`` optimizers returned as ``optimizer`` (TF 1 style: each
    minimizes ``loss`` over its variables, or over ``tf.compat.v1.trainable_variables()``);
    the engine steps the global step."""
    for opt, variables in pairs:
        opt.minimize(loss, var_list=store.ordered(variables) if variables is not None else None)


_THREADED = (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy)


_CROSS_REPLICA = (
    "model_fn created a variable in cross-replica context under a MirroredStrategy "
    "(train_distribute) where the Estimator cannot keep or checkpoint it (outside a model_fn "
    "call, or created anew on every trace). Create variables in the model_fn (layers, "
    "tf.Variable, a tf.compat.v1.train optimizer's slots), or return "
    "EstimatorSpec(optimizer=keras.optimizers.<Name>(...)) and let the engine apply it on "
    "every replica, or train without train_distribute")


def _unlifted(next_creator, **kwargs):
    kwargs["experimental_enable_variable_lifting"] = False
    return next_creator(**kwargs)


# distribution: a sparse gradient (tf.IndexedSlices, e.g. of an embedding) of a variable this
# small joins the packed all-reduce as a dense tensor; a larger one is all-gathered (TF's way:
# two or three collectives per gradient and step).
_DENSE_SPARSE_LIMIT = 1 << 18


def _all_reduce(grads: list, variables: list, outputs: tuple[tf.Tensor, tf.Tensor],
                replicas: int) -> tuple[list, tuple[tf.Tensor, tf.Tensor]]:
    """In replica context: the gradients summed over all replicas (the loss was scaled by
    ``1 / replicas``: their mean), and ``outputs`` (loss, examples) as (mean, total), with one
    collective per dtype (one for a float32 model) instead of one per step and output plus
    two or three per sparse gradient. Sparse gradients of small variables go dense (a row
    repeated in the batch is then summed before the update, as ``tf.compat.v1.train``
    optimizers do; see :mod:`..distribute`); larger ones stay sparse."""
    context = tf.distribute.get_replica_context()
    loss, examples = outputs
    out = list(grads)
    dense: dict[tf.DType, list[tuple[int, tf.Tensor]]] = {}
    sparse: list[tuple[int, tf.IndexedSlices]] = []
    for i, (grad, var) in enumerate(zip(grads, variables, strict=True)):
        if grad is None:
            continue
        if isinstance(grad, tf.IndexedSlices):
            size = var.shape.num_elements()
            if size is None or size > _DENSE_SPARSE_LIMIT:
                sparse.append((i, grad))
                continue
            grad = tf.convert_to_tensor(grad)
        dense.setdefault(grad.dtype, []).append((i, grad))
    carrier = next(iter(dense), tf.float32)  # loss and examples ride with the first dtype
    extra = tf.stack([tf.cast(loss, carrier) / replicas, tf.cast(examples, carrier)])
    dense.setdefault(carrier, [])
    totals = None
    for dtype, items in dense.items():
        tensors = [g for _, g in items] + ([extra] if dtype == carrier else [])
        reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, tensors)
        for (i, _), value in zip(items, reduced, strict=False):
            out[i] = value
        if dtype == carrier:
            totals = (tf.cast(reduced[-1][0], loss.dtype),
                      tf.cast(tf.round(reduced[-1][1]), examples.dtype))
    if sparse:
        reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, [g for _, g in sparse])
        for (i, _), value in zip(sparse, reduced, strict=True):
            out[i] = value
    return out, totals


def summed_repeats(grad):
    """``grad`` with the repeats of each row of a sparse gradient summed into one.

    A ``tf.IndexedSlices`` gradient (an embedding, a linear column's weights) holds one slice
    per example that touched a row; ``tf.compat.v1.train`` optimizers and Keras 2's (what
    tf.estimator applied) summed a row's repeats before the update. Keras 3's optimizers apply
    each repeat on its own: Adagrad and FTRL then accumulate the sum of the squares instead of
    the square of the sum (a category seen in many examples of a batch trains many times
    faster), and FTRL's update, written with ``scatter_update``, keeps whichever repeat was
    written last. Dense gradients are returned as they are.
    """
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    rows, positions = tf.unique(grad.indices)
    values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(rows)[0])
    return tf.IndexedSlices(values, rows, grad.dense_shape)


def _gradients_as_given(grads_and_vars):
    return list(grads_and_vars)


@contextlib.contextmanager
def _aggregated(optimizer):
    """The Keras optimizer applies the gradients as given (already all-reduced): its
    per-replica all-reduce (``_all_reduce_sum_gradients``, TF backend) is skipped while it
    traces ``apply_gradients``."""
    optimizer._all_reduce_sum_gradients = _gradients_as_given  # noqa: SLF001
    try:
        yield
    finally:
        del optimizer._all_reduce_sum_gradients  # noqa: SLF001


def examples_in(features) -> tf.Tensor:
    """The batch size of ``features``: the first dimension of its first tensor (int64)."""
    return batch_size(tf.nest.flatten(features)[0])


class Trainer:
    """Builds and holds the compiled training loop of one Estimator."""

    def __init__(self, store: VariableStore, model_fn: ModelFn, global_step: tf.Variable,
                 optimizers: Optimizers, distribution: Distribution | None = None, *,
                 summary_writer: Callable[[], Any] | None = None,
                 summary_steps: int | None = None) -> None:
        self._store = store
        self._model_fn = model_fn
        self._global_step = global_step
        self._optimizers = optimizers
        # distribution (components/estimator/distribute.py): the model_fn runs per replica.
        self._distribution = distribution or Distribution()
        # TF 1 idioms (tf1.py): what tf.compat.v1.train.get_global_step() returns in TRAIN, the
        # step when the step starts; a v1 optimizer's minimize(global_step=) may add to it,
        # the engine steps `global_step` itself. Not checkpointed.
        with tf.init_scope(), self._distribution.scope():
            self._step_view = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # model_fn summaries go to the writer (none under a coordinator: workers run steps).
        self._summary_writer = summary_writer if not self._distribution.coordinated else None
        self._summary_steps = summary_steps
        self._summary_step: tf.Tensor | None = None  # at trace time: the step being traced
        self.loop = tf.function(self._loop, autograph=False)
        # hooks (hooks.py): the loop variant returning tensors hooks fetch, and what the
        # model_fn's TRAIN spec carried at the latest trace.
        self.fetch_loop = tf.function(self._fetch_loop, autograph=False)
        self.spec_hooks: tuple[tuple, tuple] = ((), ())  # (training_chief_hooks, training_hooks)
        self.scaffold = None  # the TRAIN spec's scaffold at the latest trace
        self._fetch_names: tuple[str, ...] = ()
        self._fetched: dict[str, tf.Tensor] = {}
        self._reduced = False  # at trace time: the replica step's outputs are global already

    @property
    def step_view(self) -> tf.Variable:
        """What ``tf.compat.v1.train.get_global_step()`` returns in a TRAIN model_fn."""
        return self._step_view

    # -- distribution: create TRAIN-only variables before strategy.run ---------------------
    def build(self, element_spec) -> None:
        """Under a strategy, trace (never run) one distributed TRAIN step before training, so
        that the model's variables (this is the model_fn's first trace when the Estimator
        trains first), variables only TRAIN creates and the engine's optimizer slots
        (``optimizer.build``) exist, and get restored, before any step runs. The store creates
        each one eagerly,
        under ``tf.init_scope()`` inside the strategy's scope, as a distributed variable (one
        copy per replica); later traces, every replica's included, get it back. (A trace in
        cross-replica context cannot take gradients of distributed variables.) No-op without a
        strategy."""
        if self._distribution.strategy is None:
            return
        with self._distribution.scope():
            tf.function(self._replicas, autograph=False).get_concrete_function(element_spec)

    def _replicas(self, element) -> tuple[tf.Tensor, tf.Tensor]:
        """The replica step on every replica.

        Under a strategy, a ``tf.compat.v1.train`` optimizer scales the loss for the mean over
        replicas as under tf.estimator (its flag, set around the trace). Under a
        MirroredStrategy the replicas trace in their own threads; a variable created in
        cross-replica context (``merge_call``, on this thread: a ``tf.compat.v1.train``
        optimizer's slots) goes to the store as the first replica's request
        (:meth:`.VariableStore.cross_replica_scope`). One created anew on every trace is
        refused by ``tf.function`` when it traces again, and the error names the way out."""
        strategy = self._distribution.strategy
        if strategy is None:
            return self._distribution.run(self._replica_step, element)
        self._reduced = False  # set by a replica step that all-reduced its outputs
        reduced = lambda: self._reduced  # noqa: E731
        # tf.estimator's switch for v1 optimizers' loss scaling (no public equivalent)
        with strategy._scale_loss_for_estimator_enabled(), \
                self._store.cross_replica_scope():  # noqa: SLF001
            try:
                return self._distribution.run(self._replica_step, element, reduced=reduced)
            except ValueError as err:  # tf.function refusing a variable on its second trace
                if isinstance(strategy, _THREADED) and "singleton tf.Variables" in str(err):
                    raise ValueError(_CROSS_REPLICA) from err
                raise

    def _loop(self, iterator, n):
        """Run up to ``n`` steps; returns (steps run, last loss, examples, loss finite)."""

        def cond(i, loss, examples, finite, more):
            return tf.logical_and(tf.logical_and(i < n, finite), more)

        def body(i, loss, examples, finite, more):
            element = iterator.get_next_as_optional()

            def step():
                return self._step(element.get_value())

            def end():
                return loss, tf.constant(0, tf.int64)

            more = element.has_value()
            loss, size = tf.cond(more, step, end)
            done = tf.cast(more, tf.int64)
            return (i + done, loss, examples + size, tf.reduce_all(tf.math.is_finite(loss)),
                    more)

        start = (tf.constant(0, tf.int64), tf.constant(0.0), tf.constant(0, tf.int64),
                 tf.constant(True), tf.constant(True))
        i, loss, examples, finite, _ = tf.while_loop(cond, body, start)
        return i, loss, examples, finite

    def _step(self, element) -> tuple[tf.Tensor, tf.Tensor]:
        """One step: (loss, examples), the mean loss and all examples over the replicas."""
        # TF 1 idioms: the model_fn's global step holds this step's value when it starts.
        self._step_view.assign(self._global_step)
        self._summary_step = self._global_step.read_value() + 1
        try:
            loss, examples = self._replicas(element)
        finally:
            self._summary_step = None
        # Stateful ops run in program order inside a tf.function, so the model_fn's own
        # train_op (Estimator style) has run before the step count moves; it moves once per
        # step, in cross-replica context (a v1 optimizer's minimize(global_step=...) moved the
        # model_fn's copy, not this).
        self._global_step.assign_add(1)
        return loss, examples

    def _summaries(self):
        """Where the model_fn's summaries go in this trace (none in :meth:`build`'s)."""
        if self._summary_writer is None or self._summary_step is None:
            return tf1.muted()
        return tf1.summaries(self._summary_writer(), self._summary_step, self._summary_steps)

    def _replica_step(self, element) -> tuple[tf.Tensor, tf.Tensor]:
        features, labels = split_element(element)
        scope = tf.compat.v1.get_default_graph().get_name_scope()  # hooks: tensor names
        with tf.GradientTape() as tape:
            with self._store.scope(ModeKeys.TRAIN, global_step=self._step_view,
                                   summaries=self._summaries()):
                spec = self._model_fn(features, labels, ModeKeys.TRAIN)
                self._observe(spec, scope)  # hooks: spec hooks, fetched tensors
                loss = scalar_loss(spec.loss)
                # distribution: optimizers sum gradients over replicas; scale for their mean.
                scaled = loss / self._distribution.num_replicas \
                    if self._distribution.num_replicas > 1 else loss
                pairs = _pairs(spec.optimizer) if spec.optimizer is not None else []
                v1 = [(opt, v) for opt, v in pairs if tf1.is_v1_optimizer(opt)]
                if v1:  # in the scope: their slots go to the store (and its checkpoint)
                    with tape.stop_recording():
                        _minimize_v1(v1, spec.loss, self._store)
        keras_pairs = [(opt, v) for opt, v in pairs if not tf1.is_v1_optimizer(opt)]
        examples = examples_in(features)
        if keras_pairs:
            totals = self._apply(keras_pairs, scaled, tape, (loss, examples))
            if totals is not None:  # distribution: already over all replicas (one all-reduce)
                self._reduced = True
                return totals
        return tf.identity(loss), examples

    def _apply(self, pairs: list[tuple], loss: tf.Tensor, tape: tf.GradientTape,
               outputs: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor] | None:
        """Apply the gradients of ``loss``. Across workers (:meth:`.Distribution.packs`), they
        are all-reduced here with ``outputs`` (this replica's loss and examples) in one
        collective and the optimizers apply them as they are; returns the mean loss and the
        total examples then, else None."""
        optimizers = self._optimizers.adopt([opt for opt, _ in pairs])
        watched = [v for v in tape.watched_variables() if v.trainable]
        var_lists = [self._store.ordered(v if v is not None else watched) for _, v in pairs]
        flat = [v for variables in var_lists for v in variables]
        grads = tape.gradient(loss, flat)
        totals = None
        packed = self._distribution.packs(optimizers)
        if packed:
            grads, totals = _all_reduce(grads, flat, outputs, self._distribution.num_replicas)
        at = 0
        for opt, variables in zip(optimizers, var_lists, strict=True):
            part = grads[at:at + len(variables)]
            at += len(variables)
            pairs_gv = [(summed_repeats(g), v) for g, v in zip(part, variables, strict=True)
                        if g is not None]
            if not getattr(opt, "built", True):
                # Slots are created eagerly, once, outside the trace (nothing to lift: the
                # loop's tf.function need not retrace for them).
                with tf.init_scope(), tf.variable_creator_scope(_unlifted):
                    opt.build(variables)
            if packed:
                with _aggregated(opt):
                    opt.apply_gradients(pairs_gv)
            else:
                opt.apply_gradients(pairs_gv)
        return totals

    # -- hooks: tensors of the model_fn, taken at a loop's last step ---------------------------
    def _observe(self, spec: EstimatorSpec, scope: str) -> None:
        """At trace time: keep the spec's hooks; resolve the names hooks fetch (if any)."""
        self.spec_hooks = (tuple(getattr(spec, "training_chief_hooks", ()) or ()),
                           tuple(getattr(spec, "training_hooks", ()) or ()))
        self.scaffold = getattr(spec, "scaffold", None)
        if self._fetch_names:
            self._fetched = {name: _tensor_named(name, spec, scope)
                             for name in self._fetch_names}

    def _fetch_loop(self, iterator, n, names: tuple[str, ...]):
        """``loop`` plus ``{name: value at the last step}`` for ``names``: the first ``n - 1``
        steps run in the ``tf.while_loop``, the last one after it, where the model_fn's
        tensors can be returned (no extra step, one more trace of the model_fn)."""
        i, loss, examples, finite = self._loop(iterator, n - 1)
        template: dict[str, tf.Tensor] = {}

        def skipped():
            return (tf.constant(0, tf.int64), loss, tf.constant(0, tf.int64),
                    {name: _placeholder(t) for name, t in template.items()})

        def last():
            element = iterator.get_next_as_optional()

            def step():
                self._fetch_names = names
                try:
                    step_loss, size = self._step(element.get_value())
                finally:
                    self._fetch_names = ()
                template.update(self._fetched)  # traced before the other branches
                return tf.constant(1, tf.int64), step_loss, size, dict(self._fetched)

            return tf.cond(element.has_value(), step, skipped)

        ran, loss, size, fetched = tf.cond(tf.logical_and(tf.equal(i, n - 1), finite),
                                           last, skipped)
        return i + ran, loss, examples + size, tf.reduce_all(tf.math.is_finite(loss)), fetched


def _placeholder(tensor: tf.Tensor) -> tf.Tensor:
    """A stand-in of ``tensor``'s dtype for the branch where no step ran."""
    shape = [] if tensor.shape.rank is None else [d or 0 for d in tensor.shape.as_list()]
    return tf.zeros(shape, tensor.dtype)


def _tensor_named(name: str, spec: EstimatorSpec, scope: str) -> tf.Tensor:
    """The TRAIN-mode tensor a hook fetches by ``name``: a predictions key, or a tensor the
    model_fn named (relative to the name scope it was called in, like TF 1 graph names)."""
    predictions = spec.predictions
    if isinstance(predictions, dict) and name in predictions:
        return predictions[name]
    if name == "predictions" and predictions is not None and not isinstance(predictions, dict):
        return predictions
    graph = tf.compat.v1.get_default_graph()
    tensor_name = name if ":" in name else f"{name}:0"
    # the model_fn's names start at the graph's root (tf1.ModelFnGraph); an older name under
    # the engine's scope second
    for candidate in (tensor_name, f"{scope}/{tensor_name}" if scope else tensor_name):
        try:
            return graph.get_tensor_by_name(candidate)
        except (KeyError, ValueError):
            continue
    keys = sorted(predictions) if isinstance(predictions, dict) else []
    raise ValueError(
        f"A hook fetches {name!r}, expected 'loss', 'global_step', a variable name, a key of "
        f"the TRAIN-mode predictions {keys} or the name of a tensor the model_fn creates in "
        f"TRAIN mode (e.g. tf.identity(x, name={name.split(':')[0]!r})); none is called that")
