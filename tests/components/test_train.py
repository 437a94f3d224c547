"""The train step end to end on a real tf.Transform output: CLI, train.json, the SavedModel's
signatures, and no training/serving skew (the export, loaded in a fresh process, scores raw
tf.Examples exactly like the engine scores the same rows transformed in-process)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import estflow.dsl as ef
from estflow.components.train import __main__ as train
from estflow.dsl.contracts import Files
from estflow.estimator import Estimator
from estflow.estimator import EstimatorSpec
from estflow.estimator import ModeKeys
from tests.components import _train_fixtures as fx


@pytest.fixture(scope="session")
def transformed_dir(tmp_path_factory):
    """A real tf.Transform output in the transform step's layout (built once per session)."""
    return fx.transformed(tmp_path_factory)

ROOT = Path(__file__).resolve().parents[2]


def _env():
    """The step's environment as a user's shell gives it: without the TF_USE_LEGACY_KERAS=1
    that tensorflow_transform sets in this test process when imported."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


def _example(row: dict, with_label: bool) -> bytes:
    """A raw tf.Example as ingest writes it: absent optional cells are absent features."""
    feature = {}
    for name, value in row.items():
        if name == "label" and not with_label:
            continue
        if isinstance(value, str):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif isinstance(value, int):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def trained(transformed_dir, tmp_path_factory):
    """The CLI run: ``python -m estflow.components.train`` in a subprocess."""
    out = tmp_path_factory.mktemp("model")
    spec = out.parent / "pipeline.json"
    spec.write_text(fx.pipeline().to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "estflow.components.train", "--spec", str(spec),
         "--transformed", str(transformed_dir), "--model", str(out)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def test_cli_writes_checkpoints_export_and_train_json(trained):
    out, stdout = trained
    result = json.loads((out / Files.TRAIN_RESULT).read_text())
    assert result["global_step"] == 60
    assert result["final_loss"] > 0 and result["examples"] == 60 * 16
    assert result["examples_per_sec"] > 0 and result["train_seconds"] > 0
    assert result["export_dir"] == Files.EXPORT  # relative to the model artifact
    assert result["checkpoint"] == f"{Files.CHECKPOINTS}/model.ckpt-60"
    assert (out / Files.EXPORT / "saved_model.pb").exists()
    # the process leaves without the interpreter's teardown (entry.exit_after): its TensorBoard
    # events are complete all the same, training's and the final evaluation's
    from estflow.estimator._engine.reporting import read_scalars
    train_events = read_scalars([str(p) for p in (out / Files.CHECKPOINTS).glob("events*")])
    eval_events = read_scalars([str(p) for p in
                                (out / Files.CHECKPOINTS / "eval").glob("events*")])
    assert max(train_events) == 60 and "loss" in train_events[60], sorted(train_events)
    assert max(eval_events) == 60 and "loss" in eval_events[60], sorted(eval_events)
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging leftovers
    assert "[train" in stdout and "step 60, loss" in stdout and "examples/s" in stdout


def test_export_signatures_and_method_names(trained):
    from tensorflow.core.protobuf import saved_model_pb2

    out, _ = trained
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((out / Files.EXPORT / "saved_model.pb").read_bytes())
    sigs = proto.meta_graphs[0].signature_def
    assert set(sigs) - {"__saved_model_init_op"} == {"serving_default", "transform_features",
                                                     "classify", "predict_raw"}
    assert set(sigs["serving_default"].inputs) == {"examples"}
    raw = sigs["predict_raw"]
    assert {name: (t.dtype, [d.size for d in t.tensor_shape.dim]) for name, t in
            raw.inputs.items()} == {"x": (tf.float32.as_datatype_enum, [-1]),
                                    "z": (tf.float32.as_datatype_enum, [-1]),
                                    "color": (tf.string.as_datatype_enum, [-1])}
    assert set(raw.outputs) == set(sigs["serving_default"].outputs)
    assert raw.method_name == "tensorflow/serving/predict"
    assert set(sigs["serving_default"].outputs) == {"logits", "logistic", "probabilities",
                                                    "class_ids"}
    assert set(sigs["transform_features"].outputs) == {"x", "z", "color", "label", "target"}
    assert set(sigs["classify"].inputs) == {"inputs"}
    assert set(sigs["classify"].outputs) == {"classes", "scores"}
    assert sigs["classify"].method_name == "tensorflow/serving/classify"
    assert sigs["serving_default"].method_name == "tensorflow/serving/predict"
    names = [n for n, _ in tf.train.list_variables(str(out / Files.EXPORT / "variables" /
                                                       "variables"))]
    assert not [n for n in names if "optimizer" in n]  # serving carries no optimizer state


_SERVE_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf
    export, examples, with_label, out = sys.argv[1:]
    model = tf.saved_model.load(export)
    raw = tf.constant(np.load(examples, allow_pickle=True))
    raw_labelled = tf.constant(np.load(with_label, allow_pickle=True))
    served = model.signatures["serving_default"](examples=raw)
    classified = model.signatures["classify"](inputs=raw)
    transformed = model.signatures["transform_features"](examples=raw_labelled)
    np.savez(out, **{f"serve_{k}": v.numpy() for k, v in served.items()},
             **{f"classify_{k}": v.numpy() for k, v in classified.items()},
             **{f"transform_{k}": v.numpy() for k, v in transformed.items()})
""")


