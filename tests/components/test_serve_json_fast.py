"""``estflow serve``'s fast JSON (orjson) means what the standard library's ``json`` means.

The reference is ``json.loads``/``json.dumps`` (the codec's behaviour before orjson, and TF
Serving's: ``NaN``/``Infinity``/``-Infinity`` unquoted both ways). Property tests cover every
value shape the codec reads or writes: nested lists of numbers (non-finite floats and integers
beyond 64 bits included), strings of any code point (lone surrogates included), ``{"b64": ...}``
objects, booleans, nulls, objects; bodies in every layout a client may send; arbitrary bytes.
One test runs over real HTTP on loopback: a NaN the model computes reaches the client unquoted.
"""

import base64
import json
import math

import orjson
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components.serve import json_fast


def canonical(value):
    """``value`` with every scalar tagged by its type and floats by ``repr`` (NaN equals NaN,
    -0.0 differs from 0.0, 1 differs from 1.0 and True), objects in their key order."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", [canonical(v) for v in value])
    return ("object", [(k, canonical(v)) for k, v in value.items()])


_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates included
_B64 = st.binary(max_size=24).map(lambda b: {"b64": base64.b64encode(b).decode()})
_SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-2**64, 2**64)
            | st.floats() | st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e16, 5e-324])
            | _TEXT)
_MATRICES = st.integers(1, 4).flatmap(
    lambda n: st.lists(st.lists(st.floats() | st.integers(), min_size=n, max_size=n),
                       min_size=1, max_size=4))
VALUES = st.recursive(
    _SCALARS | _B64 | _MATRICES,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=40)
DOCUMENTS = st.fixed_dictionaries(
    {}, optional={"signature_name": _TEXT, "instances": VALUES, "inputs": VALUES,
                  "examples": st.lists(st.dictionaries(_TEXT, VALUES, max_size=3), max_size=3),
                  "context": st.dictionaries(_TEXT, VALUES, max_size=3)})


@st.composite
def bodies(draw):
    """A document serialized the way some client may: ASCII escapes or raw UTF-8, compact or
    indented, with or without a trailing newline."""
    value = draw(DOCUMENTS | VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 0, 2])),
                      separators=draw(st.sampled_from([None, (",", ":"), (", ", " : ")])))
    return (text + draw(st.sampled_from(["", "\n", " \r\n"]))).encode("utf-8", "surrogatepass")


def outcome(function, *args):
    try:
        return "ok", canonical(function(*args))
    except (ValueError, RecursionError, TypeError) as e:
        return "raises", type(e).__name__


@settings(max_examples=200, deadline=None)
@given(body=bodies())
def test_loads_reads_every_body_as_json_loads_does(body):
    assert outcome(json_fast.loads, body) == outcome(json.loads, body)


@st.composite
def damaged(draw):
    """A valid body with bytes cut out, inserted or replaced: malformed more often than not."""
    body = bytearray(draw(bodies()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(body)))
        what = draw(st.sampled_from(["cut", "insert", "replace"]))
        data = draw(st.binary(min_size=1, max_size=3) | st.sampled_from(
            [b"NaN", b"-Infinity", b"1e400", b"\\ud800", b"\xef\xbb\xbf", b"9" * 20, b",", b"]"]))
        if what == "cut":
            del body[at:at + len(data)]
        elif what == "insert":
            body[at:at] = data
        else:
            body[at:at + len(data)] = data
    return bytes(body)


@settings(max_examples=200, deadline=None)
@given(body=damaged() | st.binary(max_size=40))
def test_loads_accepts_and_refuses_what_json_loads_does(body):
    assert outcome(json_fast.loads, body) == outcome(json.loads, body)


@settings(max_examples=200, deadline=None)
@given(value=DOCUMENTS | VALUES)
def test_dumps_writes_the_value_json_dumps_writes(value):
    written = outcome(lambda v: json.loads(json_fast.dumps(v)), value)
    assert written == outcome(lambda v: json.loads(json.dumps(v)), value)


def test_dumps_writes_non_string_keys_as_json_dumps_does():
    value = {1: "a", 2.5: "b", False: "c", None: "d"}
    assert json.loads(json_fast.dumps(value)) == json.loads(json.dumps(value))


@pytest.mark.parametrize("value", [{"a": object()}, {"a": {1, 2}}, {(1, 2): "a"}])
def test_dumps_refuses_what_json_dumps_refuses(value):
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        json_fast.dumps(value)


def test_non_finite_floats_are_written_unquoted_as_tf_serving_writes_them():
    answer = json_fast.dumps({"predictions": [[math.nan, math.inf], [-math.inf, 0.5]]})
    assert answer == b'{"predictions": [[NaN, Infinity], [-Infinity, 0.5]]}'


def test_non_finite_floats_are_read_as_tf_serving_reads_them():
    doc = json_fast.loads(b'{"instances": [NaN, Infinity, -Infinity, 1e400, -1e400]}')
    assert [repr(v) for v in doc["instances"]] == ["nan", "inf", "-inf", "inf", "-inf"]


def test_integers_beyond_64_bits_stay_exact():
    big = 2**64 + 1
    assert json_fast.loads(f'{{"instances": [{big}, {-big}]}}'.encode()) == {
        "instances": [big, -big]}
    assert json.loads(json_fast.dumps([big])) == [big]


def test_a_typical_answer_takes_orjson_s_path():
    """The speed is the point: an answer of finite numbers and text is orjson's output."""
    answer = {"predictions": [{"logistic": [0.25], "class_ids": [0], "name": "é"}] * 3}
    assert json_fast.dumps(answer) == orjson.dumps(answer)


def test_a_nan_the_model_computes_reaches_the_client_unquoted(tmp_path):
    """Real HTTP on loopback: the fixture model scores an example whose fare is NaN."""
    import http.client

    from estflow.components.serve import __main__ as serve
    from tests.components import _serving_fixtures as fx

    fx.save_version(tmp_path / "taxi" / "1", 1)
    example = base64.b64encode(fx.serialize_example(math.nan, 60, "Cash")).decode()
    with serve.serve(tmp_path, poll_seconds=0) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("POST", "/v1/models/taxi:predict",
                     body=json.dumps({"instances": [{"b64": example}]}))
        response = conn.getresponse()
        raw = response.read()
        conn.close()
    assert response.status == 200, raw
    assert b"[NaN]" in raw and b"null" not in raw
    assert math.isnan(json.loads(raw)["predictions"][0]["logistic"][0])
