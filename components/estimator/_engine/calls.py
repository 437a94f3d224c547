"""How the engine calls user functions: the model_fn and the input_fn.

The calling convention is decided once, from the function's signature, when the Estimator is
built (not on every call by sniffing argument names, as tf.estimator did): a model_fn takes
``(features, labels, mode)`` positionally, then ``params`` and ``config`` by keyword when it
names them (or takes ``**kwargs``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from estflow.dsl.model_fn import EstimatorSpec
from estflow.estimator import distribute
from estflow.estimator._engine import tf1
from estflow.estimator._engine.input_fusion import batch_first

__all__ = ["ModelFn", "call_input_fn", "scalar_loss", "split_element"]


def _keywords(fn: Callable) -> tuple[set[str], int]:
    """(names accepted by keyword, number of positional parameters; -1 with ``*args``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins, some C callables: assume the full convention
        return {"params", "config"}, -1
    kinds = inspect.Parameter
    names = set(sig.parameters)
    if any(p.kind == kinds.VAR_KEYWORD for p in sig.parameters.values()):
        names |= {"params", "config"}
    positional = [p for p in sig.parameters.values()
                  if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    var_pos = any(p.kind == kinds.VAR_POSITIONAL for p in sig.parameters.values())
    return names, -1 if var_pos else len(positional)


class ModelFn:
    """A user model_fn with its calling convention fixed once.

    Args:
        fn: ``model_fn(features, labels, mode[, params][, config]) -> EstimatorSpec``.
        params: hyperparameters passed as ``params`` (a fresh copy on every call).
        config: the run config passed as ``config`` when the model_fn names it.

    Raises:
        TypeError: ``fn`` cannot take ``(features, labels, mode)``.
        ValueError: ``params`` are given but ``fn`` has no ``params`` argument.
    """

    def __init__(self, fn: Callable, params: dict | None = None, config: Any = None) -> None:
        if not callable(fn):
            raise TypeError(f"model_fn must be callable, got {type(fn).__name__}")
        names, positional = _keywords(fn)
        if 0 <= positional < 3:
            raise TypeError(f"model_fn {_name(fn)} must accept (features, labels, mode) "
                            "positionally, then params and optionally config")
        self.fn = fn
        self.params = dict(params or {})
        self.config = config
        self._pass_params = "params" in names
        self._pass_config = "config" in names
        if self.params and not self._pass_params:
            raise ValueError(f"model_fn {_name(fn)} has no `params` argument, but params were "
                             f"given: {sorted(self.params)}")

    def __call__(self, features, labels, mode: str) -> EstimatorSpec:
        kwargs: dict[str, Any] = {}
        if self._pass_params:
            kwargs["params"] = copy.deepcopy(self.params)
        if self._pass_config:
            kwargs["config"] = self.config
        try:
            spec = self.fn(features, labels, mode, **kwargs)
        except (AttributeError, ImportError) as err:
            explained = tf1.explain(err)  # a TF 1 idiom that cannot work on TF 2.21
            if explained is None:
                raise
            raise explained.with_traceback(err.__traceback__) from None
        if not isinstance(spec, EstimatorSpec):
            raise TypeError(f"model_fn {_name(self.fn)} must return an estflow.dsl."
                            f"EstimatorSpec, returned {type(spec).__name__}")
        if spec.mode != mode:
            raise ValueError(f"model_fn {_name(self.fn)} was called with mode={mode!r} but "
                             f"returned an EstimatorSpec with mode={spec.mode!r}")
        return spec


def call_input_fn(input_fn: Callable, params: dict | None, config: Any, mode: str | None = None,
                  input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """Call an input_fn as tf.estimator did, by the names of its arguments: ``mode``,
    ``params``, ``config`` and ``input_context`` (only when there is one: under a distribution
    strategy, as in tf.estimator; ``input_fn(mode, input_context=None)`` keeps its default
    otherwise) are passed to an input_fn naming them. It must return a ``tf.data.Dataset``.
    Unless ``config.optimize_input`` is False, an in-memory slice→batch pipeline is read
    batch-first and a per-record ``map`` before ``batch`` runs vectorised once per batch, the
    batches unchanged (:mod:`.input_fusion`). A dataset built for an ``input_context`` is recorded as
    such (across workers it is that worker's part of the input: :mod:`..distribute`)."""
    names, _ = _keywords(input_fn)
    kwargs: dict[str, Any] = {}
    if "mode" in names and mode is not None:
        kwargs["mode"] = mode
    if "params" in names:
        kwargs["params"] = copy.deepcopy(params or {})
    if "config" in names:
        kwargs["config"] = config
    if "input_context" in names and input_context is not None:
        kwargs["input_context"] = input_context
    dataset = input_fn(**kwargs)
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"input_fn {_name(input_fn)} must return a tf.data.Dataset of "
                        f"(features, labels) or of features; returned {type(dataset).__name__}")
    if getattr(config, "optimize_input", False):
        dataset, _ = batch_first(dataset)
    if "input_context" in kwargs:
        distribute.note_input_context(dataset, input_context)
    return dataset


def scalar_loss(loss) -> tf.Tensor:
    """The spec's loss as a float32 scalar (a one-element loss, ``[1]`` or ``[None]`` at batch
    size 1, is reshaped as tf.estimator did)."""
    loss = tf.cast(loss, tf.float32)
    return loss if loss.shape.rank == 0 else tf.reshape(loss, [])


def split_element(element) -> tuple[Any, Any]:
    """``(features, labels)`` from a dataset element that is a pair or features only."""
    if isinstance(element, tuple) and len(element) == 2:
        return element
    if isinstance(element, tuple) and len(element) == 1:
        return element[0], None
    return element, None


def _name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