def test_no_skew_between_export_in_a_fresh_process_and_engine_predict(trained, transformed_dir,
                                                                       tmp_path):
    out, _ = trained
    rows = fx.make_rows(60, seed=7)  # unseen rows; some lack optional z/color
    np.save(tmp_path / "raw.npy", np.array([_example(r, False) for r in rows], dtype=object))
    np.save(tmp_path / "labelled.npy", np.array([_example(r, True) for r in rows], dtype=object))
    script = tmp_path / "serve.py"
    script.write_text(_SERVE_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(out / Files.EXPORT),
                           str(tmp_path / "raw.npy"), str(tmp_path / "labelled.npy"),
                           str(tmp_path / "served.npz")],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = np.load(tmp_path / "served.npz", allow_pickle=True)  # our own file

    expected = _engine_predictions(out, transformed_dir, rows)
    for key in ("logits", "logistic", "probabilities"):
        np.testing.assert_allclose(served[f"serve_{key}"], expected[key], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(served["serve_class_ids"], expected["class_ids"])
    np.testing.assert_allclose(served["classify_scores"], expected["probabilities"], rtol=1e-5)
    assert served["classify_classes"].tolist() == [[b"0", b"1"]] * len(rows)
    np.testing.assert_array_equal(served["transform_label"], [r["label"] for r in rows])


def _engine_predictions(out: Path, transformed: Path, rows: list[dict]) -> dict:
    """The engine's own predict on the rows transformed in-process with tf.Transform."""
    import tensorflow_transform as tft

    tft_output = tft.TFTransformOutput(str(transformed / Files.TRANSFORM_FN))
    parsed = tf.io.parse_example([_example(r, True) for r in rows],
                                 tft_output.raw_feature_spec())
    features = dict(tft_output.transform_raw_features(parsed))
    features.pop("label")
    pipeline = fx.pipeline()
    model_fn, params = train.model_fn_of(pipeline.model, fx.cardinalities(transformed))
    est = Estimator(model_fn, str(out / Files.CHECKPOINTS), pipeline.run_config, params,
                    progress=lambda m: None)
    batches = est.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(16),
                          yield_single_examples=False)
    return _concat(list(batches))


def _concat(batches: list[dict]) -> dict:
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_export_without_raw_metadata_uses_the_declared_raw_spec(trained, transformed_dir,
                                                                tmp_path):
    """The transform step may not write tft's raw ``metadata/``; the serving spec then comes
    from the declarations (the spec the transform step parsed with)."""
    import shutil

    import tensorflow_transform as tft

    out, _ = trained
    bare = tmp_path / "transform_fn"
    shutil.copytree(transformed_dir / Files.TRANSFORM_FN, bare,
                    ignore=shutil.ignore_patterns("metadata"))
    pipeline = fx.pipeline()
    model_fn, params = train.model_fn_of(pipeline.model, fx.cardinalities(transformed_dir))
    est = Estimator(model_fn, str(out / Files.CHECKPOINTS), pipeline.run_config, params,
                    progress=lambda m: None)
    export = train.export_serving_model(est, tft.TFTransformOutput(str(bare)), pipeline,
                                        tmp_path / "export")
    rows = fx.make_rows(4, seed=5)
    served = tf.saved_model.load(str(export)).signatures["serving_default"](
        examples=tf.constant([_example(r, False) for r in rows]))
    reference = tf.saved_model.load(str(out / Files.EXPORT)).signatures["serving_default"](
        examples=tf.constant([_example(r, False) for r in rows]))
    np.testing.assert_allclose(served["logits"], reference["logits"], rtol=1e-6)


