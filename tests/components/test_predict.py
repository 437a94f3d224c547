"""Batch prediction (``estflow.components.predict``) on the in-memory runner, with real models.

The central check: a row scored in batch gets exactly what the REST server (``estflow serve``)
answers for it, ``:predict`` and ``:classify``, byte for byte in the JSONL text. Then the
ingest validation and line accounting it shares, the other formats, the model references,
the keys, and the output directory replaced as a whole (a failed or killed job publishes
nothing that looks finished).
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components._sources.csv_source import ReadCsv
from estflow.components._sources.registry import READERS
from estflow.components.predict import step as predict
from estflow.components.predict import text
from estflow.components.predict.schema import ScoringSchema
from estflow.components.predict.sinks import STALE_SECONDS
from estflow.components.serve import __main__ as serve
from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from tests.components import _serving_fixtures as fx

REPO = Path(__file__).resolve().parents[2]
HEADER = "trip_id,fare,trip_seconds,payment_type,company\n"
# Rows the model must score, with the gaps and oddities real exports have.
GOOD = ["t1,12.5,300,Cash,A", "t2,,60,Credit Card,B", 't4,3,,"Mo,bile",D',
        't5,1e-7,99999,Cash,"say ""hi"""', "t6,7.25,10,é unicode,E", "t8,0,0,,F",
        "t9,-3.5,12,Cash,G", "t10,1e30,1,Cash,H", ",5,5,Cash,I"]
BAD = {"t3,abc,1,Cash,C": "bad_value:fare", "t7,1,2,Cash": "wrong_field_count",
       "t11,1,2.5,Cash,J": "bad_value:trip_seconds"}


def _csv(path: Path, rows: list[str], blank: bool = True) -> Path:
    lines = [HEADER] + [r + "\n" for r in rows]
    if blank:
        lines.insert(3, "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("models")
    fx.write_versions(base / "taxi", (1, 2))
    return base


def _pipeline(model: str | Path, source, **options) -> ef.Pipeline:
    return ef.Pipeline(name="scoring", predict=ef.BatchPredict(
        model=str(model), source=source, **options))


def _run(model, source, out: Path, **options) -> dict:
    return predict.run(_pipeline(model, source, **options), str(out))


def _lines(out: Path, suffix: str = ".jsonl") -> list[str]:
    return [line for f in sorted(out.glob(f"predictions-*{suffix}"))
            for line in f.read_text(encoding="utf-8").splitlines()]


def _cell(text: str) -> list[str]:
    """A CSV row's cells as the client would send them (quotes removed)."""
    return next(csv.reader([text]))


def _typed(row: list[str]) -> dict:
    """A data row as a client would send it to the server: typed values, missing left out."""
    _, fare, seconds, payment, _ = row
    values = {"fare": float(fare) if fare else None,
              "trip_seconds": int(seconds) if seconds else None,
              "payment_type": payment or None}
    return {k: v for k, v in values.items() if v is not None}


def _served(base: Path, rows: list[dict], verb: str, batch: int = 64) -> list:
    """The server's answers for ``rows``, sent ``batch`` rows per request."""
    answers = []
    with serve.serve(base, poll_seconds=0) as server:
        for start in range(0, len(rows), batch):
            part = rows[start:start + batch]
            if verb == "predict":
                body = {"instances": [{"b64": base64.b64encode(
                    fx.serialize_example(**r)).decode()} for r in part]}
            else:
                body = {"examples": part}
            status, payload = fx.http_request(server.host, server.port, "POST",
                                              f"/v1/models/taxi:{verb}", body)
            assert status == 200, payload
            answers += payload["predictions" if verb == "predict" else "results"]
    return answers


# --- the same answers as the REST server ---------------------------------------------------------

@pytest.mark.parametrize("batch", [4, 64])
def test_each_row_gets_what_the_servers_predict_answers_byte_for_byte(models, tmp_path, batch):
    """Sent in the same batches, the server's answers and the JSONL lines are the same text.

    (TensorFlow's vectorised kernels, e.g. sigmoid, compute a value in a full SIMD packet and
    in a batch's tail differently in the last bit: the server's own answer for a row depends on
    the request it comes in, so "the same" is for the same batches; across batchings the
    values agree to the last bits of a float32, checked below.)"""
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD + list(BAD))),
                          max_rejected_fraction=0.5)
    _run(models / "taxi", source, tmp_path / "out", keys=("trip_id",), batch_size=batch)

    lines = _lines(tmp_path / "out")
    rows = [_cell(r) for r in GOOD]
    served = _served(models, [_typed(r) for r in rows], "predict", batch)
    assert len(lines) == len(GOOD) == len(served)
    for line, row, answer in zip(lines, rows, served, strict=True):
        expected = {"trip_id": row[0] or None, **answer}
        assert line == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    one_by_one = _served(models, [_typed(r) for r in rows], "predict", 1)
    for line, answer in zip(lines, one_by_one, strict=True):
        for name, value in answer.items():
            np.testing.assert_allclose(json.loads(line)[name], value, rtol=1e-6, atol=1e-7)


