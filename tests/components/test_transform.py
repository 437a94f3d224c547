"""The transform step on a few hand-made rows whose analyzer results are known by hand.

The full step runs once, as the local runner runs it (``python -m`` in a subprocess: Beam +
tf.Transform may crash at interpreter exit, which must not take pytest down). The graph helpers
that need no analyzer are checked eagerly in-process.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

import estflow.dsl as ef
from estflow.components._io.raw_features import raw_feature_spec
from estflow.components.transform import preprocessing_fn
from estflow.components.transform import step as transform
from estflow.dsl.contracts import Files
from tests.components import fixtures_derive

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = ef.Pipeline(
    name="transform-test",
    source=ef.CsvSource("unused.csv"),
    columns=(ef.Column("w", "float", default=1.0),),
    features=(
        ef.Numeric("rid", dtype="int"),  # row id: outputs come back in any order
        ef.Numeric("x", default=0.0, normalize="z_score"),
        ef.Numeric("x_log", source="x", default=0.0, normalize="log"),
        ef.Numeric("n", dtype="int", normalize="min_max"),
        ef.Bucketized("n_bucket", source="n", dtype="int", boundaries=(2, 5)),
        ef.Bucketized("x_q", source="x", num_buckets=2, default=0.0),
        ef.CategoricalVocab("color", default="unknown", num_oov_buckets=2),
        ef.CategoricalVocab("size", dtype="int", default=0),
        ef.CategoricalHash("city", hash_buckets=10, default=""),
        ef.CategoricalIdentity("hour", num_buckets=24, default=0),
        ef.Crossed("color_x_hour", keys=("color", "hour"), hash_buckets=50),
    ),
    derive=ef.Derive(fixtures_derive.label_from_x, outputs=(ef.Column("label", "int"),)),
    label=ef.Label("label"),
    model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x",), weight_column="w"),
    train=ef.TrainSpec(max_steps=1),
)
# None = absent from the raw Example (a missing cell with a default, as ingest writes it).
COLUMNS = ("rid", "x", "n", "color", "size", "city", "hour", "w")
TRAIN = [
    (0, 1.0, 1, "red", 3, "a", 5, 2.0),
    (1, 2.0, 2, "red", 3, "b", 30, None),
    (2, 3.0, 4, "red", 7, "c", -1, None),
    (3, 4.0, 5, "blue", None, "a", None, 0.5),
    (4, None, 6, "blue", 3, None, 23, None),
    (5, 5.0, 9, None, 7, "b", 0, None),
]
EVAL = [
    (6, 2.5, 10, "green", 9, "a", 12, None),
    (7, None, 1, "red", None, None, None, None),
]
X_MEAN = 2.5  # train x with the default filled in: 1, 2, 3, 4, 0, 5
X_STD = math.sqrt(sum((v - X_MEAN) ** 2 for v in (1, 2, 3, 4, 0, 5)) / 6)  # population std


def to_example(row) -> bytes:
    example = tf.train.Example()
    for name, value in zip(COLUMNS, row, strict=True):
        if value is None:
            continue
        feature = example.features.feature[name]
        if isinstance(value, str):
            feature.bytes_list.value.append(value.encode())
        elif name in ("x", "w"):
            feature.float_list.value.append(value)
        else:
            feature.int64_list.value.append(value)
    return example.SerializeToString()


def write_examples(directory: Path, rows) -> None:
    directory.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(directory / "part-00000.tfrecord.gz"), "GZIP") as writer:
        for row in rows:
            writer.write(to_example(row))


def read_transformed(out: Path, split: str) -> dict[int, dict]:
    spec = tft.TFTransformOutput(str(out / Files.TRANSFORM_FN)).transformed_feature_spec()
    files = sorted(str(p) for p in (out / split).iterdir())
    rows = {}
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        parsed = {k: v.numpy().item() for k, v in tf.io.parse_single_example(record, spec).items()}
        rows[int(parsed["rid"])] = parsed
    return rows


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transform")
    write_examples(tmp / "examples" / Files.TRAIN_EXAMPLES, TRAIN)
    write_examples(tmp / "examples" / Files.EVAL_EXAMPLES, EVAL)
    (tmp / "spec.json").write_text(PIPELINE.to_json())
    out = tmp / "transformed"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "estflow.components.transform", "--spec", str(tmp / "spec.json"),
         "--examples", str(tmp / "examples"), "--transformed", str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads((out / Files.TRANSFORM_STATS).read_text())
    return out, summary, read_transformed(out, Files.TRANSFORMED_TRAIN), \
        read_transformed(out, Files.TRANSFORMED_EVAL), proc.stdout


def test_layout_and_row_counts(transformed):
    out, summary, train, evals, stdout = transformed
    assert (out / Files.TRANSFORM_FN / "transform_fn" / "saved_model.pb").exists()
    assert summary["rows"] == {"train": 6, "eval": 2}
    assert sorted(train) == [0, 1, 2, 3, 4, 5] and sorted(evals) == [6, 7]
    assert "[transform" in stdout and "6 train and 2 eval" in stdout


def test_numeric_normalizations_use_train_statistics(transformed):
    _, _, train, evals, _ = transformed
    x = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 0.0, 5: 5.0, 6: 2.5, 7: 0.0}
    n = {0: 1, 1: 2, 2: 4, 3: 5, 4: 6, 5: 9, 6: 10, 7: 1}
    for rid, row in {**train, **evals}.items():
        assert row["x"] == pytest.approx((x[rid] - X_MEAN) / X_STD, abs=1e-5)
        assert row["x_log"] == pytest.approx(math.log1p(x[rid]), abs=1e-6)
        assert row["n"] == pytest.approx((n[rid] - 1) / 8, abs=1e-6)  # min 1, max 9 on train
    assert 0 <= min(r["x_q"] for r in train.values())
    assert max(r["x_q"] for r in train.values()) <= 1


def test_buckets_vocabularies_hashes_and_identity(transformed):
    _, _, train, evals, _ = transformed
    rows = {**train, **evals}
    assert [rows[i]["n_bucket"] for i in range(8)] == [0, 1, 1, 2, 2, 2, 2, 0]
    # Most frequent first: red (3), blue (2), unknown (1, the default of a missing cell).
    assert [rows[i]["color"] for i in (0, 3, 5, 7)] == [0, 1, 2, 0]
    assert rows[6]["color"] in (3, 4)  # "green" is unseen: one of the 2 OOV buckets
    # Int vocabulary: "3" x3, "7" x2, "0" (default) x1; 9 is unseen -> OOV id 3.
    assert [rows[i]["size"] for i in (0, 2, 3, 6)] == [0, 1, 2, 3]
    cities = {0: "a", 1: "b", 2: "c", 3: "a", 4: "", 5: "b", 6: "a", 7: ""}
    expected = tf.strings.to_hash_bucket_fast([cities[i] for i in range(8)], 10).numpy()
    assert [rows[i]["city"] for i in range(8)] == list(expected)
    assert [rows[i]["hour"] for i in range(8)] == [5, 24, 24, 0, 23, 0, 12, 0]
    joined = [f"{rows[i]['color']}_X_{rows[i]['hour']}" for i in range(8)]
    expected = tf.strings.to_hash_bucket_fast(joined, 50).numpy()
    assert [rows[i]["color_x_hour"] for i in range(8)] == list(expected)


def test_derived_label_and_weight(transformed):
    _, _, train, evals, _ = transformed
    rows = {**train, **evals}
    assert [rows[i]["label"] for i in range(8)] == [0, 0, 1, 1, 0, 1, 1, 0]
    assert [rows[i]["w"] for i in range(6)] == [2.0, 1.0, 1.0, 0.5, 1.0, 1.0]


def test_transform_json_contract(transformed):
    _, summary, _, _, _ = transformed
    assert summary["cardinalities"] == {
        "n_bucket": 3, "x_q": 2, "color": 5, "size": 4, "city": 10, "hour": 25,
        "color_x_hour": 50}
    assert summary["vocabulary_sizes"] == {"color": 3, "size": 3}
    assert summary["label"] == "label" and summary["weight_column"] == "w"
    assert summary["outputs"]["x"] == "float32" and summary["outputs"]["color"] == "int64"
    x = summary["statistics"]["raw_numeric"]["x"]
    assert x == {"count": 5, "missing": 1, "min": 1.0, "max": 5.0, "mean": 3.0}
    assert summary["statistics"]["label"]["label"]["mean"] == pytest.approx(0.5)


def test_serving_graph_fills_defaults_of_absent_features(transformed):
    out, _, _, _, _ = transformed
    output = tft.TFTransformOutput(str(out / Files.TRANSFORM_FN))
    raw = tf.io.parse_example([to_example((9, None, 3, None, None, None, None, None))],
                              raw_feature_spec(PIPELINE))
    result = output.transform_raw_features(raw)
    assert result["x"].numpy()[0] == pytest.approx((0.0 - X_MEAN) / X_STD, abs=1e-5)
    assert result["color"].numpy()[0] == 2  # "unknown"
    assert result["size"].numpy()[0] == 2  # "0"
    assert result["w"].numpy()[0] == 1.0


# --- graph helpers, eagerly, in-process ---------------------------------------------------------

def test_raw_feature_spec_varlen_for_defaults_fixedlen_for_required():
    spec = raw_feature_spec(PIPELINE)
    assert spec["x"] == tf.io.VarLenFeature(tf.float32)
    assert spec["n"] == tf.io.FixedLenFeature([], tf.int64)
    assert spec["color"] == tf.io.VarLenFeature(tf.string)
    assert "label" not in spec  # derived, not raw


def test_densify_fills_default():
    sparse = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=[1.5, 2.5], dense_shape=[3, 1])
    assert list(preprocessing_fn.densify(sparse, "float", -1.0).numpy()) == [1.5, -1.0, 2.5]


def test_derive_missing_output_is_a_clear_error():
    columns = {"x": tf.constant([1.0, 3.0])}
    outputs = (ef.Column("label", "int"),)
    with pytest.raises(ValueError, match=r"did not return declared output 'label'.*'lable'"):
        preprocessing_fn.derive_columns(fixtures_derive.forgets_label, outputs, columns)
    derived = preprocessing_fn.derive_columns(fixtures_derive.label_from_x, outputs, columns)
    assert derived["label"].dtype == tf.int64 and list(derived["label"].numpy()) == [0, 1]


def test_string_label_ids_and_identity_ids():
    ids = preprocessing_fn.label_ids(tf.constant(["b", "a", "zzz"]), ("a", "b"))
    assert list(ids.numpy()) == [1, 0, preprocessing_fn.UNKNOWN_LABEL]
    ids = preprocessing_fn.identity_ids(tf.constant([0, 3, 4, -2], tf.int64), 4)
    assert list(ids.numpy()) == [0, 3, 4, 4]


def test_missing_examples_is_an_error(tmp_path):
    with pytest.raises(transform.TransformError, match="no example shards"):
        transform.run(PIPELINE, tmp_path / "nothing", tmp_path / "out")


def test_taxi_example_ingest_and_transform(tmp_path):
    from estflow.components.ingest import step as ingest
    from estflow.pipelines.examples import taxi

    ingest.run(taxi.pipeline, tmp_path / "examples",
               source_root=ROOT / "pipelines" / "examples")
    (tmp_path / "spec.json").write_text(taxi.pipeline.to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "estflow.components.transform", "--spec",
         str(tmp_path / "spec.json"), "--examples", str(tmp_path / "examples"),
         "--transformed", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    summary = json.loads((tmp_path / "out" / Files.TRANSFORM_STATS).read_text())
    assert summary["rows"]["train"] + summary["rows"]["eval"] == 15002
    categorical = [f.name for f in taxi.pipeline.features if isinstance(f, ef.Crossed)
                   or not isinstance(f, ef.Numeric)]
    assert sorted(summary["cardinalities"]) == sorted(categorical)
    assert np.isclose(summary["statistics"]["label"]["big_tipper"]["mean"], 0.23, atol=0.05)


# --- the fused job (estflow preprocess): the same outputs as ingest, then transform ----------

def _csv_text(rows) -> str:
    lines = [",".join(COLUMNS)]
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    lines += ["8,abc,1,red,3,a,5,1.0", "9,1.0,,red,3,a,5,1.0", "10,1.0,2"]  # 3 bad rows
    return "\n".join(lines) + "\n"


def _run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def preprocessed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("preprocess")
    (tmp / "data.csv").write_text(_csv_text(TRAIN + EVAL))
    pipeline = dataclasses.replace(PIPELINE, source=ef.CsvSource("data.csv",
                                                                 max_rejected_fraction=0.3))
    (tmp / "spec.json").write_text(pipeline.to_json())
    proc = _run_module("estflow.components.preprocess", "--spec", str(tmp / "spec.json"),
                       "--examples", str(tmp / "examples"), "--transformed",
                       str(tmp / "transformed"), "--source-root", str(tmp))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return tmp, proc.stdout


def test_preprocess_writes_what_ingest_and_transform_write(preprocessed):
    tmp, stdout = preprocessed
    ingested = json.loads((tmp / "examples" / Files.INGEST_STATS).read_text())
    assert (ingested["read"], ingested["rejected"]) == (11, 3)
    assert len((tmp / "examples" / Files.REJECTED).read_text().splitlines()) == 3
    summary = json.loads((tmp / "transformed" / Files.TRANSFORM_STATS).read_text())
    assert summary["rows"] == {"train": ingested["train"], "eval": ingested["eval"]}
    assert sorted(summary["cardinalities"]) == sorted(
        ["n_bucket", "x_q", "color", "size", "city", "hour", "color_x_hour"])
    rows = {**read_transformed(tmp / "transformed", Files.TRANSFORMED_TRAIN),
            **read_transformed(tmp / "transformed", Files.TRANSFORMED_EVAL)}
    assert sorted(rows) == list(range(8))
    assert "[preprocess" in stdout and "rejected by reason" in stdout


def test_preprocess_equals_the_transform_step_on_its_examples(preprocessed, tmp_path):
    tmp, _ = preprocessed
    proc = _run_module("estflow.components.transform", "--spec", str(tmp / "spec.json"),
                       "--examples", str(tmp / "examples"), "--transformed", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-5000:]
    for split in (Files.TRANSFORMED_TRAIN, Files.TRANSFORMED_EVAL):
        assert read_transformed(tmp_path, split) == read_transformed(tmp / "transformed", split)


def test_preprocess_of_a_large_source_runs_two_jobs_with_the_same_outputs(preprocessed,
                                                                         tmp_path, monkeypatch,
                                                                         capsys):
    """Past FUSED_MAX_SOURCE_BYTES the step runs ingest's job then transform's (flat memory):
    the same rows, rejects and transformed Examples as the fused job, its lines still the
    preprocess step's (a runner echoes ``[preprocess ...`` lines)."""
    from estflow.components.preprocess import step as preprocess

    tmp, _ = preprocessed
    pipeline = ef.Pipeline.from_json((tmp / "spec.json").read_text())
    monkeypatch.setattr(preprocess, "FUSED_MAX_SOURCE_BYTES", 0)
    ingested, summary = preprocess.run(pipeline, str(tmp_path / "examples"),
                                       str(tmp_path / "transformed"), source_root=str(tmp))
    fused = json.loads((tmp / "examples" / Files.INGEST_STATS).read_text())
    assert {k: ingested[k] for k in ("read", "rejected", "train", "eval")} == \
        {k: fused[k] for k in ("read", "rejected", "train", "eval")}
    assert (tmp_path / "examples" / Files.REJECTED).read_text() == \
        (tmp / "examples" / Files.REJECTED).read_text()
    assert summary["rows"] == {"train": fused["train"], "eval": fused["eval"]}
    for split in (Files.TRANSFORMED_TRAIN, Files.TRANSFORMED_EVAL):
        assert read_transformed(tmp_path / "transformed", split) == \
            read_transformed(tmp / "transformed", split)
    lines = capsys.readouterr().out.splitlines()
    assert any("MiB of source: ingest, then transform" in line for line in lines)
    assert any(line.startswith("[preprocess") and "] ingest: " in line for line in lines)
    assert any(line.startswith("[preprocess") and "] transform: " in line for line in lines)
    assert not any(line.startswith(("[ingest", "[transform")) for line in lines)
