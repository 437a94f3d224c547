"""The fast CSV path (vectorised records, Arrow cells) and the exact one (a record at a time)
agree with each other and with a reference parser kept here, on random bytes: quotes, delimiters,
newlines, CRLF and stray CRs, a BOM, invalid UTF-8, fields over the size bound, blank lines;
with and without multi-line values; at every block size.

The reference is written on Python's ``csv`` module (``strict=True``) for the cells of a record
and on the rules of ``CsvSource`` for what a record is:

* a line is the bytes up to a LF; a line over ``max_row_bytes`` (LF excluded) is rejected
  alone (``oversized_row``); else a line holding only CRs is blank (skipped, counted);
* a record is one line, or, with ``multiline_values``, more while a quoted value is open: it
  goes on to the next line while it spans fewer than ``max_row_lines`` lines and stays within
  ``max_row_bytes`` with that line; a quote still open at the end of a line that may not go
  on rejects that line alone (``unterminated_quote``); parsing resumes on the next line;
* any other csv error (text after a closing quote, a CR inside an unquoted value) rejects the
  record's lines up to the error's (``malformed_csv``);
* then, in this order: a line that is not UTF-8 (``invalid_utf8``), the csv error, a field
  count other than the header's (``wrong_field_count``).
"""

from __future__ import annotations

import csv
import io
import sys

import pytest
from hypothesis import HealthCheck
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components._sources import csv_blocks
from estflow.components._sources import csv_parse

WIDTH = 3
TOKENS = [b"a", b"b", b"\xc3\xa9", b",", b";", b'"', b'""', b"\n", b"\n", b"\r\n", b"\r", b" ",
          b"\xff", b"\xef\xbb\xbf", b"\x00", b"x" * 45, b"\n\n"]
FAST_CASES = 150
SLOW_CASES = 3000


def physical_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _csv_fields(lines: list[bytes], delimiter: str) -> list[str]:
    text = b"\n".join(lines).decode("latin-1")  # bytes as characters: the structure is ASCII
    return next(csv.reader([text], delimiter=delimiter, strict=True))


def reference(data: bytes, rules: csv_blocks.CsvRules) -> tuple[list, int, int]:
    """``(records, blank lines, physical lines)``; a record is ``(line, lines, fields or kind)``."""
    lines = physical_lines(data)
    out, blank, i = [], 0, 1  # line 1 is the header
    while i < len(lines):
        first = lines[i]
        if len(first) > rules.max_row_bytes:
            out.append((i + 1, 1, "oversized_row"))
            i += 1
            continue
        if not first.rstrip(b"\r"):
            blank, i = blank + 1, i + 1
            continue
        count, fields, error = 1, None, None
        while True:
            try:
                fields = _csv_fields(lines[i:i + count], rules.delimiter)
                break
            except csv.Error as err:
                if "unexpected end of data" not in str(err):
                    error = "malformed_csv"
                    break
                grown = len(b"\n".join(lines[i:i + count + 1]))  # with the next line
                if (rules.multiline and count < rules.max_row_lines
                        and i + count < len(lines) and grown <= rules.max_row_bytes):
                    count += 1
                    continue
                error, count = "unterminated_quote", 1
                break
        record = lines[i:i + count]
        if not all(map(_utf8, record)):
            outcome = "invalid_utf8"
        elif error:
            outcome = error
        elif len(fields) != WIDTH:
            outcome = "wrong_field_count"
        else:
            outcome = tuple(f.encode("latin-1").decode("utf-8") for f in fields)
        out.append((i + 1, count, outcome))
        i += count
    return out, blank, len(lines)