def test_classify_outputs_are_the_servers_classify_results(models, tmp_path):
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD)))
    _run(models / "taxi", source, tmp_path / "out", keys=("trip_id",), signature="classify")

    results = _served(models, [_typed(_cell(r)) for r in GOOD], "classify")
    lines = [json.loads(line) for line in _lines(tmp_path / "out")]
    assert [[[c, s] for c, s in zip(line["classes"], line["scores"], strict=True)]
            for line in lines] == results
    assert list(lines[0]) == ["trip_id", "classes", "scores"]


def test_many_chunks_and_files_score_as_one_batch_would(models, tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for f in range(2):  # > 4 MB each: several read blocks (chunks) per file
        fares = rng.normal(20, 10, 60_000).round(2)
        rows = [f"f{f}r{i},{fare},{i % 900},{('Cash', 'Card', '')[i % 3]},{'x' * 40}"
                for i, fare in enumerate(fares.tolist())]
        paths.append(_csv(tmp_path / f"part{f}.csv", rows, blank=False))
    summary = _run(models / "taxi", ef.CsvSource(str(tmp_path / "part*.csv")), tmp_path / "out",
                   keys=("trip_id",), format="parquet", batch_size=1000)

    table = pq.read_table(sorted((tmp_path / "out").glob("predictions-*.parquet")))
    assert summary["scored"] == table.num_rows == 120_000
    model = tf.saved_model.load(str(models / "taxi" / "2"))
    order = {key: i for i, key in enumerate(table.column("trip_id").to_pylist())}
    sample = [f"f{f}r{i}" for f in range(2) for i in (0, 777, 59_999)]
    cells = {r.split(",")[0]: r.split(",") for p in paths
             for r in p.read_text().splitlines()[1:]}
    examples = [fx.serialize_example(**_typed(cells[k])) for k in sample]
    expected = model.signatures["serving_default"](examples=tf.constant(examples))
    got = table.take(pa.array([order[k] for k in sample]))
    np.testing.assert_allclose(np.stack(got.column("probabilities").to_pylist()),
                               expected["probabilities"].numpy(), rtol=1e-6)  # see above
    assert summary["lines"] == {"read": 120_002, "header": 2, "kept": 120_000, "rejected": 0,
                                "blank": 0}


@pytest.mark.parametrize("scale", [1e-9, 1e-6, 1e-4, 1e-2, 1, 1e4, 1e9, 1e10, 1e15, 1e16, 1e30])
def test_numbers_are_written_as_python_writes_them(scale):
    """Arrow writes numbers' digits vectorised; the notation must still be json.dumps's (and
    repr's, for CSV) at every magnitude, integral values and non-finite ones included."""
    values = (np.random.default_rng(0).normal(size=2000) * scale).astype(np.float32)
    values[::5] = np.round(values[::5])
    values[:3] = (np.nan, np.inf, -0.0)
    assert text.json_values(values).to_pylist() == [json.dumps(v) for v in values.tolist()]
    assert text.csv_values(values).to_pylist() == [repr(v) for v in values.tolist()]


# --- validation and line accounting: ingest's ------------------------------------------------------

def test_bad_rows_are_rejected_with_reasons_and_every_line_is_accounted_for(models, tmp_path):
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD + list(BAD))),
                          max_rejected_fraction=0.5)
    summary = _run(models / "taxi", source, tmp_path / "out")

    out = tmp_path / "out"
    rejected = [json.loads(line) for line in (out / Files.REJECTED).read_text().splitlines()]
    assert sorted(r["row"] for r in rejected) == sorted(BAD)
    assert all(r["file"] == source.path and r["line"] > 1 for r in rejected)
    assert summary["rejected_by_reason"] == {reason: 1 for reason in BAD.values()}
    assert summary["lines"] == {"read": len(GOOD) + len(BAD) + 2, "header": 1,
                                "kept": len(GOOD), "rejected": len(BAD), "blank": 1}
    assert summary["scored"] == len(GOOD) and summary["rejected"] == len(BAD)
    assert json.loads((out / Files.PREDICT_RESULT).read_text())["scored"] == len(GOOD)
    assert summary["schema"]["unseen_columns"] == ["company", "trip_id"]


