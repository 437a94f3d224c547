"""``estflow serve``'s gRPC API with TF Serving's own client stubs over loopback.

The cases of TF Serving's ``tensorflow_model_server_test.py`` that use gRPC (GetModelStatus,
GetModelMetadata, Classify, Regress, MultiInference, Predict; TF 1 and TF 2 half_plus_two from
``tests/components/tfserving_testdata``) are ported with TF Serving's expected answers; an
estflow-pushed model is checked against calling it in-process and against the REST answer for
the same inputs.
"""

import base64
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import inference_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import regression_pb2

from estflow.components import push
from estflow.components.serve import __main__ as serve
from tests.components import _serving_fixtures as fx

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = Path(__file__).parent / "tfserving_testdata"
TIMEOUT = 30
CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu", root / "default")
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_tf2_cpu", root / "default_tf2")
    export = tmp_path_factory.mktemp("export")
    push.push_directory(fx.save_version(export / "2", 2), root / "taxi", version=2)
    return root


@pytest.fixture(scope="module")
def server(base):
    with serve.serve(base, port=0, poll_seconds=0, grpc_port=0) as running:
        yield running


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.grpc.address) as ch:
        yield ch


@pytest.fixture(scope="module")
def stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def examples_input(message, rows):
    """Fill ``message.input`` with one tf.Example per row (a dict of features)."""
    for row in rows:
        example = message.input.example_list.examples.add()
        for name, value in row.items():
            feature = example.features.feature[name]
            if isinstance(value, str):
                feature.bytes_list.value.append(value.encode())
            elif isinstance(value, int):
                feature.int64_list.value.append(value)
            else:
                feature.float_list.value.append(value)
    return message


def check_spec(spec, name, signature, version):
    assert (spec.name, spec.signature_name, spec.version.value) == (name, signature, version)


# --- TF Serving's tensorflow_model_server_test.py, gRPC cases ------------------------------

def test_get_model_status(channel):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "default"
    result = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(request, TIMEOUT)
    assert len(result.model_version_status) == 1
    assert result.model_version_status[0].version == 123
    assert result.model_version_status[0].status.error_code == 0
    assert result.model_version_status[0].state == get_model_status_pb2.ModelVersionStatus.AVAILABLE


@pytest.mark.parametrize("model", ["default", "default_tf2"])
def test_get_model_metadata(stub, model):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = model
    request.metadata_field.append("signature_def")
    result = stub.GetModelMetadata(request, TIMEOUT)
    assert result.model_spec.name == model
    assert result.model_spec.version.value == 123
    assert list(result.metadata) == ["signature_def"]
    defs = get_model_metadata_pb2.SignatureDefMap()
    assert result.metadata["signature_def"].Unpack(defs)
    assert {"serving_default", "classify_x_to_y", "regress_x_to_y"} <= set(defs.signature_def)
    method = defs.signature_def["classify_x_to_y"].method_name  # TF 2 saves every one as predict
    assert method == (CLASSIFY if model == "default" else "tensorflow/serving/predict")


@pytest.mark.parametrize("model", ["default", "default_tf2"])
def test_classify(stub, model):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "classify_x_to_y"
    result = stub.Classify(examples_input(request, [{"x": 2.0}]), TIMEOUT)
    assert len(result.result.classifications) == 1
    assert len(result.result.classifications[0].classes) == 1
    assert result.result.classifications[0].classes[0].score == 3.0
    check_spec(result.model_spec, model, "classify_x_to_y", 123)


@pytest.mark.parametrize("model", ["default", "default_tf2"])
def test_regress(stub, model):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "regress_x_to_y"
    result = stub.Regress(examples_input(request, [{"x": 2.0}]), TIMEOUT)
    assert len(result.result.regressions) == 1
    assert result.result.regressions[0].value == 3.0
    check_spec(result.model_spec, model, "regress_x_to_y", 123)


