"""The ingest step on hand-written CSV files: every bad row is rejected with its line and
reason, good rows land in exactly one split, defaults stay absent, the split is stable."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components._io.outside_facts import source_fingerprint
from estflow.components._sources import csv_blocks
from estflow.components._sources import csv_parse
from estflow.components.ingest import __main__ as ingest_main
from estflow.components.ingest import step as ingest
from estflow.dsl.contracts import Files

HEADER = b"id,x,n,color,label,extra\n"
# (line number in the file, raw bytes); line 1 is the header.
ROWS = [
    (2, b"r1,1.5,3,red,1,a\n"),
    (3, b"r2,,4,,0,b\n"),                       # x and color missing: have defaults
    (4, b"r3,2.0,5,blue,1\n"),                  # 5 fields instead of 6
    (5, b"r4,abc,5,blue,1,c\n"),                # text in the float column x
    (6, b"r5,1.0,3.5,blue,0,d\n"),              # 3.5 in the int column n
    (7, b"r6,1.0,,blue,1,e\n"),                 # required n empty
    (8, b"r7,1.0,2,caf\xe9,1,f\n"),             # latin-1 byte: not UTF-8
    (9, b'r8,"2.5",7,"multi\nline",1,g\n'),     # a quoted newline: one record on lines 9-10
                                                # (the source declares multiline_values)
    (11, b"r9,3.0,8,green,1,h\n"),
    (12, b"\n"),                                # blank line: skipped, counted
    (13, b"r10,4,9.0,red,0,i\n"),               # "9.0" is an integral value: accepted
]
GOOD_IDS = {"r1", "r2", "r8", "r9", "r10"}
EXPECTED_REJECTS = {  # line -> (kind, words the reason must contain)
    4: ("wrong_field_count", ["expected 6", "got 5"]),
    5: ("bad_value:x", ["'x'", "float", "'abc'"]),
    6: ("bad_value:n", ["'n'", "integer", "'3.5'"]),
    7: ("missing_required:n", ["'n'"]),
    8: ("invalid_utf8", ["line 8", "UTF-8"]),
}


def make_pipeline(path: str, **source) -> ef.Pipeline:
    return ef.Pipeline(
        name="ingest-test",
        source=ef.CsvSource(path, **source),
        columns=(ef.Column("id", "string"),),
        features=(ef.Numeric("x", default=0.0), ef.Numeric("n", dtype="int"),
                  ef.CategoricalVocab("color", default="")),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x", "n")),
        train=ef.TrainSpec(max_steps=1),
    )


def write_csv(path: Path, rows=ROWS, header=HEADER) -> Path:
    path.write_bytes(header + b"".join(raw for _, raw in rows))
    return path


def read_split(examples: Path, split: str) -> list[tf.train.Example]:
    files = sorted(str(p) for p in (examples / split).iterdir())
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return [tf.train.Example.FromString(record.numpy()) for record in dataset]


def by_id(examples: Path) -> dict[str, tf.train.Example]:
    rows = read_split(examples, Files.TRAIN_EXAMPLES) + read_split(examples, Files.EVAL_EXAMPLES)
    return {ex.features.feature["id"].bytes_list.value[0].decode(): ex for ex in rows}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ingest")
    csv_path = write_csv(tmp / "data.csv")
    pipeline = make_pipeline("data.csv", multiline_values=True, max_rejected_fraction=0.6)
    summary = ingest.run(pipeline, tmp / "examples", source_root=tmp)
    return pipeline, tmp, csv_path, summary


def test_each_bad_row_is_rejected_with_line_and_reason(ingested):
    _, tmp, csv_path, _ = ingested
    lines = (tmp / "examples" / Files.REJECTED).read_text().splitlines()
    rejected = {r["line"]: r for r in map(json.loads, lines)}
    assert set(rejected) == set(EXPECTED_REJECTS)
    for line, (_kind, words) in EXPECTED_REJECTS.items():
        record = rejected[line]
        assert record["file"] == str(csv_path)
        for word in words:
            assert word in record["reason"], (line, record["reason"])
    assert rejected[4]["row"] == "r3,2.0,5,blue,1"
    assert rejected[8]["row"] == "r7,1.0,2,caf\\xe9,1,f"  # the bad byte stays visible


def test_summary_counts(ingested):
    _, tmp, csv_path, summary = ingested
    assert summary == json.loads((tmp / "examples" / Files.INGEST_STATS).read_text())
    assert summary["read"] == 10
    assert summary["rejected"] == 5
    assert summary["train"] + summary["eval"] == 5
    assert summary["blank_lines"] == 1
    # Every physical line accounted for: 13 = header + 6 (r8 spans two) + 5 rejected + blank.
    assert summary["lines"] == {"read": 13, "header": 1, "kept": 6, "rejected": 5, "blank": 1}
    assert summary["files"] == {str(csv_path): summary["lines"]}
    assert summary["rejected_by_reason"] == {kind: 1 for kind, _ in EXPECTED_REJECTS.values()}
    assert summary["missing_by_column"] == {"id": 0, "x": 1, "n": 0, "color": 1, "label": 0}
    assert summary["source_files"] == [str(csv_path)]


def test_every_good_row_is_written_once_with_typed_values(ingested):
    _, tmp, _, _ = ingested
    rows = by_id(tmp / "examples")
    assert set(rows) == GOOD_IDS
    r1 = rows["r1"].features.feature
    assert list(r1["x"].float_list.value) == [1.5]
    assert list(r1["n"].int64_list.value) == [3]
    assert list(r1["color"].bytes_list.value) == [b"red"]
    assert list(r1["label"].int64_list.value) == [1]
    assert "extra" not in r1  # columns the pipeline does not read are not written
    assert list(rows["r8"].features.feature["color"].bytes_list.value) == [b"multi\nline"]
    assert list(rows["r10"].features.feature["n"].int64_list.value) == [9]


def test_missing_cells_with_defaults_are_absent_not_filled(ingested):
    _, tmp, _, _ = ingested
    r2 = by_id(tmp / "examples")["r2"].features.feature
    assert "x" not in r2 and "color" not in r2
    assert list(r2["n"].int64_list.value) == [4]


def test_too_many_rejected_rows_fail_naming_the_rejected_file(tmp_path):
    write_csv(tmp_path / "data.csv")
    pipeline = make_pipeline("data.csv", multiline_values=True)  # max_rejected_fraction=0.01
    out = tmp_path / "examples"
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(pipeline, out, source_root=tmp_path)
    message = str(err.value)
    assert "5 of 11 data lines rejected (45.45%; 5 of 10 rows rejected)" in message
    assert str(out / Files.REJECTED) in message
    assert len((out / Files.REJECTED).read_text().splitlines()) == 5
    assert not (out / Files.INGEST_STATS).exists()  # ingest.json marks success only


def test_header_missing_a_needed_column_names_column_and_file(tmp_path):
    path = write_csv(tmp_path / "data.csv", rows=[(2, b"r1,1.5,red,1\n")],
                     header=b"id,x,color,label\n")
    with pytest.raises(ingest.IngestError, match=r"column 'n'.*not in the header") as err:
        ingest.run(make_pipeline("data.csv"), tmp_path / "out", source_root=tmp_path)
    assert str(path) in str(err.value)


def test_no_matching_file_is_an_error(tmp_path):
    with pytest.raises(ingest.IngestError, match="no CSV file matches"):
        ingest.run(make_pipeline("nothing/*.csv"), tmp_path / "out", source_root=tmp_path)


def _group_csv(path: Path, n: int = 300) -> Path:
    lines = [f"row{i},{i * 0.5},{i},g{i % 7},{i % 2},x\n".encode() for i in range(n)]
    path.write_bytes(HEADER + b"".join(lines))
    return path


def _shards(examples: Path) -> dict[str, bytes]:
    return {str(p.relative_to(examples)): p.read_bytes()
            for split in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES)
            for p in sorted((examples / split).iterdir())}


def test_split_is_deterministic_across_runs_and_processes(tmp_path):
    _group_csv(tmp_path / "data.csv")
    spec = tmp_path / "spec.json"
    spec.write_text(make_pipeline("data.csv").to_json())
    ingest.run(ef.Pipeline.from_json(spec.read_text()), tmp_path / "a", source_root=tmp_path)
    # A second process with another hash seed: the split hash and the bytes written must not
    # depend on Python's salted hash().
    subprocess.run([sys.executable, "-m", "estflow.components.ingest", "--spec", str(spec),
                    "--examples", str(tmp_path / "b"), "--source-root", str(tmp_path)],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONHASHSEED="7"))
    first, second = _shards(tmp_path / "a"), _shards(tmp_path / "b")
    assert first == second and len(first) == 2
    n_eval = len(read_split(tmp_path / "a", Files.EVAL_EXAMPLES))
    assert 30 <= n_eval <= 90  # eval_fraction=0.2 of 300 rows, by hash


def test_a_source_that_changes_under_the_step_fails_it(tmp_path, monkeypatch, capsys):
    """The run keyed this step by the source's digest at its start; rows written while the
    job read the file would be cached under the old data's key. A writer appending during
    the job fails the step (no ingest.json: nothing kept as done)."""
    data = _group_csv(tmp_path / "data.csv")
    pipeline = make_pipeline("data.csv")
    digest = source_fingerprint(pipeline.source, tmp_path)["digest"]
    ingest.run(pipeline, tmp_path / "same", source_root=tmp_path, source_digest=digest)
    assert (tmp_path / "same" / Files.INGEST_STATS).is_file()  # unchanged: done
    job = ingest.run_job

    def job_with_a_late_writer(*args, **kwargs):
        job(*args, **kwargs)
        with open(data, "ab") as f:
            f.write(b"late,1.0,1,g1,1,x\n")

    monkeypatch.setattr(ingest, "run_job", job_with_a_late_writer)
    with pytest.raises(ingest.IngestError, match=(
            f"the source changed while this run read it: its fingerprint was {digest[:12]} "
            r"when the run started and is [0-9a-f]{12} now \(1 object\(s\): .*data.csv "
            r"\(\d+ bytes\)\)\. What was written may mix old and new data")):
        ingest.run(pipeline, tmp_path / "moved", source_root=tmp_path, source_digest=digest)
    assert not (tmp_path / "moved" / Files.INGEST_STATS).exists()
    monkeypatch.setattr(ingest, "run_job", job)
    argv = ["--spec", pipeline.to_json(), "--examples", str(tmp_path / "cli"),
            "--source-root", str(tmp_path), "--source-digest", digest]
    assert ingest_main.main(argv) == 1  # the digest the run started with is stale now
    assert "the source changed while this run read it" in capsys.readouterr().err
    assert ingest_main.main([*argv[:-1], ""]) == 0  # no digest (a volatile source): no check


def test_split_does_not_depend_on_how_the_runner_bundles_work(tmp_path):
    # Another runner configuration (two worker threads): other bundles and shards, the same rows
    # in each split, and every rejected row in the one rejected-rows file.
    (tmp_path / "data").mkdir()
    for name in ("a", "b"):
        path = _group_csv(tmp_path / "data" / f"{name}.csv", n=150)
        with open(path, "ab") as out:
            out.write(b"bad,row\nr9,1.0,not-an-int,red,1,x\n")
    pipeline = make_pipeline("data/*.csv", max_rejected_fraction=0.1)
    ingest.run(pipeline, tmp_path / "a", source_root=tmp_path)
    ingest.run(pipeline, tmp_path / "b", source_root=tmp_path, beam_options=[
        "--direct_num_workers=2", "--direct_running_mode=multi_threading"])
    for split in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES):
        rows = [sorted(ex.SerializeToString() for ex in read_split(tmp_path / run, split))
                for run in ("a", "b")]
        assert rows[0] == rows[1] and rows[0]
    for run in ("a", "b"):
        lines = (tmp_path / run / Files.REJECTED).read_text().splitlines()
        assert sorted((json.loads(r)["file"][-5:], json.loads(r)["line"]) for r in lines) == [
            ("a.csv", 152), ("a.csv", 153), ("b.csv", 152), ("b.csv", 153)]


def test_shards_and_gzip_level_are_options(tmp_path):
    _group_csv(tmp_path / "data.csv", n=600)
    summary = ingest.run(make_pipeline("data.csv"), tmp_path / "out", source_root=tmp_path,
                         num_shards=3, gzip_level=9)
    shards = sorted(p.name for p in (tmp_path / "out" / Files.TRAIN_EXAMPLES).iterdir())
    assert shards == [f"part-0000{i}-of-00003.tfrecord.gz" for i in range(3)]
    assert len(read_split(tmp_path / "out", Files.TRAIN_EXAMPLES)) == summary["train"]


def test_declared_ratios_write_every_split(tmp_path):
    _group_csv(tmp_path / "data.csv", n=2000)
    pipeline = dataclasses.replace(make_pipeline("data.csv"), split=ef.Split(
        ratios={"train": 6, "eval": 2, "test": 2}))
    summary = ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    counts = {name: len(read_split(tmp_path / "out", name)) for name in ("train", "eval", "test")}
    assert counts == summary["splits"] and sum(counts.values()) == 2000
    assert 330 <= counts["test"] <= 470 and 330 <= counts["eval"] <= 470  # 2/10 of 2000
    ids = [{ex.features.feature["id"].bytes_list.value[0] for ex in read_split(tmp_path / "out",
                                                                               name)}
           for name in counts]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])


def test_split_key_keeps_a_key_in_one_split_and_globs_files(tmp_path):
    (tmp_path / "data").mkdir()
    _group_csv(tmp_path / "data" / "a.csv", n=150)
    _group_csv(tmp_path / "data" / "b.csv", n=150)
    pipeline = dataclasses.replace(make_pipeline("data/*.csv"),
                                   split=ef.Split(eval_fraction=0.3, key="color"))
    summary = ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    assert summary["read"] == 300 and len(summary["source_files"]) == 2
    groups = {}
    for split in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES):
        for ex in read_split(tmp_path / "out", split):
            groups.setdefault(ex.features.feature["color"].bytes_list.value[0], set()).add(split)
    assert len(groups) == 7 and all(len(splits) == 1 for splits in groups.values())


def test_string_label_outside_vocabulary_is_rejected(tmp_path):
    (tmp_path / "data.csv").write_bytes(HEADER + b"r1,1,1,red,yes,a\nr2,1,1,red,maybe,b\n")
    pipeline = dataclasses.replace(
        make_pipeline("data.csv", max_rejected_fraction=0.5),
        label=ef.Label("label", dtype="string", vocabulary=("no", "yes")))
    summary = ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    assert summary["rejected_by_reason"] == {"label_not_in_vocabulary": 1}
    record = json.loads((tmp_path / "out" / Files.REJECTED).read_text())
    assert record["line"] == 3 and "'maybe'" in record["reason"]


def test_main_reads_spec_text_and_returns_exit_codes(tmp_path, capsys):
    write_csv(tmp_path / "data.csv")
    good = make_pipeline("data.csv", multiline_values=True, max_rejected_fraction=0.6).to_json()
    argv = ["--spec", good, "--examples", str(tmp_path / "ok"), "--source-root", str(tmp_path)]
    assert ingest_main.main(argv) == 0
    assert (tmp_path / "ok" / Files.INGEST_STATS).exists()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(make_pipeline("data.csv").to_json())
    argv = ["--spec", str(spec_file), "--examples", str(tmp_path / "bad"),
            "--source-root", str(tmp_path)]
    assert ingest_main.main(argv) == 4  # too many rejected rows: a data anomaly, as validate's
    assert "rejected.jsonl" in capsys.readouterr().err


def test_bom_crlf_and_a_gzipped_file_read_like_plain_csv(tmp_path):
    rows = b"".join(raw for _, raw in ROWS[:2])
    (tmp_path / "a.csv").write_bytes(b"\xef\xbb\xbf" + (HEADER + rows).replace(b"\n", b"\r\n"))
    with gzip.open(tmp_path / "b.csv.gz", "wb") as out:
        out.write(HEADER + rows)
    for name in ("a.csv", "b.csv.gz"):
        summary = ingest.run(make_pipeline(name), tmp_path / name.replace(".", "_"),
                             source_root=tmp_path)
        assert (summary["read"], summary["rejected"]) == (2, 0), name
        r1 = by_id(tmp_path / name.replace(".", "_"))["r1"].features.feature
        assert list(r1["color"].bytes_list.value) == [b"red"]  # no stray \r


def test_schema_check_reports_and_fails_listing_every_violation(tmp_path):
    lines = [f"r{i},{'' if i % 2 else i},{i},,{i % 2},x\n".encode() for i in range(40)]
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(lines))
    check = ef.SchemaCheck(max_missing_fraction=0.3, allow_unseen_columns=False)
    pipeline = make_pipeline("data.csv", schema_check=check)
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    message = str(err.value)
    assert "column 'x' is missing in 50.00% of rows" in message
    assert "column 'color' is missing in 100.00% of rows" in message
    assert "['extra']" in message and "allow_unseen_columns=False" in message
    summary = ingest.run(make_pipeline("data.csv"), tmp_path / "ok", source_root=tmp_path)
    report = summary["schema"]
    assert report["columns"]["x"]["missing_fraction"] == 0.5
    assert report["unseen_columns"] == ["extra"] and report["violations"] == []


# --- CSV blocks: any block size gives the same records, lines and reasons ----------------------

TRICKY = (b'id,v,w\n'
          b'"a,1",1,x\n'                    # 2: a quoted delimiter
          b'"b\nstill b",2,y\n'             # 3-4: a quoted newline
          b'c,"say ""hi""",z\r\n'           # 5: escaped quotes, CRLF
          b'\n'                             # 6: blank
          b'd,4\n'                          # 7: 2 fields
          b'e,5,caf\xe9\n'                  # 8: not UTF-8
          b'f,6,w\n')                       # 9