def test_export_writes_the_raw_feature_types_serve_reads(trained):
    """What makes ``"x": 3`` (a JSON integer for a float column) a float feature when served."""
    out, _ = trained
    doc = json.loads((out / Files.EXPORT / "assets.extra" / "estflow_raw_features.json")
                     .read_text())
    assert [{k: c[k] for k in ("name", "dtype", "required")} for c in doc["columns"]] == [
        {"name": "color", "dtype": "string", "required": False},
        {"name": "target", "dtype": "float", "required": False},
        {"name": "x", "dtype": "float", "required": True},
        {"name": "z", "dtype": "float", "required": False}]
    # and how ingest read each CSV cell, for batch scoring to read rows the same way
    from estflow.dsl.sources import NA_VALUES
    columns = {c["name"]: c for c in doc["columns"]}
    assert columns["color"]["na_values"] == [""] and columns["color"]["default"] == ""
    assert columns["z"]["na_values"] == list(NA_VALUES) and columns["z"]["default"] == 0.0
    assert "default" not in columns["x"]  # required: a row without it is rejected


def test_the_served_export_takes_json_features_and_raw_instances(trained, tmp_path):
    """Over HTTP, as a TF Serving client: :classify with JSON features (whole numbers for float
    columns included), :predict on ``predict_raw`` with raw feature instances; both equal the
    in-process signatures on the same rows as tf.Examples."""
    from estflow.components.serve import __main__ as serve
    from tests.components._serving_fixtures import http_request

    out, _ = trained
    shutil.copytree(out / Files.EXPORT, tmp_path / "models" / "clf" / "1")
    rows = [{"x": 3, "z": 0.5, "color": "red"}, {"x": -1.25, "z": 2, "color": "blue"},
            {"x": 0, "z": 0.0, "color": ""}]
    as_floats = [{"x": float(r["x"]), "z": float(r["z"]), "color": r["color"]} for r in rows]
    model = tf.saved_model.load(str(out / Files.EXPORT))
    examples = tf.constant([_example(r, False) for r in as_floats])
    expected = model.signatures["serving_default"](examples=examples)
    scores = model.signatures["classify"](inputs=examples)["scores"].numpy()
    with serve.serve(tmp_path / "models", poll_seconds=0) as running:
        def post(verb, body):
            return http_request(running.host, running.port, "POST", f"/v1/models/clf:{verb}",
                                body)

        status, payload = post("classify", {"examples": rows})
        assert status == 200, payload
        np.testing.assert_allclose([[s for _, s in r] for r in payload["results"]], scores,
                                   rtol=1e-6)
        status, payload = post("predict", {"signature_name": "predict_raw", "instances": rows})
        assert status == 200, payload
        np.testing.assert_allclose([p["probabilities"] for p in payload["predictions"]],
                                   expected["probabilities"].numpy(), rtol=1e-5, atol=1e-6)
        status, payload = post("predict", {"signature_name": "predict_raw", "inputs": {
            name: [r[name] for r in rows] for name in ("x", "z", "color")}})
        assert status == 200, payload
        np.testing.assert_allclose(payload["outputs"]["logits"], expected["logits"].numpy(),
                                   rtol=1e-5, atol=1e-6)
        status, payload = post("classify", {"examples": [{"x": 1.0, "colour": "red"}]})
        assert status == 400
        assert payload["error"] == ("examples[0] feature 'colour' is not a feature of model "
                                    "'clf' version 1; known features: color, target, x, z")
        status, payload = post("predict", {"signature_name": "predict_raw",
                                           "instances": [{"x": 1.0, "z": 0.0}]})
        assert status == 400 and "color" in payload["error"]


