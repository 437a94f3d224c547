"""CsvSource's reading options through the ingest step: missing-value tokens (per source, per
column) and the split, which must not move a row when the declarations change."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components._sources import split
from estflow.components.ingest import step as ingest
from estflow.dsl import serialization
from estflow.dsl.contracts import Files
from tests.components.test_ingest import HEADER
from tests.components.test_ingest import by_id
from tests.components.test_ingest import make_pipeline
from tests.components.test_ingest import read_split
from tests.components.test_sources import _example

# --- declarations ---------------------------------------------------------------------------


def test_csv_options_round_trip_and_normalise():
    source = ef.CsvSource("d.csv", na_values=["", "-"], column_na_values={"c": ["", "NA"]},
                          multiline_values=True, max_row_lines=5, max_row_bytes=4096)
    assert source.na_values == ("", "-") and source.column_na_values == {"c": ("", "NA")}
    assert serialization.from_json(serialization.to_json(source)) == source
    assert "NA" in ef.CsvSource("d.csv").na_values
    assert ef.CsvSource("d.csv").string_na_values == ("",)


@pytest.mark.parametrize("options, field, words", [
    ({"na_values": "NA"}, "na_values", "tuple of str"),
    ({"string_na_values": (1,)}, "string_na_values[0]", "str"),
    ({"column_na_values": {"bad name": ("",)}}, "column_na_values", "identifier"),
    ({"column_na_values": {"c": "NA"}}, "column_na_values['c']", "tuple of str"),
    ({"multiline_values": 1}, "multiline_values", "True or False"),
    ({"max_row_lines": 0}, "max_row_lines", "positive integer"),
    ({"max_row_lines": 5}, "max_row_lines", "multiline_values=True"),
    ({"max_row_bytes": 0}, "max_row_bytes", "positive integer"),
    ({"delimiter": "§"}, "delimiter", "ASCII"),
])
def test_csv_options_are_checked_naming_the_field(options, field, words):
    with pytest.raises(ef.DslError) as err:
        ef.CsvSource("d.csv", **options)
    assert err.value.path == field and words in str(err.value)


# --- missing-value tokens --------------------------------------------------------------------

NA_ROWS = (b"r1,NA,3,NA,1,e\n"          # x: missing (default); color: the category "NA"
           b"r2,1.0,N/A,red,1,e\n"       # n: missing and required
           b"r3,null,4,,0,e\n"           # x missing; color "" missing (default)
           b"r4,NaN,5,blue,0,e\n"        # x missing
           b"r5,-,6,unknown,1,e\n")      # x: "-" is not a token by default: bad value


def _rejected(out) -> dict[int, dict]:
    lines = (out / Files.REJECTED).read_text().splitlines()
    return {r["line"]: r for r in map(json.loads, lines)}


def test_na_tokens_are_missing_in_numeric_columns_and_strings_keep_na_as_a_category(tmp_path):
    (tmp_path / "data.csv").write_bytes(HEADER + NA_ROWS)
    summary = ingest.run(make_pipeline("data.csv", max_rejected_fraction=0.5),
                         tmp_path / "out", source_root=tmp_path)
    bad = _rejected(tmp_path / "out")
    assert set(bad) == {3, 6}
    assert "missing required column 'n'" in bad[3]["reason"]
    assert "'x': expected a finite float, got '-'" in bad[6]["reason"]
    rows = by_id(tmp_path / "out")
    assert "x" not in rows["r1"].features.feature  # missing: the transform fills the default
    assert list(rows["r1"].features.feature["color"].bytes_list.value) == [b"NA"]
    assert "x" not in rows["r3"].features.feature and "color" not in rows["r3"].features.feature
    assert "x" not in rows["r4"].features.feature
    assert summary["missing_by_column"]["x"] == 3


def test_na_tokens_are_declared_per_source_and_overridden_per_column(tmp_path):
    (tmp_path / "data.csv").write_bytes(HEADER + NA_ROWS)
    pipeline = make_pipeline("data.csv", na_values=("", "-", "N/A"), max_rejected_fraction=0.8,
                             column_na_values={"color": ("", "NA", "unknown")})
    ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    bad = _rejected(tmp_path / "out")
    assert set(bad) == {2, 3, 4, 5}
    assert "'x': expected a finite float, got 'NA'" in bad[2]["reason"]
    assert "missing required column 'n'" in bad[3]["reason"]
    assert "'x': expected a finite float, got 'NaN'" in bad[5]["reason"]
    r5 = by_id(tmp_path / "out")["r5"].features.feature
    assert "x" not in r5 and "color" not in r5  # "-" and "unknown" are missing here


def test_column_na_values_must_name_a_raw_column(tmp_path):
    (tmp_path / "data.csv").write_bytes(HEADER + NA_ROWS)
    pipeline = make_pipeline("data.csv", column_na_values={"colour": ("NA",)})
    with pytest.raises(ingest.IngestError, match=r"column_na_values names 'colour'.*'color'"):
        ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)


# --- the split does not move when the declarations change -------------------------------------

def test_the_row_hash_is_the_documented_polynomial_of_the_bytes_alone():
    def expected(text: bytes) -> int:
        return sum((b + 1) * pow(0x01000193, j, 1 << 32) for j, b in enumerate(text)) % (1 << 32)

    data = b"r1,0.5,1,c1,1,x\n\x00\xff,\"q\"\nr1,0.5,1,c1,1,x"
    arr = np.frombuffer(data, np.uint8)
    third = data.rindex(b"r1")
    starts, ends = np.array([0, 16, third, 3]), np.array([15, 23, len(data), 3])
    hashes = split.text_hashes(arr, starts, ends).tolist()
    assert hashes == [expected(data[s:e]) for s, e in zip(starts, ends, strict=True)]
    assert hashes[0] == hashes[2]  # the same bytes anywhere: the same hash


def _split_of_each_id(out) -> dict[bytes, str]:
    return {ex.features.feature["id"].bytes_list.value[0]: split
            for split in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES)
            for ex in read_split(out, split)}


def _variants(pipeline: ef.Pipeline) -> list[ef.Pipeline]:
    more = dataclasses.replace(pipeline, columns=(*pipeline.columns,
                                                  ef.Column("extra", "string", default="")))
    fewer = dataclasses.replace(pipeline, features=tuple(
        f for f in pipeline.features if f.name != "color"))
    return [pipeline, more, fewer]


def test_declaring_or_dropping_a_column_moves_no_csv_row_between_splits(tmp_path):
    lines = [f"r{i},{i * 0.25},{i},c{i % 7},{i % 2},x{i}\n".encode() for i in range(600)]
    (tmp_path / "data.csv").write_bytes(HEADER + b"".join(lines))
    splits = []
    for k, pipeline in enumerate(_variants(make_pipeline("data.csv"))):
        ingest.run(pipeline, tmp_path / f"out{k}", source_root=tmp_path)
        splits.append(_split_of_each_id(tmp_path / f"out{k}"))
    assert len(splits[0]) == 600 and splits[0] == splits[1] == splits[2]
    assert 80 <= sum(s == "eval" for s in splits[0].values()) <= 160


def test_a_crlf_copy_of_a_file_splits_its_rows_the_same_way(tmp_path):
    lines = [f"r{i},{i * 0.25},{i},c{i % 7},{i % 2},x{i}\n".encode() for i in range(300)]
    (tmp_path / "lf.csv").write_bytes(HEADER + b"".join(lines))
    (tmp_path / "crlf.csv").write_bytes((HEADER + b"".join(lines)).replace(b"\n", b"\r\n"))
    for name in ("lf", "crlf"):
        ingest.run(make_pipeline(f"{name}.csv"), tmp_path / name, source_root=tmp_path)
    assert _split_of_each_id(tmp_path / "lf") == _split_of_each_id(tmp_path / "crlf")


def test_declaring_or_dropping_a_column_moves_no_tfrecord_row_between_splits(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "data.tfrecord")) as writer:
        for i in range(400):
            writer.write(_example(id=[f"t{i}".encode()], x=[i * 0.5], n=[i], label=[i % 2],
                                  color=[f"c{i % 3}".encode()], extra=[b"e"]))
    base = dataclasses.replace(make_pipeline("unused.csv"),
                               source=ef.TFRecordSource("data.tfrecord"))
    splits = []
    for k, pipeline in enumerate(_variants(base)):
        ingest.run(pipeline, tmp_path / f"out{k}", source_root=tmp_path)
        splits.append(_split_of_each_id(tmp_path / f"out{k}"))
    assert len(splits[0]) == 400 and splits[0] == splits[1] == splits[2]
