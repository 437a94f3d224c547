"""CSV files cut into blocks of whole records, with every physical line accounted for.

A *record* is one CSV row: one physical line, or, where the source declares
``multiline_values``, more while a quoted value is open (bounded by ``max_row_lines`` and
``max_row_bytes``; the rules are :mod:`.csv_exact`'s). Each block says how many physical lines
it holds (counted from its bytes, independently of how they were cut), and every line is in
exactly one record or is blank, so ingest can prove that lines read = header + kept +
rejected + blank.

Records are found without a Python loop: one per line, or, for multi-line values, a newline
ends a record when the number of quotes before it in the record is even. That shortcut holds
only for well-formed quoting, so it is checked vectorised (every opening quote starts a field,
every closing quote ends one, no CR inside a record, the bounds hold); from the first record
that fails the check, records are found by :func:`.csv_exact.scan_record`, exactly.

A line longer than ``max_row_bytes`` is never held in memory whole: its first bytes are kept
for ``rejected.jsonl``, the rest is skipped up to its newline, and it becomes a record of its
own, rejected as ``oversized_row`` with its line and size.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from estflow.components._sources.csv_exact import CsvRules
from estflow.components._sources.csv_exact import oversized_reason
from estflow.components._sources.csv_exact import scan_record

__all__ = ["Block", "CsvRules", "Header", "HeaderError", "ReadError", "read_blocks",
           "structure_ok", "field_counts", "DEFAULT_BLOCK_BYTES", "ROW_PREFIX_BYTES"]

_LF, _QUOTE, _CR = 10, 34, 13
_BOM = b"\xef\xbb\xbf"
DEFAULT_BLOCK_BYTES = 4 << 20  # ~100k rows of a few columns: big batches make tft fast
ROW_PREFIX_BYTES = 1024
"""The most bytes of a rejected row that ``rejected.jsonl`` keeps."""


class HeaderError(ValueError):
    """The file has no usable header row."""


class ReadError(OSError):
    """The file's bytes cannot be read (a truncated or corrupt compressed file, an I/O error)."""


@dataclasses.dataclass(frozen=True)
class Header:
    """The header row of a CSV file: its fields, the lines it spans, the blank lines before
    it and the line it starts on."""

    fields: list[str]
    lines: int
    blank_lines: int = 0
    first_line: int = 1


@dataclasses.dataclass
class Block:
    """Whole records of one file.

    Attributes:
        path: the file.
        data: the bytes of the records (a record's text is ``data[starts[i]:ends[i]]``).
        starts, ends: record offsets in ``data``; ``ends`` excludes the line ending (LF and
            the CRs before it). Blank lines are not records.
        sizes: each record's size in bytes (its lines, without the last line's LF); for an
            oversized line only its first bytes are in ``data``.
        lines: the 1-based line in the file where each record starts.
        spans: the physical lines of each record.
        problems: record index -> ``(kind, message)`` for records rejected while cutting
            (oversized lines; unclosed quotes and malformed records of multi-line sources).
        rules: the rules the records were cut by.
        blank_lines: blank lines in the block.
        physical_lines: the lines the block's bytes hold (= sum of spans + blank lines).
        index: the block's position in its file (0, 1, ...).
        first_line: the file line where ``data`` starts.
    """

    path: str
    data: bytes
    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    lines: np.ndarray
    spans: np.ndarray
    problems: dict[int, tuple[str, str]]
    rules: CsvRules
    blank_lines: int
    physical_lines: int
    index: int
    first_line: int

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def quoted(self) -> bool:
        return b'"' in self.data

    def text(self, i: int) -> str:
        """Record ``i`` as read, at most its first ``ROW_PREFIX_BYTES`` bytes (bytes that are
        not UTF-8 shown as ``\\xNN``)."""
        start, end, size = int(self.starts[i]), int(self.ends[i]), int(self.sizes[i])
        shown = self.data[start:min(end, start + ROW_PREFIX_BYTES)]
        text = shown.decode("utf-8", errors="backslashreplace")
        if len(shown) == ROW_PREFIX_BYTES and size > ROW_PREFIX_BYTES:
            text += f"... [{size} bytes in all]"
        return text

    def raw(self, i: int) -> bytes:
        """Record ``i``'s bytes with its line endings (the last LF excluded)."""
        start = int(self.starts[i])
        return self.data[start:start + int(self.sizes[i])]

    def bad_utf8(self) -> np.ndarray:
        """Per record: the 1-based file line of its first line that is not UTF-8, else 0."""
        bad = np.zeros(len(self), dtype=np.int64)
        if self.data.isascii() or not len(self):
            return bad
        self._bad_utf8(0, len(self), bad)
        return bad

    def _bad_utf8(self, low: int, high: int, bad: np.ndarray) -> None:
        """Bisect: one decode for a clean run of records, record by record at the leaves."""
        try:
            self.data[int(self.starts[low]):int(self.ends[high - 1])].decode("utf-8")
            return
        except UnicodeDecodeError:
            pass
        if high - low > 32:
            middle = (low + high) // 2
            self._bad_utf8(low, middle, bad)
            self._bad_utf8(middle, high, bad)
            return
        for i in range(low, high):
            start, end = int(self.starts[i]), int(self.ends[i])
            for offset, line in enumerate(self.data[start:end].split(b"\n")):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    bad[i] = int(self.lines[i]) + offset
                    break


