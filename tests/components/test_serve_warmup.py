"""SavedModel warm-up (``assets.extra/tf_serving_warmup_requests``, TF Serving's TFRecord of
PredictionLog): written from eval rows, read back with TF Serving's protos, replayed by
``estflow serve`` before the version is served."""

import logging
import shutil
import uuid
from pathlib import Path

import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2

from estflow.components import push
from estflow.components._io import raw_features
from estflow.components._io import warmup_rows
from estflow.components.evaluate import step as evaluate_step
from estflow.components.push import warmup as push_warmup
from estflow.components.serve import warmup
from estflow.components.serve.models import load_model
from estflow.dsl.contracts import Files
from tests.components import _eval_fixtures as efx
from tests.components import _serving_fixtures as fx

TESTDATA = Path(__file__).parent / "tfserving_testdata"
ROWS = [(7.25, 420, "Cash"), (31.0, 1800, "Credit Card"), (0.0, 0, ""), (12.5, 95, "Cash"),
        (3.0, 60, "Cash"), (9.0, 10, "Mobile")]


def read_logs(path):
    return [prediction_log_pb2.PredictionLog.FromString(r)
            for r in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]


def estimator_export(tmp_path):
    export = fx.save_estimator_style(tmp_path / "taxi" / "1", 1)
    (export / "assets.extra").mkdir(exist_ok=True)
    return export


def test_the_warmup_file_is_tf_servings_format(tmp_path):
    export = estimator_export(tmp_path)
    examples = [fx.serialize_example(*row) for row in ROWS]
    path = push_warmup.write_warmup(export, examples)
    assert path == export / "assets.extra" / "tf_serving_warmup_requests"
    logs = read_logs(path)
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log", "classify_log",
                                                            "regress_log"]
    predict = logs[0].predict_log.request
    assert predict.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(predict.inputs["examples"]).tolist() == examples[:push_warmup.MAX_ROWS]
    classify = logs[1].classify_log.request
    assert classify.model_spec.signature_name == "classification"
    # the same Examples (compared parsed: a map's serialized order is not fixed)
    assert list(classify.input.example_list.examples) == [
        tf.train.Example.FromString(e) for e in examples[:push_warmup.MAX_ROWS]]
    assert logs[2].regress_log.request.model_spec.signature_name == "regression"


def test_serve_replays_the_warmup_requests(tmp_path, caplog):
    export = estimator_export(tmp_path)
    push_warmup.write_warmup(export, [fx.serialize_example(*row) for row in ROWS])
    with caplog.at_level(logging.INFO, logger="estflow.serve"):
        model = load_model("taxi", 1, export)
    assert warmup.replay(model) == 3
    assert "taxi version 1: assets.extra/tf_serving_warmup_requests: replayed 3 warm-up " \
           "requests" in caplog.text


def test_a_malformed_warmup_file_is_a_warning_naming_it_not_a_failed_load(tmp_path, caplog):
    export = estimator_export(tmp_path)
    (export / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"not a tfrecord")
    with caplog.at_level(logging.WARNING, logger="estflow.serve"):
        model = load_model("taxi", 1, export)
    assert model.version == 1  # served all the same
    assert "taxi version 1: assets.extra/tf_serving_warmup_requests: record 0 cannot be " \
           "replayed" in caplog.text


def test_a_request_the_model_refuses_is_a_warning_naming_the_record(tmp_path, caplog):
    export = estimator_export(tmp_path)
    good = push_warmup.warmup_logs({}, [])  # no signatures: nothing to write
    assert good == []
    request = predict_pb2.PredictRequest()
    request.inputs["nope"].CopyFrom(tf.make_tensor_proto([1.0]))
    bad = prediction_log_pb2.PredictionLog(predict_log={"request": request})
    with tf.io.TFRecordWriter(str(export / push_warmup.WARMUP_FILE)) as writer:
        writer.write(bad.SerializeToString())
    with caplog.at_level(logging.WARNING, logger="estflow.serve"):
        load_model("taxi", 1, export)
    assert "record 0 cannot be replayed" in caplog.text and "nope" in caplog.text


def test_tf_serving_half_plus_two_warms_up_from_a_file_written_like_its_docs(tmp_path):
    """TF Serving's testdata has no warm-up file; this one is written as its
    saved_model_warmup.md shows (a PredictLog of x=[[1.0]])."""
    version = tmp_path / "default" / "123"
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu" / "00000123", version)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "default"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]], dtype=tf.float32))
    (version / "assets.extra").mkdir()
    with tf.io.TFRecordWriter(str(version / push_warmup.WARMUP_FILE)) as writer:
        for _ in range(4):
            writer.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())
    model = load_model("default", 123, version)
    assert warmup.replay(model) == 4


# --- the pipeline: evaluate keeps eval rows, push writes the version's warm-up file

EVAL_ROWS = efx.make_rows(40, seed=3)


def _evaluate(tmp_path, serving, types=None, **push_args):
    """The evaluate step on eval fixtures' rows and good model (with the raw feature types the
    train step writes, when ``types`` is given)."""
    efx.write_examples(tmp_path / "examples", EVAL_ROWS, shards=1)
    export = efx.good_model(tmp_path / "model" / "export")
    if types is not None:
        raw_features.write_types(export, types)
    pipeline = efx.pipeline(serving, **push_args)
    evaluate_step.run(pipeline, str(tmp_path / "examples"), str(tmp_path / "model"),
                      str(tmp_path / "evaluation"))
    return pipeline