def test_the_csv_reader_gives_ingests_chunks_without_the_split_hashes(models, tmp_path):
    """Batch prediction reads through ingest's reader lookup with one cost left out (the
    split's row hashes): their chunks must agree."""
    path = _csv(tmp_path / "in.csv", GOOD + list(BAD) + ['t12,1,1,"open', "t13,2,2,Cash,K"])
    source = ef.CsvSource(str(path), multiline_values=True, max_row_lines=3)
    columns = (ef.Column("fare", "float", 0.0), ef.Column("trip_seconds", "int", 0),
               ef.Column("payment_type", "string", ""), ef.Column("trip_id", "string", ""))
    schema = ScoringSchema(source, columns)
    reader = READERS[ef.CsvSource]
    ours = list(reader.files(schema, [str(path)], 64, False).process(str(path)))
    theirs = list(ReadCsv(schema, 64).process(str(path)))
    assert len(ours) == len(theirs) > 2
    for a, b in zip(ours, theirs, strict=True):
        assert a.batch.equals(b.batch) and a.rejected == b.rejected and a.stats == b.stats
        assert a.hashes is None


def test_too_many_rejected_rows_fail_and_publish_only_the_rejected_rows(models, tmp_path):
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD[:2] + list(BAD))))
    out = tmp_path / "out"
    with pytest.raises(predict.PredictError, match="max_rejected_fraction"):
        _run(models / "taxi", source, out)
    assert sorted(p.name for p in out.iterdir()) == [Files.REJECTED]
    assert len((out / Files.REJECTED).read_text().splitlines()) == len(BAD)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_unreadable_source_fails_naming_the_file_and_leaves_nothing(models, tmp_path):
    data = gzip.compress(("".join([HEADER] + [r + "\n" for r in GOOD * 500])).encode())
    (tmp_path / "in.csv.gz").write_bytes(data[:len(data) // 2])  # truncated
    with pytest.raises(predict.PredictError, match="in.csv.gz"):
        _run(models / "taxi", ef.CsvSource(str(tmp_path / "in.csv.gz")), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_required_feature_missing_rejects_the_row_rather_than_the_batch(tmp_path):
    model = fx.save_version(tmp_path / "m" / "1", 1)
    raw = json.loads((model / "assets.extra" / "estflow_raw_features.json").read_text())
    raw["columns"][0]["required"] = True  # fare
    (model / "assets.extra" / "estflow_raw_features.json").write_text(json.dumps(raw))
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD)), max_rejected_fraction=0.5)
    summary = _run(tmp_path / "m", source, tmp_path / "out")
    assert summary["rejected_by_reason"] == {"missing_required:fare": 1}
    assert summary["scored"] == len(GOOD) - 1