def read_blocks(handle: BinaryIO, path: str, rules: CsvRules | None = None, *,
                block_bytes: int = DEFAULT_BLOCK_BYTES, exact: bool = False
                ) -> Iterator[Header | Block]:
    """Yield the file's :class:`Header`, then its records in :class:`Block` s.

    Args:
        handle: the file's bytes (decompressed).
        path: the file, for messages.
        rules: how records are cut (default: ``CsvRules()``, one line per record).
        block_bytes: about how many bytes a block holds.
        exact: cut multi-line records with the exact parser only (tests compare both ways).

    Raises:
        HeaderError: the file is empty or its header is not valid UTF-8 / CSV.
        ReadError: the bytes cannot be read (naming the file and the last line read).
    """
    reader = _Reader(handle, path, rules or CsvRules(), block_bytes, exact)
    yield reader.header()
    index = 0
    while (block := reader.block(index)) is not None:
        yield block
        index += 1


class _Reader:
    """Buffered reads of about ``block_bytes``; the buffer always starts at a record start,
    on file line ``line``."""

    def __init__(self, handle: BinaryIO, path: str, rules: CsvRules, block_bytes: int,
                 exact: bool) -> None:
        self.handle, self.path, self.rules = handle, path, rules
        self.block_bytes, self.exact = max(1, block_bytes), exact
        self.buffer = b""
        self.eof = False
        self.line = 1

    # --- reading ---------------------------------------------------------------------------

    def fill(self, size: int) -> None:
        while len(self.buffer) < size and not self.eof:
            try:
                more = self.handle.read(max(size - len(self.buffer), self.block_bytes))
            except (OSError, EOFError, zlib.error) as err:
                last = self.line - 1 + self.buffer.count(b"\n")
                raise ReadError(f"cannot read {self.path} after line {last}: "
                                f"{type(err).__name__}: {err}") from None
            if not more:
                self.eof = True
            self.buffer += more

    def more(self) -> None:
        self.fill(max(2 * len(self.buffer), self.block_bytes))

    def consume(self, size: int, lines: int) -> None:
        self.buffer = self.buffer[size:]
        self.line += lines

    # --- the header --------------------------------------------------------------------------

    def header(self) -> Header:
        self.fill(max(self.block_bytes, len(_BOM)))
        if self.buffer.startswith(_BOM):  # what spreadsheet exports put first
            self.buffer = self.buffer[len(_BOM):]
        blank, bound = 0, self.rules.max_row_bytes
        while True:
            self.fill(1)
            buf = self.buffer
            if not buf:
                raise HeaderError(f"{self.path} is empty: expected a header row" if not blank
                                  else f"{self.path} has only blank lines: expected a header row")
            newline = buf.find(b"\n", 0, bound + 1)
            if newline < 0 and len(buf) > bound:
                raise HeaderError(f"the header (line {self.line}) of {self.path} has more than "
                                  f"max_row_bytes={bound} bytes")
            if newline < 0 and not self.eof:
                self.more()
                continue
            end = newline if newline >= 0 else len(buf)
            if not buf[:end].strip(b"\r"):
                blank += 1
                self.consume(end + 1, 1)
                continue
            scan = scan_record(buf, 0, self.rules, self.eof)
            if scan is None:
                self.more()
                continue
            break
        where = f"the header (line {self.line}) of {self.path}"
        if scan.problem:
            raise HeaderError(f"{where} is not a CSV row: {scan.problem[1]}")
        try:
            fields = [field.decode("utf-8") for field in scan.fields]
        except UnicodeDecodeError:
            raise HeaderError(f"{where} is not valid UTF-8") from None
        header = Header(fields, scan.lines, blank, self.line)
        self.consume(scan.end + 1, scan.lines)
        return header

    # --- blocks ------------------------------------------------------------------------------

    def block(self, index: int) -> Block | None:
        bound = self.rules.max_row_bytes
        while True:
            self.fill(self.block_bytes)
            buf = self.buffer
            if not buf:
                return None
            if buf.find(b"\n", 0, bound + 1) < 0:
                if len(buf) > bound:
                    return self._oversized_line(index)
                if not self.eof:
                    self.more()
                    continue
            cut = self._records(buf)
            if cut is not None:
                block = _make_block(self, buf, *cut, index)
                self.consume(len(block.data), block.physical_lines)
                return block
            self.more()

    def _oversized_line(self, index: int) -> Block:
        """The line at the start of the buffer is longer than max_row_bytes: keep its first
        bytes, skip the rest without holding it, and make it a record of its own."""
        self.fill(ROW_PREFIX_BYTES)
        prefix = self.buffer[:ROW_PREFIX_BYTES].split(b"\n", 1)[0]
        size = 0
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                size += newline
                self.buffer = self.buffer[newline + 1:]
                break
            size += len(self.buffer)
            self.buffer = b""
            if self.eof:
                break
            self.fill(self.block_bytes)
        line = self.line
        self.line += 1
        one = np.ones(1, dtype=np.int64)
        return Block(self.path, prefix, np.zeros(1, np.int64), one * len(prefix), one * size,
                     one * line, one, {0: oversized_reason(line, size, self.rules.max_row_bytes)},
                     self.rules, 0, 1, index, line)

    def _records(self, buf: bytes):
        """``(used bytes, record starts, record ends, problems)`` for the whole records at
        the front of ``buf`` (ends: offsets of their last LF), or None when more data is
        needed."""
        arr = np.frombuffer(buf, np.uint8)
        newlines = np.flatnonzero(arr == _LF)
        if not self.rules.multiline or (not self.exact and b'"' not in buf):
            return self._lines(buf, newlines)
        if self.exact:
            return self._exact_records(buf, 0, [], [])
        offset, starts, ends = _fast_multiline(buf, arr, newlines, self.rules, self.eof)
        if offset is None:  # every record cut vectorised (or none whole yet: None)
            return (min(int(ends[-1]) + 1, len(buf)), starts, ends, {}) if len(ends) else None
        return self._exact_records(buf, offset, starts.tolist(), ends.tolist())

    def _lines(self, buf: bytes, newlines: np.ndarray):
        if self.eof and not buf.endswith(b"\n"):
            newlines = np.append(newlines, len(buf))
        used = min(int(newlines[-1]) + 1, len(buf))
        starts = np.concatenate([[0], newlines[:-1] + 1]).astype(np.int64)
        return used, starts, newlines.astype(np.int64), {}

    def _exact_records(self, buf: bytes, pos: int, starts: list[int], ends: list[int]):
        """Cut records one by one from ``pos`` on, after those already cut."""
        problems: dict[int, tuple[str, str]] = {}
        bound, size = self.rules.max_row_bytes, len(buf)
        while pos < size:
            newline = buf.find(b"\n", pos)
            line_end = newline if newline >= 0 else size
            if newline < 0 and not self.eof:
                break  # an incomplete line (an oversized one is taken on the next call)
            if line_end - pos > bound or not buf[pos:line_end].strip(b"\r"):
                starts.append(pos)  # oversized or blank: a line of its own
                ends.append(line_end)
                pos = line_end + 1
                continue
            scan = scan_record(buf, pos, self.rules, self.eof)
            if scan is None:
                break
            if scan.problem:
                problems[len(starts)] = scan.problem
            starts.append(pos)
            ends.append(scan.end)
            pos = scan.end + 1
        if not starts:
            return None
        return (min(pos, size), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                problems)


