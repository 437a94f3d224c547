"""The CSV grammar, exactly, one record at a time: what a record is and what its fields are.

This is the rule book the vectorised path (:mod:`.csv_blocks`, :mod:`.csv_parse`) must agree
with on every input, and the path taken by every record the vectorised checks cannot vouch
for. It works on bytes: quotes, delimiters, CR and LF are ASCII, so they are never part of a
multi-byte UTF-8 character, and a line that is not UTF-8 still has a structure.

Rules (Python's ``csv`` module with ``strict=True``, plus bounds):

* a record starts at the start of a line; a field that starts with ``"`` is quoted, ``""``
  inside it is one quote, and its closing quote must be followed by the delimiter or the end
  of the record (text after it is ``malformed_csv``); a quote inside an unquoted field is a
  literal character;
* CRs at the end of a record are its line ending; a CR elsewhere is data inside a quoted value
  and ``malformed_csv`` in an unquoted one;
* a quote still open at the end of a line continues onto the next line only with
  ``multiline_values``, while the record stays within ``max_row_lines`` lines and
  ``max_row_bytes`` bytes; otherwise the line that opened it is rejected alone
  (``unterminated_quote``) and the next record starts on the next line;
* a malformed record ends with the line holding the error.
"""

from __future__ import annotations

import dataclasses

__all__ = ["OVERSIZED", "INVALID_UTF8", "UNTERMINATED", "MALFORMED", "WRONG_FIELD_COUNT",
           "CsvRules", "Scan", "scan_record", "oversized_reason"]

OVERSIZED, INVALID_UTF8 = "oversized_row", "invalid_utf8"
UNTERMINATED, MALFORMED = "unterminated_quote", "malformed_csv"
WRONG_FIELD_COUNT = "wrong_field_count"
_QUOTE, _LF = b'"', b"\n"


@dataclasses.dataclass(frozen=True)
class CsvRules:
    """How a CSV source is cut into records (from :class:`~estflow.dsl.CsvSource`)."""

    delimiter: str = ","
    multiline: bool = False
    max_row_lines: int = 100
    max_row_bytes: int = 1 << 20

    @classmethod
    def of(cls, source) -> CsvRules:
        return cls(source.delimiter, source.multiline_values, source.max_row_lines,
                   source.max_row_bytes)


@dataclasses.dataclass
class Scan:
    """One record: it ends at ``end`` (its last line's LF, or the end of the data) after
    ``lines`` lines; ``fields`` (raw bytes) when it is a row, else ``problem``
    (``(kind, message)``)."""

    end: int
    lines: int
    fields: list[bytes] | None
    problem: tuple[str, str] | None = None


def oversized_reason(line: int, size: int, bound: int) -> tuple[str, str]:
    return OVERSIZED, f"line {line} has {size} bytes, more than max_row_bytes={bound}"


def scan_record(data: bytes, start: int, rules: CsvRules, eof: bool) -> Scan | None:
    """The record that starts at ``start`` (a line start; the caller has set aside blank and
    oversized first lines), or None when ``data`` ends before it does and ``eof`` is False."""
    delimiter = rules.delimiter.encode()
    size = len(data)
    line_end = data.find(_LF, start)
    if line_end < 0:
        if not eof:
            return None
        line_end = size
    first_end, lines, pos, fields = line_end, 1, start, []
    while True:
        if pos < line_end and data[pos] == 34:  # a quoted field
            pieces, p = [], pos + 1
            while True:
                q = data.find(_QUOTE, p, line_end)
                if q >= 0 and q + 1 < line_end and data[q + 1] == 34:  # "" inside
                    pieces.append(data[p:q + 1])
                    p = q + 2
                    continue
                if q >= 0:
                    pieces.append(data[p:q])
                    pos = q + 1
                    break
                # The quote is open at the end of this line: go on to the next one, or stop.
                why = _continues(data, start, line_end, lines, rules, eof)
                if why is None:
                    return None
                if isinstance(why, str):
                    return Scan(first_end, 1, None, (UNTERMINATED, (
                        f"field {len(fields) + 1}: its opening quote is not closed {why}")))
                pieces.append(data[p:line_end + 1])
                p, line_end, lines = line_end + 1, why, lines + 1
            fields.append(b"".join(pieces))
            rest = data[pos:line_end]
            if not rest.strip(b"\r"):  # only the line ending's CRs left
                return Scan(line_end, lines, fields)
            if data[pos:pos + 1] == delimiter:
                pos += 1
                continue
            got = rest.rstrip(b"\r")[:20].decode("utf-8", errors="backslashreplace")
            return Scan(line_end, lines, None, (MALFORMED, (
                f"field {len(fields)}: text after its closing quote (expected "
                f"{rules.delimiter!r} or the end of the line, got {got!r})")))
        found = data.find(delimiter, pos, line_end)
        stop = line_end if found < 0 else found
        value = data[pos:stop]
        cr = value.find(b"\r")
        if cr >= 0:
            if found >= 0 or value[cr:].strip(b"\r"):
                return Scan(line_end, lines, None, (MALFORMED, (
                    f"field {len(fields) + 1}: a carriage return (CR) inside an unquoted "
                    "value")))
            value = value[:cr]  # the line ending's CRs
        fields.append(value)
        if found < 0:
            return Scan(line_end, lines, fields)
        pos = found + 1


def _continues(data: bytes, start: int, line_end: int, lines: int, rules: CsvRules,
               eof: bool) -> int | str | None:
    """Where the next line of an open quoted value ends, or why the value may not go on (a
    phrase), or None when more data is needed to tell."""
    if not rules.multiline:
        return ("on its line (values span lines only with "
                "CsvSource(multiline_values=True))")
    if lines >= rules.max_row_lines:
        return f"within {rules.max_row_lines} lines (max_row_lines)"
    size = len(data)
    if line_end >= size - 1 and eof:  # no next line
        return "before the end of the file"
    limit = start + rules.max_row_bytes + 1  # the next line must end before this
    found = data.find(_LF, line_end + 1, limit)
    if found >= 0:
        return found
    if size >= limit:
        return f"within max_row_bytes={rules.max_row_bytes} bytes"
    if not eof:
        return None
    return size
