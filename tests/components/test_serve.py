"""The serve component over real HTTP on loopback, against real SavedModels.

Every answer is checked against calling the same SavedModel in-process, which is what the
server claims to be a transport for.
"""

import base64
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from estflow.components import push
from estflow.components.serve import __main__ as serve
from tests.components import _serving_fixtures as fx

ROWS = [  # (fare, trip_seconds, payment_type)
    (7.25, 420, "Cash"),
    (31.0, 1800, "Credit Card"),
    (0.0, 0, ""),
    (12.5, 95, "Cash"),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    fx.write_versions(root / "taxi", (1, 2))
    fx.drop_raw_features(root / "taxi" / "2", root / "taxi_untyped" / "2")
    fx.save_estimator_style(root / "taxi_estimator" / "2", 2)
    (root / "taxi" / ".tmp-9-123").mkdir()  # a push in progress: must be ignored
    return root


@pytest.fixture(scope="module")
def server(base):
    with serve.serve(base, poll_seconds=0) as running:
        yield running


@pytest.fixture(scope="module")
def reference(base):
    """The served version (2), loaded in-process."""
    return tf.saved_model.load(str(base / "taxi" / "2"))


def request(server, method, path, body=None, *, raw=None, connection=None):
    """(status, decoded JSON) of one request; ``body`` is JSON-encoded, ``raw`` sent as is."""
    conn = connection or http.client.HTTPConnection(server.host, server.port, timeout=30)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = json.loads(response.read())
    if connection is None:
        conn.close()
    return response.status, payload


def b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


def serialized(rows=ROWS) -> list[bytes]:
    return [fx.serialize_example(*row) for row in rows]


def in_process(model, signature, rows=ROWS) -> dict[str, np.ndarray]:
    fn = model.signatures[signature]
    (name,) = fn.structured_input_signature[1]
    return {k: v.numpy() for k, v in fn(**{name: tf.constant(serialized(rows))}).items()}


def as_f32(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


# --- status and metadata ----------------------------------------------------------------------

def test_status_reports_the_highest_version_as_available(server):
    status, payload = request(server, "GET", "/v1/models/taxi")
    assert status == 200
    assert payload == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    ]}
    assert request(server, "GET", "/v1/models/taxi/versions/2") == (status, payload)


def test_only_the_latest_version_is_served(server):
    status, payload = request(server, "GET", "/v1/models/taxi/versions/1")
    assert status == 404
    assert "version 1 is not served" in payload["error"]
    assert "the served version is 2" in payload["error"]
    status, payload = request(server, "POST", "/v1/models/taxi/versions/1:predict",
                              {"instances": [b64(serialized()[0])]})
    assert status == 404


