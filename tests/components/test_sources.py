"""Sources besides CSV, through the real ingest step: Parquet and TFRecord files with typed
values (nulls, wrong kinds, several values, corrupt records), BigQuery's clear offline
failure; and the cell conversion rules every source shares."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components._sources import bigquery_reader
from estflow.components._sources import cells as _cells
from estflow.components.ingest import step as ingest
from estflow.dsl.contracts import Files
from tests.components.test_ingest import by_id


def make_pipeline(source) -> ef.Pipeline:
    return ef.Pipeline(
        name="sources-test",
        source=source,
        columns=(ef.Column("id", "string"),),
        features=(ef.Numeric("x", default=0.0), ef.Numeric("n", dtype="int"),
                  ef.CategoricalVocab("color", default="")),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x", "n")),
        train=ef.TrainSpec(max_steps=1),
    )


def rejected(out: Path) -> dict[int, dict]:
    lines = (out / Files.REJECTED).read_text().splitlines()
    return {r["line"]: r for r in map(json.loads, lines)}


# --- Parquet -----------------------------------------------------------------------------------

PARQUET_ROWS = {
    "id": ["p1", "p2", "p3", "p4", "p5", "p6"],
    "x": [1.5, None, 2.0, float("nan"), 3.0, 4.0],         # null: default; nan: rejected
    "n": [3.0, 4.0, 5.5, 1.0, None, 2.0],                   # float column read as int: 5.5 bad
    "color": ["red", None, "blue", "blue", "red", "green"],
    "label": [1, 0, 1, 0, 1, 0],
    "unused": [0, 0, 0, 0, 0, 0],
}


def test_parquet_rows_typed_checked_and_rejected_with_row_numbers(tmp_path):
    pq.write_table(pa.table(PARQUET_ROWS), tmp_path / "data.parquet")
    pipeline = make_pipeline(ef.ParquetSource("*.parquet", max_rejected_fraction=0.6))
    summary = ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    assert (summary["read"], summary["rejected"]) == (6, 3)
    bad = rejected(tmp_path / "out")
    assert set(bad) == {3, 4, 5}  # 1-based row numbers in the file
    assert "'n': expected an integer, got 5.5" in bad[3]["reason"]
    assert "'x': expected a finite float, got nan" in bad[4]["reason"]
    assert "missing required column 'n'" in bad[5]["reason"]
    assert json.loads(bad[3]["row"])["id"] == "p3"
    rows = by_id(tmp_path / "out")
    assert set(rows) == {"p1", "p2", "p6"}
    p2 = rows["p2"].features.feature
    assert "x" not in p2 and "color" not in p2  # nulls with defaults stay absent
    assert list(p2["n"].int64_list.value) == [4]
    assert summary["schema"]["unseen_columns"] == ["unused"]


def test_parquet_column_of_an_unusable_type_fails_before_the_job(tmp_path):
    table = pa.table({**{k: v for k, v in PARQUET_ROWS.items() if k != "n"},
                      "n": pa.array([[1]] * 6)})
    pq.write_table(table, tmp_path / "data.parquet")
    with pytest.raises(ingest.IngestError, match=r"column 'n' of .*data.parquet has Parquet "
                       r"type list<.*int64>.*'int'"):
        ingest.run(make_pipeline(ef.ParquetSource("data.parquet")), tmp_path / "out",
                   source_root=tmp_path)


# --- TFRecord of tf.Example --------------------------------------------------------------------

def _example(**features) -> bytes:
    example = tf.train.Example()
    for name, values in features.items():
        feature = example.features.feature[name]
        kind = {bytes: "bytes_list", float: "float_list", int: "int64_list"}[type(values[0])]
        getattr(feature, kind).value.extend(values)
    return example.SerializeToString()


def test_tfrecord_examples_checked_record_by_record(tmp_path):
    records = [
        _example(id=[b"t1"], x=[1.5], n=[3], color=[b"red"], label=[1]),
        _example(id=[b"t2"], n=[4], label=[0]),                           # x, color absent
        _example(id=[b"t3"], x=[1.0, 2.0], n=[5], label=[1]),               # x: two values
        _example(id=[b"t4"], x=[1.0], n=[2.5], label=[1]),                  # n: a float_list
        b"\x00\x01 not a proto",                                            # not an Example
        _example(id=[b"t6"], x=[2.0], n=[6], label=[0], extra=[b"e"]),
    ]
    with tf.io.TFRecordWriter(str(tmp_path / "data.tfrecord.gz"), "GZIP") as writer:
        for record in records:
            writer.write(record)
    pipeline = make_pipeline(ef.TFRecordSource("data.tfrecord.gz", max_rejected_fraction=0.6))
    summary = ingest.run(pipeline, tmp_path / "out", source_root=tmp_path)
    assert (summary["read"], summary["rejected"]) == (6, 3)
    bad = rejected(tmp_path / "out")
    assert set(bad) == {3, 4, 5}  # 1-based record numbers
    assert "feature 'x' has 2 values; expected one" in bad[3]["reason"]
    assert "'n': expected an integer, got 2.5" in bad[4]["reason"]
    assert "not a serialized tf.train.Example" in bad[5]["reason"]
    rows = by_id(tmp_path / "out")
    assert set(rows) == {"t1", "t2", "t6"}
    assert "x" not in rows["t2"].features.feature
    assert summary["schema"]["unseen_columns"] == ["extra"]


# --- BigQuery ----------------------------------------------------------------------------------

def test_bigquery_source_fails_clearly_where_it_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    pipeline = make_pipeline(ef.BigQuerySource(table="proj-123:trips.raw"))
    with pytest.raises(ingest.IngestError) as err:
        ingest.run(pipeline, tmp_path / "out")
    message = str(err.value)
    assert "table 'proj-123:trips.raw'" in message and "credentials" in message
    assert "ParquetSource" in message  # what to do instead


def test_bigquery_rows_are_validated_like_any_typed_rows():
    pipeline = make_pipeline(ef.BigQuerySource(query="SELECT * FROM t"))
    rows = [{"id": "b1", "x": 1.5, "n": 3, "color": "red", "label": 1, "more": 0},
            {"id": "b2", "x": None, "n": None, "color": None, "label": 0}]
    chunk = bigquery_reader.rows_chunk(rows, pipeline)
    assert chunk.batch.num_rows == 1
    [line] = chunk.rejected
    record = json.loads(line)
    assert record["line"] is None and "missing required column 'n'" in record["reason"]
    assert json.loads(record["row"])["id"] == "b2"
    assert chunk.stats["unseen_columns"] == ["more"]


# --- the conversion rules ----------------------------------------------------------------------

def _convert(dtype: str, cells, default=None):
    result = _cells.convert(ef.Column("c", dtype, default), cells)
    return result.values.to_pylist(), list(result.missing), list(result.bad)


def test_text_cells_follow_python_rules_even_in_the_vectorised_path():
    cells = pa.array(["1.5", " 2 ", "", "  ", "nan", "1e39", "+3", "1_000", "abc"])
    values, missing, bad = _convert("float", cells)
    assert values[:2] == [1.5, 2.0] and values[6:8] == [3.0, 1000.0]
    assert missing == [False, False, True, True, False, False, False, False, False]
    assert bad == [False, False, False, False, True, True, False, False, True]  # 1e39: inf in f32
    ints = pa.array(["3", "3.0", "1e3", "3.5", "+4", "9223372036854775807", "9223372036854775808"])
    values, _, bad = _convert("int", ints)
    assert values[:3] == [3, 3, 1000] and values[4:6] == [4, 2**63 - 1]
    assert bad == [False, False, False, True, False, False, True]


def test_typed_cells_convert_only_exactly():
    values, missing, bad = _convert("int", pa.array([1.0, 2.5, None, math.inf]))
    assert values == [1, None, None, None] and missing[2] and bad == [False, True, False, True]
    values, _, bad = _convert("float", pa.array(np.array([1, 2**40], dtype=np.int64)))
    assert values == [1.0, float(np.float32(2**40))] and not any(bad)
    values, _, _ = _convert("string", pa.array([7, None]))
    assert values == [b"7", None]
    with pytest.raises(_cells.CellTypeError, match="holds double values.*'string'"):
        _cells.convert(ef.Column("c", "string"), pa.array([1.5]))


def test_an_unreachable_remote_path_is_a_clear_error(tmp_path, monkeypatch):
    # s3:// goes through Beam's filesystem. An ingest step's process lists its source before
    # any Beam pipeline gave the filesystems options, so with no S3 client configured the
    # listing fails at once. Earlier tests in this process ran Beam pipelines, which left
    # options behind (the filesystems' and the runtime value providers'); Beam's S3 listing
    # would then retry against AWS for minutes.
    from apache_beam.io.filesystems import FileSystems  # noqa: PLC0415
    from apache_beam.options.value_provider import RuntimeValueProvider  # noqa: PLC0415

    monkeypatch.setattr(FileSystems, "_pipeline_options", None)
    monkeypatch.setattr(RuntimeValueProvider, "runtime_options", None)
    pipeline = make_pipeline(ef.CsvSource("s3://bucket/trips/*.csv"))
    with pytest.raises(ingest.IngestError, match=r"cannot list source.path='s3://bucket/"):
        ingest.run(pipeline, tmp_path / "out")