def _features(example: bytes) -> dict:
    return {name: feature for name, feature in
            tf.train.Example.FromString(example).features.feature.items()}


def test_evaluate_keeps_the_first_eval_rows_as_a_client_sends_them(tmp_path):
    _evaluate(tmp_path, None)
    rows = warmup_rows.read_rows(tmp_path / "evaluation")
    assert len(rows) == warmup_rows.MAX_ROWS
    first = [_features(r) for r in tf.data.TFRecordDataset(
        sorted(str(p) for p in (tmp_path / "examples" / "eval").iterdir()),
        compression_type="GZIP").take(warmup_rows.MAX_ROWS).as_numpy_iterator()]
    for kept, row in zip(rows, first, strict=True):
        assert "big_tipper" in row
        assert _features(kept) == {k: v for k, v in row.items() if k != "big_tipper"}


def test_evaluate_keeps_only_the_features_the_export_parses(tmp_path):
    spec = {"fare": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
            "payment_type": tf.io.FixedLenFeature([1], tf.string, default_value=[""])}
    _evaluate(tmp_path, None, types=spec)
    rows = warmup_rows.read_rows(tmp_path / "evaluation")
    assert rows and all(set(_features(r)) <= {"fare", "payment_type"} for r in rows)
    assert any("payment_type" in _features(r) for r in rows)


def _warmup_rows_sent(version_dir) -> list[bytes]:
    (log,) = read_logs(version_dir / push_warmup.WARMUP_FILE)
    request = log.predict_log.request
    assert request.model_spec.signature_name == "serving_default"
    return tf.make_ndarray(request.inputs["examples"]).tolist()


def test_push_publishes_the_warmup_file_and_serve_replays_it(tmp_path, caplog):
    serving = tmp_path / "serving"
    pipeline = _evaluate(tmp_path, serving, kserve_manifest=True)
    lines = []
    result = push.run(pipeline, str(tmp_path / "model"), str(tmp_path / "evaluation"),
                      str(tmp_path / "pushed"), progress=lines.append)
    version = Path(result["path"])
    kept = warmup_rows.read_rows(tmp_path / "evaluation")
    assert _warmup_rows_sent(version) == kept
    # KServe's copy (what TF Serving loads there) carries it too
    served_copy = Path(result["kserve_storage_uri"]) / str(result["version"])
    assert _warmup_rows_sent(served_copy) == kept
    assert not (tmp_path / "model" / "export" / push_warmup.WARMUP_FILE).exists()  # untouched
    assert not any("warm-up" in line for line in lines)
    with caplog.at_level(logging.INFO, logger="estflow.serve"):
        load_model("taxi", result["version"], version)
    assert f"taxi version {result['version']}: assets.extra/tf_serving_warmup_requests: " \
           "replayed 1 warm-up requests" in caplog.text


def test_push_to_a_bucket_publishes_the_warmup_file(tmp_path):
    base = f"ram://warmup-{uuid.uuid4().hex[:8]}/models"
    pipeline = _evaluate(tmp_path, base)
    result = push.run(pipeline, str(tmp_path / "model"), str(tmp_path / "evaluation"),
                      str(tmp_path / "pushed"))
    local = tmp_path / "downloaded"
    (local / "assets.extra").mkdir(parents=True)
    tf.io.gfile.copy(f"{result['path']}/{push_warmup.WARMUP_FILE}",
                     str(local / push_warmup.WARMUP_FILE))
    assert _warmup_rows_sent(local) == warmup_rows.read_rows(tmp_path / "evaluation")


def test_an_evaluation_without_kept_rows_pushes_without_warmup_and_says_so(tmp_path):
    serving = tmp_path / "serving"
    pipeline = _evaluate(tmp_path, serving)
    (tmp_path / "evaluation" / Files.WARMUP_EXAMPLES).unlink()  # an older evaluation
    lines = []
    result = push.run(pipeline, str(tmp_path / "model"), str(tmp_path / "evaluation"),
                      str(tmp_path / "pushed"), progress=lines.append)
    assert result["pushed"] is True
    assert not (Path(result["path"]) / push_warmup.WARMUP_FILE).exists()
    assert any(f"has no {Files.WARMUP_EXAMPLES}" in line for line in lines)


def test_the_metrics_page_counts_the_replayed_warmup_requests(tmp_path):
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from estflow.components.serve import __main__ as serve

    export = estimator_export(tmp_path)
    push_warmup.write_warmup(export, [fx.serialize_example(*row) for row in ROWS])
    with serve.serve(tmp_path, port=0, poll_seconds=0) as server:  # every model under it
        with urllib.request.urlopen(server.url + "/monitoring/prometheus/metrics",
                                    timeout=30) as response:
            text = response.read().decode()
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(text) for s in family.samples}
    assert found[("estflow_serving_warmup_requests_total",
                  (("model", "taxi"), ("version", "1")))] == 3  # predict, classify, regress
