"""A new source kind is one declaration, one reader module and one row in the source lookup:
ingest, batch prediction and the fingerprint step read it with no other code change.

The kind, JSON lines, is estflow's nowhere: declared in ``tests/components/jsonl_source.py``
(a ``Source`` subclass), read by ``tests/components/jsonl_reader.py``, and registered below
with one row. Real Beam (the in-memory runner), a real SavedModel, a few rows."""

from __future__ import annotations

import json
from pathlib import Path

import tensorflow as tf

import estflow.dsl as ef
from estflow.components import fingerprint
from estflow.components._sources import registry
from estflow.components._sources.registry import Reader
from estflow.components.ingest import __main__ as ingest_main
from estflow.components.ingest import step as ingest
from estflow.components.predict import step as predict
from estflow.dsl.contracts import Files
from estflow.pipelines import data_check
from tests.components import _serving_fixtures as fx
from tests.components import jsonl_reader
from tests.components.jsonl_source import JsonLinesSource

# The one row.
registry.register(JsonLinesSource, Reader("JSON lines", "*.jsonl", check=jsonl_reader.check,
                                          files=jsonl_reader.read_file))

ROWS = ['{"id": "r1", "x": 1.5, "n": 3, "color": "red", "label": 1, "extra": "a"}',
        '{"id": "r2", "n": 4, "label": 0}',                       # x, color: their defaults
        '{"id": "r3", "x": "abc", "n": 5, "color": "blue", "label": 1}',  # text in a float
        'not json',                                                # not an object
        '{"id": "r4", "x": 2, "n": 7, "color": "green", "label": 0}']


def _training(source) -> ef.Pipeline:
    return ef.Pipeline(
        name="jsonl-kind", source=source, columns=(ef.Column("id", "string"),),
        features=(ef.Numeric("x", default=0.0), ef.Numeric("n", dtype="int"),
                  ef.CategoricalVocab("color", default="")),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x", "n")),
        train=ef.TrainSpec(max_steps=1))


def _examples(folder: Path) -> dict[str, tf.train.Example]:
    files = sorted(str(p) for split in (Files.TRAIN_EXAMPLES, Files.EVAL_EXAMPLES)
                   for p in (folder / split).iterdir())
    examples = [tf.train.Example.FromString(r.numpy())
                for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    return {e.features.feature["id"].bytes_list.value[0].decode(): e for e in examples}


def test_ingest_reads_the_new_kind_from_its_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("data.jsonl").write_text("\n".join(ROWS) + "\n")
    pipeline = _training(JsonLinesSource("data.jsonl", max_rejected_fraction=0.5))

    assert ingest_main.main(["--spec", pipeline.to_json(), "--examples", "examples"]) == 0

    examples = _examples(Path("examples"))
    assert set(examples) == {"r1", "r2", "r4"}
    assert examples["r1"].features.feature["x"].float_list.value == [1.5]
    assert examples["r4"].features.feature["n"].int64_list.value == [7]
    rejected = [json.loads(line) for line in
                (Path("examples") / Files.REJECTED).read_text().splitlines()]
    assert [(r["line"], r["row"]) for r in rejected] == [(3, ROWS[2]), (4, ROWS[3])]
    assert "'x'" in rejected[0]["reason"] and "JSON object" in rejected[1]["reason"]
    summary = json.loads((Path("examples") / Files.INGEST_STATS).read_text())
    assert summary["read"] == 5 and summary["rejected"] == 2
    assert summary["schema"]["unseen_columns"] == ["extra"]


def test_a_file_the_new_kind_cannot_read_fails_its_driver_side_check(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("data.jsonl").write_text("id,x\n")
    pipeline = _training(JsonLinesSource("data.jsonl"))
    try:
        ingest.run(pipeline, "examples")
    except ingest.IngestError as err:
        assert "expected a JSON object on line 1" in str(err)
    else:
        raise AssertionError("ingest read a file that is not JSON lines")


def test_batch_prediction_scores_the_new_kind_as_it_scores_csv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fx.write_versions(Path("models/taxi"), (1,))
    trips = [("t1", 12.5, 300, "Cash"), ("t2", None, 60, "Credit Card"), ("t3", 3.0, 7, None)]
    Path("in.jsonl").write_text("".join(json.dumps(
        {"trip_id": t, "fare": f, "trip_seconds": s, "payment_type": p}) + "\n"
        for t, f, s, p in trips))
    Path("in.csv").write_text("trip_id,fare,trip_seconds,payment_type\n" + "".join(
        f"{t},{'' if f is None else f},{s},{p or ''}\n" for t, f, s, p in trips))

    scored = {}
    for name, source in (("jsonl", JsonLinesSource("in.jsonl")), ("csv", ef.CsvSource("in.csv"))):
        predict.run(ef.Pipeline(name="scoring", predict=ef.BatchPredict(
            model="models/taxi", source=source, keys=("trip_id",))), name)
        scored[name] = [json.loads(line) for f in sorted(Path(name).glob("predictions-*.jsonl"))
                        for line in f.read_text().splitlines()]

    assert [line["trip_id"] for line in scored["jsonl"]] == ["t1", "t2", "t3"]
    assert scored["jsonl"] == scored["csv"]


def test_the_fingerprint_step_fingerprints_the_new_kind_by_content(tmp_path):
    (tmp_path / "a.jsonl").write_text(ROWS[0] + "\n")
    pipeline = _training(JsonLinesSource("*.jsonl"))

    first = fingerprint.gather(pipeline, str(tmp_path), []).source

    assert first["kind"] == "JsonLinesSource" and first["by_content"]
    assert [Path(o["path"]).name for o in first["objects"]] == ["a.jsonl"]
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "a.jsonl").write_text(ROWS[0] + "\n")
    assert fingerprint.gather(pipeline, str(tmp_path / "copy"), []).source["digest"] == \
        first["digest"]  # what the data is, not where
    (tmp_path / "a.jsonl").write_text(ROWS[1] + "\n")
    assert fingerprint.gather(pipeline, str(tmp_path), []).source["digest"] != first["digest"]


def test_the_local_header_check_leaves_a_kind_without_a_header_to_its_reader(tmp_path):
    (tmp_path / "data.jsonl").write_text("\n".join(ROWS) + "\n")
    assert data_check.header_errors(_training(JsonLinesSource("data.jsonl")),
                                    str(tmp_path)) == []
