"""The ``model_fn`` contract: :class:`ModeKeys` and :class:`EstimatorSpec` (tf.estimator's).

A model_fn is ``model_fn(features, labels, mode, params[, config]) -> EstimatorSpec``. The
train step calls it while a ``tf.function`` traces, once per mode; what it must return depends
on the mode, and :class:`EstimatorSpec` checks that at construction (like the original's
``_validate_estimator_spec_*``), naming the missing field and the mode.

This module never imports TensorFlow: tensors, metrics and optimizers are checked by what they
can do (duck typing), so declaring a pipeline stays light.

Example:
    >>> import estflow.dsl as ef
    >>> try:
    ...     ef.EstimatorSpec(mode=ef.ModeKeys.PREDICT)
    ... except ef.DslError as err:
    ...     print(err.path, "|", err.expected)
    predictions | a tensor or a dict of tensors (EstimatorSpec needs `predictions` when mode='infer')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from estflow.dsl.errors import DslError

__all__ = ["ModeKeys", "EstimatorSpec"]


class ModeKeys:
    """The three modes a model_fn is called in (the values tf.estimator.ModeKeys used).

    Attributes:
        TRAIN: training: the model_fn returns ``loss`` and ``train_op`` or ``optimizer``.
        EVAL: evaluation: it returns ``loss`` (and optionally ``eval_metric_ops``).
        PREDICT: prediction and export: it returns ``predictions`` (``labels`` is None).
        ALL: the three modes.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.ModeKeys.PREDICT, ef.ModeKeys.PREDICT in ef.ModeKeys.ALL
        ('infer', True)
    """

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"

    ALL = (TRAIN, EVAL, PREDICT)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape")


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of {[type(v).__name__ for v in value]}"
    return type(value).__name__


def _size(value: Any) -> int | None:
    """Static number of elements of a tensor-like, None when a dimension is unknown."""
    size = 1
    for dim in value.shape:
        dim = getattr(dim, "value", dim)
        if dim is None:
            return None
        size *= int(dim)
    return size


def _rank(value: Any) -> int | None:
    """Static rank of a tensor-like, None when unknown."""
    shape = value.shape
    try:
        return len(shape)
    except (TypeError, ValueError):  # TensorShape of unknown rank
        return None


def _is_metric(value: Any) -> bool:
    """A Keras (or tf_keras) metric object, or a TF 1 ``(value, update_op)`` pair (what
    ``tf.compat.v1.metrics.*`` return): a value tensor and an update tensor whose value is the
    metric after the update."""
    if hasattr(value, "update_state") and hasattr(value, "result"):
        return True
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(
        _is_tensor(v) for v in value)


def _is_optimizer(value: Any) -> bool:
    return hasattr(value, "apply_gradients")


def _optimizer_ok(value: Any) -> bool:
    """An optimizer, or a non-empty sequence of ``(optimizer, variables)`` pairs."""
    if _is_optimizer(value):
        return True
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(isinstance(p, (list, tuple)) and len(p) == 2 and _is_optimizer(p[0])
               and isinstance(p[1], (list, tuple)) for p in value)


_HOOK_FIELDS = ("training_chief_hooks", "training_hooks", "evaluation_hooks",
                "prediction_hooks")


def _hooks(value: Any, field: str) -> tuple:
    """``value`` as a tuple of hook objects (anything with ``before_run`` and ``after_run``)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise DslError(field, "a list of SessionRunHook objects", type(value).__name__)
    for i, hook in enumerate(value):
        if not (callable(getattr(hook, "before_run", None))
                and callable(getattr(hook, "after_run", None))):
            raise DslError(f"{field}[{i}]", "a SessionRunHook (with before_run and after_run)",
                           type(hook).__name__)
    return tuple(value)


def _needed(field: str, expected: str, mode: str) -> DslError:
    return DslError(field, f"{expected} (EstimatorSpec needs `{field}` when mode={mode!r})", None)