def test_rerun_resumes_and_replaces_the_export(trained, transformed_dir):
    out, _ = trained
    pipeline = fx.pipeline(train=ef.TrainSpec(max_steps=80, batch_size=16, shuffle_buffer=64))
    lines = []
    result = train.run(pipeline, transformed_dir, out, progress=lines.append)
    assert "training from global step 60 to 80" in lines
    assert result["global_step"] == 80 and result["examples"] == 20 * 16
    assert tf.saved_model.load(str(out / Files.EXPORT)).signatures["serving_default"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_regressor_exports_regress_signature(transformed_dir, tmp_path):
    pipeline = fx.pipeline(
        model=ef.DNNRegressor((8,), ("x", "z", ef.Indicator("color"))),
        label=ef.Label("target", dtype="float"),
        columns=(ef.Column("label", "int"),))
    result = train.run(pipeline, transformed_dir, tmp_path, progress=lambda m: None)
    model = tf.saved_model.load(result["export_dir"])
    assert set(model.signatures) == {"serving_default", "transform_features", "regress",
                                     "predict_raw"}
    rows = fx.make_rows(5, seed=3)
    raw = tf.constant([_example(r, True) for r in rows])
    regressed = model.signatures["regress"](inputs=raw)["outputs"].numpy()
    served = model.signatures["serving_default"](examples=raw)["predictions"].numpy()
    assert regressed.shape == (5,)
    np.testing.assert_allclose(regressed, served.reshape(-1))


def custom_model_fn(features, labels, mode, params):
    """A CustomModel for the train step (resolved by reference from the spec)."""
    import keras

    net = tf.stack([features["x"], features["z"]], axis=1)
    logits = keras.layers.Dense(1, name="out")(net)
    predictions = {"logistic": tf.sigmoid(logits), "probabilities": tf.concat(
        [1 - tf.sigmoid(logits), tf.sigmoid(logits)], axis=1)}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    labels = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = keras.optimizers.SGD(params["lr"]) if mode == ModeKeys.TRAIN else None
    return EstimatorSpec(mode, loss=loss, predictions=predictions, optimizer=optimizer)


def test_custom_model_trains_with_params_and_exports(transformed_dir, tmp_path):
    pipeline = fx.pipeline(model=ef.CustomModel(custom_model_fn, params={"lr": 0.5}))
    result = train.run(pipeline, transformed_dir, tmp_path, progress=lambda m: None)
    assert result["global_step"] == 60 and result["model"] == "CustomModel"
    model = tf.saved_model.load(result["export_dir"])
    assert {"serving_default", "transform_features", "classify"} <= set(model.signatures)


def test_missing_transform_output_is_a_clear_cli_error(tmp_path):
    spec = tmp_path / "p.json"
    spec.write_text(fx.pipeline().to_json())
    assert train.main(["--spec", str(spec), "--transformed", str(tmp_path / "nope"),
                       "--model", str(tmp_path / "m")]) == 1


def _custom_without_logistic(features, labels, mode, params):
    """A binary CustomModel's model_fn that forgets the head's scored output in PREDICT."""
    from estflow.dsl.model_fn import EstimatorSpec

    logits = tf.reduce_sum(tf.stack([tf.cast(v, tf.float32) for v in features.values()], 1), 1)
    loss = None if mode == "infer" else tf.reduce_mean(logits)
    return EstimatorSpec(mode=mode, predictions={"logits": logits}, loss=loss)


def test_a_custom_model_without_the_heads_output_is_refused_by_name():
    """The train step wraps a CustomModel's model_fn with the DSL's head output contract: in
    PREDICT (what export and evaluate use) a missing key is named, with the keys received."""
    import estflow.dsl as ef

    model = ef.CustomModel(_custom_without_logistic, head="binary")
    model_fn, _ = train.model_fn_of(model, {})
    with pytest.raises(ef.DslError, match="logistic") as err:
        model_fn({"x": tf.constant([1.0])}, None, ef.ModeKeys.PREDICT, {})
    assert "logits" in str(err.value)
    spec = model_fn({"x": tf.constant([1.0])}, tf.constant([1.0]), ef.ModeKeys.EVAL, {})
    assert spec.predictions["logits"].shape == (1,)


@pytest.mark.parametrize("start", ["plain", "prestarted"])
def test_the_train_step_keeps_the_users_keras(start):
    """tensorflow_transform, which the step imports, would make tf.keras Keras 2 in the step
    only; the step keeps Keras 3 (what a user's process has), also when a prestarted process
    ran only the module's imports (components/_runtime/prestart.py)."""
    load = ("from estflow.components._runtime.prestart import preimport; "
            "preimport('estflow.components.train')" if start == "prestarted"
            else "import estflow.components.train.__main__")
    code = f"{load}; import tensorflow as tf; print(tf.keras.__name__)"
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1].startswith("keras."), out.stdout


def test_the_input_pipeline_runs_without_tfdatas_tuning_model(transformed_dir):
    """Its tuning thread slowed the taxi training and, joined when the iterator went, held
    the step for seconds (``_without_autotune``); every batch and label still comes."""
    dataset = fx.input_fn(transformed_dir, Files.TRANSFORMED_EVAL, "label", repeat=False)()
    assert dataset.options().autotune.enabled is False
    counted = sum(int(labels.shape[0]) for _, labels in dataset)
    assert counted == json.loads((transformed_dir / Files.TRANSFORM_STATS).read_text())[
        "rows"]["eval"]
