"""``estflow serve`` against hostile clients and hostile files, over real HTTP on loopback.

Requests: whatever JSON arrives (random nesting and shapes, huge numbers, random feature names),
the answer is TF Serving's ``{"error": ...}`` with 400/404, never a 500. Connections: stalled or
idle clients cost no thread and are closed after a timeout; the worker pool and the number of
connections are bounded. Files: nothing outside the base path is read (symlinks out of it are
refused, and reported).
"""

import json
import os
import re
import shutil
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components.serve import __main__ as serve
from tests.components import _serving_fixtures as fx

KNOWN = sorted(c["name"] for c in fx.RAW_FEATURES["columns"])  # fare, payment_type, trip_seconds


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    fx.write_versions(root / "taxi", (2,))
    fx.drop_raw_features(root / "taxi" / "2", root / "taxi_untyped" / "2")
    fx.save_estimator_style(root / "taxi_estimator" / "2", 2)
    return root


@pytest.fixture(scope="module")
def server(base):
    with serve.serve(base, poll_seconds=0) as running:
        yield running


def request(server, method, path, body=None, **kwargs):
    return fx.http_request(server.host, server.port, method, path, body, **kwargs)


def assert_clear_error(status, payload, expected_status=400):
    assert status == expected_status, payload
    assert set(payload) == {"error"} and isinstance(payload["error"], str) and payload["error"]


# --- JSON depth and size ----------------------------------------------------------------------

@pytest.mark.parametrize("depth", [65, 5_000, 50_000])
@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deeply_nested_json_is_a_400_naming_the_limit(server, depth, opener):
    closer = "]" if opener == "[" else "}"
    nested = opener * depth + "1" + closer * depth
    raw = ('{"instances": [' + nested + "]}").encode()
    status, payload = request(server, "POST", "/v1/models/taxi:predict", raw=raw)
    assert_clear_error(status, payload)
    assert "nested more than 64 levels deep" in payload["error"]


def test_nesting_within_the_limit_is_parsed(server):
    nested = "[" * 60 + '"a"' + "]" * 60  # a valid rank-60 tensor, the wrong rank for the model
    status, payload = request(server, "POST", "/v1/models/taxi:predict",
                              raw=('{"inputs": ' + nested + "}").encode())
    assert_clear_error(status, payload)
    assert "expected shape [-1] (DT_STRING)" in payload["error"]


def test_an_integer_literal_too_long_for_python_is_a_400(server):
    raw = b'{"examples": [{"fare": ' + b"9" * 5000 + b"}]}"
    status, payload = request(server, "POST", "/v1/models/taxi:classify", raw=raw)
    assert_clear_error(status, payload)
    assert "malformed JSON" in payload["error"] and "4300 digits" in payload["error"]


# --- random documents: never a 500 ------------------------------------------------------------

_SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
            | st.builds(lambda s: {"b64": s}, st.sampled_from(["", "Q2FzaA==", "***", "=="])))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                           ["examples", "inputs", "fare", "trip_seconds", "payment_type",
                            "b64"]), inner, max_size=4), max_leaves=24)
_KEYS = st.sampled_from(["instances", "inputs", "examples", "context", "signature_name"])
_SIGNATURES = st.sampled_from(["serving_default", "classify", "regress", "classification",
                               "regression", "nope", ""])
_BODIES = st.dictionaries(_KEYS | st.text(max_size=6), _VALUES | _SIGNATURES, max_size=4)
_PATHS = st.builds("/v1/models/{}{}".format,
                   st.sampled_from(["taxi", "taxi_untyped", "taxi_estimator"]),
                   st.sampled_from([":predict", ":classify", ":regress"]))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=_PATHS, body=_BODIES | _VALUES)
def test_random_json_gets_an_answer_or_a_clear_error_never_a_500(server, path, body):
    raw = json.dumps(body, allow_nan=True).encode()
    status, payload = request(server, "POST", path, raw=raw)
    if status == 200:
        assert {"predictions", "outputs", "results"} & set(payload), payload
    else:
        assert_clear_error(status, payload, expected_status=400)


_FEATURE_VALUES = {"fare": st.floats(-1e6, 1e6) | st.integers(-10**6, 10**6),
                   "trip_seconds": st.integers(0, 10**6),
                   "payment_type": st.sampled_from(["Cash", "Credit Card", ""])}
_NAMES = st.sampled_from(KNOWN) | st.text(min_size=1, max_size=10)