def test_metadata_has_tf_servings_shape(server):
    status, payload = request(server, "GET", "/v1/models/taxi/metadata")
    assert status == 200
    assert payload["model_spec"] == {"name": "taxi", "signature_name": "", "version": "2"}
    defs = payload["metadata"]["signature_def"]["signature_def"]
    assert sorted(defs) == ["classify", "regress", "serving_default"]
    examples = defs["serving_default"]["inputs"]["examples"]
    assert examples["dtype"] == "DT_STRING"
    assert examples["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}],
                                        "unknown_rank": False}
    outputs = defs["serving_default"]["outputs"]
    assert sorted(outputs) == ["class_ids", "logistic", "logits", "probabilities"]
    assert outputs["probabilities"]["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in outputs["probabilities"]["tensor_shape"]["dim"]] == ["-1", "2"]
    assert outputs["class_ids"]["dtype"] == "DT_INT64"
    assert defs["classify"]["outputs"]["classes"]["dtype"] == "DT_STRING"
    assert request(server, "GET", "/v1/models/taxi/versions/2/metadata") == (status, payload)


# --- predict ----------------------------------------------------------------------------------

def test_predict_row_format_matches_in_process(server, reference):
    status, payload = request(server, "POST", "/v1/models/taxi:predict",
                              {"instances": [b64(e) for e in serialized()]})
    assert status == 200
    expected = in_process(reference, "serving_default")
    predictions = payload["predictions"]
    assert len(predictions) == len(ROWS)
    for name, values in expected.items():
        column = [p[name] for p in predictions]
        if values.dtype == np.float32:
            np.testing.assert_array_equal(as_f32(column), values)
        else:
            np.testing.assert_array_equal(np.asarray(column), values)


def test_predict_columnar_format_matches_in_process(server, reference):
    body = {"signature_name": "serving_default",
            "inputs": {"examples": [b64(e) for e in serialized()]}}
    status, payload = request(server, "POST", "/v1/models/taxi:predict", body)
    assert status == 200
    expected = in_process(reference, "serving_default")
    assert sorted(payload["outputs"]) == sorted(expected)
    np.testing.assert_array_equal(as_f32(payload["outputs"]["probabilities"]),
                                  expected["probabilities"])
    # a lone input may also be given bare
    status, bare = request(server, "POST", "/v1/models/taxi:predict",
                           {"inputs": [b64(e) for e in serialized()]})
    assert (status, bare) == (200, payload)


def test_predict_with_one_output_returns_bare_values(server, reference):
    status, payload = request(server, "POST", "/v1/models/taxi/versions/2:predict",
                              {"signature_name": "regress",
                               "instances": [b64(e) for e in serialized()]})
    assert status == 200
    np.testing.assert_array_equal(as_f32(payload["predictions"]),
                                  in_process(reference, "regress")["outputs"])


def test_predict_string_output_is_text(server):
    status, payload = request(server, "POST", "/v1/models/taxi:predict",
                              {"signature_name": "classify",
                               "instances": [b64(serialized()[0])]})
    assert status == 200
    assert payload["predictions"][0]["classes"] == ["0", "1"]


# --- classify and regress ---------------------------------------------------------------------

def json_examples(rows=ROWS):
    return [{"fare": fare, "trip_seconds": seconds, "payment_type": payment}
            for fare, seconds, payment in rows]


def test_classify_json_examples_match_in_process(server, reference):
    examples = json_examples()
    examples[1]["fare"] = 31  # a JSON integer for a float feature: typed by the raw features
    examples[3]["payment_type"] = {"b64": base64.b64encode(b"Cash").decode()}
    status, payload = request(server, "POST", "/v1/models/taxi:classify",
                              {"examples": examples})
    assert status == 200
    expected = in_process(reference, "classify")
    assert "result" not in payload  # TF Serving answers "results" only
    assert [[label for label, _ in row] for row in payload["results"]] == [["0", "1"]] * len(ROWS)
    np.testing.assert_array_equal(as_f32([[s for _, s in row] for row in payload["results"]]),
                                  expected["scores"])


def test_regress_merges_context_into_each_example(server, reference):
    rows = [(3.0, 60, "Cash"), (45.5, 2400, "Cash")]
    body = {"context": {"payment_type": "Cash"},
            "examples": [{"fare": 3, "trip_seconds": 60}, {"fare": 45.5, "trip_seconds": 2400}]}
    status, payload = request(server, "POST", "/v1/models/taxi:regress", body)
    assert status == 200
    np.testing.assert_array_equal(as_f32(payload["results"]),
                                  in_process(reference, "regress", rows)["outputs"])


def test_without_raw_features_file_types_come_from_json(server, reference):
    ok = {"examples": [{"fare": 7.25, "trip_seconds": 420, "payment_type": "Cash"}]}
    status, payload = request(server, "POST", "/v1/models/taxi_untyped:regress", ok)
    assert status == 200
    np.testing.assert_array_equal(as_f32(payload["results"]),
                                  in_process(reference, "regress", ROWS[:1])["outputs"])
    as_int = {"examples": [{"fare": 7, "trip_seconds": 420}]}  # int64_list for a float feature
    status, payload = request(server, "POST", "/v1/models/taxi_untyped:regress", as_int)
    assert status == 400
    assert "fare" in payload["error"] and "Data types don't match" in payload["error"]


def test_classify_and_regress_default_to_signatures_by_method_name(server, reference):
    """tf.estimator names them `classification`/`regression` and marks their method names."""
    body = {"examples": json_examples()}
    status, payload = request(server, "POST", "/v1/models/taxi_estimator:classify", body)
    assert status == 200
    np.testing.assert_array_equal(as_f32([[s for _, s in row] for row in payload["results"]]),
                                  in_process(reference, "classify")["scores"])
    status, payload = request(server, "POST", "/v1/models/taxi_estimator:regress", body)
    assert status == 200
    np.testing.assert_array_equal(as_f32(payload["results"]),
                                  in_process(reference, "regress")["outputs"])
    status, payload = request(server, "GET", "/v1/models/taxi_estimator/metadata")
    defs = payload["metadata"]["signature_def"]["signature_def"]
    assert defs["classification"]["method_name"] == "tensorflow/serving/classify"


# --- errors -----------------------------------------------------------------------------------

ERRORS = [
    ("POST", "/v1/models/taxi:predict", b'{"instances": [', 400, "malformed JSON"),
    ("POST", "/v1/models/taxi:predict", b"[1, 2]", 400, "must be a JSON object"),
    ("POST", "/v1/models/taxi:predict", b"", 400, "body is empty"),
    ("POST", "/v1/models/taxi:predict", {"instances": [3.5]}, 400,
     "input 'examples': expected DT_STRING, got 3.5"),
    ("POST", "/v1/models/taxi:predict", {"instances": [{"b64": "***"}]}, 400, "not valid base64"),
    ("POST", "/v1/models/taxi:predict", {"instances": ["not an example"]}, 400,
     "Could not parse example input"),
    ("POST", "/v1/models/taxi:predict", {"inputs": [["a"], "b"]}, 400, "ragged"),
    ("POST", "/v1/models/taxi:predict", {"inputs": [["a"]]}, 400,
     "expected shape [-1] (DT_STRING), got [1, 1]"),
    ("POST", "/v1/models/taxi:predict", {"instances": [{"examples": "a", "x": 1}]}, 400,
     "must have exactly the inputs of signature 'serving_default'"),
    ("POST", "/v1/models/taxi:predict", {"signature_name": "nope", "instances": ["a"]}, 400,
     "has no signature 'nope'; available signatures: classify, regress, serving_default"),
    ("POST", "/v1/models/taxi:predict", {"instances": []}, 400, "non-empty list"),
    ("POST", "/v1/models/taxi:predict", {"examples": []}, 400, "exactly one of 'instances'"),
    ("POST", "/v1/models/taxi:predict", {"instances": ["a"], "inputs": ["a"]}, 400,
     "got both"),
    ("POST", "/v1/models/taxi:classify", {"examples": [{"fare": "cheap"}]}, 400,
     "examples[0] feature 'fare': expected floats"),
    ("POST", "/v1/models/taxi:classify", {"examples": [{"trip_seconds": 1.5}]}, 400,
     "feature 'trip_seconds': expected integers"),
    ("POST", "/v1/models/taxi:classify", {"examples": [{"payment_type": 3}]}, 400,
     "feature 'payment_type': expected strings"),
    ("POST", "/v1/models/taxi:regress", {"examples": [{"fare": None}]}, 400,
     "feature 'fare': expected a number, string"),
    ("POST", "/v1/models/taxi:regress", {"context": {"fare": 1.0}, "examples": [{"fare": 2.0}]},
     400, "in both 'context' and examples[0]"),
    ("POST", "/v1/models/taxi:regress", {"examples": "fare=1"}, 400, "'examples' must be"),
    ("POST", "/v1/models/taxi:classify", {"signature_name": "regress", "examples": [{}]}, 400,
     "not a classification signature"),
    ("GET", "/v1/models/nope", None, 404, "no model named 'nope'"),
    ("POST", "/v1/models/nope:predict", {"instances": ["a"]}, 404, "no model named 'nope'"),
    ("GET", "/v1/models/taxi/versions/7", None, 404, "version 7 is not served"),
    # TF Serving's statuses (tensorflow_serving/model_servers/http_rest_api_handler_test.cc):
    # a /v1/ path that matches no API is a 400 "Malformed request", whatever the method; names
    # are only looked up in memory, so '..' is an unknown model (404), never a path.
    ("GET", "/v1/models/taxi/versions/x", None, 400, "Malformed request"),
    ("GET", "/v1/models/../../etc/passwd", None, 400, "Malformed request"),
    ("GET", "/v1/models/..%2F..%2Fetc%2Fpasswd/metadata", None, 404,
     "no model named '../../etc/passwd'"),
    ("GET", "/v1/models/%2e%2e", None, 404, "no model named '..'"),
    ("GET", "/v1/models/taxi/labels/stable", None, 400,
     "Unrecognized servable version label: 'stable'"),
    ("GET", "/v1/models/taxi/extra/path", None, 400, "Malformed request"),
    ("GET", "/v2/models/taxi", None, 404, "unknown path"),
    ("POST", "/v1/models/taxi:explain", {}, 400, "Malformed request"),
    ("GET", "/v1/models/taxi:predict", None, 400, "Malformed request"),
    ("POST", "/v1/models/taxi", {}, 400, "Malformed request"),
    ("DELETE", "/v1/models/taxi", None, 400, "Malformed request"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), ERRORS,
                         ids=[f"{e[3]}-{e[4][:30]}" for e in ERRORS])
def test_errors_are_json_with_a_clear_message(server, method, path, body, status, message):
    raw = body if isinstance(body, bytes) else None
    got_status, payload = request(server, method, path, None if raw is not None else body,
                                  raw=raw)
    assert got_status == status, payload
    assert set(payload) == {"error"}
    assert message in payload["error"]


def test_oversize_body_is_refused_before_it_is_read(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/models/taxi:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 20000000\r\n\r\n{")
        response = b""
        while b"\r\n\r\n" not in response or not response.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert b"Connection: close" in head
    assert "over the limit of 10485760 bytes" in json.loads(body)["error"]


def test_keep_alive_survives_errors(server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    assert request(server, "POST", "/v1/models/nope:predict", {"instances": ["a"]},
                   connection=conn)[0] == 404
    assert request(server, "GET", "/v1/models/taxi:predict", connection=conn)[0] == 400
    assert request(server, "GET", "/v1/models/taxi", connection=conn)[0] == 200
    conn.close()


# --- versions ---------------------------------------------------------------------------------

def wait_for_version(running, version, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, payload = request(running, "GET", "/v1/models/taxi")
        served = [s["version"] for s in payload.get("model_version_status", [])
                  if s["state"] == "AVAILABLE"]
        if served == [str(version)]:
            return payload
        time.sleep(0.05)
    raise AssertionError(f"version {version} was not served within {timeout}s: {payload}")


def test_a_pushed_version_is_served_without_restart(base, tmp_path):
    shutil.copytree(base / "taxi", tmp_path / "taxi")
    with serve.serve(tmp_path, poll_seconds=0.1) as running:
        wait_for_version(running, 2)
        push.push_directory(fx.save_version(tmp_path / "export", 3), tmp_path / "taxi", version=3)
        wait_for_version(running, 3)
        status, payload = request(running, "POST", "/v1/models/taxi:regress",
                                  {"examples": json_examples()})
        assert status == 200
        v3 = tf.saved_model.load(str(tmp_path / "taxi" / "3"))
        np.testing.assert_array_equal(as_f32(payload["results"]),
                                      in_process(v3, "regress")["outputs"])


def test_a_version_that_fails_to_load_leaves_the_old_one_serving(base, tmp_path):
    shutil.copytree(base / "taxi", tmp_path / "taxi")
    with serve.serve(tmp_path, poll_seconds=0.1) as running:
        broken = tmp_path / "taxi" / ".tmp-5"
        broken.mkdir()
        (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
        broken.rename(tmp_path / "taxi" / "5")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, payload = request(running, "GET", "/v1/models/taxi")
            if len(payload["model_version_status"]) == 2:
                break
            time.sleep(0.05)
        failed, served = payload["model_version_status"]
        assert served["version"] == "2" and served["state"] == "AVAILABLE"
        assert failed["version"] == "5" and failed["state"] == "END"
        assert failed["status"]["error_message"]
        status, _ = request(running, "POST", "/v1/models/taxi:predict",
                            {"instances": [b64(serialized()[0])]})
        assert status == 200
        status, payload = request(running, "GET", "/v1/models/taxi/versions/5/metadata")
        assert status == 404 and "failed to load" in payload["error"]


def test_serve_refuses_a_missing_base_path(tmp_path):
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        serve.serve(tmp_path / "missing")


# --- load -------------------------------------------------------------------------------------

def test_concurrent_clients_get_in_process_answers(server, reference):
    # Expected answers come from the same batches in-process: a vectorised op may round the
    # same row differently in a batch of another size, so only identical batches compare exactly.
    rng = random.Random(0)
    batches = [[rng.randrange(len(ROWS)) for _ in range(size)] for size in (1, 2, 3, 5, 8, 16)]
    cases = []
    for rows in batches:
        batch = [ROWS[i] for i in rows]
        cases.append(("/v1/models/taxi:predict",
                      {"instances": [b64(e) for e in serialized(batch)]},
                      lambda p: as_f32([row["probabilities"] for row in p["predictions"]]),
                      in_process(reference, "serving_default", batch)["probabilities"]))
        cases.append(("/v1/models/taxi:classify", {"examples": json_examples(batch)},
                      lambda p: as_f32([[s for _, s in row] for row in p["results"]]),
                      in_process(reference, "classify", batch)["scores"]))
    errors, counts = [], []

    def client(seed):
        pick = random.Random(seed)
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        done, deadline = 0, time.monotonic() + 2.0
        try:
            while time.monotonic() < deadline:
                path, body, extract, want = pick.choice(cases)
                status, payload = request(server, "POST", path, body, connection=conn)
                if status != 200 or not np.array_equal(extract(payload), want):
                    errors.append((path, status, payload))
                done += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            conn.close()
            counts.append(done)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(counts) == 8 and min(counts) > 5, counts


# --- command line -----------------------------------------------------------------------------

@pytest.mark.slow
def test_command_line_prints_a_ready_line_and_serves(base):
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.components.serve", str(base), "--port", "0",
         "--poll-seconds", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"estflow serve: listening on http://127\.0\.0\.1:(\d+) "
                             r"\(models: taxi@2, taxi_estimator@2, "
                             r"taxi_untyped@2\)\n", line)
        assert match, line
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        conn.request("GET", "/v1/models/taxi")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
        process.stdout.close()


def test_a_premade_estimators_export_answers_classify_and_predict(tmp_path):
    """What a ported tf.estimator program exports (DNNClassifier.export_saved_model) is served
    as TF Serving serves it: :classify on serving_default, :predict on "predict"."""
    import estflow.estimator as estimator

    fc = estimator.feature_column
    cols = [fc.numeric_column("x"), fc.indicator_column(
        fc.categorical_column_with_vocabulary_list("c", ["a", "b"]))]
    r = np.random.RandomState(0)
    x = r.randn(128, 1).astype("float32")
    c = r.choice([b"a", b"b"], (128, 1))
    est = estimator.DNNClassifier([4], cols, model_dir=str(tmp_path / "m"),
                                  label_vocabulary=["no", "yes"], progress=lambda m: None)
    est.train(lambda: tf.data.Dataset.from_tensor_slices((
        {"x": x, "c": c}, np.where(x > 0, b"yes", b"no"))).repeat().batch(32), steps=5)
    exported = os.fsdecode(est.export_saved_model(  # bytes, as tf.estimator 2.15's
        str(tmp_path / "export"), estimator.parsing_serving_input_receiver_fn(
            fc.make_parse_example_spec(cols))))
    shutil.copytree(exported, tmp_path / "serving" / "clf" / "1")
    reference = tf.saved_model.load(exported).signatures["predict"]
    rows = [{"x": 1.5, "c": "b"}, {"x": -2.0, "c": "a"}]
    examples = tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[row["x"]])),
        "c": tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["c"].encode()]))}))
        .SerializeToString() for row in rows])
    expected = reference(examples=examples)
    with serve.serve(tmp_path / "serving", poll_seconds=0) as running:
        status, payload = request(running, "POST", "/v1/models/clf:classify",
                                  {"examples": rows})
        assert status == 200, payload
        for i, result in enumerate(payload["results"]):
            assert [label for label, _ in result] == ["no", "yes"]
            np.testing.assert_allclose([score for _, score in result],
                                       expected["probabilities"].numpy()[i], rtol=1e-5)
        status, payload = request(running, "POST", "/v1/models/clf:predict", {
            "signature_name": "predict",
            "instances": [{"examples": b64(e)} for e in examples.numpy()]})
        assert status == 200, payload
        np.testing.assert_allclose([p["logistic"] for p in payload["predictions"]],
                                   expected["logistic"].numpy(), rtol=1e-5)
