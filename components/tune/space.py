"""The declared search space (:mod:`estflow.dsl.tune`) as Optuna sees it, and back.

A dimension is an Optuna parameter named by its path: an :class:`~estflow.dsl.IntRange` is
``suggest_int`` (its ``step``, ``log``), a :class:`~estflow.dsl.FloatRange` ``suggest_float``
and a :class:`~estflow.dsl.Choice` ``suggest_categorical``. Optuna's categorical values are
``None``, booleans, numbers and strings, stored as they are; a Choice of strings only, or of
numbers only, goes to Optuna as it is, any other (tuples such as hidden units ``(64, 32)``,
``None`` or booleans among numbers) as the JSON text of each value (``"[64, 32]"``), read
back as the declared value (a tuple again). A conditional dimension (``when=``) is drawn only
when it is active, in the order :meth:`~estflow.dsl.Tune.dimensions` gives (its Choice
first), so a trial's assignment holds the active paths only.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

from estflow.dsl.tune import Choice
from estflow.dsl.tune import FloatRange
from estflow.dsl.tune import IntRange
from estflow.dsl.tune import Tune

__all__ = ["suggest", "encoded", "decoded", "as_json", "key_of", "grid_order"]


def _as_text(dim: Choice) -> bool:
    """Whether ``dim``'s values go to Optuna as JSON text (see the module docstring)."""
    values = dim.values
    if all(isinstance(v, str) for v in values):
        return False
    return not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _choices(dim: Choice) -> tuple:
    return tuple(json.dumps(as_json(v)) for v in dim.values) if _as_text(dim) else dim.values


def encoded(tune: Tune, assignment: Mapping[str, Any]) -> dict[str, Any]:
    """``assignment`` (path -> declared value) as Optuna parameters."""
    out = {}
    for path, value in assignment.items():
        dim = tune.dimension(path)
        out[path] = json.dumps(as_json(value)) if isinstance(dim, Choice) and _as_text(dim) \
            else value
    return out


def decoded(tune: Tune, params: Mapping[str, Any]) -> dict[str, Any]:
    """Optuna parameters (a trial's ``params``) as the assignment: path -> declared value, in
    the order the dimensions are drawn."""
    out = {}
    for path, dim in tune.dimensions():
        if path not in params:
            continue
        value = params[path]
        if isinstance(dim, Choice):
            value = dim.values[_choices(dim).index(value)]
        elif isinstance(dim, IntRange):
            value = int(value)
        else:
            value = float(value)
        out[path] = value
    return out


def suggest(trial, tune: Tune) -> dict[str, Any]:
    """Draw an assignment for the Optuna ``trial``: each active dimension, in order (an
    enqueued trial's fixed values come back as they were given)."""
    assignment: dict[str, Any] = {}
    for path, dim in tune.dimensions():
        if not dim.active(assignment):
            continue
        if isinstance(dim, IntRange):
            assignment[path] = trial.suggest_int(path, dim.low, dim.high, step=dim.step,
                                                 log=dim.log)
        elif isinstance(dim, FloatRange):
            assignment[path] = trial.suggest_float(path, dim.low, dim.high, log=dim.log)
        else:
            choices = _choices(dim)
            assignment[path] = dim.values[choices.index(
                trial.suggest_categorical(path, choices))]
    return assignment


def as_json(value: Any) -> Any:
    """A declared value as JSON holds it (tuples as lists)."""
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def key_of(assignment: Mapping[str, Any]) -> str:
    """A text that is the same for two equal assignments (the grid's points)."""
    return json.dumps({k: as_json(v) for k, v in assignment.items()}, sort_keys=True)


def grid_order(tune: Tune) -> Iterator[dict[str, Any]]:
    """Every point of ``tune``'s grid (:meth:`~estflow.dsl.Tune.grid`: conditional dimensions
    only where active), in a random order fixed by ``tune.seed``."""
    points = list(tune.grid())
    random.Random(tune.seed).shuffle(points)
    return iter(points)