@st.composite
def _examples(draw):
    examples = []
    for _ in range(draw(st.integers(1, 4))):
        names = draw(st.lists(_NAMES, max_size=4, unique=True))
        examples.append({name: draw(_FEATURE_VALUES.get(name, st.floats(0, 1)))
                         for name in names})
    return examples


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(examples=_examples(), verb=st.sampled_from(["classify", "regress"]))
def test_random_feature_names_unknown_ones_are_rejected_with_the_known_ones(server, examples,
                                                                            verb):
    status, payload = request(server, "POST", f"/v1/models/taxi:{verb}", {"examples": examples})
    unknown = sorted({name for example in examples for name in example} - set(KNOWN))
    if not unknown:
        assert status == 200, payload
        assert len(payload["results"]) == len(examples)
        return
    assert_clear_error(status, payload)
    assert any(repr(name) in payload["error"] for name in unknown), payload
    assert f"known features: {', '.join(KNOWN)}" in payload["error"]


def test_a_misspelt_feature_is_rejected_not_scored_with_defaults(server):
    status, payload = request(server, "POST", "/v1/models/taxi:classify",
                              {"examples": [{"fair": 7.25, "payment_type": "Cash"}]})
    assert_clear_error(status, payload)
    assert payload["error"] == ("examples[0] feature 'fair' is not a feature of model 'taxi' "
                                "version 2; known features: fare, payment_type, trip_seconds")
    status, payload = request(server, "POST", "/v1/models/taxi:regress",
                              {"context": {"paymnet_type": "Cash"}, "examples": [{"fare": 1}]})
    assert_clear_error(status, payload)
    assert "context feature 'paymnet_type' is not a feature" in payload["error"]


def test_a_whole_number_for_a_float_feature_is_accepted(server):
    as_int = request(server, "POST", "/v1/models/taxi:regress", {"examples": [{"fare": 12}]})
    as_float = request(server, "POST", "/v1/models/taxi:regress", {"examples": [{"fare": 12.0}]})
    assert as_int[0] == 200 and as_int == as_float


# --- connections: timeouts, a bounded pool, bounded connections --------------------------------

def _serve_threads():
    return [t for t in threading.enumerate() if t.name.startswith("estflow-serve")]


def _read_all(sock, timeout=10.0):
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def test_stalled_connections_hold_no_threads_and_are_answered_408(base):
    threads_before = len(_serve_threads())
    with serve.serve(base, poll_seconds=0, threads=4, request_timeout_seconds=1.5,
                     max_connections=1000) as running:
        threads_serving = len(_serve_threads())
        assert threads_serving - threads_before <= 4 + 1  # the workers and the loop
        stalled = []
        for i in range(300):
            sock = socket.create_connection((running.host, running.port), timeout=10)
            if i % 3 == 0:  # headers never finished
                sock.sendall(b"POST /v1/models/taxi:predict HTTP/1.1\r\nHost: x\r\n")
            elif i % 3 == 1:  # a body shorter than its Content-Length
                sock.sendall(b"POST /v1/models/taxi:predict HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 100\r\n\r\n{\"instances\"")
            else:  # connected, silent
                pass
            stalled.append(sock)
        time.sleep(0.3)
        assert len(_serve_threads()) == threads_serving
        start = time.monotonic()
        status, payload = request(running, "GET", "/v1/models/taxi")
        assert status == 200 and time.monotonic() - start < 1.0
        answers = [_read_all(sock) for sock in stalled[:2]]
        for answer in answers:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), answer
            assert b"Connection: close" in head
            assert "request not received within 1.5 seconds" in json.loads(body)["error"]
        for sock in stalled:
            sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(base):
    with serve.serve(base, poll_seconds=0, idle_timeout_seconds=0.5) as running:
        sock = socket.create_connection((running.host, running.port), timeout=10)
        sock.sendall(b"GET /v1/models/taxi HTTP/1.1\r\nHost: x\r\n\r\n")
        start = time.monotonic()
        answer = _read_all(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert 0.4 < time.monotonic() - start < 5  # the server closed it: recv returned b""
        sock.close()


def test_connections_over_the_limit_get_a_503(base):
    with serve.serve(base, poll_seconds=0, max_connections=3) as running:
        held = [socket.create_connection((running.host, running.port)) for _ in range(3)]
        time.sleep(0.2)
        extra = socket.create_connection((running.host, running.port), timeout=10)
        head, _, body = _read_all(extra).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), head
        assert "too many connections (limit 3" in json.loads(body)["error"]
        for sock in [*held, extra]:
            sock.close()
        deadline = time.monotonic() + 5  # once the server has seen the closes
        while (status := request(running, "GET", "/v1/models/taxi")[0]) == 503 \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status == 200


