"""The header of a local CSV source, checked against the declaration before any step runs.

``estflow run``, ``estflow preprocess`` and ``estflow compile`` read the first line of each CSV
file the source matches on this machine (standard library only: ``csv``, and ``gzip``/``bz2``/
``lzma`` for compressed files) and report every mismatch at once, as
:meth:`Pipeline.header_errors <estflow.dsl.Pipeline.header_errors>` words it: a raw column
missing from a file (a typo, a label that is neither a column nor a ``derive`` output), a
column twice, or unseen columns a strict ``SchemaCheck`` refuses. The ingest step checks the
same again where it runs; a source this machine cannot read (a URL, Parquet, TFRecord,
BigQuery, a path matching nothing here) is left to it. Which sources have a header to check
is the declaration's to say (:meth:`estflow.dsl.sources.Source.header_delimiter`).
"""

from __future__ import annotations

import bz2
import csv
import glob
import gzip
import lzma
import os
from pathlib import Path

from estflow.dsl.checks import source_patterns
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.pipeline import Pipeline

__all__ = ["local_csv_files", "read_header", "header_errors", "check_local_source", "OPENERS"]

MAX_FILES = 1000
"""At most this many files are checked (a header is one short read each)."""

OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".lzma": lzma.open}
"""How a CSV file is opened by its suffix (compressed ones), else ``open``."""


def local_csv_files(pipeline: Pipeline, source_root: str) -> list[Path]:
    """The files of a source with a header row (its declaration's ``header_delimiter()``: a
    CSV source) on this machine (relative paths resolve against ``source_root``), sorted; []
    for other sources, URLs and patterns matching nothing."""
    source = pipeline.source
    if source is None or source.header_delimiter() is None or "://" in source.path:
        return []
    matches = [m for declared in source_patterns(source)  # one per span of a window
               # an absolute path stays itself
               for m in glob.glob(os.path.join(source_root, declared), recursive=True)]
    return sorted(Path(p) for p in matches if os.path.isfile(p))[:MAX_FILES]


def read_header(path: Path, delimiter: str) -> list[str]:
    """The first row of a CSV file ([] for an empty file).

    Raises:
        OSError, UnicodeDecodeError, csv.Error, EOFError: the file cannot be read as CSV.
    """
    opener = OPENERS.get(path.suffix.lower(), open)
    with opener(path, "rt", encoding="utf-8-sig", newline="") as lines:
        return next(csv.reader(lines, delimiter=delimiter), [])


def header_errors(pipeline: Pipeline, source_root: str) -> list[DslError]:
    """Every mismatch between the local CSV files' headers and the declared raw columns (a file
    that cannot be read is left to the ingest step)."""
    errors: list[DslError] = []
    seen: set[str] = set()
    for path in local_csv_files(pipeline, source_root):
        try:
            header = read_header(path, pipeline.source.header_delimiter())
        except (OSError, UnicodeDecodeError, csv.Error, EOFError):
            continue
        for error in pipeline.header_errors(header, str(path)):
            if str(error) not in seen:
                seen.add(str(error))
                errors.append(error)
    return errors


def check_local_source(pipeline: Pipeline, source_root: str) -> None:
    """Raise :class:`DslErrors` listing every mismatch :func:`header_errors` finds."""
    errors = header_errors(pipeline, source_root)
    if errors:
        raise DslErrors(errors)
