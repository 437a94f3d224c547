"""SavedModel warm-up (``assets.extra/tf_serving_warmup_requests``, TF Serving's TFRecord of
PredictionLog): written from eval rows, read back with TF Serving's protos, replayed by
``estflow serve`` before the version is served."""

import logging
import shutil
from pathlib import Path

import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2

from estflow.components.push import warmup as push_warmup
from estflow.components.serve import warmup
from estflow.components.serve.models import load_model
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
    assert [e.SerializeToString() for e in classify.input.example_list.examples] == \
        examples[:push_warmup.MAX_ROWS]
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
