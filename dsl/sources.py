"""Data sources: where the raw rows come from, and how strictly they are checked at ingest.

The schema of every source is the pipeline's declared raw columns (names, dtypes, defaults):
ingest reads those columns, converts each value to its dtype and rejects, with its reason, a
row that does not fit. ``max_rejected_fraction`` bounds how many rows may be rejected before
the step fails; an optional :class:`SchemaCheck` also checks the data as a whole.

Example:
    >>> import estflow.dsl as ef
    >>> ef.ParquetSource("gs://bucket/trips/*.parquet", schema_check=ef.SchemaCheck())
    ParquetSource(path='gs://bucket/trips/*.parquet', max_rejected_fraction=0.01, schema_check=SchemaCheck(max_missing_fraction=1.0, max_type_error_fraction=0.01, allow_unseen_columns=True), spans=None)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from estflow.dsl import _checks
from estflow.dsl.checks import Spans
from estflow.dsl.checks import check_source_spans
from estflow.dsl.errors import DslError
from estflow.dsl.serialization import kind_name
from estflow.dsl.serialization import serializable

__all__ = ["SchemaCheck", "Source", "CsvSource", "TFRecordSource", "ParquetSource",
           "BigQuerySource", "source_kinds", "expect_source"]

_TABLE = re.compile(r"^(?:[A-Za-z0-9.:-]+[:.])?[A-Za-z0-9_]+\.[A-Za-z0-9_$-]+$")
_PROJECT = re.compile(r"^(?:[a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")
TFRECORD_COMPRESSIONS = ("auto", "gzip", "none")


@serializable
@dataclasses.dataclass(frozen=True)
class SchemaCheck:
    """Check the data against the declared raw columns at ingest. The per-column report (missing
    and type-error rates, unseen columns) is in ``ingest.json`` either way; with a check, a
    violation fails the step with every violation listed.

    Args:
        max_missing_fraction: per raw column, the largest fraction of rows that may lack a value
            (a default fills them, but a mostly empty column usually means a renamed column or
            a broken export).
        max_type_error_fraction: per raw column, the largest fraction of rows whose value is not
            of the declared dtype (such rows are rejected either way; a high rate means the
            declaration does not match the data).
        allow_unseen_columns: whether the data may hold columns that no declaration reads.

    Example:
        >>> import estflow.dsl as ef
        >>> check = ef.SchemaCheck(max_missing_fraction=0.5, allow_unseen_columns=False)
        >>> ef.CsvSource("data/trips.csv", schema_check=check).schema_check.max_missing_fraction
        0.5
    """

    max_missing_fraction: float = 1.0
    max_type_error_fraction: float = 0.01
    allow_unseen_columns: bool = True

    def __post_init__(self) -> None:
        _checks.number(self.max_missing_fraction, "max_missing_fraction", low=0, high=1)
        _checks.number(self.max_type_error_fraction, "max_type_error_fraction", low=0, high=1)
        if not isinstance(self.allow_unseen_columns, bool):
            raise DslError("allow_unseen_columns", "True or False", self.allow_unseen_columns)


class Source:
    """The base of every source declaration: subclassing it declares a source kind.

    A kind is a frozen dataclass subclassing :class:`Source`; declaring it registers it as what
    ``Pipeline.source`` and ``BatchPredict.source`` accept (:func:`source_kinds`) and for the
    JSON round trip of specs. Reading it is one row in the steps' source lookup (its reader).
    What a check before any step runs needs to know of a kind is a method here, which a kind
    overrides where it differs (never a test of which class a source is).

    A kind declared outside estflow is written in a spec as ``"module:ClassName"``: a step's
    process imports that module to read it (:mod:`estflow.dsl.serialization`), so the kind
    lives in a module the steps can import (an installed package, a module on the path) or in
    the pipeline file itself, and that module registers the kind's reader when imported
    (``estflow.components._sources.registry.register``).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        serializable(cls, importable=True)
        _KINDS[kind_name(cls)] = cls

    def header_delimiter(self) -> str | None:
        """The delimiter of the header row its files start with (a row naming its columns,
        which ``estflow run`` checks on this machine before any step runs); None where its
        rows carry no such header to check."""
        return None


_KINDS: dict[str, type[Source]] = {}


def source_kinds() -> tuple[type[Source], ...]:
    """The declared source kinds, in declaration order."""
    return tuple(_KINDS.values())


def expect_source(value: Any, field: str = "source") -> None:
    """Raise a :class:`DslError` naming ``field`` unless ``value`` is a declared source kind."""
    if not isinstance(value, source_kinds()):
        names = [kind.__name__ for kind in source_kinds()]
        expected = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise DslError(field, f"a {expected}", value)


def _check_common(source) -> None:
    _checks.number(source.max_rejected_fraction, "max_rejected_fraction", low=0, high=1)
    if source.schema_check is not None and not isinstance(source.schema_check, SchemaCheck):
        raise DslError("schema_check", "a SchemaCheck or None", source.schema_check)
    check_source_spans(source)


