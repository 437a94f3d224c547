"""How a model_fn's arguments are bound: by name, as tf.estimator bound them.

tf.estimator 2.15 read the model_fn's argument names (``function_utils.fn_args``) and passed
``features`` plus, when named, ``labels``, ``mode``, ``params`` and ``config``, all by keyword:
``def model_fn(mode, features, labels)`` and ``def model_fn(features, mode)`` both work. It
refused a model_fn without ``features`` and one naming anything else, with the messages
reproduced here. Two conveniences estflow adds: a model_fn of ``*args`` only is called
``(features, labels, mode)`` positionally, and one with ``**kwargs`` also gets ``params`` and
``config``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Binding", "bind_model_fn", "VALID_MODEL_FN_ARGS"]

# tf.estimator 2.15's estimator._VALID_MODEL_FN_ARGS ("self": a method's own, not passed).
VALID_MODEL_FN_ARGS = frozenset({"features", "labels", "mode", "params", "self", "config"})
_KINDS = inspect.Parameter


@dataclass(frozen=True)
class Binding:
    """Where each of the engine's values goes in a call of the model_fn.

    Attributes:
        positional: names passed positionally, in order (positional-only arguments, or
            ``features, labels, mode`` for a model_fn of ``*args``).
        keywords: names passed by keyword.
        names: every name the model_fn receives.
    """

    positional: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.positional) | frozenset(self.keywords)

    def arguments(self, values: dict[str, Any]) -> tuple[list, dict[str, Any]]:
        """``(args, kwargs)`` for a call, from ``{name: value}``."""
        return ([values[n] for n in self.positional],
                {n: values[n] for n in self.keywords})


def bind_model_fn(fn: Callable) -> Binding:
    """The :class:`Binding` of ``fn`` (a function, a bound method, a callable object or a
    ``functools.partial``: ``inspect.signature`` leaves out what is already bound).

    Raises:
        ValueError: tf.estimator's messages: ``fn`` has no ``features`` argument, or has
            arguments that are not ``features, labels, mode, params, config``.
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins, some C callables: the full convention
        return Binding(("features", "labels", "mode"), ("params", "config"))
    named = [p for p in parameters if p.kind not in (_KINDS.VAR_POSITIONAL,
                                                     _KINDS.VAR_KEYWORD)]
    var_positional = any(p.kind == _KINDS.VAR_POSITIONAL for p in parameters)
    var_keyword = any(p.kind == _KINDS.VAR_KEYWORD for p in parameters)
    extra = ("params", "config") if var_keyword else ()
    if not named and var_positional:
        return Binding(("features", "labels", "mode"), extra)
    names = [p.name for p in named]
    if "features" not in names and not var_keyword:
        raise ValueError(f"model_fn ({fn}) must include features argument.")
    unknown = [n for n in names if n not in VALID_MODEL_FN_ARGS]
    if unknown:
        raise ValueError(f"model_fn ({fn}) has following not expected args: {unknown}")
    positional = tuple(p.name for p in named if p.kind == _KINDS.POSITIONAL_ONLY)
    keywords = tuple(n for n in names if n not in positional and n != "self")
    if var_keyword:
        keywords += tuple(n for n in ("features", *extra) if n not in names)
    return Binding(positional, keywords)
