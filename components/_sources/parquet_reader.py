"""The reader of a ParquetSource: Parquet files, columns matched to the declared raw columns by
name (its row in :data:`.registry.READERS`).

Each value is checked against its declared column like a CSV cell (:mod:`.cells`): a missing
value takes the default or rejects the row, a value the declared dtype cannot hold exactly
rejects the row. A Parquet row holds no text as read, so its split hashes the encoded Example
of the declared columns (declare ``Split(key=...)`` to keep the split fixed while the
declarations change).
"""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from estflow.components._sources.cells import can_hold
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import check_columns
from estflow.components._sources.chunks import json_row
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.rows import validate
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadParquet", "check", "column_dtypes", "read_file"]

_BATCH_ROWS = 65536


def check(pipeline: Pipeline, files: list[str]) -> None:
    """Every file has every raw column, of a type its declared dtype can hold."""
    for path in files:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            schema = pq.read_schema(handle)
        check_columns(pipeline, schema.names, path, "schema")
        for column in pipeline.raw_columns():
            if not can_hold(column, schema.field(column.name).type):
                raise SourceError(f"column {column.name!r} of {path} has Parquet type "
                                  f"{schema.field(column.name).type}, which cannot be read as "
                                  f"its declared dtype {column.dtype!r}")


def column_dtypes(files: list[str], names: tuple[str, ...]) -> dict[str, str]:
    """The dtype (``"float"``, ``"int"``, else ``"string"``) of each of ``names`` that the first
    file's Parquet schema holds; {} without files."""
    if not files:
        return {}
    with FileSystems.open(files[0], compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        schema = pq.read_schema(handle)
    return {name: _dtype_of(schema.field(name).type) for name in names if name in schema.names}


def _dtype_of(kind: pa.DataType) -> str:
    if pa.types.is_floating(kind):
        return "float"
    return "int" if pa.types.is_integer(kind) else "string"


def read_file(pipeline: Pipeline, files: list[str], block_bytes: int,
              row_hashes: bool) -> beam.DoFn:
    """The DoFn reading one Parquet file (a file is read in batches of rows, not blocks of
    bytes, and its rows have no text as read to hash)."""
    del files, block_bytes, row_hashes
    return ReadParquet(pipeline)


class ReadParquet(beam.DoFn):
    """A Parquet file -> RowChunks of up to 65,536 rows (only the raw columns are read)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def process(self, path: str):
        names = [c.name for c in self._pipeline.raw_columns()]
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            parquet = pq.ParquetFile(handle)
            unseen = [n for n in parquet.schema_arrow.names if n not in names]
            start = 0
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=names):
                validated = validate(self._pipeline, {n: batch.column(n) for n in names},
                                     batch.num_rows)
                yield make_chunk(validated, path, lines=lambda i, s=start: s + i + 1,
                                 texts=lambda i, b=batch: json_row(b.slice(i, 1).to_pylist()[0]),
                                 read=batch.num_rows, unseen=unseen)
                start += batch.num_rows