def _check_path(path) -> None:
    if not isinstance(path, str) or not path.strip():
        raise DslError("path", "a non-empty file path, glob or URL (gs://, s3://)", path)


NA_VALUES = ("", "NA", "N/A", "NULL", "null", "NaN", "nan")
"""The cells that mean "missing" in a numeric CSV column unless declared otherwise."""


@dataclasses.dataclass(frozen=True)
class CsvSource(Source):
    """CSV file(s) with a header row.

    A record is one line unless ``multiline_values`` is declared: a quote still open at the end
    of a line then rejects that line alone (``unterminated_quote``) and reading resumes on the
    next line, so a broken export costs its own lines, never the rows after it. Every
    physical line is accounted for in ``ingest.json``: lines read = header + kept + rejected +
    blank, per file.

    Missing values: a cell equal to one of the column's missing-value tokens is missing, and
    then takes the column's declared default, or rejects the row when it declares none. The
    tokens of a numeric column are ``na_values``; those of a string column are
    ``string_na_values``, by default only the empty cell, so that ``"NA"`` or ``"null"``
    stay categories of a string column unless declared missing; ``column_na_values`` sets the
    tokens of single columns.

    Args:
        path: a file path or a glob (``data/*.csv``), local or a URL Beam reads (``gs://``,
            ``s3://``); relative paths are resolved against the directory of the pipeline
            file that declares them. Compressed files (``.gz``, ``.bz2``) are read as such.
        delimiter: one ASCII character (not a quote, CR or LF).
        max_rejected_fraction: the ingest step fails when more than this fraction of the data
            lines (header and blank lines excluded) belongs to rejected rows; a rejected row
            that spans five lines counts five. Each rejected row is written with its file,
            line and reason to ``rejected.jsonl``.
        schema_check: an optional check of the data as a whole (see :class:`SchemaCheck`).
        na_values: the cells that are missing in int and float columns.
        string_na_values: the cells that are missing in string columns.
        column_na_values: raw column name -> its own missing-value tokens (replacing those
            of its dtype), e.g. ``{"company": ("", "NA", "unknown")}``.
        multiline_values: whether a quoted value may span lines (RFC 4180); off, every record
            is one line.
        max_row_lines: with ``multiline_values``, the most lines one row may span; a quote not
            closed within them rejects the line that opened it alone.
        max_row_bytes: the most bytes a row (all its lines, line ending excluded), hence each
            of its values, may hold; a longer row is rejected with its file, line and size,
            and only its first bytes are kept in ``rejected.jsonl``.
        spans: the source's partitions, named by a ``{span:FORMAT}`` placeholder in ``path``
            (see :class:`~estflow.dsl.checks.Spans`); None: the path is read as it is.

    Example:
        >>> import estflow.dsl as ef
        >>> source = ef.CsvSource("data/*.csv", delimiter=";", max_rejected_fraction=0.0,
        ...                       column_na_values={"company": ("", "NA")})
        >>> source.na_values  # numeric columns
        ('', 'NA', 'N/A', 'NULL', 'null', 'NaN', 'nan')
        >>> source.string_na_values, source.column_na_values
        (('',), {'company': ('', 'NA')})
        >>> ef.CsvSource("notes.csv", multiline_values=True, max_row_lines=20).max_row_bytes
        1048576
    """

    path: str
    delimiter: str = ","
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None
    na_values: tuple[str, ...] = NA_VALUES
    string_na_values: tuple[str, ...] = ("",)
    column_na_values: Mapping[str, tuple[str, ...]] | None = None
    multiline_values: bool = False
    max_row_lines: int = 100
    max_row_bytes: int = 1 << 20
    spans: Spans | None = None

    def __post_init__(self) -> None:
        _check_path(self.path)
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1 or \
                not self.delimiter.isascii() or self.delimiter in "\"\r\n":
            raise DslError("delimiter", "a single character, ASCII (not a quote, CR or LF)",
                           self.delimiter)
        _check_common(self)
        _checks.freeze(self, "na_values", _tokens(self.na_values, "na_values"))
        _checks.freeze(self, "string_na_values",
                       _tokens(self.string_na_values, "string_na_values"))
        if self.column_na_values is not None:
            if not isinstance(self.column_na_values, Mapping):
                raise DslError("column_na_values", "a mapping of raw column name to a tuple of "
                               "missing-value tokens, or None", self.column_na_values)
            for name in self.column_na_values:
                _checks.name(name, "column_na_values")
            _checks.freeze(self, "column_na_values", {
                name: _tokens(tokens, f"column_na_values[{name!r}]")
                for name, tokens in sorted(self.column_na_values.items())})
        if not isinstance(self.multiline_values, bool):
            raise DslError("multiline_values", "True or False", self.multiline_values)
        _checks.positive_int(self.max_row_lines, "max_row_lines")
        if self.max_row_lines != 100 and not self.multiline_values:
            raise DslError("max_row_lines", "left at its default unless multiline_values=True "
                           "(without it every row is one line)", self.max_row_lines)
        _checks.positive_int(self.max_row_bytes, "max_row_bytes")

    def header_delimiter(self) -> str:
        """The delimiter of the header row every CSV file starts with."""
        return self.delimiter

    def missing_tokens(self, name: str, dtype: str) -> tuple[str, ...]:
        """The cells that mean "missing" in the raw column ``name`` of ``dtype``: its own
        ``column_na_values`` when declared, else ``string_na_values`` for a string column and
        ``na_values`` for a numeric one (e.g. ``('', 'NA')`` for ``sex`` in a source declaring
        ``column_na_values={"sex": ("", "NA")}``)."""
        own = self.column_na_values or {}
        if name in own:
            return own[name]
        return self.string_na_values if dtype == "string" else self.na_values