TRICKY_EXPECTED = [(2, ["a,1", "1", "x"]), (3, ["b\nstill b", "2", "y"]),
                   (5, ["c", 'say "hi"', "z"]), (7, "wrong_field_count"),
                   (8, "invalid_utf8"), (9, ["f", "6", "w"])]


def _parse_all(data: bytes, block_bytes: int) -> tuple[list, int]:
    layout = csv_parse.CsvLayout(3, {"id": 0, "v": 1, "w": 2})
    blocks = csv_blocks.read_blocks(io.BytesIO(data), "t.csv",
                                    csv_blocks.CsvRules(multiline=True), block_bytes=block_bytes)
    assert next(blocks).fields == ["id", "v", "w"]
    found, blank = [], 0
    for block in blocks:
        rows = csv_parse.parse_block(block, layout)
        blank += rows.blank_lines
        cells = {n: c.to_pylist() for n, c in rows.columns.items()}
        for k, record in enumerate(rows.records):
            found.append((int(rows.lines[record]), [cells[n][k] for n in ("id", "v", "w")]))
        found += [(int(rows.lines[i]), kind) for i, kind, _ in rows.rejected]
    return sorted(found, key=lambda item: item[0]), blank


@pytest.mark.parametrize("block_bytes", [1, 7, 16, 33, 1 << 20])
def test_any_block_size_gives_the_same_records_and_lines(block_bytes):
    assert _parse_all(TRICKY, block_bytes) == (TRICKY_EXPECTED, 1)


def test_a_stray_quote_takes_the_exact_path_and_loses_no_row():
    # A quote inside an unquoted field is a literal for csv; its record fails the vectorised
    # quoting check and is cut and parsed by the exact parser.
    data = b'id,v,w\nab"c,1,x\nd,2,y\ne,3\n'
    found, _ = _parse_all(data, 1 << 20)
    assert found == [(2, ['ab"c', "1", "x"]), (3, ["d", "2", "y"]), (4, "wrong_field_count")]
