"""Reading a pipeline's source in Beam: every row validated, bad rows rejected with a reason.

:class:`ReadSource` turns the declared source (CSV, Parquet, TFRecord, BigQuery) into a
PCollection of :class:`~._chunks.RowChunk`. Files are the unit of parallelism (a file is read
in order, which is what gives every row its line number); the blocks of a file are validated
vectorised. Problems with the source as a whole (no file matches, a needed column is missing,
a column's type cannot hold its declared dtype, BigQuery without credentials) are found on the
driver by :func:`check_source` before the job starts.
"""

from __future__ import annotations

import os

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError

from estflow.components._io.tfrecords import expand_pattern
from estflow.components.ingest import csv_blocks
from estflow.components.ingest import typed_sources
from estflow.components.ingest.cells import CellTypeError
from estflow.components.ingest.chunks import SourceError
from estflow.components.ingest.csv_source import ReadCsv
from estflow.components.ingest.csv_source import check_csv_headers
from estflow.dsl import sources as s
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadSource", "check_source", "source_files"]


def source_files(source, root: str) -> list[str]:
    """The files a file source reads (relative paths resolve against ``root``); [] for
    BigQuery.

    Raises:
        SourceError: no file matches, or a match is a directory.
    """
    if isinstance(source, s.BigQuerySource):
        return []
    pattern = source.path
    if "://" not in pattern and not os.path.isabs(pattern):
        pattern = os.path.join(root, pattern)
    try:
        files = expand_pattern(pattern)
    except BeamIOError as err:
        raise SourceError(f"cannot list source.path={source.path!r} ({pattern!r}): "
                          f"{err}") from None
    kind = {s.CsvSource: "CSV", s.ParquetSource: "Parquet"}.get(type(source), "TFRecord")
    if not files:
        raise SourceError(f"no {kind} file matches source.path={source.path!r} (resolved to "
                          f"{pattern!r} against source root {root!r})")
    for path in files:
        if "://" not in path and os.path.isdir(path):
            suffix = {"CSV": "*.csv", "Parquet": "*.parquet"}.get(kind, "*.tfrecord*")
            hint = f"{source.path.rstrip('/')}/{suffix}"
            raise SourceError(f"{path} is a directory, not a {kind} file (source.path="
                              f"{source.path!r}): declare a file or a glob of files, e.g. "
                              f"{hint!r}")
    return files


def check_source(pipeline: Pipeline, files: list[str]) -> None:
    """Driver-side checks of the whole source (headers, schemas, access) before the job.

    Raises:
        SourceError: a file lacks a needed column or holds one of an unusable type, or
            BigQuery cannot be reached.
    """
    source = pipeline.source
    try:
        if isinstance(source, s.CsvSource):
            check_csv_headers(pipeline, files)
        elif isinstance(source, s.ParquetSource):
            typed_sources.check_parquet_schemas(pipeline, files)
        elif isinstance(source, s.BigQuerySource):
            typed_sources.check_bigquery_access(source)
    except CellTypeError as err:
        raise SourceError(str(err)) from None


class ReadSource(beam.PTransform):
    """The pipeline's source as a PCollection of RowChunks.

    Args:
        pipeline: the validated pipeline (its source and raw columns).
        files: the files to read (from :func:`source_files`); unused for BigQuery.
        block_bytes: CSV bytes per block (bigger blocks: fewer, larger batches).
    """

    def __init__(self, pipeline: Pipeline, files: list[str], *,
                 block_bytes: int = csv_blocks.DEFAULT_BLOCK_BYTES) -> None:
        super().__init__()
        self._pipeline, self._files, self._block_bytes = pipeline, files, block_bytes

    def expand(self, pbegin):
        source = self._pipeline.source
        if isinstance(source, s.BigQuerySource):
            return pbegin | "ReadBigQuery" >> typed_sources.ReadBigQuery(self._pipeline)
        if isinstance(source, s.CsvSource):
            read = ReadCsv(self._pipeline, self._block_bytes)
        elif isinstance(source, s.ParquetSource):
            read = typed_sources.ReadParquet(self._pipeline)
        else:
            read = typed_sources.ReadTFRecord(self._pipeline)
        return (pbegin
                | "Files" >> beam.Create(self._files)
                | "SpreadFiles" >> beam.Reshuffle()
                | "ReadAndValidate" >> beam.ParDo(read))