def _tokens(value, field: str) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise DslError(field, "a tuple of str (the cells read as missing)", value)
    for i, token in enumerate(value):
        if not isinstance(token, str):
            raise DslError(f"{field}[{i}]", "a str (a cell read as missing)", token)
    return tuple(value)


@dataclasses.dataclass(frozen=True)
class TFRecordSource(Source):
    """TFRecord file(s) of serialized ``tf.train.Example`` (e.g. another pipeline's output).

    Args:
        path: a file path or glob, local or ``gs://`` / ``s3://``.
        compression: ``"auto"`` (by file name: ``.gz`` is GZIP), ``"gzip"`` or ``"none"``.
        max_rejected_fraction: see :class:`CsvSource`; a record that is not an Example, or a
            feature with several values or the wrong kind, rejects its row.
        schema_check: see :class:`SchemaCheck`.
        spans: see :class:`CsvSource`.

    Example:
        >>> import estflow.dsl as ef
        >>> source = ef.TFRecordSource("gs://bucket/examples/part-*.tfrecord.gz")
        >>> source.compression  # "auto": GZIP, by the .gz suffix
        'auto'
    """

    path: str
    compression: str = "auto"
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None
    spans: Spans | None = None

    def __post_init__(self) -> None:
        _check_path(self.path)
        _checks.one_of(self.compression, TFRECORD_COMPRESSIONS, "compression")
        _check_common(self)


@dataclasses.dataclass(frozen=True)
class ParquetSource(Source):
    """Parquet file(s); columns are matched to the declared raw columns by name.

    Args:
        path: a file path or glob, local or ``gs://`` / ``s3://``.
        max_rejected_fraction: see :class:`CsvSource`.
        schema_check: see :class:`SchemaCheck`.
        spans: see :class:`CsvSource`.

    Example:
        >>> import estflow.dsl as ef
        >>> source = ef.ParquetSource("s3://bucket/trips/*.parquet", max_rejected_fraction=0.05)
        >>> source.schema_check is None
        True
    """

    path: str
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None
    spans: Spans | None = None

    def __post_init__(self) -> None:
        _check_path(self.path)
        _check_common(self)


@dataclasses.dataclass(frozen=True)
class BigQuerySource(Source):
    """A BigQuery table or query result (read with Beam's ``ReadFromBigQuery``; it needs Google
    Cloud credentials and network access, so it runs on Dataflow, not offline).

    Args:
        query: a standard-SQL query; exactly one of ``query`` and ``table``.
        table: ``"project:dataset.table"``, ``"project.dataset.table"`` or ``"dataset.table"``.
        project: the project billed for the read (default: the credentials' project).
        max_rejected_fraction: see :class:`CsvSource`.
        schema_check: see :class:`SchemaCheck`.

    Example:
        >>> import estflow.dsl as ef
        >>> source = ef.BigQuerySource(table="bigquery-public-data.chicago_taxi_trips.taxi_trips",
        ...                            project="my-billing-project")
        >>> source.query is None
        True
    """

    query: str | None = None
    table: str | None = None
    project: str | None = None
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None

    def __post_init__(self) -> None:
        if (self.query is None) == (self.table is None):
            raise DslError("query", "exactly one of `query` (SQL) or `table` (a table name)",
                           {"query": self.query, "table": self.table})
        if self.query is not None and (not isinstance(self.query, str)
                                       or not self.query.strip()):
            raise DslError("query", "a non-empty standard-SQL query", self.query)
        if self.table is not None and (not isinstance(self.table, str)
                                       or not _TABLE.match(self.table)):
            raise DslError("table", "'project:dataset.table', 'project.dataset.table' or "
                           "'dataset.table'", self.table)
        if self.project is not None and (not isinstance(self.project, str)
                                         or not _PROJECT.match(self.project)):
            raise DslError("project", "a Google Cloud project id (6-30 lowercase letters, "
                           "digits or '-', starting with a letter) or None", self.project)
        _check_common(self)
