"""The one lookup from a dsl source class to its :class:`Reader`: ingest, batch prediction and
the fingerprint step all ask it, never which class a source is.

A new source kind is a declaration (a :class:`~estflow.dsl.sources.Source` subclass) plus one
reader module (its driver-side check and its Beam reader) and one row here: in
:data:`READERS`, or added with :func:`register`. A kind declared outside estflow registers its
row in the module that declares it, when imported: a step's process imports that module when
it reads the kind from its spec (:mod:`estflow.dsl.serialization`), and with it the row.

This module imports neither Beam nor pyarrow: the built-in rows name their reader modules'
functions, imported when first called (:func:`late`), so the fingerprint step (which must not
import Beam) asks the lookup for a file source's fingerprint without loading any reader.
Reading through the lookup (:class:`~.read.ReadSource`, :func:`~.read.check_source`,
:func:`~.read.source_files`) is in :mod:`.read`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

from estflow.dsl import sources as s

__all__ = ["SourceError", "Reader", "READERS", "register", "reader_for", "late"]


class SourceError(RuntimeError):
    """The source cannot be read as declared (no files, a missing column, a wrong type)."""


def late(module: str, name: str) -> Callable:
    """``module.name``, imported when first called: a row names its reader's functions without
    importing the reader. Write ``module`` as a literal, full name (``late("estflow.x.y",
    ...)``): the step code digest reads it as an import of the step that asks the lookup
    (:func:`estflow.components._io.outside_facts.estflow_fingerprint`)."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = call.__name__ = f"{module}.{name}"
    return call


@dataclasses.dataclass(frozen=True)
class Reader:
    """How one kind of source is read, and fingerprinted.

    Attributes:
        kind: its name in messages (``"CSV"``).
        glob: the files a directory of it holds (``"*.csv"``), for the hint when a path is a
            directory; None for a source that is not files (BigQuery).
        check: ``check(pipeline, files)``, on the driver before the job; raises
            :class:`~.cells.CellTypeError` or :class:`SourceError`.
        files: ``files(pipeline, files, block_bytes, row_hashes)``: the ``beam.DoFn`` that
            turns one file into RowChunks (a file source).
        whole: ``whole(pipeline)``: the ``beam.PTransform`` reading the whole source (a source
            that is not files).
        column_dtypes: ``column_dtypes(files, names)``: the dtype (``"float"``, ``"int"``,
            ``"string"``) the source's own schema gives each of ``names`` it holds, on the
            driver (batch prediction keeps a key column's numbers numbers); {} where its values
            have no declared type (CSV, TFRecord; BigQuery keys are read as text).
        fingerprint: ``fingerprint(source, root, clients)``: what its cache keys hold of the
            data, without reading it (``{"digest", "kind", ...}``, see
            :func:`estflow.components._io.outside_facts.source_fingerprint`); by default that
            of the files ``source.path`` matches (their content, or their objects' metadata),
            shared by every file source.
    """

    kind: str
    glob: str | None
    check: Callable[..., None] = lambda pipeline, files: None
    files: Callable[..., object] | None = None
    whole: Callable[..., object] | None = None
    column_dtypes: Callable[..., dict[str, str]] = lambda files, names: {}
    fingerprint: Callable[..., dict] = late("estflow.components._io.outside_facts",
                                            "files_fingerprint")

    def __post_init__(self) -> None:
        if (self.files is None) == (self.whole is None):
            raise ValueError(f"reader {self.kind!r}: expected exactly one of files (a file "
                             f"source) or whole (a source that is not files); received "
                             f"files={self.files!r}, whole={self.whole!r}")
        if (self.glob is None) != (self.whole is not None):
            raise ValueError(f"reader {self.kind!r}: expected a glob exactly when it reads "
                             f"files; received glob={self.glob!r}")


READERS: dict[type, Reader] = {
    s.CsvSource: Reader(
        "CSV", "*.csv",
        check=late("estflow.components._sources.csv_source", "check_csv_headers"),
        files=late("estflow.components._sources.csv_source", "read_file")),
    s.ParquetSource: Reader(
        "Parquet", "*.parquet",
        check=late("estflow.components._sources.parquet_reader", "check"),
        files=late("estflow.components._sources.parquet_reader", "read_file"),
        column_dtypes=late("estflow.components._sources.parquet_reader", "column_dtypes")),
    s.TFRecordSource: Reader(
        "TFRecord", "*.tfrecord*",
        files=late("estflow.components._sources.tfrecord_reader", "read_file")),
    s.BigQuerySource: Reader(
        "BigQuery", None,
        check=late("estflow.components._sources.bigquery_reader", "check"),
        whole=late("estflow.components._sources.bigquery_reader", "read_whole"),
        fingerprint=late("estflow.components._sources.bigquery_reader", "fingerprint")),
}
"""The reader of each source class (:mod:`estflow.dsl.sources`)."""


def register(source_class: type, reader: Reader) -> None:
    """Add the row of a new source kind: ``source_class`` is read with ``reader``.

    Raises:
        ValueError: ``source_class`` is not a declared source kind
            (:func:`estflow.dsl.sources.source_kinds`), or another reader reads it already.
    """
    if source_class not in s.source_kinds():
        raise ValueError(f"source class: expected a declared source kind (a dataclass "
                         f"subclassing estflow.dsl.sources.Source); received {source_class!r}")
    if READERS.get(source_class, reader) != reader:
        raise ValueError(f"{source_class.__name__}: already read by {READERS[source_class]}; "
                         "a kind has one reader")
    READERS[source_class] = reader


def reader_for(source) -> Reader:
    """The :class:`Reader` of ``source``'s class.

    Raises:
        SourceError: no reader reads that class.
    """
    reader = READERS.get(type(source))
    if reader is None:
        kind = type(source)
        hint = ""
        if not kind.__module__.startswith("estflow."):
            hint = (f" (no reader is registered for {kind.__name__}: the module that declares "
                    f"it, {kind.__module__!r}, registers its reader when imported, with "
                    f"estflow.components._sources.registry.register({kind.__name__}, "
                    "Reader(...)))")
        raise SourceError(f"source: expected one of {sorted(c.__name__ for c in READERS)}; "
                          f"received a {kind.__name__}{hint}")
    return reader