def production(data: bytes, rules: csv_blocks.CsvRules, block_bytes: int, exact: bool
               ) -> tuple[list, int, int]:
    blocks = csv_blocks.read_blocks(io.BytesIO(data), "t.csv", rules, block_bytes=block_bytes,
                                    exact=exact)
    header = next(blocks)
    assert header.fields == ["a", "b", "c"]
    layout = csv_parse.CsvLayout(WIDTH, {"a": 0, "b": 1, "c": 2}, rules.delimiter)
    out, blank, read = [], header.blank_lines, header.lines + header.blank_lines
    for block in blocks:
        rows = csv_parse.parse_block(block, layout, exact=exact)
        assert block.physical_lines == int(rows.spans.sum()) + rows.blank_lines
        blank += rows.blank_lines
        read += block.physical_lines
        cells = [rows.columns[name].to_pylist() for name in ("a", "b", "c")]
        out += [(int(rows.lines[r]), int(rows.spans[r]), tuple(column[k] for column in cells))
                for k, r in enumerate(rows.records.tolist())]
        out += [(int(rows.lines[r]), int(rows.spans[r]), kind) for r, kind, _ in rows.rejected]
    return sorted(out), blank, read


PLAIN = st.lists(st.sampled_from([b"a", b"b", b"1", b"2.5", b"\xc3\xa9", b" ", b"x" * 45,
                                  b"\xff", b"\x00"]), max_size=4).map(b"".join)
QUOTED = st.lists(st.sampled_from([b"a", b",", b";", b'"', b"\n", b"\r\n", b" ", b"\xc3\xa9"]),
                 max_size=5).map(lambda parts: b'"' + b"".join(parts).replace(b'"', b'""') + b'"')


@st.composite
def csv_files(draw):
    """Random tokens, or well-formed rows (what the fast path is for) with damage between."""
    delimiter = draw(st.sampled_from([",", ";"]))
    rules = csv_blocks.CsvRules(delimiter=delimiter, multiline=draw(st.booleans()),
                                max_row_lines=draw(st.integers(1, 4)),
                                max_row_bytes=draw(st.sampled_from([8, 30, 60, 1 << 20])))
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    header = bom + delimiter.join("abc").encode() + newline
    field = st.one_of(PLAIN, QUOTED)
    row = st.one_of(st.lists(field, min_size=WIDTH, max_size=WIDTH),
                    st.lists(field, min_size=1, max_size=4)).map(delimiter.encode().join)
    line = st.tuples(row, st.sampled_from([b"\n", b"\r\n"])).map(b"".join)
    parts = draw(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=80),
                           st.lists(st.one_of(line, line, line, st.sampled_from(TOKENS)),
                                    max_size=16)))
    return header + b"".join(parts), rules


def check(data: bytes, rules: csv_blocks.CsvRules, block_bytes: int) -> None:
    expected = reference(data, rules)
    assert production(data, rules, block_bytes, exact=True) == expected
    assert production(data, rules, block_bytes, exact=False) == expected


@pytest.fixture(autouse=True, scope="module")
def _no_csv_field_limit():
    previous = csv.field_size_limit(sys.maxsize)
    yield
    csv.field_size_limit(previous)


BLOCK_SIZES = st.sampled_from([1, 3, 7, 16, 64, 1 << 16])


@settings(max_examples=FAST_CASES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(csv_files(), BLOCK_SIZES)
@example((b'a,b,c\n"Flash" Cab,1,x\nok,2,y\n', csv_blocks.CsvRules()), 1 << 16)
@example((b'a,b,c\nr,"open,1\n' + b"q,2,3\n" * 5 + b'end",4,5\n', csv_blocks.CsvRules()), 7)
@example((b'a,b,c\nr,"two\nlines",1\nx,y,z', csv_blocks.CsvRules(multiline=True)), 3)
@example((b'a,b,c\r\n1,2,3\r\r\n\r\n"a\r\nb",c,d\r\nab"c,d,e\r\n',
          csv_blocks.CsvRules(multiline=True)), 1 << 16)
@example((b"a,b,c\n" + b"y" * 100 + b"\n1,2,3\n", csv_blocks.CsvRules(max_row_bytes=30)), 7)
def test_fast_exact_and_reference_parsers_agree(case, block_bytes):
    check(*case, block_bytes)


@pytest.mark.slow
@settings(max_examples=SLOW_CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files(), BLOCK_SIZES)
def test_fast_exact_and_reference_parsers_agree_on_many_more_files(case, block_bytes):
    check(*case, block_bytes)