# --- formats ------------------------------------------------------------------------------------

@pytest.mark.parametrize("format", ["csv", "parquet", "tfrecord"])
def test_every_format_holds_the_jsonl_values(models, tmp_path, format):
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD)))
    _run(models / "taxi", source, tmp_path / "jsonl", keys=("trip_id", "company"))
    _run(models / "taxi", source, tmp_path / format, keys=("trip_id", "company"), format=format)

    expected = [json.loads(line) for line in _lines(tmp_path / "jsonl")]
    rows = _read_format(tmp_path / format, format)
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        assert got["trip_id"] == want["trip_id"] and got["company"] == want["company"]
        for name in ("probabilities", "logits", "class_ids"):
            assert got[name] == want[name], name


def _read_format(out: Path, format: str) -> list[dict]:
    files = sorted(out.glob("predictions-*"))
    if format == "parquet":
        return pq.read_table(files).to_pylist()
    if format == "csv":
        rows = list(csv.DictReader(files[0].read_text(encoding="utf-8").splitlines()))
        return [{"trip_id": r["trip_id"] or None, "company": r["company"] or None,
                 "probabilities": [float(r["probabilities_0"]), float(r["probabilities_1"])],
                 "logits": [float(r["logits"])], "class_ids": [int(r["class_ids"])]}
                for r in rows]
    rows = []
    for record in tf.data.TFRecordDataset([str(f) for f in files], compression_type="GZIP"):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        text = [v.decode() for v in feature["trip_id"].bytes_list.value]
        company = [v.decode() for v in feature["company"].bytes_list.value]
        rows.append({"trip_id": text[0] if text else None,
                     "company": company[0] if company else None,
                     "probabilities": [float(np.float32(v)) for v in
                                       feature["probabilities"].float_list.value],
                     "logits": [float(v) for v in feature["logits"].float_list.value],
                     "class_ids": list(feature["class_ids"].int64_list.value)})
    return rows


def test_parquet_and_tfrecord_sources_with_typed_keys(models, tmp_path):
    table = pa.table({"trip_id": pa.array([11, 12, None], pa.int64()),
                      "fare": pa.array([1.5, None, 3.0], pa.float64()),
                      "trip_seconds": pa.array([5, 6, 7], pa.int64()),
                      "payment_type": pa.array(["Cash", "Card", None])})
    pq.write_table(table, tmp_path / "in.parquet")
    _run(models / "taxi", ef.ParquetSource(str(tmp_path / "in.parquet")), tmp_path / "pq",
         keys=("trip_id",))
    lines = [json.loads(line) for line in _lines(tmp_path / "pq")]
    assert [line["trip_id"] for line in lines] == [11, 12, None]  # ints stay ints

    with tf.io.TFRecordWriter(str(tmp_path / "in.tfrecord")) as writer:
        for fare, seconds, payment in ((1.5, 5, "Cash"), (None, 6, "Card"), (3.0, 7, None)):
            writer.write(fx.serialize_example(fare, seconds, payment))
    _run(models / "taxi", ef.TFRecordSource(str(tmp_path / "in.tfrecord")), tmp_path / "tf")
    assert [json.loads(line)["probabilities"] for line in _lines(tmp_path / "tf")] == \
        [line["probabilities"] for line in lines]


# --- the model, the keys, the signature ----------------------------------------------------------

def test_model_references_resolve_to_the_same_saved_model(models, tmp_path):
    from estflow.components.predict.model import ModelError
    from estflow.components.predict.model import resolve_model

    assert resolve_model(str(models / "taxi")).version == 2  # the latest version
    assert resolve_model(str(models / "taxi" / "1")).path == str(models / "taxi" / "1")
    run = tmp_path / "run"
    fx.save_version(run / "train" / "model" / "export", 1)
    assert resolve_model(str(run)).path == str(run / "train" / "model" / "export")
    assert resolve_model(str(run / "train" / "model")).version is None
    (tmp_path / "empty" / "3").mkdir(parents=True)  # a version being pushed: no saved_model.pb
    with pytest.raises(ModelError, match="none holds a saved_model.pb"):
        resolve_model(str(tmp_path / "empty"))
    with pytest.raises(ModelError, match="no model at"):
        resolve_model(str(tmp_path / "nothing"))


