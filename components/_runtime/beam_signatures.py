"""Beam's signature inspection, memoized per function.

Beam (2.77) asks for the signature of every method of every DoFn many times while it builds,
translates and runs a pipeline: ``userstate.get_dofn_specs`` wraps each bound method of a DoFn
(``dir(dofn)``, ~30 methods) to read its defaults, and it is called for every ParDo when the
pipeline is applied, translated to its proto and when each bundle processor is built. On the
taxi example's transform step that is ~59,000 ``inspect.signature`` calls, ~1.5 s of a 3-6 s
job; tf.Transform's pipeline alone has ~200 ParDos.

A signature depends on the function object only (its code, defaults, annotations,
``__wrapped__``/``__signature__``), not on the instance a method is bound to, so it is cached
per function (weakly: a function that goes away takes its entry with it), separately for the
function and its bound form (a bound method's signature lacks the first parameter). Anything
else (partials, callable objects, builtins) is inspected every time, as before. Results are
the same objects Beam would build (``inspect.Signature`` is immutable; the argument lists are
copied for each caller).

:func:`install` patches the module globals Beam resolves these names through; idempotent.
"""

from __future__ import annotations

import types
import weakref

__all__ = ["install"]

_installed = False


def _memoized(compute):
    """``compute(f)``, cached per plain function / per bound method's function."""
    plain: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def lookup(f):
        if type(f) is types.FunctionType:  # noqa: E721 - exact type: no subclass surprises
            cache, key = plain, f
        elif type(f) is types.MethodType and type(f.__func__) is types.FunctionType:  # noqa: E721
            cache, key = bound, f.__func__
        else:
            return compute(f)
        try:
            return cache[key]
        except KeyError:
            value = cache[key] = compute(f)
            return value

    lookup.__wrapped_compute__ = compute
    return lookup


def install() -> None:
    """Memoize Beam's ``get_signature`` and ``get_function_args_defaults`` in this process."""
    global _installed
    if _installed:
        return
    from apache_beam.transforms import core
    from apache_beam.transforms import ptransform
    from apache_beam.transforms import util
    from apache_beam.typehints import decorators

    signature = _memoized(decorators.get_signature)
    for module in (decorators, core, ptransform, util):
        module.get_signature = signature
    args_defaults = _memoized(core.get_function_args_defaults)
    core.get_function_args_defaults = lambda f: tuple(list(x) for x in args_defaults(f))
    _installed = True
