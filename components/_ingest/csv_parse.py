"""The cells of a CSV block as Arrow string columns, and the records that are not rows.

The fast path gives the whole block to Arrow's C++ CSV reader (needed columns only, every cell
as text, no type inference) and checks its row count against the records found by
:mod:`._csv_blocks`. Field counts come from the delimiters outside quotes, also vectorised, so
a row with the wrong number of fields is rejected with its line whichever path parses the
block. When Arrow and the record count disagree (odd quoting), the block is parsed record by
record with Python's ``csv`` module, which is exact and slower.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from estflow.components._ingest.csv_blocks import Block

__all__ = ["CsvLayout", "TextRows", "parse_block"]

_QUOTE = 34


@dataclasses.dataclass(frozen=True)
class CsvLayout:
    """Where the needed columns are in a file: ``positions`` maps a column to its field index
    in rows of ``width`` fields."""

    width: int
    positions: dict[str, int]
    delimiter: str = ","


@dataclasses.dataclass
class TextRows:
    """The parsed records of a block.

    Attributes:
        columns: needed column -> ``large_string`` cells, one per parsed row.
        records: for each parsed row, its record index.
        rejected: ``(record index, kind, message)`` of records that are not rows.
        lines: record index -> the 1-based line where the record starts.
        text: record index -> the record as read.
        count: the number of records (blank lines excluded).
        blank_lines: blank lines skipped.
    """

    columns: dict[str, pa.Array]
    records: np.ndarray
    rejected: list[tuple[int, str, str]]
    lines: np.ndarray
    text: Callable[[int], str]
    count: int
    blank_lines: int


def parse_block(block: Block, layout: CsvLayout) -> TextRows:
    """Split every record of ``block`` into the needed cells, or reject it with a reason."""
    bad_utf8 = block.bad_utf8()
    counts = _field_counts(block, layout.delimiter)
    rejected = [(int(i), "invalid_utf8", f"line {int(bad_utf8[i])} is not valid UTF-8")
                for i in np.flatnonzero(bad_utf8)]
    wrong = np.flatnonzero((counts != layout.width) & (bad_utf8 == 0))
    rejected += [(int(i), "wrong_field_count", f"expected {layout.width} fields (as in the "
                  f"header), got {int(counts[i])}") for i in wrong]
    rows = np.flatnonzero(counts == layout.width)  # bad UTF-8 rows too: dropped below
    columns = _arrow_parse(block, layout, len(rows))
    if columns is None:
        return _python_parse(block, layout)
    if len(rejected) > len(wrong):  # keep only valid UTF-8 rows
        keep = bad_utf8[rows] == 0
        columns = {name: col.filter(pa.array(keep)) for name, col in columns.items()}
        rows = rows[keep]
    return TextRows(columns, rows, sorted(rejected), block.lines, block.text, len(block),
                    block.blank_lines)


def _field_counts(block: Block, delimiter: str) -> np.ndarray:
    arr = np.frombuffer(block.data, np.uint8)
    delims = np.flatnonzero(arr == ord(delimiter))
    if block.quoted and len(delims):
        quotes = np.cumsum(arr == _QUOTE, dtype=np.int64)
        delims = delims[quotes[delims] % 2 == 0]
    record = np.searchsorted(block.starts, delims, side="right") - 1
    inside = (record >= 0) & (delims < block.ends[np.maximum(record, 0)])
    return np.bincount(record[inside], minlength=len(block)) + 1


def _arrow_parse(block: Block, layout: CsvLayout, expected: int) -> dict[str, pa.Array] | None:
    """Arrow's parse of the block, or None when its rows do not match the records."""
    names = [f"f{i}" for i in range(layout.width)]
    skipped = []
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(block.data),
            read_options=pa_csv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pa_csv.ParseOptions(
                delimiter=layout.delimiter, newlines_in_values=block.quoted,
                invalid_row_handler=lambda row: skipped.append(row) or "skip"),
            convert_options=pa_csv.ConvertOptions(
                column_types={names[i]: pa.large_string() for i in layout.positions.values()},
                include_columns=[names[i] for i in layout.positions.values()],
                check_utf8=False, strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != expected:
        return None
    return {name: table.column(names[i]).combine_chunks()
            for name, i in layout.positions.items()}


def _python_parse(block: Block, layout: CsvLayout) -> TextRows:
    """The block's physical lines through Python's csv module: exact (records as csv sees
    them, e.g. a stray quote inside an unquoted field is a literal), and slower."""
    lines = _Lines(block.data, block.first_line)
    reader = csv.reader(lines, delimiter=layout.delimiter, strict=True)
    cells: dict[str, list[str]] = {name: [] for name in layout.positions}
    rows, rejected, starts, texts = [], [], [], []
    while True:
        start = lines.number + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error:
            fields = None
        bad_line, raw = lines.bad_line, lines.take()
        if fields == []:  # an empty line: not a row, only counted
            lines.blank_lines += 1
            continue
        index = len(starts)
        starts.append(start)
        texts.append(raw)
        problem = _problem(fields, bad_line, layout.width)
        if problem:
            rejected.append((index, *problem))
            continue
        rows.append(index)
        for name, position in layout.positions.items():
            cells[name].append(fields[position])
    columns = {name: pa.array(values, pa.large_string()) for name, values in cells.items()}
    return TextRows(columns, np.array(rows, dtype=np.int64), rejected,
                    np.array(starts, dtype=np.int64), texts.__getitem__, len(starts),
                    lines.blank_lines)


def _problem(fields, bad_line: int | None, width: int) -> tuple[str, str] | None:
    if bad_line is not None:
        return "invalid_utf8", f"line {bad_line} is not valid UTF-8"
    if fields is None:
        return "malformed_csv", "the CSV parser could not read this row"
    if len(fields) != width:
        return "wrong_field_count", f"expected {width} fields (as in the header), got " \
            f"{len(fields)}"
    return None


class _Lines:
    """Feeds csv.reader one decoded line at a time, remembering the raw text of the current
    record and whether any of its lines was not UTF-8, so a bad line rejects one row."""

    def __init__(self, data: bytes, first_line: int) -> None:
        pieces = data.split(b"\n")
        self._lines = (piece + b"\n" for piece in pieces[:-1])
        if pieces[-1]:  # a last line without its newline
            self._lines = itertools.chain(self._lines, [pieces[-1]])
        self.number = first_line - 1
        self.blank_lines = 0
        self._pending: list[str] = []
        self.bad_line: int | None = None

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.number += 1
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            # backslashreplace keeps the offending bytes visible in rejected.jsonl.
            text = line.decode("utf-8", errors="backslashreplace")
            if self.bad_line is None:
                self.bad_line = self.number
        self._pending.append(text)
        return text

    def take(self) -> str:
        """The raw text of the record just read (without its final newline); resets state."""
        raw = "".join(self._pending).rstrip("\r\n")
        self._pending = []
        self.bad_line = None
        return raw
