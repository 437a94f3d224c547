"""JSON for ``estflow serve`` at the speed of orjson, with the standard library's meaning.

TF Serving reads and writes ``NaN``, ``Infinity`` and ``-Infinity`` unquoted (as Python's
``json`` does); orjson refuses them on input and writes ``null`` for them on output. So each
function here takes orjson's fast path only where its answer is the standard library's, and
otherwise gives the standard library's answer:

* :func:`loads`: orjson, unless the body has a run of 19 or more digits (orjson turns an
  integer beyond 64 bits into a float silently; ``json`` keeps it exact); anything orjson
  refuses (``NaN``/``Infinity``, a number beyond the double range, a lone surrogate, a byte
  order mark, UTF-16, malformed JSON) is parsed again by ``json.loads``, which accepts it or
  raises its own error.
* :func:`dumps`: orjson, unless its output contains ``null`` (where orjson may have written a
  non-finite float; the fallback also covers a real ``None`` or the text "null") or it refuses
  the value (non-string keys, integers beyond 64 bits, lone surrogates, unknown types);
  then ``json.dumps``. orjson writes UTF-8 where ``json`` writes ``\\uXXXX`` escapes and
  ``1e16`` where it writes ``1e+16``: the same JSON values.

The property tests in ``tests/components/test_serve_json_fast.py`` check both against the
standard library for every value shape the codec takes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["loads", "dumps"]

_LONG_DIGITS = re.compile(rb"[0-9]{19}")  # a possible integer beyond 64 bits
_NULL = b"null"
# Types json.dumps refuses but orjson would write (datetimes, dataclasses): orjson refuses them
# too, so json.dumps raises its TypeError. Subclasses of str/int/dict/list go to json.dumps,
# which writes them its own way (an IntEnum as its value).
_OPTIONS = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
            | orjson.OPT_PASSTHROUGH_SUBCLASS)


def loads(body: bytes) -> Any:
    """``json.loads(body)``, faster for the bodies clients send.

    Raises:
        ValueError: (``json.JSONDecodeError``, ``UnicodeDecodeError``) what ``json.loads``
            raises for ``body``.
        RecursionError: as ``json.loads``, for nesting deeper than the interpreter's limit.
    """
    if not _LONG_DIGITS.search(body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # maybe NaN/Infinity or another form only json accepts; json decides
    return json.loads(body)


def dumps(value: Any) -> bytes:
    """``json.dumps(value)`` as UTF-8 bytes (the same JSON value), faster.

    Raises:
        TypeError, ValueError: what ``json.dumps`` raises for ``value``.
    """
    try:
        data = orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()
    if _NULL in data:
        return json.dumps(value).encode()
    return data