@pytest.mark.parametrize("model", ["default", "default_tf2"])
def test_multi_inference(stub, model):
    request = inference_pb2.MultiInferenceRequest()
    request.tasks.add().model_spec.name = model
    request.tasks[0].model_spec.signature_name = "regress_x_to_y"
    request.tasks[0].method_name = REGRESS
    request.tasks.add().model_spec.name = model
    request.tasks[1].model_spec.signature_name = "classify_x_to_y"
    request.tasks[1].method_name = CLASSIFY
    result = stub.MultiInference(examples_input(request, [{"x": 2.0}]), TIMEOUT)
    assert len(result.results) == 2
    assert result.results[0].regression_result.regressions[0].value == 3.0
    assert result.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for i in range(2):
        check_spec(result.results[i].model_spec, model, request.tasks[i].model_spec.signature_name,
                   123)


def test_predict(stub):
    """tensorflow_model_server_test_base.VerifyPredictRequest: x=[[1.0], [2.0]] -> 2.5, 3.0
    (the default signature; the version named as in TF Serving's test)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "default"
    request.model_spec.version.value = 123
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0], [2.0]], dtype=tf.float32))
    result = stub.Predict(request, TIMEOUT)
    assert list(result.outputs) == ["y"]
    assert result.outputs["y"].float_val == [2.5, 3.0]  # TF Serving's AsProtoField encoding
    np.testing.assert_array_equal(tf.make_ndarray(result.outputs["y"]), [[2.5], [3.0]])
    check_spec(result.model_spec, "default", "serving_default", 123)


# --- errors: TF Serving's status codes -----------------------------------------------------

def rpc_error(call, request):
    with pytest.raises(grpc.RpcError) as caught:
        call(request, TIMEOUT)
    return caught.value.code(), caught.value.details()


def predict_request(model="default", **spec):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for key, value in spec.items():
        if key == "version":
            request.model_spec.version.value = value
        else:
            setattr(request.model_spec, key, value)
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]], dtype=tf.float32))
    return request


def test_unknown_model_and_version_are_not_found(stub):
    code, details = rpc_error(stub.Predict, predict_request("nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in details
    code, details = rpc_error(stub.Predict, predict_request(version=7))
    assert code == grpc.StatusCode.NOT_FOUND and "version 7" in details


def test_missing_signature_is_failed_precondition(stub):
    code, details = rpc_error(stub.Predict, predict_request(signature_name="nope"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "'nope' not found" in details


def test_bad_inputs_are_invalid_argument(stub):
    request = predict_request()
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([["a"]]))
    code, details = rpc_error(stub.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'x': expected DT_FLOAT, got DT_STRING" in details
    request = predict_request()
    request.inputs["z"].CopyFrom(tf.make_tensor_proto([1.0]))
    code, details = rpc_error(stub.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "z" in details
    request = predict_request()
    request.output_filter.append("nope")
    code, details = rpc_error(stub.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "nope" in details


def test_empty_input_and_metadata_field_are_invalid_argument(stub):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "default"
    request.model_spec.signature_name = "classify_x_to_y"
    code, details = rpc_error(stub.Classify, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "Input is empty" in details
    metadata = get_model_metadata_pb2.GetModelMetadataRequest()
    metadata.model_spec.name = "default"
    assert rpc_error(stub.GetModelMetadata, metadata)[0] == grpc.StatusCode.INVALID_ARGUMENT
    metadata.metadata_field.append("graph")
    code, details = rpc_error(stub.GetModelMetadata, metadata)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "'graph' is not supported" in details


def test_multi_inference_tasks_of_two_models_are_invalid_argument(stub):
    request = inference_pb2.MultiInferenceRequest()
    for model in ("default", "default_tf2"):
        task = request.tasks.add(method_name=REGRESS)
        task.model_spec.name = model
        task.model_spec.signature_name = "regress_x_to_y"
    code, details = rpc_error(stub.MultiInference, examples_input(request, [{"x": 1.0}]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "same model" in details


# --- an estflow-pushed model: in-process answers, and REST == gRPC --------------------------

def test_pushed_model_predict_matches_in_process(stub, base):
    rows = [(7.25, 420, "Cash"), (31.0, 1800, "Credit Card"), (0.0, 0, "")]
    serialized = [fx.serialize_example(*row) for row in rows]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "taxi"
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(serialized))
    result = stub.Predict(request, TIMEOUT)
    check_spec(result.model_spec, "taxi", "serving_default", 2)
    expected = tf.saved_model.load(str(base / "taxi" / "2")).signatures["serving_default"](
        examples=tf.constant(serialized))
    assert set(result.outputs) == set(expected)
    for name, tensor in expected.items():
        np.testing.assert_array_equal(tf.make_ndarray(result.outputs[name]), tensor.numpy())


ROW = st.fixed_dictionaries({
    "fare": st.floats(-1e6, 1e6, allow_nan=False, width=32),
    "trip_seconds": st.integers(-2**40, 2**40),
    "payment_type": st.sampled_from(["Cash", "Credit Card", "", "Mobile ünï"]),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=5))
def test_rest_and_grpc_answer_alike(server, stub, rows):
    """The same rows through REST (:predict, :classify, :regress) and gRPC give equal
    answers: both call the one inference core."""
    def rest(verb, body):
        status, payload = fx.http_request(server.host, server.port, "POST",
                                          f"/v1/models/taxi:{verb}", body)
        assert status == 200, payload
        return payload

    classify = examples_input(classification_pb2.ClassificationRequest(), rows)
    classify.model_spec.name = "taxi"
    got = stub.Classify(classify, TIMEOUT).result.classifications
    assert [[[c.label, c.score] for c in row.classes] for row in got] == \
        rest("classify", {"examples": rows})["results"]
    regress = examples_input(regression_pb2.RegressionRequest(), rows)
    regress.model_spec.name = "taxi"
    assert [r.value for r in stub.Regress(regress, TIMEOUT).result.regressions] == \
        rest("regress", {"examples": rows})["results"]
    serialized = [e.SerializeToString() for e in classify.input.example_list.examples]
    predict = predict_pb2.PredictRequest()
    predict.model_spec.name = "taxi"
    predict.inputs["examples"].CopyFrom(tf.make_tensor_proto(serialized))
    outputs = stub.Predict(predict, TIMEOUT).outputs
    columns = rest("predict", {"inputs": {"examples": [
        {"b64": base64.b64encode(s).decode()} for s in serialized]}})["outputs"]
    assert {name: tf.make_ndarray(proto).tolist() for name, proto in outputs.items()} == columns


def test_grpc_answers_are_counted_in_the_metrics(server, stub):
    stub.Predict(predict_request(), TIMEOUT)
    page = server.metrics.render()  # the page itself is checked in test_serve_metrics.py
    assert ('estflow_serving_requests_total{model="default",version="123",'
            'signature="serving_default",api="Predict",entrypoint="GRPC",code="OK"}') in page


# --- the command line, as a user runs it -------------------------------------------------

def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TF_CPP"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_a_busy_grpc_port_fails_at_once_naming_it(tmp_path):
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu", tmp_path / "models" / "default")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "serve", "models",
                               "--port", "0", "--grpc-port", str(port)], cwd=tmp_path,
                              capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"estflow serve: gRPC: cannot listen on 127.0.0.1:{port}: "
                                   f"port {port} is already in use (choose another with "
                                   "--grpc-port)")


@pytest.mark.slow
def test_estflow_serve_grpc_port_serves_the_stubs(tmp_path):
    """``estflow serve models --grpc-port 0`` from a fresh directory: the ready line names the
    gRPC address, which TF Serving's stubs then use."""
    shutil.copytree(TESTDATA / "saved_model_half_plus_two_cpu", tmp_path / "models" / "default")
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.pipelines.cli", "serve", "models", "--port", "0",
         "--grpc-port", "0", "--poll-seconds", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"estflow serve: listening on http://127\.0\.0\.1:\d+, gRPC on "
                             r"(127\.0\.0\.1:\d+) \(models: default@123\)\n", line)
        assert match, line
        with grpc.insecure_channel(match[1]) as ch:
            result = prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(
                predict_request(), TIMEOUT)
        np.testing.assert_array_equal(tf.make_ndarray(result.outputs["y"]), [[2.5]])
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert process.returncode == 0