def _fast_multiline(buf: bytes, arr: np.ndarray, newlines: np.ndarray, rules: CsvRules,
                    eof: bool) -> tuple[int | None, np.ndarray, np.ndarray]:
    """Records cut where the quotes before a newline are even in number, checked:
    ``(None, starts, ends)`` when that holds for every whole record and what follows them
    can wait for more data, else ``(offset, starts, ends)`` of the records before the offset
    where exact cutting must take over."""
    parity = np.cumsum(arr == _QUOTE, dtype=np.uint8) & 1
    ends = newlines[parity[newlines] == 0]
    if eof and not buf.endswith(b"\n") and parity[-1] == 0:
        ends = np.append(ends, len(buf))  # a last record without its newline
    ends = ends.astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1])[:len(ends)].astype(np.int64)
    spans = np.searchsorted(newlines, ends) - np.searchsorted(newlines, starts) + 1
    content = _strip_cr(arr, starts, ends)
    good = (ends - starts <= rules.max_row_bytes) & (spans <= rules.max_row_lines) & \
        structure_ok(arr, starts, content, ord(rules.delimiter))
    bad = np.flatnonzero(~good)
    if len(bad):
        first = int(bad[0])
        return int(starts[first]), starts[:first], ends[:first]
    tail = int(ends[-1]) + 1 if len(ends) else 0  # where an unfinished record starts
    if tail < len(buf):
        lines = len(newlines) - int(np.searchsorted(newlines, tail))
        if eof or len(buf) - tail > rules.max_row_bytes or lines >= rules.max_row_lines:
            return tail, starts, ends  # exact cutting decides the quote left open
    return None, starts, ends