def test_pipelined_requests_are_answered_in_order(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/models/taxi HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v1/models/nope HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v1/models/taxi/metadata HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\n\r\n")
        answer = _read_all(sock)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"200", b"404", b"200"]


def test_expect_100_continue_is_honoured(server):
    body = json.dumps({"examples": [{"fare": 7.25}]}).encode()
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/models/taxi:regress HTTP/1.1\r\nHost: x\r\n"
                     b"Expect: 100-continue\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(("raw", "status", "message"), [
    (b"NONSENSE\r\n\r\n", 400, "malformed request line"),
    (b"GET /v1/models/taxi HTTP/2.0\r\n\r\n", 505, "HTTP/2.0 is not supported"),
    (b"GET /v1/models/taxi HTTP/1.1\r\nbad header\r\n\r\n", 400, "malformed header line"),
    (b"POST /v1/models/taxi:predict HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400,
     "invalid Content-Length '-1'"),
    (b"POST /v1/models/taxi:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411,
     "send a Content-Length header"),
    (b"GET /v1/models/taxi HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431,
     "request headers over 65536 bytes"),
])
def test_malformed_http_gets_a_json_error_and_the_connection_closes(server, raw, status, message):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(raw)
        head, _, body = _read_all(sock).partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert b"Connection: close" in head
    assert message in json.loads(body)["error"]


@pytest.fixture(scope="module")
def impatient(base):
    """A server that gives clients half a second to send a request."""
    with serve.serve(base, poll_seconds=0, request_timeout_seconds=0.5, threads=2) as running:
        yield running


_TOKENS = st.sampled_from(["GET", "POST", "HEAD", "PUT", "", "G T", "\x00", "POST\t"])
_TARGETS = (st.sampled_from(["/v1/models/taxi", "/v1/models/taxi:predict", "/v1/models/%ff",
                             "/v1/models/taxi/versions/99999999999999999999", "*", ""])
            | st.text(max_size=40))
_VERSIONS = st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2", "HTTP/1.1 x", ""])
_HEADERS = st.lists(st.sampled_from(["Content-Length: 2", "Content-Length: x",
                                     "Content-Length: 99999999999999999999999", "Expect: 100-continue",
                                     "Transfer-Encoding: chunked", "Connection: close", "X: y",
                                     ": empty", "no colon"]) | st.text(max_size=30), max_size=5)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(method=_TOKENS, target=_TARGETS, version=_VERSIONS, headers=_HEADERS,
       body=st.binary(max_size=40), end=st.sampled_from(["\r\n\r\n", "\r\n", "", "\n\n"]))
