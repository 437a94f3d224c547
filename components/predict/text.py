"""Values as JSON or CSV text, a whole column at a time (Arrow kernels, no loop per row).

The JSON of a value is what the REST server answers for it (``json.dumps`` of
``array.tolist()``, :mod:`estflow.components.serve.codec`): a float32 is written as the
shortest text of its float64 value (``0.30000001192092896``, ``1.0``, ``1e-05``), with
``NaN``/``Infinity`` as Python's json writes them; bytes as UTF-8 text, or ``{"b64": ...}``
when they are not UTF-8 or the output's name ends in ``_bytes``. Arrow writes the same digits
as Python but another notation for integral values (``1``) and for very small or large ones
(``0.00001``, ``1e+16``); those values are written again in Python, so the text is the same
byte for byte. CSV cells use the same number text (Python's ``csv`` module writes ``repr``)
and quote a cell holding the delimiter, a quote, CR or LF.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["lit", "json_values", "json_nested", "csv_values", "number_texts",
           "join_lines", "to_bytes"]

_TEXT = pa.large_string()
_ARROW_EXPONENT = 1e10  # Arrow writes |x| >= 1e10 as 1.5e+10; Python from 1e16 (tests check)
_CONTROL = r"[\x00-\x1f]"


def lit(text: str) -> pa.Scalar:
    """A text constant for Arrow's element-wise joins."""
    return pa.scalar(text, _TEXT)


def _replace(texts: pa.Array, rows: np.ndarray, values: list[str]) -> pa.Array:
    if not len(rows):
        return texts
    mask = np.zeros(len(texts), bool)
    mask[rows] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(values, _TEXT))


def number_texts(values: np.ndarray, *, json_style: bool) -> pa.Array:
    """The text of each number of a flat array, as Python writes ``value.tolist()``'s items
    (``json.dumps`` for JSON; ``repr``, as the csv module, otherwise)."""
    if values.dtype.kind == "b":
        return pc.if_else(pa.array(values), lit("true" if json_style else "True"),
                          lit("false" if json_style else "False"))
    if values.dtype.kind in "iu":
        return pc.cast(pa.array(values), _TEXT)
    wide = values.astype(np.float64)
    texts = pc.cast(pa.array(wide), _TEXT)
    size = np.abs(wide)
    with np.errstate(invalid="ignore"):  # Arrow's exponent notation starts at 1e10
        other = ~np.isfinite(wide) | (size >= _ARROW_EXPONENT) | ((size < 1e-4) & (size > 0))
    rows = np.flatnonzero(other)
    write = json.dumps if json_style else repr
    texts = _replace(texts, rows, [write(float(v)) for v in wide[rows].tolist()])
    integral = np.flatnonzero(~other & (wide == np.floor(wide)))
    if len(integral):  # Arrow writes 3.0 as "3"
        mask = np.zeros(len(texts), bool)
        mask[integral] = True
        texts = pc.if_else(pa.array(mask), pc.binary_join_element_wise(texts, lit(".0"),
                                                                        lit("")), texts)
    return texts


def _json_strings(values: pa.Array, as_b64: bool) -> pa.Array:
    """JSON string literals of binary values (null stays null)."""
    binary = values.cast(pa.large_binary())
    if as_b64:
        return pa.array([None if v is None else json.dumps({"b64": base64.b64encode(v).decode()})
                         for v in binary.to_pylist()], _TEXT)
    try:
        text = binary.cast(_TEXT)
    except pa.ArrowInvalid:  # not UTF-8: value by value
        return pa.array([None if v is None else _json_bytes(v) for v in binary.to_pylist()],
                        _TEXT)
    escaped = pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), '"', '\\"')
    quoted = pc.binary_join_element_wise(lit('"'), escaped, lit('"'), lit(""))
    odd = np.flatnonzero(np.asarray(pc.match_substring_regex(text, _CONTROL).fill_null(False)))
    return _replace(quoted, odd, [json.dumps(v, ensure_ascii=False)
                                  for v in text.take(pa.array(odd)).to_pylist()])


def _json_bytes(value: bytes) -> str:
    try:
        return json.dumps(value.decode(), ensure_ascii=False)
    except UnicodeDecodeError:
        return json.dumps({"b64": base64.b64encode(value).decode()})


def json_values(values, *, as_b64: bool = False) -> pa.Array:
    """The JSON text of each value of a flat numpy array or Arrow array (null: ``null``)."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return number_texts(values, json_style=True)
    array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(
        values.tolist(), pa.large_binary())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or \
            pa.types.is_string(kind) or pa.types.is_large_string(kind):
        texts = _json_strings(array, as_b64)
    elif pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        valid = np.asarray(array.is_valid())
        filled = array.fill_null(False if pa.types.is_boolean(kind) else 0)
        texts = number_texts(np.asarray(filled.to_numpy(zero_copy_only=False)),
                             json_style=True)
        texts = pc.if_else(pa.array(valid), texts, pa.nulls(len(texts), _TEXT))
    else:
        texts = pa.array([json.dumps(v) for v in array.to_pylist()], _TEXT)
    return texts.fill_null(lit("null"))


def json_nested(flat: pa.Array, shape: tuple[int, ...]) -> pa.Array:
    """The JSON lists of rows of ``shape`` from the flat texts of their values (row-major)."""
    for width in reversed(shape):
        if width == 0:
            raise ValueError("an output with an empty dimension has no values to write")
        if width == 1:
            flat = pc.binary_join_element_wise(lit("["), flat, lit("]"), lit(""))
            continue
        offsets = pa.array(np.arange(0, len(flat) + 1, width, dtype=np.int64))
        lists = pa.LargeListArray.from_arrays(offsets, flat)
        flat = pc.binary_join_element_wise(lit("["), pc.binary_join(lists, lit(",")), lit("]"),
                                           lit(""))
    return flat


def csv_values(values, delimiter: str = ",") -> pa.Array:
    """The CSV cell of each value of a flat numpy or Arrow array (null: an empty cell)."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return number_texts(values, json_style=False)
    array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(
        values.tolist(), pa.large_binary())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        valid = np.asarray(array.is_valid())
        filled = array.fill_null(False if pa.types.is_boolean(kind) else 0)
        texts = number_texts(np.asarray(filled.to_numpy(zero_copy_only=False)), json_style=False)
        return pc.if_else(pa.array(valid), texts, lit("")).cast(_TEXT)
    try:
        text = array.cast(pa.large_binary()).cast(_TEXT)
    except pa.ArrowInvalid:
        text = pa.array([None if v is None else v.decode("utf-8", "backslashreplace")
                         for v in array.cast(pa.large_binary()).to_pylist()], _TEXT)
    special = "[\"\r\n" + ("\\\\" if delimiter == "\\" else "") + \
        (delimiter if delimiter not in "]^-" else "\\" + delimiter) + "]"
    needs = pc.match_substring_regex(text, special).fill_null(False)
    quoted = pc.binary_join_element_wise(lit('"'), pc.replace_substring(text, '"', '""'),
                                         lit('"'), lit(""))
    return pc.if_else(needs, quoted, text).fill_null(lit(""))


def join_lines(pieces: list) -> pa.Array:
    """Rows of text from columns of text and constants, joined element-wise."""
    return pc.binary_join_element_wise(*pieces, lit(""))


def to_bytes(lines: pa.Array) -> bytes:
    """The text of all rows, one after the other (each row ends with its own newline)."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if not len(lines):
        return b""
    offsets = np.frombuffer(lines.buffers()[1], np.int64, len(lines) + 1, lines.offset * 8)
    return lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