def _make_block(reader: _Reader, buf: bytes, used: int, starts: np.ndarray, ends: np.ndarray,
                problems: dict, index: int) -> Block:
    data = buf[:used]
    arr = np.frombuffer(data, np.uint8)
    physical = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    sizes = ends - starts
    content = _strip_cr(arr, starts, ends)
    if len(starts) == physical:  # one line per record
        spans = np.ones(len(starts), dtype=np.int64)
        lines = reader.line + np.arange(len(starts), dtype=np.int64)
    else:
        newlines = np.flatnonzero(arr == _LF)
        spans = np.searchsorted(newlines, ends) - np.searchsorted(newlines, starts) + 1
        lines = reader.line + np.searchsorted(newlines, starts)
    bound = reader.rules.max_row_bytes
    oversized = sizes > bound
    blank = (content == starts) & ~oversized
    keep = ~blank
    renumber = np.cumsum(keep) - 1
    kept_problems = {int(renumber[i]): problem for i, problem in problems.items() if keep[i]}
    for i in np.flatnonzero(oversized).tolist():
        kept_problems[int(renumber[i])] = oversized_reason(int(lines[i]), int(sizes[i]), bound)
    return Block(reader.path, data, starts[keep], content[keep], sizes[keep], lines[keep],
                 spans[keep], kept_problems, reader.rules, int(blank.sum()), physical, index,
                 reader.line)


def _strip_cr(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Record ends without the CRs of their line ending."""
    ends = ends.copy()
    while True:
        cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == _CR)
        if not cr.any():
            return ends
        ends -= cr


def structure_ok(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, delimiter: int
                 ) -> np.ndarray:
    """Per record ``[starts, ends)``: whether its quoting is plain enough for the vectorised
    path: an even number of quotes, each opening quote at the start of a field, each closing
    quote at its end (or doubled inside it), and no CR. The others take the exact path."""
    ok = np.ones(len(starts), dtype=bool)
    if not len(starts):
        return ok
    region = arr[:int(ends[-1])]
    for byte, check in ((_CR, False), (_QUOTE, True)):
        if byte not in region:
            continue
        where = np.flatnonzero(region == byte)
        record = np.searchsorted(starts, where, side="right") - 1
        inside = (record >= 0) & (where < ends[np.maximum(record, 0)])
        where, record = where[inside], record[inside]
        if not check:
            ok[record] = False
            continue
        k = np.arange(len(where)) - np.searchsorted(where, starts[record])
        previous = arr[np.maximum(where - 1, 0)]
        following = arr[np.minimum(where + 1, len(arr) - 1)]
        opens = (where == starts[record]) | (previous == delimiter) | (previous == _QUOTE)
        closes = (where + 1 == ends[record]) | (following == delimiter) | (following == _QUOTE)
        placed = np.where(k % 2 == 0, opens, closes)
        ok[record[~placed]] = False
        ok &= np.bincount(record, minlength=len(starts)) % 2 == 0
    return ok


def field_counts(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, delimiter: int,
                 quoted: bool) -> np.ndarray:
    """Per record: 1 + the delimiters outside quotes (exact for records that pass
    :func:`structure_ok`). A sum per record from its start to the next record's: the bytes
    between records (line endings, blank lines) hold no delimiter."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    delims = arr == delimiter
    if not quoted:
        return np.add.reduceat(delims.view(np.uint8), starts, dtype=np.int32) + 1
    parity = np.cumsum(arr == _QUOTE, dtype=np.uint8) & 1  # quotes so far, mod 2
    even = np.add.reduceat((delims & (parity == 0)).view(np.uint8), starts, dtype=np.int32)
    odd = np.add.reduceat((delims & (parity == 1)).view(np.uint8), starts, dtype=np.int32)
    base = np.where(starts > 0, parity[np.maximum(starts - 1, 0)], 0)  # parity at the start
    return np.where(base == 0, even, odd) + 1
