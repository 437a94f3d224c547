"""CSV files as validated row chunks: blocks of records (:mod:`._csv_blocks`), cells
(:mod:`._csv_parse`), typed and checked rows (:mod:`._rows`)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from estflow.components._ingest import csv_blocks
from estflow.components._ingest.chunks import RowChunk
from estflow.components._ingest.chunks import SourceError
from estflow.components._ingest.chunks import check_columns
from estflow.components._ingest.chunks import make_chunk
from estflow.components._ingest.csv_parse import CsvLayout
from estflow.components._ingest.csv_parse import parse_block
from estflow.components._ingest.rows import validate
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadCsv", "check_csv_headers", "csv_layout"]


def csv_layout(pipeline: Pipeline, header: list[str], path: str) -> CsvLayout:
    """Where the raw columns are in a file with this header."""
    check_columns(pipeline, header, path, "header")
    positions = {c.name: header.index(c.name) for c in pipeline.raw_columns()}
    return CsvLayout(len(header), positions, pipeline.source.delimiter)


def _open(path: str):
    return FileSystems.open(path, compression_type=CompressionTypes.AUTO)  # .gz, .bz2, ...


def check_csv_headers(pipeline: Pipeline, files: list[str]) -> None:
    """Read each file's header on the driver: a missing column fails before the job starts.

    Raises:
        SourceError: a file is empty, has an unreadable header or lacks a needed column.
    """
    for path in files:
        with _open(path) as handle:
            try:
                header = next(csv_blocks.read_blocks(
                    handle, path, delimiter=pipeline.source.delimiter, block_bytes=1 << 16))
            except csv_blocks.HeaderError as err:
                raise SourceError(str(err)) from None
        csv_layout(pipeline, header.fields, path)


class ReadCsv(beam.DoFn):
    """A CSV file -> RowChunks, one per block of records."""

    def __init__(self, pipeline: Pipeline, block_bytes: int) -> None:
        self._pipeline, self._block_bytes = pipeline, block_bytes

    def process(self, path: str):
        with _open(path) as handle:
            blocks = csv_blocks.read_blocks(handle, path,
                                             delimiter=self._pipeline.source.delimiter,
                                             block_bytes=self._block_bytes)
            header = next(blocks)
            layout = csv_layout(self._pipeline, header.fields, path)
            unseen = [name for name in header.fields if name not in layout.positions]
            for block in blocks:
                yield self._chunk(block, layout, unseen)

    def _chunk(self, block: csv_blocks.Block, layout: CsvLayout, unseen) -> RowChunk:
        rows = parse_block(block, layout)
        validated = validate(self._pipeline, rows.columns, len(rows.records))
        validated.rejected = [(int(rows.records[i]), kind, message)
                              for i, kind, message in validated.rejected]
        return make_chunk(validated, block.path, lines=lambda i: rows.lines[i],
                          texts=rows.text, early=rows.rejected, read=rows.count,
                          blank_lines=rows.blank_lines, unseen=unseen)
