"""The reader of a CsvSource: CSV files as validated row chunks: blocks of records
(:mod:`.csv_blocks`), cells (:mod:`.csv_parse`), typed and checked rows (:mod:`.rows`), each
kept row with the hash of its text as read (the split's row hash) and each file's physical
lines accounted for."""

from __future__ import annotations

import bz2
import gzip

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from estflow.components._sources import csv_blocks
from estflow.components._sources.chunks import RowChunk
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import check_columns
from estflow.components._sources.chunks import header_chunk
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.csv_exact import CsvRules
from estflow.components._sources.csv_parse import CsvLayout
from estflow.components._sources.csv_parse import parse_block
from estflow.components._sources.rows import validate
from estflow.components._sources.split import text_hashes
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadCsv", "check_csv_headers", "csv_layout", "na_tokens", "read_file", "row_hashes"]

# Read with Python's decompressors, which raise on a truncated file where Beam's stop quietly.
_DECOMPRESSORS = {".gz": gzip.GzipFile, ".gzip": gzip.GzipFile, ".bz2": bz2.BZ2File}


def csv_layout(pipeline: Pipeline, header: list[str], path: str) -> CsvLayout:
    """Where the raw columns are in a file with this header."""
    check_columns(pipeline, header, path, "header")
    positions = {c.name: header.index(c.name) for c in pipeline.raw_columns()}
    return CsvLayout(len(header), positions, pipeline.source.delimiter)


def na_tokens(pipeline: Pipeline) -> dict[str, tuple[str, ...]]:
    """Raw column -> the cells that mean "missing" in it (see ``CsvSource``)."""
    source = pipeline.source
    return {c.name: source.missing_tokens(c.name, c.dtype) for c in pipeline.raw_columns()}


class _Decompressed:
    """A decompressing reader that also closes the file under it."""

    def __init__(self, raw, decompressor) -> None:
        self._raw = raw
        self._file = decompressor(fileobj=raw, mode="rb") if decompressor is gzip.GzipFile \
            else decompressor(raw, mode="rb")
        self.read = self._file.read

    def __enter__(self) -> _Decompressed:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._file.close()
        finally:
            self._raw.close()


def _open(path: str):
    for suffix, decompressor in _DECOMPRESSORS.items():
        if path.lower().endswith(suffix):
            raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
            return _Decompressed(raw, decompressor)
    return FileSystems.open(path, compression_type=CompressionTypes.AUTO)  # .zst, .deflate, ...


def check_csv_headers(pipeline: Pipeline, files: list[str]) -> None:
    """Read each file's header on the driver: a missing column fails before the job starts.

    Raises:
        SourceError: a file is empty, has an unreadable header or lacks a needed column, or
            ``column_na_values`` names a column the pipeline does not read.
    """
    raw = [c.name for c in pipeline.raw_columns()]
    for name in pipeline.source.column_na_values or {}:
        if name not in raw:
            raise SourceError(f"source.column_na_values names {name!r}, which is not a raw "
                              f"column of the pipeline; raw columns: {raw}")
    rules = CsvRules.of(pipeline.source)
    for path in files:
        with _open(path) as handle:
            try:
                header = next(csv_blocks.read_blocks(handle, path, rules, block_bytes=1 << 16))
            except (csv_blocks.HeaderError, csv_blocks.ReadError) as err:
                raise SourceError(str(err)) from None
        csv_layout(pipeline, header.fields, path)


def row_hashes(block: csv_blocks.Block, records: np.ndarray) -> np.ndarray:
    """The hash (:func:`.split.text_hashes`) of each record's text as read, line endings
    normalised: without the last line's ending, and CR LF inside a multi-line record read as
    LF."""
    starts, ends = block.starts[records], block.ends[records]
    hashes = text_hashes(np.frombuffer(block.data, np.uint8), starts, ends)
    for k in np.flatnonzero(block.spans[records] > 1).tolist():
        text = block.data[int(starts[k]):int(ends[k])]
        if b"\r\n" in text:
            text = text.replace(b"\r\n", b"\n")
            hashes[k] = text_hashes(np.frombuffer(text, np.uint8), np.zeros(1, np.int64),
                                    np.full(1, len(text), np.int64))[0]
    return hashes


def read_file(pipeline: Pipeline, files: list[str], block_bytes: int,
              row_hashes: bool) -> beam.DoFn:
    """The DoFn reading one CSV file (its row in :data:`.registry.READERS`)."""
    del files  # each file is read alone
    return ReadCsv(pipeline, block_bytes, row_hashes=row_hashes)


class ReadCsv(beam.DoFn):
    """A CSV file -> RowChunks, one per block of records (and one for the header).

    Args:
        row_hashes: give each chunk its kept rows' hashes (:func:`row_hashes`, what the split
            hashes); False: ``hashes`` is None (a reader that splits nothing, such as batch
            prediction's, skips hashing every row's text, 40% of reading it).
    """

    def __init__(self, pipeline: Pipeline, block_bytes: int, *, row_hashes: bool = True) -> None:
        self._pipeline, self._block_bytes = pipeline, block_bytes
        self._row_hashes = row_hashes
        self._rules = CsvRules.of(pipeline.source)
        self._na = na_tokens(pipeline)

    def process(self, path: str):
        try:
            with _open(path) as handle:
                blocks = csv_blocks.read_blocks(handle, path, self._rules,
                                                block_bytes=self._block_bytes)
                header = next(blocks)
                layout = csv_layout(self._pipeline, header.fields, path)
                unseen = [name for name in header.fields if name not in layout.positions]
                first = header
                for block in blocks:
                    yield self._chunk(block, layout, unseen, first)
                    first = None
                if first is not None:  # no data lines: the header's lines all the same
                    yield header_chunk(self._pipeline, path, header.lines, header.blank_lines)
        except (csv_blocks.HeaderError, csv_blocks.ReadError) as err:
            raise SourceError(str(err)) from None

    def _chunk(self, block: csv_blocks.Block, layout: CsvLayout, unseen,
               header: csv_blocks.Header | None) -> RowChunk:
        rows = parse_block(block, layout)
        validated = validate(self._pipeline, rows.columns, len(rows.records), na=self._na)
        validated.rejected = [(int(rows.records[i]), kind, message)
                              for i, kind, message in validated.rejected]
        kept = rows.records[validated.rows]
        head, blank = (header.lines, header.blank_lines) if header else (0, 0)
        return make_chunk(validated, block.path, lines=lambda i: rows.lines[i],
                          texts=rows.text, early=rows.rejected, read=rows.count,
                          blank_lines=rows.blank_lines + blank, unseen=unseen, kept=kept,
                          spans=rows.spans, physical_lines=rows.physical_lines + head + blank,
                          header_lines=head,
                          hashes=row_hashes(block, kept) if self._row_hashes else None)
