"""Cron expressions for Kubeflow Pipelines schedules.

KFP's scheduler parses cron with six fields, **seconds first** (``"0 0 3 * * *"`` is 03:00 every
day), while people write the usual five (``"0 3 * * *"``). :func:`to_kfp_cron` accepts either,
plus the ``@hourly`` style macros, validates every field, and returns the six-field form, so a
mistake fails here, before anything is sent to a KFP API.

Each field is ``*`` (``?`` too, in the day fields), a value, a range ``a-b``, a step ``*/n``,
``a-b/n`` or ``a/n``, or a comma-separated list of those. Months and weekdays also take names
(``JAN``-``DEC``, ``SUN``-``SAT``, any case).

Example:
    >>> to_kfp_cron("0 3 * * *")
    '0 0 3 * * *'
    >>> to_kfp_cron("@weekly")
    '0 0 0 * * 0'
"""

from __future__ import annotations

import dataclasses

__all__ = ["CronError", "MACROS", "to_kfp_cron"]

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

# Six-field equivalents, so what KFP receives is always the explicit form.
MACROS: dict[str, str] = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}


class CronError(ValueError):
    """An invalid cron expression; ``field`` names the offending field (None: the whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class _Invalid(Exception):
    """One part of a field is invalid: ``token`` is that part, ``phrase`` says why."""

    def __init__(self, token: str, phrase: str) -> None:
        super().__init__(token, phrase)
        self.token = token
        self.phrase = phrase


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] means low + i
    any_marker: bool = False  # accepts "?" (robfig/cron: same as "*", day fields only)

    def value(self, text: str) -> int:
        """The number ``text`` stands for (a number or a name)."""
        if text.upper() in self.names:
            return self.low + self.names.index(text.upper())
        if not text.isdigit():
            names = f" or a name {self.names[0]}-{self.names[-1]}" if self.names else ""
            raise _Invalid(text, f"is not a number{names}")
        if not self.low <= int(text) <= self.high:
            raise _Invalid(text, f"is out of range {self.low}-{self.high}")
        return int(text)


_FIELDS = (
    _Field("second", 0, 59),
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31, any_marker=True),
    _Field("month", 1, 12, names=_MONTHS),
    _Field("day-of-week", 0, 6, names=_WEEKDAYS, any_marker=True),
)


def to_kfp_cron(expr: str) -> str:
    """The six-field (seconds first) form of ``expr``, as Kubeflow Pipelines schedules want it.

    Args:
        expr: five fields (minute hour day-of-month month day-of-week), six fields (second
            first; kept as given), or a macro: ``@hourly``, ``@daily``/``@midnight``,
            ``@weekly``, ``@monthly``, ``@yearly``/``@annually``.

    Returns:
        The expression with single spaces between six fields.

    Raises:
        CronError: (a ValueError) the expression is malformed; the message names the field.
    """
    if not isinstance(expr, str):
        raise CronError(f"Received an invalid value for `cron`, expected a string such as "
                        f"'0 3 * * *'. Received: cron={expr!r}")
    text = expr.strip()
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            raise CronError(f"unknown cron macro '{text}', expected one of "
                            f"{', '.join(sorted(MACROS))}")
        return macro
    fields = text.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        raise CronError(f"cron '{expr}' has {len(fields)} fields, expected 5 (minute hour "
                        "day-of-month month day-of-week) or 6 (second first)")
    for spec, field in zip(_FIELDS, fields, strict=True):
        problem = _check_field(spec, field)
        if problem:
            raise CronError(f"{spec.name} field '{field}' {problem} in cron '{expr}'", spec.name)
    return " ".join(fields)


def _check_field(spec: _Field, field: str) -> str | None:
    """What is wrong with ``field`` (a phrase following "<name> field '<field>'"), or None."""
    if spec.any_marker and field == "?":
        return None
    items = field.split(",")
    if "" in items:
        return "has an empty list element (a stray comma?)"
    try:
        for item in items:
            _check_item(spec, item)
    except _Invalid as bad:
        # Point at the offending part when it is not the whole field: "'1,25': '25' is ...".
        return bad.phrase if bad.token == field else f"has '{bad.token}', which {bad.phrase}"
    return None


def _check_item(spec: _Field, item: str) -> None:
    """Check one list element: ``*``, ``v``, ``a-b``, each optionally followed by ``/step``."""
    base, slash, step = item.partition("/")
    if not base:
        raise _Invalid(item, "has nothing before '/' (write '*/n' or 'a-b/n')")
    if "-" in base:
        start, _, end = base.partition("-")
        if not start or not end:
            raise _Invalid(item, "is an incomplete range (write 'a-b')")
        if spec.value(start) > spec.value(end):
            raise _Invalid(item, f"is a reversed range ({start} is after {end})")
    elif base != "*":
        spec.value(base)  # "a/n" (from a to the field's end, every n) is valid too
    if slash:
        span = spec.high - spec.low
        if not step.isdigit() or not 1 <= int(step) <= span:
            raise _Invalid(item, f"has step '{step}', expected a step 1-{span}")
