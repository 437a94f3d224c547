"""Server-side batching (TF Serving's ``--enable_batching``): concurrent requests merged into
one call, answers split back, equal to the unbatched answers.

Requests come from threads, as the HTTP workers send them. Where a test needs requests to land
in one batch, the batch timeout is an hour and ``max_batch_size`` the rows the test sends, so
the batch closes when it is full: no timing decides what is merged. The model is the taxi
fixture SavedModel (``_serving_fixtures``) through the inference core
(``ServedModel.predict``/``classify``), or a numpy function where the shape of the batch is
the point.
"""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components.serve import batching
from estflow.components.serve.batching import Batcher
from estflow.components.serve.batching import BatchingParameters
from estflow.components.serve.errors import ServingError
from tests.components import _serving_fixtures as fx

HOUR_MICROS = 3600 * 10**6


def concurrently(call, arguments):
    """``call(argument)`` for each argument, each on its own thread; the answers (or the
    exceptions raised) in order."""
    answers = [None] * len(arguments)

    def run(i):
        try:
            answers[i] = call(arguments[i])
        except Exception as e:  # noqa: BLE001 - compared by the test
            answers[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return answers


class Recorder:
    """Wraps a function; keeps the row count of each call."""

    def __init__(self, function):
        self.function = function
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, **inputs):
        with self.lock:
            self.calls.append({name: tuple(np.shape(v)) for name, v in inputs.items()})
        return self.function(**inputs)


def full_batches(rows, **more):
    """Parameters under which a batch runs only when it holds ``rows`` rows."""
    return BatchingParameters(max_batch_size=rows, batch_timeout_micros=HOUR_MICROS, **more)


# --- the taxi SavedModel through the inference core ------------------------------------------

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from estflow.components.serve.models import load_model

    base = tmp_path_factory.mktemp("batching")
    return load_model("taxi", 1, fx.save_version(base / "taxi" / "1", 1))


def recorded(model):
    """``model`` with its serving_default function wrapped in a :class:`Recorder`."""
    import dataclasses

    signature = model.signatures["serving_default"]
    recorder = Recorder(signature.function)
    signatures = {**model.signatures,
                  "serving_default": dataclasses.replace(signature, function=recorder)}
    return dataclasses.replace(model, signatures=signatures), recorder


_EXAMPLES = st.builds(fx.serialize_example,
                      st.floats(-1e6, 1e6, width=32) | st.none(),
                      st.integers(-10**6, 10**6) | st.none(),
                      st.sampled_from(["Cash", "Credit Card", "", "é"]) | st.none())
_REQUESTS = st.lists(st.lists(_EXAMPLES, min_size=1, max_size=4), min_size=1, max_size=8)


def predict(model, examples):
    array = np.empty(len(examples), dtype=object)
    array[:] = examples
    return model.predict(None, {"examples": array})[1]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(requests=_REQUESTS, max_batch=st.sampled_from([1, 3, 8, 1000]),
       timeout=st.sampled_from([0, 2000]))
def test_batched_answers_equal_unbatched_answers(model, requests, max_batch, timeout):
    batcher = Batcher(BatchingParameters(max_batch_size=max_batch, batch_timeout_micros=timeout,
                                         num_batch_threads=2))
    try:
        batched = batcher.batched_model(model)
        answers = concurrently(lambda examples: predict(batched, examples), requests)
    finally:
        batcher.stop()
    for examples, answer in zip(requests, answers, strict=True):
        assert_same_answer(answer, predict(model, examples))


def assert_same_answer(answer, expected):
    """Equal outputs: exactly, but for floats within 4 units in the last place (TensorFlow's
    vectorised kernels round the rows of a longer batch differently, as in TF Serving)."""
    assert answer.keys() == expected.keys()
    for name, value in expected.items():
        assert answer[name].dtype == value.dtype and answer[name].shape == value.shape, name
        if value.dtype.kind == "f":
            np.testing.assert_array_max_ulp(answer[name], value, maxulp=4)
        else:
            np.testing.assert_array_equal(answer[name], value, err_msg=name)


def test_concurrent_requests_are_merged_into_one_call(model):
    plain, recorder = recorded(model)
    batcher = Batcher(full_batches(6))
    try:
        requests = [[fx.serialize_example(3.0 + i, 60 * i, "Cash")] * (1 + i % 2)
                    for i in range(4)]  # 1 + 2 + 1 + 2 rows
        answers = concurrently(lambda e: predict(batcher.batched_model(plain), e), requests)
    finally:
        batcher.stop()
    assert recorder.calls == [{"examples": (6,)}]
    for examples, answer in zip(requests, answers, strict=True):
        assert_same_answer(answer, predict(model, examples))


