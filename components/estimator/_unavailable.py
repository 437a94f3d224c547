"""tf.estimator 2.15 names the engine does not implement, kept so that a migrated program fails
where it uses one, with the replacement named, instead of at an import or attribute lookup.

Each is a class (or function) that raises :class:`UnavailableError` when constructed (called),
with tf.estimator's name and what to use instead. ``tests/compat/test_surface.py`` checks every
tf.estimator 2.15 name is in the engine or here, and that the message names the replacement
``estflow migrate`` names for it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["UnavailableError", "unavailable_class", "unavailable_function"]


class UnavailableError(NotImplementedError):
    """A tf.estimator 2.15 name estflow's engine does not implement (its message names the
    replacement)."""


def _message(name: str, replacement: str) -> str:
    return f"tf.{name} is not in estflow's engine (TF 2.21 has no tf.estimator); use {replacement}"


def unavailable_class(name: str, replacement: str, bases: tuple = (object,)) -> type:
    """A class named like tf.estimator's ``name`` (its path under ``tf``) whose construction
    raises :class:`UnavailableError` naming ``replacement``; ``bases`` keeps subclass checks
    (a hook is still a ``SessionRunHook``)."""
    message = _message(name, replacement)

    def __init__(self, *args, **kwargs):
        raise UnavailableError(message)

    short = name.rsplit(".", 1)[-1]
    return type(short, bases, {"__init__": __init__, "__doc__": message,
                               "__module__": "estflow.estimator"})


def unavailable_function(name: str, replacement: str) -> Callable:
    """A function named like tf.estimator's ``name`` that raises :class:`UnavailableError`
    naming ``replacement`` when called."""
    message = _message(name, replacement)

    def function(*args, **kwargs):
        raise UnavailableError(message)

    function.__name__ = function.__qualname__ = name.rsplit(".", 1)[-1]
    function.__doc__ = message
    return function
