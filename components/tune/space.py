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
import random
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

from estflow.dsl.tune import Choice
from estflow.dsl.tune import IntRange
from estflow.dsl.tune import Tune
from estflow.dsl.tune import as_json
from estflow.dsl.tune import choice_as_text as _as_text
from estflow.dsl.tune import optuna_choices
from estflow.dsl.tune import suggest

__all__ = ["suggest", "encoded", "decoded", "as_json", "key_of", "grid_order"]


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
            value = dim.values[optuna_choices(dim).index(value)]
        elif isinstance(dim, IntRange):
            value = int(value)
        else:
            value = float(value)
        out[path] = value
    return out


def key_of(assignment: Mapping[str, Any]) -> str:
    """A text that is the same for two equal assignments (the grid's points)."""
    return json.dumps({k: as_json(v) for k, v in assignment.items()}, sort_keys=True)


def grid_order(tune: Tune) -> Iterator[dict[str, Any]]:
    """Every point of ``tune``'s grid (:meth:`~estflow.dsl.Tune.grid`: conditional dimensions
    only where active), in a random order fixed by ``tune.seed``."""
    points = list(tune.grid())
    random.Random(tune.seed).shuffle(points)
    return iter(points)
