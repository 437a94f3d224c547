"""Data checks and spans: what each night's data must look like before a model trains on it.

:class:`DataChecks` (``Pipeline.checks``) declares the checks the ``validate`` step runs on the
statistics ingest computed: the data against a schema (tensorflow-metadata ``Schema`` text,
committed with the pipeline, or inferred from the first run and written to the run for the
user to commit), the number of examples, missing values, drift against the training data of
the served model (L-infinity distance for categorical columns, Jensen-Shannon divergence for
numeric ones). A run whose data
breaks a blocking check stops before training (``estflow run`` exit status 4); a warn-only
check prints and goes on.

:class:`Spans` (``CsvSource(..., spans=...)`` and the other file sources) names the source's
partitions by a ``{span:FORMAT}`` placeholder in its path (``data/{span:%Y-%m-%d}/*.csv``): a
run reads one span (or a rolling window of the last N), the latest by default or the one
``estflow run --span`` names;
``estflow backfill --from X --to Y`` runs each span in order.

Example:
    >>> import estflow.dsl as ef
    >>> checks = ef.DataChecks(schema="schema.pbtxt", min_examples=100,
    ...                        drift={"company": 0.2}, drift_js=0.1, warn_only=("missing",))
    >>> checks.drift_threshold("company", categorical=True), checks.drift_threshold("fare")
    (0.2, 0.1)
    >>> checks.blocks("company", "COMPARATOR_L_INFINITY_HIGH", family="drift")
    True
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from estflow.dsl import _checks
from estflow.dsl.errors import DslError
from estflow.dsl.serialization import serializable

__all__ = ["DataChecks", "Spans", "CHECK_FAMILIES", "SPAN_PLACEHOLDER", "select_span",
           "select_window", "source_patterns", "span_of"]

CHECK_FAMILIES = ("schema", "examples", "missing", "drift", "span")
"""The families of checks a ``warn_only`` entry may name (besides a column or an anomaly
kind): the schema's checks, the number of examples, missing values, drift, and a missing
or empty span."""

_KIND = re.compile(r"^[A-Z][A-Z0-9_]*$")  # TFDV's anomaly kind names, e.g. SCHEMA_NEW_COLUMN
SPAN_PLACEHOLDER = re.compile(r"\{span:([^{}]+)\}")
"""``{span:FORMAT}`` in a source path: FORMAT is a ``strftime`` format of the partition."""
_FORMAT_FIELDS = {"Y": r"\d{4}", "m": r"\d{2}", "d": r"\d{2}", "H": r"\d{2}", "M": r"\d{2}",
                  "S": r"\d{2}", "j": r"\d{3}", "y": r"\d{2}"}


@serializable
@dataclasses.dataclass(frozen=True)
class DataChecks:
    """The checks of each run's data, run by the ``validate`` step after ingest, before
    training.

    Args:
        schema: a tensorflow-metadata ``Schema`` text file (relative paths resolve against the
            pipeline file's directory, as source paths do), checked in with the pipeline; None:
            the schema is inferred from the run's statistics and written to the run
            (``validation/schema.pbtxt``) for you to commit and name here.
        min_examples: the fewest rows the run's data may have: the whole span, every split
            together, as ingest kept them (an empty span, or an empty split, is an anomaly,
            never a silently smaller training set). Like every check, it is computed over the
            whole span, as TFDV validates one dataset; each anomaly is reported once. An
            inferred schema records it as ``dataset_constraints.min_examples_count``.
        max_missing_fraction: per column, the largest fraction of rows without a value (None:
            the schema's presence decides).
        drift: column -> the largest allowed distance between this run's training data and
            the served model's (L-infinity for a categorical column, Jensen-Shannon divergence
            for a numeric one); overrides the defaults below for that column.
        drift_linf: the default L-infinity threshold of every categorical column (None: no
            drift check of columns not named in ``drift``).
        drift_js: the default Jensen-Shannon threshold of every numeric column (None: as
            above).
        warn_only: checks that print a warning and let the run go on: families
            (:data:`CHECK_FAMILIES`), anomaly kinds (TFDV's names, e.g.
            ``"SCHEMA_NEW_COLUMN"``) or raw column names.

    Raises:
        DslError: a field has the wrong type or range (its name says which).

    Example:
        >>> import estflow.dsl as ef
        >>> checks = ef.DataChecks(schema="schema.pbtxt", min_examples=1000,
        ...                        drift={"payment_type": 0.1}, drift_js=0.05,
        ...                        warn_only=("SCHEMA_NEW_COLUMN",))
        >>> checks.blocks("fare", "SCHEMA_NEW_COLUMN", family="schema")
        False
    """

    schema: str | None = None
    min_examples: int = 1
    max_missing_fraction: float | None = None
    drift: Mapping[str, float] | None = None
    drift_linf: float | None = None
    drift_js: float | None = None
    warn_only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.schema is not None and (not isinstance(self.schema, str)
                                        or not self.schema.strip()):
            raise DslError("schema", "a path to a Schema text file (schema.pbtxt) or None "
                           "(inferred from the first run)", self.schema)
        _checks.positive_int(self.min_examples, "min_examples")
        _checks.number(self.max_missing_fraction, "max_missing_fraction", allow_none=True,
                       low=0, high=1)
        _checks.freeze(self, "drift", _thresholds(self.drift, "drift"))
        for field in ("drift_linf", "drift_js"):
            _checks.number(getattr(self, field), field, allow_none=True, low=0, high=1)
        if isinstance(self.warn_only, str) or not isinstance(self.warn_only, (list, tuple)):
            raise DslError("warn_only", "a tuple of check families, anomaly kinds or column "
                           "names", self.warn_only)
        for i, item in enumerate(self.warn_only):
            if not isinstance(item, str) or not item:
                raise DslError(f"warn_only[{i}]", f"one of {list(CHECK_FAMILIES)}, an "
                               "anomaly kind (e.g. 'SCHEMA_NEW_COLUMN') or a column name", item)
        _checks.freeze(self, "warn_only", tuple(self.warn_only))

    def columns(self) -> tuple[tuple[str, str], ...]:
        """``(field, column name)`` of every column the checks name (what the pipeline checks
        against its raw columns)."""
        named = [(f"checks.drift[{c!r}]", c) for c in (self.drift or {})]
        named += [(f"checks.warn_only[{i}]", item) for i, item in enumerate(self.warn_only)
                  if item not in CHECK_FAMILIES and not _KIND.match(item)]
        return tuple(named)

    def drift_threshold(self, column: str, *, categorical: bool = False) -> float | None:
        """The drift threshold of ``column`` (None: not checked)."""
        if self.drift and column in self.drift:
            return self.drift[column]
        return self.drift_linf if categorical else self.drift_js

    def blocks(self, column: str | None, kind: str, *, family: str) -> bool:
        """Whether an anomaly (its column, TFDV kind and check family) stops the run; False
        when ``warn_only`` names any of the three."""
        return not ({column, kind, family} & set(self.warn_only))


def _thresholds(value: Any, field: str) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DslError(field, "a mapping of column name to a threshold in [0, 1], or None",
                       value)
    for column, threshold in value.items():
        _checks.name(column, field)
        _checks.number(threshold, f"{field}[{column!r}]", low=0, high=1)
    return dict(sorted(value.items()))


@serializable
@dataclasses.dataclass(frozen=True)
class Spans:
    """The partitions of a file source: its path holds one ``{span:FORMAT}`` placeholder, a
    ``strftime`` format (``data/{span:%Y-%m-%d}/*.csv``, ``logs/{span:%Y%m%d%H}.csv.gz``).

    A run reads one span: the latest present (the greatest value, in the format's order) unless
    ``estflow run --span VALUE`` names one; ``estflow backfill --from X --to Y`` runs each span
    from X to Y in order, reusing cached steps. With ``last=N`` a run reads a rolling window:
    the N spans ending at that one (for a format whose finest field is the day or the hour,
    every day or hour of the window; otherwise the N latest present). A span that is missing
    (no file matches) or empty is an anomaly that stops the run before training, never a
    smaller training set.

    Args:
        last: how many spans one run reads, the latest and the ones before it (1: one span).
        selected: the spans a run reads, set when the run starts (``estflow run``, or the
            Kubeflow run's first task, from its ``span`` parameter or schedule time); left
            empty in a declaration.

    Example:
        >>> import estflow.dsl as ef
        >>> spans = ef.Spans(last=7)
        >>> source = ef.CsvSource("data/{span:%Y-%m-%d}/*.csv", spans=spans)
        >>> spans.format_of(source.path)
        '%Y-%m-%d'
        >>> from estflow.dsl.checks import select_window, source_patterns
        >>> source_patterns(select_window(source, ("2024-01-01", "2024-01-02")))
        ('data/2024-01-01/*.csv', 'data/2024-01-02/*.csv')
    """

    last: int = 1
    selected: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _checks.positive_int(self.last, "spans.last")
        _checks.freeze(self, "selected", _checks.tuple_of(self.selected, "spans.selected", str,
                                                          what="span values"))

    @staticmethod
    def format_of(path: str) -> str:
        """The ``strftime`` format of ``path``'s placeholder.

        Raises:
            DslError: ``path`` holds no placeholder, or more than one.
        """
        found = SPAN_PLACEHOLDER.findall(path)
        if len(found) != 1:
            raise DslError("path", "a path with one {span:FORMAT} placeholder (e.g. "
                           "'data/{span:%Y-%m-%d}/*.csv') when spans are declared", path)
        return found[0]

    @staticmethod
    def value_regex(fmt: str) -> str:
        """A regex matching a span value written in ``fmt`` (``%Y`` four digits, ...)."""
        out, i = [], 0
        while i < len(fmt):
            if fmt[i] == "%" and i + 1 < len(fmt):
                out.append(_FORMAT_FIELDS.get(fmt[i + 1], r"[^/]+?"))
                i += 2
            else:
                out.append(re.escape(fmt[i]))
                i += 1
        return "".join(out)


def select_span(source: Any, value: str, field: str = "--span") -> Any:
    """``source`` reading span ``value`` alone: its path with the placeholder replaced, and no
    spans (what the run's spec records, so each span has its own cache keys).

    Raises:
        DslError: ``source`` declares no spans, or ``value`` is not written in its format.
    """
    if getattr(source, "spans", None) is None:
        raise DslError(field, "a pipeline whose source declares spans=ef.Spans() and a "
                       "{span:FORMAT} placeholder in its path", value)
    fmt = Spans.format_of(source.path)
    if not isinstance(value, str) or not re.fullmatch(Spans.value_regex(fmt), value):
        raise DslError(field, f"a span written as {fmt!r} (the source path's placeholder)",
                       value)
    return dataclasses.replace(source, path=SPAN_PLACEHOLDER.sub(value, source.path),
                               spans=None)


def select_window(source: Any, values, field: str = "--span") -> Any:
    """``source`` reading the spans ``values`` (a rolling window, oldest first): its path keeps
    the placeholder and ``spans.selected`` names them (what the run's spec records, so each
    window has its own cache keys). One value: :func:`select_span`'s source.

    Raises:
        DslError: ``source`` declares no spans, or a value is not written in its format.
    """
    values = tuple(values)
    if len(values) == 1:
        return select_span(source, values[0], field)
    for value in values:
        select_span(source, value, field)  # the same checks, one by one
    return dataclasses.replace(source, spans=dataclasses.replace(source.spans,
                                                                 selected=values))


def source_patterns(source: Any) -> tuple[str, ...]:
    """The path patterns a file source reads: its path, or one per selected span of its
    rolling window."""
    spans = getattr(source, "spans", None)
    if spans is None or not spans.selected:
        return (source.path,)
    return tuple(SPAN_PLACEHOLDER.sub(v, source.path) for v in spans.selected)


def span_of(path_pattern: str, path: str) -> str | None:
    """The span value a concrete ``path`` holds where ``path_pattern`` has its placeholder
    (None: the path does not fit the pattern's text around it)."""
    head, fmt, tail = SPAN_PLACEHOLDER.split(path_pattern, maxsplit=1)
    glob_part = re.escape(head).replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    match = re.match(glob_part + f"({Spans.value_regex(fmt)})", path)
    return match.group(1) if match else None


def check_source_spans(source: Any) -> None:
    """A file source's ``spans`` against its path: declared spans need one placeholder, and a
    placeholder needs declared spans (else it would be read as a literal directory name)."""
    spans = getattr(source, "spans", None)
    path = getattr(source, "path", "")
    if spans is None:
        if SPAN_PLACEHOLDER.search(path or ""):
            raise DslError("spans", "ef.Spans() for a path with a {span:FORMAT} placeholder",
                           None)
        return
    if not isinstance(spans, Spans):
        raise DslError("spans", "an ef.Spans() or None", spans)
    Spans.format_of(path)
