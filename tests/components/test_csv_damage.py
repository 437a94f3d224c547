"""Damaged CSV files (issue 11): every physical line is accounted for, a broken quote costs
its own line and no more, an oversized record is rejected with its file, line and size, the
fast parser rejects what the exact one rejects, and a failed run leaves nothing behind."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from estflow.components._sources import csv_blocks
from estflow.components._sources import csv_parse
from estflow.components._sources.report import summary_lines
from estflow.components.ingest import step as ingest
from estflow.dsl.contracts import Files
from tests.components.test_ingest import HEADER
from tests.components.test_ingest import by_id
from tests.components.test_ingest import make_pipeline


def good_rows(n: int, first: int = 0) -> list[bytes]:
    return [f"r{i},{i * 0.5},{i},c{i % 5},{i % 2},e\n".encode() for i in range(first, first + n)]


def rejected(out: Path) -> dict[int, dict]:
    lines = (out / Files.REJECTED).read_text(encoding="utf-8").splitlines()
    return {r["line"]: r for r in map(json.loads, lines)}


def assert_balanced(summary: dict) -> None:
    """physical lines read = header + kept + rejected + blank, per file and in total."""
    for name, entry in [("all", summary["lines"]), *summary["files"].items()]:
        parts = entry["header"] + entry["kept"] + entry["rejected"] + entry["blank"]
        assert entry["read"] == parts, (name, entry)


def leftovers(out: Path) -> list[str]:
    """Hidden entries (temporary directories, statistics) in the output and its splits."""
    return sorted(str(p.relative_to(out)) for folder in (out, out / "train", out / "eval")
                  if folder.exists() for p in folder.iterdir() if p.name.startswith("."))


def test_an_unterminated_quote_rejects_its_own_line_and_no_other(tmp_path):
    rows = good_rows(1000)
    rows[10] = b'r10,1.0,3,"Flash Cab,1,e\n'  # a broken export: the quote never closes
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(rows))
    summary = ingest.run(make_pipeline("data.csv"), tmp_path / "out", source_root=tmp_path)
    assert summary["rejected_by_reason"] == {"unterminated_quote": 1}
    assert summary["lines"] == {"read": 1001, "header": 1, "kept": 999, "rejected": 1,
                                "blank": 0}
    assert summary["train"] + summary["eval"] == 999
    [(line, record)] = rejected(tmp_path / "out").items()
    assert line == 12 and record["row"] == 'r10,1.0,3,"Flash Cab,1,e'
    assert "quote" in record["reason"] and "field 4" in record["reason"]
    assert_balanced(summary)


def test_two_unterminated_quotes_do_not_merge_the_lines_between_them(tmp_path):
    rows = good_rows(200)
    rows[10] = b'r10,1.0,3,"Flash\n'  # opens a quote in the color column ...
    rows[110] = b'end",1,e\n'          # ... that this line would close: one 101-line "row"
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(rows))
    summary = ingest.run(make_pipeline("data.csv", max_rejected_fraction=0.02),
                         tmp_path / "out", source_root=tmp_path)
    assert summary["rejected_by_reason"] == {"unterminated_quote": 1, "wrong_field_count": 1}
    assert set(rejected(tmp_path / "out")) == {12, 112}
    rows_out = by_id(tmp_path / "out")
    assert len(rows_out) == 198 and "r50" in rows_out
    assert not any(b"\n" in value for ex in rows_out.values()
                   for value in ex.features.feature["color"].bytes_list.value)
    assert_balanced(summary)


def test_multiline_values_are_read_only_when_declared_and_within_bounds(tmp_path):
    rows = good_rows(30)
    rows[5] = b'r5,1.0,3,"three\nline\nvalue",1,e\n'  # lines 7-9
    rows[20] = b'r20,1.0,3,"never closed,1,e\n'      # line 24 (no quote follows)
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(rows))
    # Not declared: a quote open at the end of a line rejects that line; parsing resumes.
    plain = ingest.run(make_pipeline("data.csv", max_rejected_fraction=0.2),
                       tmp_path / "plain", source_root=tmp_path)
    assert set(rejected(tmp_path / "plain")) == {7, 8, 9, 24}
    assert plain["lines"]["rejected"] == 4 and plain["lines"]["kept"] == 28
    # Declared: the three-line value is one row; the unclosed quote still costs one line.
    multi = ingest.run(make_pipeline("data.csv", multiline_values=True,
                                     max_rejected_fraction=0.2),
                       tmp_path / "multi", source_root=tmp_path)
    assert list(rejected(tmp_path / "multi")) == [24]
    assert "not closed" in rejected(tmp_path / "multi")[24]["reason"]
    color = by_id(tmp_path / "multi")["r5"].features.feature["color"].bytes_list.value
    assert list(color) == [b"three\nline\nvalue"]
    assert multi["lines"] == {"read": 33, "header": 1, "kept": 31, "rejected": 1, "blank": 0}
    # Declared with a bound of two lines: the three-line value is over it.
    bounded = ingest.run(make_pipeline("data.csv", multiline_values=True, max_row_lines=2,
                                       max_rejected_fraction=0.2),
                         tmp_path / "bounded", source_root=tmp_path)
    bad = rejected(tmp_path / "bounded")
    assert set(bad) == {7, 8, 9, 24} and "2 lines" in bad[7]["reason"]
    for summary in (plain, multi, bounded):
        assert_balanced(summary)


def test_max_rejected_fraction_counts_rejected_lines_not_rows(tmp_path):
    rows = good_rows(16)
    rows[3] = b'r3,1.0,3,"a\nb\nc\nd\ne",1\n'  # one 5-line row with 5 fields: rejected
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(rows))
    pipeline = make_pipeline("data.csv", multiline_values=True, max_rejected_fraction=0.2)
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    message = str(err.value)  # 1 of 16 rows, but 5 of 20 data lines
    assert "5 of 20 data lines rejected (25.00%; 1 of 16 rows rejected)" in message


def test_a_record_over_64_mb_is_rejected_with_file_line_and_size(tmp_path):
    huge = b"r99,1.0,3," + b"x" * (65 << 20) + b",1,e\n"  # no newline for 65 MB
    path = tmp_path / "data.csv"
    path.write_bytes(HEADER + b"".join(good_rows(10)) + huge + b"".join(good_rows(10, 10)))
    summary = ingest.run(make_pipeline("data.csv", max_rejected_fraction=0.1),
                         tmp_path / "out", source_root=tmp_path)
    [(line, record)] = rejected(tmp_path / "out").items()
    assert line == 12 and record["file"] == str(path)
    assert str(len(huge) - 1) in record["reason"] and "max_row_bytes" in record["reason"]
    assert len(record["row"]) < 2000  # a bounded prefix, never 65 MB
    assert summary["rejected_by_reason"] == {"oversized_row": 1}
    assert summary["lines"] == {"read": 22, "header": 1, "kept": 20, "rejected": 1, "blank": 0}
    assert leftovers(tmp_path / "out") == []


def test_a_row_over_the_declared_size_is_rejected_inside_a_block(tmp_path):
    rows = good_rows(20)
    rows[4] = b"r4,1.0,3," + b"y" * 5000 + b",1,e\n"
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(rows))
    summary = ingest.run(make_pipeline("data.csv", max_row_bytes=1000,
                                       max_rejected_fraction=0.1),
                         tmp_path / "out", source_root=tmp_path)
    record = rejected(tmp_path / "out")[6]
    assert "line 6 has 5013 bytes, more than max_row_bytes=1000" in record["reason"]
    assert len(record["row"]) < 2000
    assert summary["lines"]["kept"] == 19


def _parse(data: bytes, *, exact: bool = False) -> list:
    rules = csv_blocks.CsvRules()
    blocks = csv_blocks.read_blocks(io.BytesIO(data), "t.csv", rules, block_bytes=1 << 16)
    header = next(blocks)
    layout = csv_parse.CsvLayout(len(header.fields), {"id": 0, "v": 1, "w": 2})
    found = []
    for block in blocks:
        rows = csv_parse.parse_block(block, layout, exact=exact)
        cells = {n: c.to_pylist() for n, c in rows.columns.items()}
        found += [(int(rows.lines[r]), [cells[n][k] for n in ("id", "v", "w")])
                  for k, r in enumerate(rows.records)]
        found += [(int(rows.lines[i]), kind) for i, kind, _ in rows.rejected]
    return sorted(found, key=lambda item: item[0])


def test_text_after_a_closing_quote_is_rejected_by_the_fast_and_the_exact_parser():
    data = b'id,v,w\n"Flash" Cab,1,x\n"ok",2,y\n'
    expected = [(2, "malformed_csv"), (3, ["ok", "2", "y"])]
    assert _parse(data) == expected
    assert _parse(data, exact=True) == expected


def test_a_directory_as_the_source_path_is_a_clear_error(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_bytes(HEADER + b"".join(good_rows(3)))
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(make_pipeline("data"), tmp_path / "out", source_root=tmp_path)
    message = str(err.value)
    assert f"{tmp_path / 'data'} is a directory" in message
    assert "'data/*.csv'" in message  # what to write instead


def test_a_failed_read_names_the_file_and_leaves_no_temporary_directory(tmp_path):
    whole = gzip.compress(HEADER + b"".join(good_rows(400_000)), compresslevel=1)
    (tmp_path / "data.csv.gz").write_bytes(whole[:len(whole) * 3 // 4])  # truncated
    out = tmp_path / "out"
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(make_pipeline("data.csv.gz"), out, source_root=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "data.csv.gz") in message and "after line" in message
    assert leftovers(out) == [] and not (out / Files.INGEST_STATS).exists()


def test_accounting_balances_per_file_with_every_kind_of_damage(tmp_path):
    (tmp_path / "data").mkdir()
    damaged = (HEADER.replace(b"\n", b"\r\n")
               + b"".join(r.replace(b"\n", b"\r\n") for r in good_rows(20))
               + b"\r\n\n"                                  # two blank lines
               + b'r90,1.0,3,"open,1,e\r\n'                 # unterminated quote
               + b'r91,1.0,3,"Flash" Cab,1,e\r\n'           # text after a closing quote
               + b"r92,1.0,3,caf\xe9,1,e\n"                 # not UTF-8
               + b"r93,1.0,3\n"                             # too few fields
               + b"r94,1.0,3," + b"z" * 3000 + b",1,e\n"    # over max_row_bytes
               + b"r95,NA,3,red,1,e")                       # last line, no newline; NA: missing
    (tmp_path / "data" / "a.csv").write_bytes(damaged)
    (tmp_path / "data" / "b.csv").write_bytes(HEADER + b"".join(good_rows(10)))
    summary = ingest.run(make_pipeline("data/*.csv", max_row_bytes=1000,
                                       max_rejected_fraction=0.5),
                         tmp_path / "out", source_root=tmp_path)
    files = {Path(name).name: entry for name, entry in summary["files"].items()}
    assert files == {
        "a.csv": {"read": 29, "header": 1, "kept": 21, "rejected": 5, "blank": 2},
        "b.csv": {"read": 11, "header": 1, "kept": 10, "rejected": 0, "blank": 0}}
    assert summary["rejected_by_reason"] == {
        "unterminated_quote": 1, "malformed_csv": 1, "invalid_utf8": 1,
        "wrong_field_count": 1, "oversized_row": 1}
    assert_balanced(summary)
    text = "\n".join(summary_lines(summary))
    assert "40 lines read: 2 header, 31 kept, 5 rejected, 2 blank" in text


def test_an_oversized_line_is_skipped_unread_and_keeps_only_its_own_first_bytes():
    data = b"id,v,w\n" + b"x" * 150 + b"\nok,1,2\n" + b"y" * 5000 + b"\n"
    rules = csv_blocks.CsvRules(max_row_bytes=100)
    blocks = list(csv_blocks.read_blocks(io.BytesIO(data), "t.csv", rules, block_bytes=16))
    records = [(int(b.lines[i]), b.text(i), b.problems.get(i, ("row",))[0])
               for b in blocks[1:] for i in range(len(b))]
    assert records == [(2, "x" * 150, "oversized_row"), (3, "ok,1,2", "row"),
                       (4, "y" * 1024 + "... [5000 bytes in all]", "oversized_row")]
    assert max(len(b.data) for b in blocks[1:]) <= 1024  # never the whole line in memory
    assert sum(b.physical_lines for b in blocks[1:]) == 3