def test_a_bad_request_fails_alone_and_its_batch_is_answered(model):
    plain, recorder = recorded(model)
    batcher = Batcher(full_batches(4))
    batched = batcher.batched_model(plain)
    good = [[fx.serialize_example(5.0, 60, "Cash")], [fx.serialize_example(9.0, 0, "Mobile")],
            [fx.serialize_example(1.0, 30, "")]]
    try:
        answers = concurrently(lambda e: predict(batched, e), [*good, [b"not a tf.Example"]])
    finally:
        batcher.stop()
    assert recorder.calls[0] == {"examples": (4,)}  # tried as one batch first
    assert isinstance(answers[3], ServingError) and answers[3].status == 400, answers[3]
    assert "rejected the input" in answers[3].message
    for examples, answer in zip(good, answers[:3], strict=True):
        assert_same_answer(answer, predict(model, examples))


def test_classify_goes_through_the_batcher(model):
    import dataclasses

    signature = model.signatures["classify"]
    recorder = Recorder(signature.function)
    plain = dataclasses.replace(model, signatures={
        **model.signatures, "classify": dataclasses.replace(signature, function=recorder)})
    batcher = Batcher(full_batches(3))
    examples = [fx.serialize_example(float(i), i, "Cash") for i in range(3)]
    try:
        answers = concurrently(
            lambda e: batcher.batched_model(plain).classify("classify", np.array([e], object)),
            examples)
    finally:
        batcher.stop()
    assert recorder.calls == [{"inputs": (3,)}]
    for example, (_, results) in zip(examples, answers, strict=True):
        assert results == model.classify("classify", np.array([example], object))[1]


# --- what can and cannot be merged (numpy functions) -----------------------------------------

def row_sums(x):
    return {"sum": x.sum(axis=tuple(range(1, x.ndim))), "twice": 2 * x}


def test_inputs_of_other_shapes_or_dtypes_are_never_merged():
    recorder = Recorder(row_sums)
    batcher = Batcher(BatchingParameters(max_batch_size=4, batch_timeout_micros=20_000))
    function = batcher.wrap(recorder)
    requests = [np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 3), np.float32), np.ones((2, 3)),
                np.arange(4.0).reshape(2, 2)]
    try:
        answers = concurrently(lambda x: function(x=x), requests)
    finally:
        batcher.stop()
    for x, answer in zip(requests, answers, strict=True):
        np.testing.assert_array_equal(answer["sum"], x.sum(axis=1))
        np.testing.assert_array_equal(answer["twice"], 2 * x)
        assert answer["twice"].dtype == x.dtype
    assert all(len({shape[1:] for shape in call.values()}) == 1 for call in recorder.calls)


def test_a_model_that_reduces_over_the_batch_answers_each_request_alone():
    recorder = Recorder(lambda x: {"total": np.asarray(x.sum())})
    batcher = Batcher(full_batches(5))
    function = batcher.wrap(recorder)
    requests = [np.full(2, 1.0), np.full(3, 10.0)]
    try:
        answers = concurrently(lambda x: function(x=x), requests)
    finally:
        batcher.stop()
    assert [float(a["total"]) for a in answers] == [2.0, 30.0]
    assert recorder.calls[0] == {"x": (5,)}  # tried as one batch: its answer does not split
    assert sorted(call["x"] for call in recorder.calls[1:]) == [(2,), (3,)]


def test_a_batch_is_padded_to_an_allowed_size_with_copies_of_its_first_row():
    recorder = Recorder(row_sums)
    batcher = Batcher(BatchingParameters(max_batch_size=8, allowed_batch_sizes=(4, 8),
                                         num_batch_threads=1))
    function = batcher.wrap(recorder)
    try:
        answer = function(x=np.arange(6.0).reshape(3, 2))
    finally:
        batcher.stop()
    assert recorder.calls == [{"x": (3, 2)}]  # one request alone is run as it is
    np.testing.assert_array_equal(answer["sum"], [1.0, 5.0, 9.0])
    merged, size = batching._merged(
        [batching._Task({"x": np.arange(4.0).reshape(2, 2)}, 2),
         batching._Task({"x": np.full((1, 2), 7.0)}, 1)], (4, 8))
    assert size == 4
    np.testing.assert_array_equal(merged["x"], [[0, 1], [2, 3], [7, 7], [0, 1]])