@pytest.mark.parametrize("options, message", [
    ({"keys": ("trip_ident",)}, "'trip_ident' .*is not in the header"),
    ({"keys": ("logits",)}, "name of an output"),
    ({"signature": "predict_nothing"}, "no signature 'predict_nothing'"),
    ({"signature": "regress", "format": "csv", "keys": ("company",)}, None),
])
def test_problems_are_reported_before_the_job_runs(models, tmp_path, options, message):
    path = _csv(tmp_path / "in.csv", GOOD)
    if "logits" in options.get("keys", ()):
        path.write_text(path.read_text().replace("company", "logits"))
    if message is None:  # the regress signature's one output, as CSV
        _run(models / "taxi", ef.CsvSource(str(path)), tmp_path / "out", **options)
        header = (tmp_path / "out" / "predictions-00000-of-00001.csv").read_text().split("\n")[0]
        assert header == "company,outputs"
        return
    with pytest.raises(predict.PredictError, match=message):
        _run(models / "taxi", ef.CsvSource(str(path)), tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


# --- the output, replaced as a whole ---------------------------------------------------------------

def test_a_rerun_replaces_the_output_and_other_directories_are_refused(models, tmp_path):
    out = tmp_path / "out"
    _run(models / "taxi", ef.CsvSource(str(_csv(tmp_path / "a.csv", GOOD))), out,
         format="csv")
    _run(models / "taxi", ef.CsvSource(str(_csv(tmp_path / "b.csv", GOOD[:2]))), out)
    assert sorted(p.name for p in out.iterdir()) == [
        Files.PREDICT_RESULT, "predictions-00000-of-00001.jsonl", Files.REJECTED]
    assert len(_lines(out)) == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(predict.PredictError, match="holds files that are not predictions"):
        _run(models / "taxi", ef.CsvSource(str(tmp_path / "a.csv")), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_a_killed_job_leaves_the_previous_output_and_no_finished_looking_one(models, tmp_path):
    out = tmp_path / "out"
    small = _pipeline(models / "taxi", ef.CsvSource(str(_csv(tmp_path / "a.csv", GOOD))))
    predict.run(small, str(out))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    rows = [f"k{i},{i % 50}.5,{i % 900},Cash,{'y' * 60}" for i in range(400_000)]
    big = _pipeline(models / "taxi", ef.CsvSource(str(_csv(tmp_path / "big.csv", rows))))
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.components.predict", "--spec", big.to_json(),
         "--predictions", str(out)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    try:
        for line in process.stdout:
            if "scoring CsvSource" in line:  # the job starts now; it takes seconds
                break
        time.sleep(1.0)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=60)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-predict-")]
    assert len(leftovers) == 1 and not (leftovers[0] / Files.PREDICT_RESULT).exists()

    old = time.time() - STALE_SECONDS - 60
    os.utime(leftovers[0], (old, old))
    predict.run(small, str(out))  # the next run removes what the killed one left
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_an_output_of_its_own_gets_the_predictions_and_the_artifact_the_summary(models,
                                                                               tmp_path):
    pipeline = _pipeline(models / "taxi", ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD))),
                         output=str(tmp_path / "scores"))
    predict.run(pipeline, str(tmp_path / "artifact"))
    assert len(_lines(tmp_path / "scores")) == len(GOOD)
    summary = json.loads((tmp_path / "artifact" / Files.PREDICT_RESULT).read_text())
    assert summary["output"] == str(tmp_path / "scores") and summary["scored"] == len(GOOD)
    assert [p.name for p in (tmp_path / "artifact").iterdir()] == [Files.PREDICT_RESULT]


