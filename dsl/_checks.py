"""Field checks shared by the declaration classes; each raises DslError naming the field."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from estflow.dsl.errors import DslError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PIPELINE_NAME = re.compile(r"^[a-z0-9]([a-z0-9_-]{0,62}[a-z0-9])?$")


def name(value: Any, field: str = "name") -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise DslError(field, "an identifier (letters, digits, underscores; not starting "
                       "with a digit)", value)


def pipeline_name(value: Any, field: str = "name") -> None:
    if not isinstance(value, str) or not _PIPELINE_NAME.match(value):
        raise DslError(field, "lowercase letters, digits, '-' or '_', at most 64 characters, "
                       "starting and ending with a letter or digit", value)


def one_of(value: Any, allowed: Iterable[Any], field: str) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise DslError(field, f"one of {list(allowed)}", value)


def positive_int(value: Any, field: str, *, allow_none: bool = False, minimum: int = 1) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise DslError(field, what + (" or None" if allow_none else ""), value)


def number(value: Any, field: str, *, allow_none: bool = False, low: float | None = None,
           high: float | None = None, low_open: bool = False) -> None:
    if value is None and allow_none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bounds = ""
        if low is not None:
            bounds += f" {'>' if low_open else '>='} {low}"
        if high is not None:
            bounds += f"{' and' if bounds else ''} <= {high}"
        raise DslError(field, f"a finite number{bounds}" + (" or None" if allow_none else ""),
                       value)


def tuple_of(value: Any, field: str, item_type: type | tuple[type, ...], *, min_len: int = 0,
             what: str = "") -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise DslError(field, f"a tuple of {what or item_type}", value)
    for i, item in enumerate(value):
        if not isinstance(item, item_type) or isinstance(item, bool) and item_type is not bool:
            raise DslError(f"{field}[{i}]", what or str(item_type), item)
    if len(value) < min_len:
        raise DslError(field, f"at least {min_len} item(s)", value)
    return tuple(value)


def freeze(obj: Any, field: str, value: Any) -> None:
    """Set a field of a frozen dataclass during __post_init__ (normalisation, e.g. list->tuple)."""
    object.__setattr__(obj, field, value)