def test_scalars_and_oversized_requests_run_alone():
    recorder = Recorder(lambda x: {"y": x})
    batcher = Batcher(full_batches(2))
    function = batcher.wrap(recorder)
    try:
        assert function(x=np.float64(3.0))["y"] == 3.0
        np.testing.assert_array_equal(function(x=np.arange(3))["y"], np.arange(3))
    finally:
        batcher.stop()
    assert recorder.calls == [{"x": ()}, {"x": (3,)}]


def test_a_full_queue_refuses_the_request_with_tf_serving_s_503():
    entered, release = threading.Event(), threading.Event()

    def slow(x):
        entered.set()
        release.wait(60)
        return {"y": x}

    batcher = Batcher(BatchingParameters(max_batch_size=1, max_enqueued_batches=1,
                                         num_batch_threads=1))
    function = batcher.wrap(slow)
    first = threading.Thread(target=function, kwargs={"x": np.ones(1)})
    first.start()
    assert entered.wait(60)  # the one batch thread is busy
    second = threading.Thread(target=function, kwargs={"x": np.ones(1)})
    second.start()
    while batcher.waiting() < 1:  # the second request is queued: one batch, the limit
        second.join(0.01)
    try:
        with pytest.raises(ServingError) as refused:
            function(x=np.ones(1))
    finally:
        release.set()
        first.join(60)
        second.join(60)
        batcher.stop()
    assert refused.value.status == 503
    assert "queue to which this task was submitted is full" in refused.value.message


# --- the parameters file -----------------------------------------------------------------------

def test_the_parameters_file_is_read_in_tf_serving_s_text_format(tmp_path):
    path = tmp_path / "batching.txt"
    path.write_text("# TF Serving's example\nmax_batch_size { value: 32 }\n"
                    "batch_timeout_micros { value: 5000 }\nmax_enqueued_batches { value: 100 }\n"
                    "num_batch_threads { value: 4 }\nallowed_batch_sizes: 8\n"
                    "allowed_batch_sizes: 32\npad_variable_length_inputs: false\n"
                    "thread_pool_name { value: \"model_server_batch_threads\" }\n")
    assert batching.read_parameters(path) == BatchingParameters(
        max_batch_size=32, batch_timeout_micros=5000, max_enqueued_batches=100,
        num_batch_threads=4, allowed_batch_sizes=(8, 32))
    path.write_text("")
    assert batching.read_parameters(path) == BatchingParameters()


@pytest.mark.parametrize(("text", "message"), [
    ("max_batch_size: 32", 'Expected "{"'),
    ("max_batch_size { value: 32 }\nallowed_batch_sizes: 16",
     "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; "
     "expected 32"),
    ("num_batch_threads { value: 0 }", "num_batch_threads must be >= 1, got 0"),
    ("max_batch_size { value: 8 }\nallowed_batch_sizes: 8\nallowed_batch_sizes: 4\n"
     "allowed_batch_sizes: 8", "positive and increasing"),
    ("max_batch_sise { value: 8 }", "max_batch_sise"),
])
def test_a_bad_parameters_file_is_refused_naming_the_file_and_field(tmp_path, text, message):
    path = tmp_path / "batching.txt"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        batching.read_parameters(path)
    assert str(path) in str(refused.value) and message in str(refused.value)


# --- the server: REST and gRPC through one batcher ---------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    fx.save_version(root / "taxi" / "1", 1)
    return root


def grpc_predict(address, examples):
    """(status code, outputs or details) of a gRPC Predict of serialized tf.Examples."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "taxi"
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(examples, dtype=tf.string))
    with grpc.insecure_channel(address) as channel:
        try:
            result = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                request, 120)
        except grpc.RpcError as e:
            return e.code(), e.details()
    return grpc.StatusCode.OK, {name: tf.make_ndarray(t) for name, t in result.outputs.items()}


def rest_predict(server, examples):
    import base64

    body = {"instances": [{"b64": base64.b64encode(e).decode()} for e in examples]}
    return fx.http_request(server.host, server.port, "POST", "/v1/models/taxi:predict", body,
                           timeout=120)


def test_rest_and_grpc_requests_are_batched_together_and_answered_as_unbatched(base):
    """Four requests, two REST and two gRPC, under a batch that runs only when it holds four
    rows: all four are answered only if they were merged into one call; the answers equal
    an unbatched server's."""
    from estflow.components.serve import __main__ as serve

    rows = [[fx.serialize_example(4.5 + i, 90 * i, ["Cash", "Mobile"][i % 2])] for i in range(4)]
    with serve.serve(base, port=0, poll_seconds=0, grpc_port=0,
                     batching=full_batches(4)) as server:
        calls = [lambda e, s=server: rest_predict(s, e),
                 lambda e, s=server: grpc_predict(s.grpc.address, e)] * 2
        answers = concurrently(lambda i: calls[i](rows[i]), list(range(4)))
    with serve.serve(base, port=0, poll_seconds=0, grpc_port=0) as plain:
        expected = [rest_predict(plain, rows[0]), grpc_predict(plain.grpc.address, rows[1]),
                    rest_predict(plain, rows[2]), grpc_predict(plain.grpc.address, rows[3])]
    for i in (0, 2):  # REST: the JSON of one row
        (status, payload), (_, want) = answers[i], expected[i]
        assert status == 200, payload
        (got,), (wanted,) = payload["predictions"], want["predictions"]
        assert got.keys() == wanted.keys()
        for name in wanted:
            np.testing.assert_array_max_ulp(np.float32(got[name]), np.float32(wanted[name]), 4)
    for i in (1, 3):  # gRPC: the tensors
        assert answers[i][0].name == "OK", answers[i]
        assert_same_answer(answers[i][1], expected[i][1])


