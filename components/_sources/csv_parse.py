"""The cells of a CSV block as Arrow string columns, and the records that are not rows.

Each record gets one verdict, in this order: rejected while cutting (an oversized line;
an unclosed quote or a malformed record of a multi-line source), not UTF-8, malformed CSV
(an unclosed quote, text after a closing quote, a CR in an unquoted value), a field count other
than the header's; the others are rows.

The fast path gives Arrow's C++ CSV reader the records whose quoting passes
:func:`.csv_blocks.structure_ok` (needed columns only, every cell as text) and counts their
fields from the delimiters outside quotes, vectorised; Arrow's row count must match those
records. Every other record, and a whole block where Arrow disagrees, goes through
:func:`.csv_exact.scan_record`: the same verdicts, a record at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from estflow.components._sources.csv_blocks import Block
from estflow.components._sources.csv_blocks import field_counts
from estflow.components._sources.csv_blocks import structure_ok
from estflow.components._sources.csv_exact import INVALID_UTF8
from estflow.components._sources.csv_exact import OVERSIZED
from estflow.components._sources.csv_exact import WRONG_FIELD_COUNT
from estflow.components._sources.csv_exact import scan_record

__all__ = ["CsvLayout", "TextRows", "parse_block"]

_LF = 10
_BOM = b"\xef\xbb\xbf"


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
        spans: record index -> the physical lines it spans.
        text: record index -> the record as read (a bounded prefix).
        count: the number of records (blank lines excluded).
        blank_lines: blank lines skipped.
        physical_lines: the physical lines of the block.
    """

    columns: dict[str, pa.Array]
    records: np.ndarray
    rejected: list[tuple[int, str, str]]
    lines: np.ndarray
    spans: np.ndarray
    text: Callable[[int], str]
    count: int
    blank_lines: int
    physical_lines: int


def parse_block(block: Block, layout: CsvLayout, *, exact: bool = False) -> TextRows:
    """Split every record of ``block`` into the needed cells, or reject it with a reason.

    Args:
        block: whole records of one file.
        layout: where the needed columns are.
        exact: parse every record with the exact parser (tests compare both ways).
    """
    verdicts: dict[int, tuple[str, str]] = {}
    for i, problem in block.problems.items():
        if problem[0] == OVERSIZED:
            verdicts[i] = problem
    bad_utf8 = block.bad_utf8()
    for i in np.flatnonzero(bad_utf8).tolist():
        verdicts.setdefault(i, (INVALID_UTF8, f"line {int(bad_utf8[i])} is not valid UTF-8"))
    for i, problem in block.problems.items():
        verdicts.setdefault(i, problem)
    candidate = np.ones(len(block), dtype=bool)
    candidate[list(verdicts)] = False
    arr = np.frombuffer(block.data, np.uint8)
    delimiter = ord(layout.delimiter)
    if exact:
        fast = np.zeros(len(block), dtype=bool)
    elif block.quoted or b"\r" in block.data:
        fast = candidate & structure_ok(arr, block.starts, block.ends, delimiter)
    else:
        fast = candidate
    counts = field_counts(arr, block.starts, block.ends, delimiter, block.quoted)
    for i in np.flatnonzero(fast & (counts != layout.width)).tolist():
        verdicts[i] = _wrong_count(layout.width, int(counts[i]))
    rows = np.flatnonzero(fast & (counts == layout.width))
    columns = _arrow_parse(block, layout, rows, fast) if len(rows) else None
    if columns is None and len(rows):  # Arrow disagrees: parse those rows exactly
        fast[rows] = False
        rows = rows[:0]
    exact_rows, exact_cells = [], {name: [] for name in layout.positions}
    for i in np.flatnonzero(candidate & ~fast).tolist():
        scan = scan_record(block.raw(i), 0, block.rules, eof=True)
        if scan.problem:
            verdicts[i] = scan.problem
        elif len(scan.fields) != layout.width:
            verdicts[i] = _wrong_count(layout.width, len(scan.fields))
        else:
            exact_rows.append(i)
            for name, position in layout.positions.items():
                exact_cells[name].append(scan.fields[position].decode("utf-8"))
    columns, records = _merge(layout, columns, rows, exact_cells, exact_rows)
    rejected = sorted((i, kind, message) for i, (kind, message) in verdicts.items())
    return TextRows(columns, records, rejected, block.lines, block.spans, block.text,
                    len(block), block.blank_lines, block.physical_lines)


def _wrong_count(width: int, got: int) -> tuple[str, str]:
    return WRONG_FIELD_COUNT, f"expected {width} fields (as in the header), got {got}"


def _arrow_parse(block: Block, layout: CsvLayout, rows: np.ndarray, fast: np.ndarray
                 ) -> dict[str, pa.Array] | None:
    """Arrow's cells of ``rows``, or None when Arrow's rows do not match them. Records that
    are not on the fast path are blanked out (made newlines) in a copy of the bytes."""
    data = block.data
    others = np.flatnonzero(~fast)
    if len(others):
        arr = np.frombuffer(data, np.uint8).copy()
        edges = np.bincount(block.starts[others], minlength=len(arr) + 1) - \
            np.bincount(block.ends[others], minlength=len(arr) + 1)
        arr[np.cumsum(edges[:-1]) > 0] = _LF
        data = arr.tobytes()
    if data.startswith(_BOM):  # Arrow would drop it from the first row
        data = b"\n" + data
    names = [f"f{i}" for i in range(layout.width)]
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pa_csv.ParseOptions(
                delimiter=layout.delimiter,
                newlines_in_values=block.rules.multiline and block.quoted,
                invalid_row_handler=lambda row: "skip"),
            convert_options=pa_csv.ConvertOptions(
                column_types={names[i]: pa.large_string() for i in layout.positions.values()},
                include_columns=[names[i] for i in layout.positions.values()],
                check_utf8=False, strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(rows):
        return None
    return {name: table.column(names[i]).combine_chunks()
            for name, i in layout.positions.items()}


def _merge(layout: CsvLayout, columns: dict[str, pa.Array] | None, rows: np.ndarray,
           exact_cells: dict[str, list[str]], exact_rows: list[int]):
    """The fast and the exact rows' cells, in record order."""
    if columns is None:
        columns = {name: pa.array([], pa.large_string()) for name in layout.positions}
        rows = rows[:0]
    if not exact_rows:
        return columns, rows.astype(np.int64)
    records = np.concatenate([rows, np.array(exact_rows, dtype=np.int64)])
    order = np.argsort(records, kind="stable")
    merged = {name: pa.concat_arrays([columns[name],
                                      pa.array(exact_cells[name], pa.large_string())])
              .take(pa.array(order)) for name in layout.positions}
    return merged, records[order]
