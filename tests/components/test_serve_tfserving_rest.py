"""TF Serving's own REST tests, ported, as the spec of ``estflow serve``.

Every REST case of tensorflow/serving's ``tensorflow_model_server_test.py`` (the ``*REST``
tests), every case of ``http_rest_api_handler_test.cc`` and the request/response examples of
``g3doc/api_rest.md`` (commit 9d981c5c, see ``tfserving_testdata/README.md``), run over real
HTTP on loopback against ``estflow serve`` started as a user starts it (the ``estflow``
command, from a fresh working directory, relative paths) and serving TF Serving's own test
models. Each case asserts TF Serving's HTTP status and JSON answer; the model server test's
``--model_name default --model_base_path`` and the handler test's ``ModelServerConfig``
(``specific { versions: 123 }``, label ``Version_Label``) are given with
``tensorflow_model_server``'s own flags.

Where the wording of an error differs from TF Serving's (the status is the same, a substring
of TF Serving's message is asserted where estflow uses it):

* empty body: TF Serving "JSON Parse error: The document is empty"; estflow "the request body
  is empty; expected a JSON object";
* malformed JSON: TF Serving "JSON Parse error: Invalid value"; estflow "malformed JSON in
  request body: ..." (Python's parser's message);
* wrong value type: TF Serving "... not of expected type: float"; estflow "input 'x':
  expected DT_FLOAT, got \"x\"";
* non-string ``signature_name``: TF Serving "'signature_name' key must be a string value.";
  estflow "'signature_name' must be a string, got 100";
* unknown model: estflow starts with TF Serving's "Servable not found for request:
  Latest(NAME)" and adds which models are served.

Left out: ``testPrometheusEndpoint`` (the metrics page is tested with the gRPC/metrics
suite), the model server's gRPC cases, and api_rest.md's ``classify_objects`` b64 example
(no such model in TF Serving's test data; the b64 mapping is tested in test_serve.py).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "tfserving_testdata"
ESTFLOW = str(Path(sys.executable).parent / "estflow")
TWO = "saved_model_half_plus_two_2_versions"
OK_STATUS = {"model_version_status": [{"version": "123", "state": "AVAILABLE",
                                       "status": {"error_code": "OK", "error_message": ""}}]}


class Served:
    """An ``estflow serve`` process and a client for it (stopped by :meth:`stop`)."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.cwd = cwd
        self.proc = subprocess.Popen([ESTFLOW, "serve", *args], cwd=cwd, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={k: v for k, v in os.environ.items()
                                          if not k.startswith("PYTEST")})
        line = self.proc.stdout.readline()  # the ready line, or EOF if it failed
        match = re.search(r"listening on http://([0-9.]+):([0-9]+)", line)
        if match is None:
            self.proc.kill()
            raise AssertionError(f"estflow serve did not start: {line}{self.proc.stderr.read()}")
        self.host, self.port = match.group(1), int(match.group(2))

    def call(self, method: str, path: str, body: str | dict | None = None):
        """(status, JSON answer, Content-Type) of one request."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            data = json.dumps(body) if isinstance(body, dict) else body
            conn.request(method, path, body=data.encode() if data is not None else None)
            response = conn.getresponse()
            return (response.status, json.loads(response.read()),
                    response.getheader("Content-Type"))
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=60)


def _copy(model: str, target: Path) -> None:
    shutil.copytree(DATA / model, target / model)


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    """tensorflow_model_server_test.py's server: --model_name=default
    --model_base_path=saved_model_half_plus_two_cpu (relative, from the cwd)."""
    cwd = tmp_path_factory.mktemp("tms")
    _copy("saved_model_half_plus_two_cpu", cwd)
    served = Served(cwd, "--model_name", "default", "--model_base_path",
                    "saved_model_half_plus_two_cpu", "--rest_api_port", "0",
                    "--rest_api_timeout_in_ms", "5000", "--file_system_poll_wait_seconds", "1")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def handler(tmp_path_factory):
    """http_rest_api_handler_test.cc's server core: a ModelServerConfig with the two-version
    model, specific { versions: 123 } and the label Version_Label -> 123."""
    cwd = tmp_path_factory.mktemp("handler")
    _copy(TWO, cwd)
    (cwd / "models.config").write_text(f"""