@dataclasses.dataclass(frozen=True, eq=False)
class EstimatorSpec:
    """What a model_fn returns: the ops and objects defining the model in one mode.

    Per mode (checked at construction):

    - ``ModeKeys.TRAIN``: ``loss`` and exactly one of ``train_op`` (the model_fn applies its
      own gradients, Estimator style) or ``optimizer`` (the engine takes gradients of ``loss``
      and applies them: estflow's extension, what the premade models use).
    - ``ModeKeys.EVAL``: ``loss``; ``eval_metric_ops`` optional.
    - ``ModeKeys.PREDICT``: ``predictions``.

    Args:
        mode: one of :class:`ModeKeys`.
        predictions: a tensor or a dict of tensors (batch-major).
        loss: a scalar tensor.
        train_op: an op or tensor that applies one training update (TRAIN).
        eval_metric_ops: ``{name: metric}``, Keras metric objects whose ``update_state`` the
            model_fn called, or TF 1 ``(value, update_op)`` pairs as ``tf.compat.v1.metrics``
            return them (``update_op`` a tensor whose value is the metric after the update;
            a ``tf.group`` op is rejected: it has no value to read).
        export_outputs: ``{signature name: output}`` for the export (informational).
        optimizer: a Keras optimizer, or a sequence of ``(optimizer, variables)`` pairs
            (e.g. wide & deep: one optimizer per part). With a single optimizer the engine
            updates every trainable variable the loss depends on.
        training_chief_hooks: hooks run by ``train`` on the chief only (TRAIN).
        training_hooks: hooks run by ``train`` on every worker (TRAIN).
        evaluation_hooks: hooks run by ``evaluate`` (EVAL).
        prediction_hooks: hooks run by ``predict`` (PREDICT).
        scaffold: tf.estimator's ``tf.compat.v1.train.Scaffold``; the Estimator engine takes
            one whose ``saver`` is a ``tf.train.Checkpoint`` (its objects are saved in every
            checkpoint, restorable by that object layout) and refuses the other fields.

    Hooks are ``SessionRunHook`` objects (``estflow.estimator.hooks``); the engine
    takes them from the model_fn's latest trace in that mode. Tensors are recognised by their
    ``dtype`` and ``shape``, so a NumPy value passes the checks too (handy in unit tests of a
    model_fn's contract).

    Raises:
        DslError: a field the mode needs is missing or has the wrong kind of value; the message
            names the field and the mode.

    Example:
        >>> import numpy as np
        >>> import estflow.dsl as ef
        >>> spec = ef.EstimatorSpec(mode=ef.ModeKeys.EVAL, loss=np.float32(0.25))
        >>> spec.mode
        'eval'
        >>> try:
        ...     ef.EstimatorSpec(mode=ef.ModeKeys.TRAIN, loss=np.float32(0.25))
        ... except ef.DslError as err:
        ...     print(err.path)
        train_op
    """

    mode: str
    predictions: Any = None
    loss: Any = None
    train_op: Any = None
    eval_metric_ops: Mapping[str, Any] | None = None
    export_outputs: Mapping[str, Any] | None = None
    optimizer: Any = None
    training_chief_hooks: tuple = ()
    training_hooks: tuple = ()
    evaluation_hooks: tuple = ()
    prediction_hooks: tuple = ()
    scaffold: Any = None

    def __post_init__(self) -> None:
        if self.mode not in ModeKeys.ALL:
            raise DslError("mode", f"one of {list(ModeKeys.ALL)} (ModeKeys)", self.mode)
        self._check_kinds()
        for field in _HOOK_FIELDS:
            object.__setattr__(self, field, _hooks(getattr(self, field), field))
        if self.mode == ModeKeys.TRAIN:
            self._check_train()
        elif self.mode == ModeKeys.EVAL:
            if self.loss is None:
                raise _needed("loss", "a scalar loss tensor", self.mode)
        elif self.predictions is None:
            raise _needed("predictions", "a tensor or a dict of tensors", self.mode)

    def _check_train(self) -> None:
        if self.loss is None:
            raise _needed("loss", "a scalar loss tensor", self.mode)
        if self.train_op is None and self.optimizer is None:
            raise DslError("train_op", "an op applying the update, or set `optimizer` so the "
                           f"engine applies gradients (EstimatorSpec needs one of them when "
                           f"mode={self.mode!r})", None)
        if self.train_op is not None and self.optimizer is not None:
            raise DslError("optimizer", "None when `train_op` is given (set one of them: "
                           "`train_op` if the model_fn applies gradients itself, `optimizer` "
                           "if the engine should)", type(self.optimizer).__name__)

    def _check_kinds(self) -> None:
        if self.loss is not None:
            if not _is_tensor(self.loss):
                raise DslError("loss", "a scalar tensor", type(self.loss).__name__)
            if _rank(self.loss) not in (None, 0) and _size(self.loss) not in (None, 1):
                # as tf.estimator: a loss of one element ([1], or [None] at batch size 1) is
                # taken as a scalar (the engine reshapes it)
                raise DslError("loss", "a scalar tensor (reduce it, e.g. with "
                               "tf.reduce_mean)", f"a tensor of shape {self.loss.shape}")
        if self.predictions is not None:
            self._check_predictions()
        if self.eval_metric_ops is not None:
            if not isinstance(self.eval_metric_ops, Mapping):
                raise DslError("eval_metric_ops", "a dict {name: metric}",
                               type(self.eval_metric_ops).__name__)
            for name, metric in self.eval_metric_ops.items():
                if not isinstance(name, str) or not _is_metric(metric):
                    raise DslError(f"eval_metric_ops[{name!r}]", "a Keras metric object "
                                   "(with update_state and result) or a TF 1 (value tensor, "
                                   "update_op tensor) pair as tf.compat.v1.metrics return",
                                   _describe(metric))
        if self.optimizer is not None and not _optimizer_ok(self.optimizer):
            raise DslError("optimizer", "a Keras optimizer or a sequence of (optimizer, "
                           "variables) pairs", type(self.optimizer).__name__)
        if self.export_outputs is not None and not isinstance(self.export_outputs, Mapping):
            raise DslError("export_outputs", "a dict {signature name: output}",
                           type(self.export_outputs).__name__)

    def _check_predictions(self) -> None:
        if isinstance(self.predictions, Mapping):
            for key, value in self.predictions.items():
                if not isinstance(key, str) or not _is_tensor(value):
                    raise DslError(f"predictions[{key!r}]", "a tensor keyed by a string",
                                   type(value).__name__)
        elif not _is_tensor(self.predictions):
            raise DslError("predictions", "a tensor or a dict of tensors",
                           type(self.predictions).__name__)