def test_a_bad_request_in_a_batch_fails_alone_over_rest_and_grpc(base):
    from estflow.components.serve import __main__ as serve

    good = [[fx.serialize_example(2.0, 30, "Cash")], [fx.serialize_example(7.0, 0, "")]]
    with serve.serve(base, port=0, poll_seconds=0, grpc_port=0,
                     batching=full_batches(4)) as server:
        calls = [lambda: rest_predict(server, good[0]),
                 lambda: grpc_predict(server.grpc.address, good[1]),
                 lambda: rest_predict(server, [b"not a tf.Example"]),
                 lambda: grpc_predict(server.grpc.address, [b"nor this"])]
        answers = concurrently(lambda call: call(), calls)
    assert answers[0][0] == 200 and len(answers[0][1]["predictions"]) == 1, answers[0]
    assert answers[1][0].name == "OK", answers[1]
    assert answers[2][0] == 400 and "rejected the input" in answers[2][1]["error"], answers[2]
    assert answers[3][0].name == "INVALID_ARGUMENT" and "rejected the input" in answers[3][1]


def test_a_bad_batching_parameters_file_fails_at_start_naming_it(base, tmp_path, capsys):
    from estflow.components.serve import __main__ as serve

    path = tmp_path / "batching.txt"
    path.write_text("max_batch_size { value: 32 }\nallowed_batch_sizes: 16\n")
    assert serve.main([str(base), "--port", "0", "--enable_batching=true",
                       "--batching_parameters_file", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"estflow serve: {path}: Last entry in allowed_batch_sizes must match "
                     "max_batch_size; last entry was 16; expected 32")
    assert serve.main([str(base), "--port", "0", "--enable-batching",
                       "--batching-parameters-file", str(tmp_path / "missing.txt")]) == 2
    assert "--batching-parameters-file: cannot read" in capsys.readouterr().err


@pytest.mark.slow
def test_estflow_serve_enable_batching_serves_batched(base, tmp_path):
    """``estflow serve --enable-batching`` (and TF Serving's spelling) reach the server."""
    import base64
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "batching.txt"
    path.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000 }\n")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root),
                                                         os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.pipelines.cli", "serve", str(base), "--port", "0",
         "--poll-seconds", "0", "--enable-batching", "--batching_parameters_file", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"estflow serve: listening on http://127\.0\.0\.1:(\d+) "
                             r"\(models: taxi@1\), batching requests\n", line)
        assert match, line
        example = base64.b64encode(fx.serialize_example(3.0, 60, "Cash")).decode()
        status, payload = fx.http_request("127.0.0.1", int(match.group(1)), "POST",
                                          "/v1/models/taxi:predict",
                                          {"instances": [{"b64": example}] * 3})
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
    assert status == 200 and len(payload["predictions"]) == 3, payload


def test_the_batching_flag_takes_tf_serving_s_spellings(base, capsys):
    from estflow.components.serve import __main__ as serve
    from estflow.pipelines import cli

    parse = serve._parser().parse_args
    for argv, expected in (([], None), (["--enable-batching"], True),
                           (["--enable_batching=true"], True), (["--enable_batching=false"], False),
                           (["--enable_batching", "True"], True)):
        assert parse([str(base), *argv]).enable_batching is expected, argv
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--enable-batching", str(base)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "estflow serve: error: argument --enable-batching/--enable_batching: expected true or "
        f"false, got {base} (a positional argument goes before this flag)")