def test_random_http_framing_gets_json_answers_or_a_close(impatient, method, target, version,
                                                          headers, body, end):
    """Whatever bytes arrive, every answer is an HTTP response with a JSON body (never a
    500), and the server answers the next client."""
    head = " ".join(part for part in (method, target, version) if part)
    raw = "\r\n".join([head, *headers]).encode("utf-8", "surrogatepass") + end.encode() + body
    with socket.create_connection((impatient.host, impatient.port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)  # the server sees the end after what was sent
        answer = _read_all(sock, timeout=5)
    responses = re.split(rb"(?=HTTP/1\.1 \d{3} )", answer)
    for response in filter(None, responses):
        if response.startswith(b"HTTP/1.1 100 Continue"):
            continue
        status_line, _, rest = response.partition(b"\r\n")
        assert re.fullmatch(rb"HTTP/1\.1 \d{3} [A-Za-z -]+", status_line), answer
        assert not status_line.startswith(b"HTTP/1.1 500"), answer
        content = rest.partition(b"\r\n\r\n")[2]
        if method == "HEAD" and not content:
            continue  # an answer to HEAD has headers only
        assert isinstance(json.loads(content), dict), answer
    status, _ = request(impatient, "GET", "/v1/models/taxi")
    assert status == 200


def test_http_1_0_closes_after_the_answer(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/models/taxi HTTP/1.0\r\n\r\n")
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"}")


# --- files: nothing outside the base path is read ---------------------------------------------

def test_a_model_directory_symlinked_from_outside_is_refused_and_reported(base, tmp_path,
                                                                           caplog):
    served, outside = tmp_path / "served", tmp_path / "outside"
    shutil.copytree(base / "taxi", outside / "taxi")
    served.mkdir()
    (served / "elsewhere").symlink_to(outside / "taxi", target_is_directory=True)
    shutil.copytree(base / "taxi", served / "taxi")
    with caplog.at_level("ERROR", logger="estflow.serve"), \
            serve.serve(served, poll_seconds=0) as running:
        assert [m.name for m in running.models()] == ["taxi"]
        status, payload = request(running, "GET", "/v1/models/elsewhere")
        assert_clear_error(status, payload, 404)
        # where it points is logged, never told to a client (no server paths in answers)
        assert "resolves outside the base path" in payload["error"]
        assert str(tmp_path) not in payload["error"]
        status, payload = request(running, "POST", "/v1/models/elsewhere:regress",
                                  {"examples": [{"fare": 1.0}]})
        assert status == 404 and "outside the base path" in payload["error"]
    assert any("elsewhere" in r.getMessage() and "outside the base path" in r.getMessage()
               for r in caplog.records)


def test_a_symlink_inside_the_base_path_is_served(base, tmp_path):
    shutil.copytree(base / "taxi", tmp_path / "taxi")
    (tmp_path / "alias").symlink_to(tmp_path / "taxi", target_is_directory=True)
    with serve.serve(tmp_path, poll_seconds=0) as running:
        assert [m.name for m in running.models()] == ["alias", "taxi"]


def test_a_version_symlinked_out_is_refused_and_the_previous_one_keeps_serving(base, tmp_path):
    served, outside = tmp_path / "served", tmp_path / "outside"
    shutil.copytree(base / "taxi", served / "taxi")
    fx.save_version(outside / "3", 3)
    with serve.serve(served, poll_seconds=0.1) as running:
        (served / "taxi" / "3").symlink_to(outside / "3", target_is_directory=True)
        payload = _wait_for_status(running, lambda s: len(s) == 2)
        refused, current = payload["model_version_status"]
        assert current["version"] == "2" and current["state"] == "AVAILABLE"
        assert refused["version"] == "3" and refused["state"] == "END"
        assert "outside the base path" in refused["status"]["error_message"]


def test_a_file_symlinked_out_of_a_version_is_refused(base, tmp_path):
    served, outside = tmp_path / "served", tmp_path / "outside"
    shutil.copytree(base / "taxi", served / "taxi")
    fx.save_version(outside / "3", 3)
    version = served / "taxi" / ".tmp-3"
    version.mkdir()
    for child in (outside / "3").iterdir():
        (version / child.name).symlink_to(child)
    with serve.serve(served, poll_seconds=0.1) as running:
        version.rename(served / "taxi" / "3")
        payload = _wait_for_status(running, lambda s: len(s) == 2)
        refused, current = payload["model_version_status"]
        assert current["version"] == "2" and refused["version"] == "3"
        assert "outside the base path" in refused["status"]["error_message"]


def test_a_version_symlinked_to_the_root_is_refused_without_walking_it(base, tmp_path):
    shutil.copytree(base / "taxi", tmp_path / "taxi")
    (tmp_path / "taxi" / "9").symlink_to("/", target_is_directory=True)
    done = threading.Event()
    result = {}

    def start():
        result["server"] = serve.serve(tmp_path, poll_seconds=0)
        done.set()

    threading.Thread(target=start, daemon=True).start()
    assert done.wait(60), "serve() still scanning after 60 s: it walks the filesystem"
    with result["server"] as running:
        status, payload = request(running, "GET", "/v1/models/taxi/versions/9")
        assert status == 200
        (entry,) = payload["model_version_status"]
        assert entry["state"] == "END"
        assert "taxi/9 resolves outside the base path" in entry["status"]["error_message"]


def _wait_for_status(running, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, payload = request(running, "GET", "/v1/models/taxi")
        if status == 200 and done(payload["model_version_status"]):
            return payload
        time.sleep(0.05)
    raise AssertionError(f"no such status within {timeout}s: {payload}")


def test_serve_options_are_validated(base):
    for bad in ({"threads": 0}, {"request_timeout_seconds": 0}, {"idle_timeout_seconds": -1},
                {"max_connections": 0}):
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}`"):
            serve.serve(base, **bad)


def test_os_error_of_a_busy_port_names_the_port(base):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve.serve(base, port=port)


def test_no_file_descriptors_leak_when_connections_come_and_go(base):
    fds = len(os.listdir("/proc/self/fd"))
    with serve.serve(base, poll_seconds=0) as running:
        for _ in range(50):
            with socket.create_connection((running.host, running.port), timeout=10) as sock:
                sock.sendall(b"GET /v1/models/taxi HTTP/1.1\r\nConnection: close\r\n\r\n")
                assert _read_all(sock).startswith(b"HTTP/1.1 200 ")
    assert len(os.listdir("/proc/self/fd")) <= fds + 2
