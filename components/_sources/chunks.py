"""What every source reader produces: validated rows, their rejects, their statistics.

A :class:`RowChunk` holds a RecordBatch of good rows (raw-example layout, :mod:`._rows`), the
rejected rows as JSON lines (``{"file", "line", "row", "reason"}``; ``line`` is the line in a
CSV file, the 1-based row in a Parquet file or query result, the 1-based record in a TFRecord
file) and the chunk's statistics, which merge across chunks into ``ingest.json``.

The statistics account for every physical line of each file (``files``): lines read (counted
from the bytes) = header + lines of kept rows + lines of rejected rows + blank lines. A row of
a typed source is one "line".
"""

from __future__ import annotations

import collections
import dataclasses
import json

import numpy as np
import pyarrow as pa

from estflow.components._sources.registry import SourceError
from estflow.components._sources.rows import Validated
from estflow.components._sources.rows import arrow_schema
from estflow.components._sources.rows import empty_stats
from estflow.components._sources.rows import merge_stats
from estflow.dsl.pipeline import Pipeline

__all__ = ["SourceError", "RowChunk", "check_columns", "make_chunk", "header_chunk",
           "empty_chunk_stats", "merge_chunk_stats", "json_row"]


def json_row(row: dict) -> str:
    """A row of a typed source (a dict) as the text a rejected row is written with."""
    def plain(value):
        return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    return json.dumps(row, ensure_ascii=False, default=plain, sort_keys=True)


@dataclasses.dataclass
class RowChunk:
    """Validated rows of one block of one source file, their rejects and statistics;
    ``hashes``: per row, the CRC of the row as read (what the split hashes when no key is
    declared), or None where the source has no such text (Parquet, BigQuery)."""

    batch: pa.RecordBatch
    rejected: list[str]
    stats: dict
    hashes: np.ndarray | None = None


def check_columns(pipeline: Pipeline, names: list[str], path: str, where: str) -> None:
    """Every raw column must appear exactly once among ``names`` (a header or a schema).

    Raises:
        SourceError: naming the column, the file and the columns it has.
    """
    for column in pipeline.raw_columns():
        count = names.count(column.name)
        if count != 1:
            problem = "is not in" if count == 0 else f"appears {count} times in"
            raise SourceError(f"column {column.name!r} (needed by the pipeline) {problem} the "
                              f"{where} of {path}; {where} columns: {names}")


def make_chunk(validated: Validated, path: str, *, lines, texts,
               early: list[tuple[int, str, str]] = (), read: int, blank_lines: int = 0,
               unseen: list[str] = (), kept: np.ndarray | None = None, spans=None,
               physical_lines: int | None = None, header_lines: int = 0,
               hashes: np.ndarray | None = None) -> RowChunk:
    """Package a validated block.

    Args:
        validated: the result of ``_rows.validate``; its rejected positions are source
            positions (as ``early``'s are).
        lines: source position -> line (CSV) or 1-based row/record number.
        texts: source position -> the row as read.
        early: ``(position, kind, message)`` of rows rejected before validation.
        read: rows read from the source in this block (blank lines excluded).
        blank_lines: blank lines skipped in this block.
        unseen: the source's columns that no declaration reads.
        kept: the source positions of the good rows (default: ``validated.rows``).
        spans: source positions -> the physical lines of each row (default: one each).
        physical_lines: the physical lines this chunk read, counted apart from the rows
            (default: one per row, plus the blank lines and the header).
        header_lines: the header's lines (and blank lines before it), in the file's first
            chunk.
        hashes: per good row, the CRC of its text as read (see :class:`RowChunk`).
    """
    reasons: collections.Counter = collections.Counter()
    rejected, rejected_lines = [], 0
    for position, kind, message in sorted(list(early) + list(validated.rejected)):
        reasons[kind] += 1
        rejected_lines += 1 if spans is None else int(spans[position])
        line = lines(position)
        rejected.append(json.dumps({"file": path, "line": None if line is None else int(line),
                                    "row": texts(position), "reason": message},
                                   ensure_ascii=False))
    kept = validated.rows if kept is None else kept
    kept_lines = len(kept) if spans is None else int(np.sum(spans[kept]))
    if physical_lines is None:
        physical_lines = read + blank_lines + header_lines
    files = {path: {"read": int(physical_lines), "header": header_lines, "kept": kept_lines,
                    "rejected": rejected_lines, "blank": blank_lines}}
    stats = {"read": read, "blank_lines": blank_lines, "rejected_by_reason": dict(reasons),
             "columns": validated.stats, "unseen_columns": sorted(unseen), "splits": {},
             "files": files}
    return RowChunk(validated.batch, rejected, stats, hashes)


def header_chunk(pipeline: Pipeline, path: str, lines: int, blank: int) -> RowChunk:
    """The lines of a file's header (and of blank lines before it) as a chunk without rows."""
    stats = empty_chunk_stats(pipeline)
    stats["blank_lines"] = blank
    stats["files"] = {path: {"read": lines + blank, "header": lines, "kept": 0, "rejected": 0,
                             "blank": blank}}
    batch = pa.RecordBatch.from_pylist([], schema=arrow_schema(pipeline.raw_columns()))
    return RowChunk(batch, [], stats, np.zeros(0, np.uint32))


def empty_chunk_stats(pipeline: Pipeline) -> dict:
    return {"read": 0, "blank_lines": 0, "rejected_by_reason": {},
            "columns": empty_stats(pipeline.raw_columns()), "unseen_columns": [], "splits": {},
            "files": {}}


def merge_chunk_stats(left: dict, right: dict) -> dict:
    """Merge the statistics of two chunks (left is updated and returned)."""
    left["read"] += right["read"]
    left["blank_lines"] += right["blank_lines"]
    for table in ("rejected_by_reason", "splits"):
        for key, count in right[table].items():
            left[table][key] = left[table].get(key, 0) + count
    for path, lines in right["files"].items():
        entry = left["files"].setdefault(path, dict.fromkeys(lines, 0))
        for key, count in lines.items():
            entry[key] += count
    merge_stats(left["columns"], right["columns"])
    left["unseen_columns"] = sorted(set(left["unseen_columns"]) | set(right["unseen_columns"]))
    return left