# --- after push ----------------------------------------------------------------------------------

def test_after_push_it_scores_the_pushed_version_or_skips(models, tmp_path):
    source = ef.CsvSource(str(_csv(tmp_path / "in.csv", GOOD)))
    pipeline = dataclasses.replace(taxi.pipeline, predict=ef.BatchPredict(source=source))
    pushed = tmp_path / "pushed"
    pushed.mkdir()
    (pushed / Files.PUSH_RESULT).write_text(json.dumps(
        {"pushed": True, "path": str(models / "taxi" / "1"), "version": 1}))
    summary = predict.run(pipeline, str(tmp_path / "p1"), pushed_dir=str(pushed))
    assert summary["model"]["version"] == 1 and summary["scored"] == len(GOOD)

    (pushed / Files.PUSH_RESULT).write_text(json.dumps(
        {"pushed": False, "model_name": "taxi", "reasons": ["auc 0.5 < 0.85"]}))
    summary = predict.run(pipeline, str(tmp_path / "p2"), pushed_dir=str(pushed))
    assert summary == {"skipped": True, "model_name": "taxi",
                       "reason": "the model was not pushed: auc 0.5 < 0.85"}
    assert [p.name for p in (tmp_path / "p2").iterdir()] == [Files.PREDICT_RESULT]


# --- a real export: the train step's, served and scored ---------------------------------------------

@pytest.mark.slow
def test_a_trained_exports_predict_and_classify_equal_the_servers(tmp_path_factory, tmp_path):
    """The train step's own export (tf.Transform graph, required and optional raw features):
    batch answers equal the server's, and a row without a required feature is rejected."""
    from estflow.components.train import __main__ as train
    from tests.components import _train_fixtures as trainfx

    transformed = trainfx.transformed(tmp_path_factory)
    result = train.run(trainfx.pipeline(), transformed, tmp_path / "model",
                       progress=lambda m: None)
    version = tmp_path / "served" / "clf" / "1"
    version.parent.mkdir(parents=True)
    Path(result["export_dir"]).rename(version)
    rows = trainfx.make_rows(40, seed=5)
    lines = ["id,x,z,color,target"] + [
        f"r{i},{r['x']},{r.get('z', '')},{r.get('color', '')},{r['target']}"
        for i, r in enumerate(rows)] + ["missing_x,,1.0,red,0.5"]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n")
    source = ef.CsvSource(str(tmp_path / "in.csv"), max_rejected_fraction=0.1)

    for signature, verb in (("serving_default", "predict"), ("classify", "classify")):
        out = tmp_path / signature
        summary = _run(version.parent, source, out, keys=("id",), signature=signature,
                       batch_size=16)
        assert summary["rejected_by_reason"] == {"missing_required:x": 1}
        typed = [{k: float(v) if k in ("x", "z", "target") else v
                  for k, v in r.items() if k != "label"} for r in rows]
        with serve.serve(tmp_path / "served", poll_seconds=0) as server:
            answers = []
            for start in range(0, len(typed), 16):  # the batches the job scored
                part = typed[start:start + 16]
                body = ({"examples": part} if verb == "classify" else {"instances": [
                    {"b64": base64.b64encode(_example(r)).decode()} for r in part]})
                status, payload = fx.http_request(server.host, server.port, "POST",
                                                  f"/v1/models/clf:{verb}", body)
                assert status == 200, payload
                answers += payload["results" if verb == "classify" else "predictions"]
        got = [json.loads(line) for line in _lines(out)]
        assert [g.pop("id") for g in got] == [f"r{i}" for i in range(len(rows))]
        if verb == "classify":
            got = [[[c, s] for c, s in zip(g["classes"], g["scores"], strict=True)] for g in got]
        assert got == answers


def _example(row: dict) -> bytes:
    feature = {name: tf.train.Feature(float_list=tf.train.FloatList(value=[row[name]]))
               for name in ("x", "z", "target") if name in row}
    if "color" in row:
        feature["color"] = tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[row["color"].encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
