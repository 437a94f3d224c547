"""CSV files cut into blocks of whole records, each record with its first line number.

A *record* is one CSV row: usually one physical line, more when a quoted field holds newlines.
Records are found without a Python loop: a newline ends a record when the number of quote
characters before it is even (RFC 4180 quoting). Every byte of the file belongs to exactly one
record, so every row is later either written or rejected; none can be lost between blocks.

A stray quote inside an unquoted field (``ab"c``) flips that parity. The vectorised parser then
disagrees with the record count and the block takes the exact, slower path (Python's ``csv``
per record, :mod:`._csv_cells`); when no even-parity newline is found in a whole chunk, the
chunk's records fall back to physical lines. Either way nothing is dropped silently.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

__all__ = ["Block", "Header", "HeaderError", "read_blocks"]

_NEWLINE, _QUOTE, _CR = 10, 34, 13
_BOM = b"\xef\xbb\xbf"
DEFAULT_BLOCK_BYTES = 4 << 20  # ~100k rows of a few columns: big batches make tft fast
_RUNAWAY_BYTES = 64 << 20  # an unclosed quote: stop looking for its end after this much


class HeaderError(ValueError):
    """The file has no usable header row."""


@dataclasses.dataclass(frozen=True)
class Header:
    """The header row of a CSV file."""

    fields: list[str]
    lines: int  # physical lines it spans


@dataclasses.dataclass
class Block:
    """Whole records of one file.

    Attributes:
        path: the file.
        data: the bytes of the records (a record's text is ``data[starts[i]:ends[i]]``, line
            terminator excluded).
        starts, ends: record offsets in ``data`` (blank lines already removed).
        lines: the 1-based line number in the file where each record starts.
        quoted: whether the block holds any quote character (parsing needs more care).
        blank_lines: empty lines skipped in this block.
        index: the block's position in its file (0, 1, ...).
        first_line: the file line where ``data`` starts.
    """

    path: str
    data: bytes
    starts: np.ndarray
    ends: np.ndarray
    lines: np.ndarray
    quoted: bool
    blank_lines: int
    index: int
    first_line: int

    def __len__(self) -> int:
        return len(self.starts)

    def text(self, i: int) -> str:
        """Record ``i`` as read (bytes that are not UTF-8 shown as ``\\xNN``)."""
        return self.data[self.starts[i]:self.ends[i]].decode("utf-8", errors="backslashreplace")

    def bad_utf8(self) -> np.ndarray:
        """Per record: the 1-based file line of its first non-UTF-8 line, 0 when valid."""
        bad = np.zeros(len(self), dtype=np.int64)
        if self.data.isascii():
            return bad
        try:
            self.data.decode("utf-8")
            return bad
        except UnicodeDecodeError:
            pass
        for i, (start, end) in enumerate(zip(self.starts.tolist(), self.ends.tolist(), strict=True)):
            for offset, line in enumerate(self.data[start:end].split(b"\n")):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    bad[i] = int(self.lines[i]) + offset
                    break
        return bad


def read_blocks(handle: BinaryIO, path: str, *, delimiter: str = ",",
                block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[Header | Block]:
    """Yield the file's :class:`Header`, then its records in :class:`Block` s.

    Raises:
        HeaderError: the file is empty or its header is not valid UTF-8 / CSV.
    """
    reader = _Chunks(handle, block_bytes)
    header, line = _read_header(reader, path, delimiter)
    yield header
    index = 0
    while (found := reader.records()) is not None:
        block = _block(*found, reader.eof_reached, path, line, index)
        reader.consume(len(block.data))
        line += block.data.count(b"\n")
        yield block
        index += 1


class _Chunks:
    """Buffered reads of about ``block_bytes`` that end on a record boundary."""

    def __init__(self, handle: BinaryIO, block_bytes: int) -> None:
        self.handle, self.block_bytes = handle, block_bytes
        self.buffer = b""
        self.eof_reached = False

    def fill(self, size: int) -> None:
        while len(self.buffer) < size and not self.eof_reached:
            more = self.handle.read(max(size - len(self.buffer), self.block_bytes))
            if not more:
                self.eof_reached = True
            self.buffer += more

    def consume(self, size: int) -> None:
        self.buffer = self.buffer[size:]

    def records(self) -> tuple[bytes, np.ndarray] | None:
        """The unread bytes and the offsets of the newlines ending records in them, read
        until at least one record is complete (or the file ends); None at the end."""
        self.fill(self.block_bytes)
        while self.buffer:
            arr = np.frombuffer(self.buffer, np.uint8)
            ends = _record_ends(arr, b'"' in self.buffer)
            if len(ends) or self.eof_reached:
                return self.buffer, ends
            if len(self.buffer) >= max(_RUNAWAY_BYTES, 16 * self.block_bytes):
                # A quote that never closes: take physical lines (the exact parser decides).
                return self.buffer, np.flatnonzero(arr == _NEWLINE)
            self.fill(2 * len(self.buffer))
        return None


def _read_header(reader: _Chunks, path: str, delimiter: str) -> tuple[Header, int]:
    found = reader.records()
    buffer = found[0] if found else b""
    bom = len(_BOM) if buffer.startswith(_BOM) else 0  # what spreadsheet exports put first
    if not buffer[bom:].strip(b"\r\n"):
        raise HeaderError(f"{path} is empty: expected a header row")
    ends = found[1]
    end = int(ends[0]) if len(ends) else len(buffer)
    raw = buffer[bom:end]
    try:
        text = raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        raise HeaderError(f"the header (line 1) of {path} is not valid UTF-8") from None
    try:
        fields = next(csv.reader([text], delimiter=delimiter, strict=True))
    except (csv.Error, StopIteration) as err:
        raise HeaderError(f"the header (line 1) of {path} is not a CSV row: {err}") from None
    lines = raw.count(b"\n") + 1
    reader.consume(end + 1)
    return Header(fields, lines), lines + 1


def _record_ends(arr: np.ndarray, quoted: bool) -> np.ndarray:
    """Offsets of the newlines that end records (even number of quotes before them)."""
    newlines = np.flatnonzero(arr == _NEWLINE)
    if not quoted or not len(newlines):
        return newlines
    quotes = np.cumsum(arr == _QUOTE, dtype=np.int64)
    return newlines[quotes[newlines] % 2 == 0]


def _block(chunk: bytes, ends: np.ndarray, eof: bool, path: str, first_line: int,
           index: int) -> Block:
    """The whole records at the front of ``chunk`` (``ends``: their newlines)."""
    if eof and (not len(ends) or ends[-1] != len(chunk) - 1):
        ends = np.append(ends, len(chunk))  # a last record without its newline
    used = min(int(ends[-1]) + 1, len(chunk))
    data = chunk[:used]
    arr = np.frombuffer(data, np.uint8)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    ends = ends.astype(np.int64)
    has_cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == _CR)
    ends = ends - has_cr
    newlines = np.flatnonzero(arr == _NEWLINE)
    lines = first_line + np.searchsorted(newlines, starts)
    keep = ends > starts
    return Block(path, data, starts[keep], ends[keep], lines[keep], b'"' in data,
                 int(np.count_nonzero(~keep)), index, first_line)