model_config_list {{
  config {{
    name: "{TWO}"
    base_path: "{TWO}"
    model_platform: "tensorflow"
    model_version_policy {{ specific {{ versions: 123 }} }}
    version_labels {{ key: "Version_Label" value: 123 }}
  }}
}}
""")
    served = Served(cwd, "--model_config_file", "models.config", "--port", "0")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """api_rest.md's example: half_plus_three served from a base path (estflow's BASE_PATH
    mode: every model directory under it)."""
    cwd = tmp_path_factory.mktemp("docs")
    _copy("saved_model_half_plus_three", cwd / "models")
    _copy("saved_model_half_plus_two_tf2_cpu", cwd / "models")  # a TF 2 SavedModel
    (cwd / "models" / "broken" / "1").mkdir(parents=True)  # a version that cannot load
    (cwd / "models" / "broken" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    served = Served(cwd, "models", "--port", "0")
    yield served
    served.stop()


def _ok(answer, expected):
    status, payload, content_type = answer
    assert (status, payload) == (200, expected)
    assert content_type == "application/json"


def _error(answer, status, *substrings):
    got, payload, content_type = answer
    assert got == status, payload
    assert set(payload) == {"error"} and content_type == "application/json"
    for text in substrings:
        assert text in payload["error"], payload["error"]


# --- tensorflow_model_server_test.py ---------------------------------------------------------

def test_tms_classify_rest(default):
    _ok(default.call("POST", "/v1/models/default:classify",
                     {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}),
        {"results": [[["", 3.0]]]})


def test_tms_regress_rest(default):
    _ok(default.call("POST", "/v1/models/default:regress",
                     {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}),
        {"results": [3.0]})


def test_tms_predict_rest(default):
    _ok(default.call("POST", "/v1/models/default:predict", {"instances": [2.0, 3.0, 4.0]}),
        {"predictions": [3.0, 3.5, 4.0]})


def test_tms_predict_columnar_rest(default):
    _ok(default.call("POST", "/v1/models/default:predict", {"inputs": [2.0, 3.0, 4.0]}),
        {"outputs": [3.0, 3.5, 4.0]})


def test_tms_get_status_rest(default):
    _ok(default.call("GET", "/v1/models/default"), OK_STATUS)


def test_tms_get_model_metadata_rest(default):
    expected = json.loads((DATA / "half_plus_two_model_metadata.json").read_text())
    _ok(default.call("GET", "/v1/models/default/metadata"), expected)


# --- http_rest_api_handler_test.cc -----------------------------------------------------------

def test_handler_path_regex(handler):
    _error(handler.call("GET", "/v1/models"), 400, "Missing model name")
    for path in ("/statuspage", "/index"):  # outside /v1/: no handler
        assert handler.call("GET", path)[0] == 404


UNSUPPORTED = [
    ("GET", "/v1/foo", "Malformed request"),
    ("POST", "/v1/foo", "Malformed request"),
    ("GET", "/v1/models", "Missing model name"),
    ("GET", "/v1/models/debug/model_name", "Malformed request"),
    ("POST", "/v1/models", "Malformed request"),
    ("GET", "/v1/models/foo:predict", "Malformed request"),
    ("GET", "/v1/models/foo/version/50:predict", "Malformed request"),
    ("POST", "/v1/models/foo/version/50:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/HELLO:regress", "Malformed request"),
    ("POST", f"/v1/models/foo/versions/{2**64 - 1}:regress", "Failed to convert version"),
    ("POST", "/v1/models/foo/metadata", "Malformed request"),
    ("POST", "/v1/models/foo/label/some_label:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/50/labels/some_label:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/some_label:regress", "Malformed request"),
]


@pytest.mark.parametrize(("method", "path", "message"), UNSUPPORTED)
def test_handler_unsupported_api_calls(handler, method, path, message):
    _error(handler.call(method, path, "" if method == "POST" else None), 400, message)


def test_handler_predict_model_name_version_errors(handler):
    body = {"instances": [1]}
    _error(handler.call("POST", "/v1/models/foo:predict", body), 404)
    _error(handler.call("POST", "/v1/models/foo/versions/50:predict", body), 404)
    _error(handler.call("POST", f"/v1/models/{TWO}99:predict", body), 404)


def test_handler_predict_request_errors(handler):
    path = f"/v1/models/{TWO}:predict"
    _error(handler.call("POST", path, ""), 400, "empty")
    _error(handler.call("POST", path, "instances = [1, 2]"), 400, "JSON")
    _error(handler.call("POST", path, {"instances": ["x", "y"]}), 400, "DT_FLOAT")
    _error(handler.call("POST", f"/v1/models/{TWO}/labels/Version_Nonexistent:predict",
                        {"instances": ["x", "y"]}), 400, "Unrecognized servable version label")
    _error(handler.call("POST", path, {"signature_name": 100}), 400,
           "'signature_name'", "must be a string")


def test_handler_predict(handler):
    _ok(handler.call("POST", f"/v1/models/{TWO}:predict",
                     {"instances": [[1.0, 2.0], [3.0, 4.0]]}),
        {"predictions": [[2.5, 3.0], [3.5, 4.0]]})
    _ok(handler.call("POST", f"/v1/models/{TWO}/versions/123:predict",
                     {"instances": [1.0, 2.0]}), {"predictions": [2.5, 3.0]})
    _ok(handler.call("POST", f"/v1/models/{TWO}/labels/Version_Label:predict",
                     {"instances": [1.0, 2.0]}), {"predictions": [2.5, 3.0]})
    _ok(handler.call("POST", f"/v1/models/{TWO}/versions/123:predict",
                     {"signature_name": "serving_default", "instances": [3.0, 4.0]}),
        {"predictions": [3.5, 4.0]})
    _ok(handler.call("POST", f"/v1/models/{TWO}/versions/123:predict",
                     {"signature_name": "serving_default", "inputs": [3.0, 4.0]}),
        {"outputs": [3.5, 4.0]})


def test_handler_regress(handler):
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 80.0}]}
    for path in (f"/v1/models/{TWO}:regress", f"/v1/models/{TWO}/versions/123:regress",
                 f"/v1/models/{TWO}/labels/Version_Label:regress"):
        _ok(handler.call("POST", path, body), {"results": [42]})


def test_handler_classify(handler):
    _ok(handler.call("POST", f"/v1/models/{TWO}:classify",
                     {"signature_name": "classify_x_to_y", "examples": [{"x": 20.0}]}),
        {"results": [[["", 12]]]})
    _ok(handler.call("POST", f"/v1/models/{TWO}/labels/Version_Label:classify",
                     {"signature_name": "classify_x_to_y", "examples": [{"x": 10.0}]}),
        {"results": [[["", 7]]]})


def test_handler_get_status(handler):
    for path in (f"/v1/models/{TWO}", f"/v1/models/{TWO}/versions/123",
                 f"/v1/models/{TWO}/labels/Version_Label"):
        _ok(handler.call("GET", path), OK_STATUS)


def test_handler_get_model_metadata(handler):
    expected = json.loads((DATA / f"{TWO}_metadata.json").read_text())
    _ok(handler.call("GET", f"/v1/models/{TWO}/metadata"), expected)


# --- g3doc/api_rest.md -----------------------------------------------------------------------

def test_docs_status(docs):
    _ok(docs.call("GET", "/v1/models/saved_model_half_plus_three"), OK_STATUS)


def test_docs_predict(docs):
    _ok(docs.call("POST", "/v1/models/saved_model_half_plus_three:predict",
                  {"instances": [1.0, 2.0, 5.0]}), {"predictions": [3.5, 4.0, 5.5]})


def test_docs_regress(docs):
    _ok(docs.call("POST", "/v1/models/saved_model_half_plus_three:regress",
                  {"signature_name": "tensorflow/serving/regress",
                   "examples": [{"x": 1.0}, {"x": 2.0}]}), {"results": [3.5, 4.0]})


def test_docs_unknown_model_is_404(docs):
    _error(docs.call("POST", "/v1/models/half:predict", {"instances": [1.0, 5.0]}), 404,
           "Servable not found for request: Latest(half)")


def test_docs_json_conformance_nan_and_infinity(docs):
    """NaN, Infinity and -Infinity are accepted in requests and written in answers."""
    status, payload, _ = docs.call("POST", "/v1/models/saved_model_half_plus_three:predict",
                                   '{"instances": [NaN, Infinity, -Infinity]}')
    assert status == 200
    assert str(payload) == str({"predictions": [float("nan"), float("inf"), float("-inf")]})


# --- beyond TF Serving's suites: what issue 24 asks of estflow serve -------------------------

def test_error_messages_never_show_the_servers_paths(docs):
    _status, payload, _ = docs.call("GET", "/v1/models/nope")
    assert "Latest(nope)" in payload["error"] and str(docs.cwd) not in payload["error"]
    # as TF Serving: the status of a version that failed to load is END with its error
    status, payload, _ = docs.call("GET", "/v1/models/broken")
    (entry,) = payload["model_version_status"]
    assert status == 200 and entry["state"] == "END"
    assert entry["status"]["error_code"] == "UNKNOWN"
    assert "DecodeError" in entry["status"]["error_message"]
    status, payload, _ = docs.call("POST", "/v1/models/broken:predict", {"instances": [1.0]})
    assert status == 404 and "version 1 failed to load: DecodeError" in payload["error"]
    for answer in (json.dumps(payload), json.dumps(entry)):
        assert str(docs.cwd) not in answer and "/models/" not in answer


def test_a_tf2_saved_model_is_served(docs):
    """saved_model_half_plus_two_tf2_cpu's signatures take a tensor of shape [1] (one value,
    no batch dimension): a request of another shape is refused, as TF Serving does."""
    path = "/v1/models/saved_model_half_plus_two_tf2_cpu:predict"
    _ok(docs.call("POST", path, {"instances": [2.0]}), {"predictions": [3.0]})
    _ok(docs.call("POST", path, {"inputs": {"x": [5.0]}}), {"outputs": [4.5]})
    _error(docs.call("POST", path, {"instances": [[1.0], [2.0]]}), 400,
           "input 'x': expected shape [1] (DT_FLOAT), got [2, 1]")


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    """A ModelServerConfig with each version policy and labels over the two-version model."""
    cwd = tmp_path_factory.mktemp("policies")
    _copy(TWO, cwd)
    _copy("saved_model_half_plus_three", cwd)
    configs = {"latest": "", "latest2": "model_version_policy { latest { num_versions: 2 } }",
               "all": "model_version_policy { all {} }",
               "specific": "model_version_policy { specific { versions: 124 } }"}
    text = "".join(f'config {{ name: "{name}" base_path: "{TWO}" {policy} '
                   'version_labels { key: "stable" value: 123 } } '
                   for name, policy in configs.items())
    text += 'config { name: "three" base_path: "saved_model_half_plus_three" }'
    (cwd / "models.config").write_text(f"model_config_list {{ {text} }}")
    served = Served(cwd, "--model_config_file", "models.config", "--rest_api_port", "0")
    yield served
    served.stop()


def _versions(served, name):
    status, payload, _ = served.call("GET", f"/v1/models/{name}")
    assert status == 200, payload
    return [(e["version"], e["state"]) for e in payload["model_version_status"]]


def test_version_policies_of_a_model_config(policies):
    available = "AVAILABLE"
    assert _versions(policies, "latest") == [("124", available)]
    assert _versions(policies, "latest2") == [("124", available), ("123", available)]
    assert _versions(policies, "all") == [("124", available), ("123", available)]
    assert _versions(policies, "specific") == [("124", available)]
    assert _versions(policies, "three") == [("123", available)]
    _error(policies.call("GET", "/v1/models/latest/versions/123"), 404, "is not served")


def test_version_labels_of_a_model_config(policies):
    _ok(policies.call("GET", "/v1/models/all/labels/stable/metadata"),
        {**json.loads((DATA / f"{TWO}_metadata.json").read_text()),
         "model_spec": {"name": "all", "signature_name": "", "version": "123"}})
    _ok(policies.call("POST", "/v1/models/latest2/labels/stable:predict", {"instances": [1.0]}),
        {"predictions": [2.5]})
    _error(policies.call("GET", "/v1/models/latest2/labels/canary"), 400,
           "Unrecognized servable version label")


def test_tf_servings_config_template_parses():
    from estflow.components.serve.config import parse_config

    text = (DATA / "good_model_config.txt").read_text()
    text = text.replace("${TEST_HALF_PLUS_TWO_DIR}", "a").replace("${TEST_HALF_PLUS_THREE_DIR}",
                                                                  "b")
    models = parse_config(text)
    assert [(m.name, m.base_path.name, m.policy.describe()) for m in models] == [
        ("half_plus_two", "a", "the latest 1"), ("half_plus_three", "b", "the latest 1")]


def test_a_bad_model_config_file_is_a_clear_error(tmp_path):
    shutil.copy(DATA / "bad_model_config.txt", tmp_path)
    proc = subprocess.run([ESTFLOW, "serve", "--model_config_file", "bad_model_config.txt"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "bad_model_config.txt is not a ModelServerConfig in text format" in proc.stderr
