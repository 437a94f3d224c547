"""How the engine calls user functions: the model_fn and the input_fn.

The calling convention is decided once, from the function's signature, when the Estimator is
built (:mod:`.binding`): a model_fn's arguments are bound by name, as tf.estimator bound them;
an input_fn gets ``mode``, ``params``, ``config`` and ``input_context`` when it names them. An
input_fn that returns TF 1 iterator tensors (``make_one_shot_iterator(ds).get_next()``) is run
as a dataset (:mod:`.graph_input`).
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
from estflow.estimator._engine.binding import bind_model_fn
from estflow.estimator._engine.graph_input import dataset_of
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


def _copy_params(params: Any) -> Any:
    """A fresh copy of ``params`` for one call: a dict, or an HParams-like object
    (``tf.contrib.training.HParams``: attributes and ``.values()``), as tf.estimator passed
    whatever ``Estimator(params=...)`` was given."""
    return copy.deepcopy(params if params is not None else {})


class ModelFn:
    """A user model_fn with its calling convention fixed once, from its signature.

    As tf.estimator did, arguments are bound by NAME: ``features`` (required), ``labels``,
    ``mode``, ``params`` and ``config``, in any order, the optional ones absent (so
    ``model_fn(mode, features, labels)`` works); any other name is refused with tf.estimator's
    message. A model_fn of ``*args`` only is called ``(features, labels, mode)``; one with
    ``**kwargs`` also gets ``params`` and ``config``.

    Args:
        fn: ``model_fn(features, labels, mode[, params][, config]) -> EstimatorSpec``.
        params: hyperparameters passed as ``params`` (a fresh copy on every call): a dict or
            an HParams-like object.
        config: the run config passed as ``config`` when the model_fn names it.

    Raises:
        ValueError: ``fn`` has no ``features`` argument, has one tf.estimator does not know,
            or ``params`` are given but ``fn`` has no ``params`` argument.
    """

    def __init__(self, fn: Callable, params: Any = None, config: Any = None) -> None:
        if not callable(fn):
            raise TypeError(f"model_fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.params = params if params is not None else {}
        self.config = config
        self._binding = bind_model_fn(fn)
        if _given(self.params) and "params" not in self._binding.names:
            raise ValueError(f"model_fn ({_name(fn)}) does not include params argument, but "
                             f"params ({self.params!r}) is passed to Estimator.")

    def __call__(self, features, labels, mode: str) -> EstimatorSpec:
        values = {"features": features, "labels": labels, "mode": mode}
        if "params" in self._binding.names:
            values["params"] = _copy_params(self.params)
        if "config" in self._binding.names:
            values["config"] = self.config
        if labels is not None and "labels" not in self._binding.names:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        args, kwargs = self._binding.arguments(values)
        try:
            spec = self.fn(*args, **kwargs)
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


def _given(params: Any) -> bool:
    """Whether ``params`` were given (an empty dict counts as none, as before)."""
    return not (isinstance(params, dict) and not params)


def call_input_fn(input_fn: Callable, params: dict | None, config: Any, mode: str | None = None,
                  input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """Call an input_fn as tf.estimator did, by the names of its arguments: ``mode``,
    ``params``, ``config`` and ``input_context`` (only when there is one: under a distribution
    strategy, as in tf.estimator; ``input_fn(mode, input_context=None)`` keeps its default
    otherwise) are passed to an input_fn naming them. It must return a ``tf.data.Dataset``
    (or, as in TF 1, ``make_one_shot_iterator(dataset).get_next()``'s tensors: :mod:`.graph_input`).
    Unless ``config.optimize_input`` is False, an in-memory slice→batch pipeline is read
    batch-first and a per-record ``map`` before ``batch`` runs vectorised once per batch, the
    batches unchanged (:mod:`.input_fusion`). A dataset built for an ``input_context`` is recorded as
    such (across workers it is that worker's part of the input: :mod:`..distribute`)."""
    names, _ = _keywords(input_fn)

    def kwargs() -> dict[str, Any]:
        given: dict[str, Any] = {}
        if "mode" in names and mode is not None:
            given["mode"] = mode
        if "params" in names:
            given["params"] = _copy_params(params)
        if "config" in names:
            given["config"] = config
        if "input_context" in names and input_context is not None:
            given["input_context"] = input_context
        return given

    dataset = dataset_of(input_fn, kwargs, mode)  # TF 1 iterator tensors -> their dataset
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"input_fn {_name(input_fn)} must return a tf.data.Dataset of "
                        f"(features, labels) or of features (or the tensors of "
                        f"tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()); "
                        f"returned {type(dataset).__name__}")
    if getattr(config, "optimize_input", False):
        dataset, _ = batch_first(dataset)
    if "input_context" in names and input_context is not None:
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
