"""Cells to declared column types, a whole column at a time, with a verdict per cell.

Text cells (CSV, and string columns of typed sources) are converted by Arrow in one cast when
the whole column is clean. When it is not, a regular expression picks the cells Arrow can cast
(the common syntax), and only the others go through Python's exact rules (``" 3"``, ``"+1"``,
``"1e3"`` for an int, ...), so one odd cell never turns a block into a per-row loop.

Typed cells (Parquet, TFRecord, BigQuery) are cast when the declared dtype can hold them
exactly: an int column accepts integral floats, a float column any number, a string column
text or integers; anything else is a schema error for the whole source.

Rules shared by every source: a missing cell (null, absent, or text equal to one of the
column's missing-value tokens: CSV declares them, ``CsvSource.na_values``; elsewhere only the
empty text) takes the declared default or rejects the row when none is declared; a float must be finite as a float32 (nan
and inf would poison every analyzer; 1e39 would silently become inf); an int must fit int64.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from estflow.dsl.features import Column

__all__ = ["ARROW_TYPES", "Cells", "CellTypeError", "can_hold", "convert", "WHAT"]

ARROW_TYPES = {"float": pa.float32(), "int": pa.int64(), "string": pa.large_binary()}
WHAT = {"float": "a finite float", "int": "an integer", "string": "a string"}
_FAST_SYNTAX = {"float": r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$",
                "int": r"^-?[0-9]{1,18}$"}


class CellTypeError(TypeError):
    """A source column's type cannot hold the declared dtype (a schema error, not a row one)."""


@dataclasses.dataclass
class Cells:
    """One column converted: ``values`` (declared Arrow type, null where missing or bad),
    ``missing`` and ``bad`` masks, and the original cells for error messages."""

    values: pa.Array
    missing: np.ndarray
    bad: np.ndarray
    source: pa.Array

    def describe_bad(self, column: Column, row: int) -> str:
        got = self.source[row].as_py()
        if isinstance(got, bytes):
            got = got.decode("utf-8", errors="backslashreplace")
        return f"column {column.name!r}: expected {WHAT[column.dtype]}, got {got!r}"


def convert(column: Column, cells: pa.Array, na: tuple[str, ...] | None = None) -> Cells:
    """Convert ``cells`` to ``column.dtype``.

    Args:
        column: the declared column.
        cells: its cells (text, or typed values).
        na: the text cells that mean "missing" (default: only the empty cell); a null is
            always missing.

    Raises:
        CellTypeError: the cells' Arrow type cannot be read as the declared dtype.
    """
    if isinstance(cells, pa.ChunkedArray):
        cells = cells.combine_chunks()
    kind = cells.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or (
            column.dtype != "string" and (pa.types.is_binary(kind)
                                          or pa.types.is_large_binary(kind))):
        return _from_text(column, cells.cast(pa.large_string()), ("",) if na is None else na)
    if pa.types.is_null(kind):
        return _result(pa.nulls(len(cells), ARROW_TYPES[column.dtype]), cells,
                       np.ones(len(cells), bool), np.zeros(len(cells), bool))
    return _from_typed(column, cells)


def can_hold(column: Column, kind: pa.DataType) -> bool:
    """Whether values of Arrow type ``kind`` can be read as ``column.dtype`` at all."""
    try:
        convert(column, pa.array([], kind))
    except CellTypeError:
        return False
    return True


def _result(values: pa.Array, source: pa.Array, missing: np.ndarray, bad: np.ndarray) -> Cells:
    unusable = missing | bad
    if unusable.any():
        values = pc.if_else(pa.array(unusable), pa.nulls(len(values), values.type), values)
    return Cells(values, missing, bad, source)


def _mask(array: pa.Array) -> np.ndarray:
    return np.asarray(array.fill_null(False), dtype=bool)


def _missing(cells: pa.Array, na: tuple[str, ...]) -> pa.Array:
    """Where a cell is null or one of the ``na`` tokens."""
    if na == ("",):
        tokens = pc.equal(cells, "")
    elif not na:
        tokens = pa.array(np.zeros(len(cells), bool))
    else:
        tokens = pc.is_in(cells, value_set=pa.array(na, pa.large_string()))
    return pc.or_(tokens.fill_null(False), cells.is_null())


def _from_text(column: Column, cells: pa.Array, na: tuple[str, ...]) -> Cells:
    if column.dtype == "string":
        missing = _mask(_missing(cells, na))
        return _result(cells.cast(pa.large_binary()), cells, missing,
                       np.zeros(len(cells), bool))
    # No token reads as a finite number ("NA", "NaN", ...): a clean column needs no lookup of
    # the tokens, only of the empty cell; a token other than "" fails the cast, or casts to
    # a nan/inf, and is looked up then.
    cheap = not any(map(_finite_number, na))
    empty = _missing(cells, tuple(t for t in na if not t) if cheap else na)
    try:  # clean column: one cast
        values = _cast_number(column.dtype, pc.if_else(empty, None, cells))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _from_text_slow(column, cells, _missing(cells, na) if cheap else empty,
                               "" in na)
    missing = _mask(empty)
    bad = _not_finite(values) & ~missing
    if cheap and bad.any() and any(na):
        missing |= bad & _mask(_missing(cells, na))
        bad &= ~missing
    return _result(values, cells, missing, bad)


def _finite_number(token: str) -> bool:
    try:
        return math.isfinite(float(token))
    except ValueError:
        return False


def _cast_number(dtype: str, cells: pa.Array) -> pa.Array:
    if dtype == "int":
        return pc.cast(cells, pa.int64())
    return pc.cast(pc.cast(cells, pa.float64()), pa.float32(), safe=False)


def _not_finite(values: pa.Array) -> np.ndarray:
    if not pa.types.is_floating(values.type):
        return np.zeros(len(values), bool)
    return ~_mask(pc.is_finite(values)) & _mask(values.is_valid())


def _from_text_slow(column: Column, cells: pa.Array, empty: pa.Array,
                    blank_is_missing: bool = True) -> Cells:
    """Arrow casts the cells with the common syntax; Python's rules decide the rest (a cell of
    spaces is missing where the empty cell is)."""
    fast = pc.and_(pc.match_substring_regex(cells, _FAST_SYNTAX[column.dtype]), pc.invert(empty))
    values = _cast_number(column.dtype, pc.if_else(fast, cells, None))
    missing, bad = _mask(empty), _not_finite(values)
    others = np.flatnonzero(~_mask(fast) & ~missing)
    if len(others):
        parse = _to_int if column.dtype == "int" else _to_float
        numpy_values = values.fill_null(0).to_numpy(zero_copy_only=False).copy()
        valid = _mask(values.is_valid())
        for row, text in zip(others.tolist(), cells.take(pa.array(others)).to_pylist(), strict=True):
            text = text.strip()
            if not text:
                missing[row] = blank_is_missing
                bad[row] = not blank_is_missing
                continue
            try:
                numpy_values[row] = parse(text)
                valid[row] = True
            except (ValueError, OverflowError):
                bad[row] = True
        values = pa.array(numpy_values, ARROW_TYPES[column.dtype], mask=~valid)
    return _result(values, cells, missing, bad)


def _to_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or not math.isfinite(np.float32(value)):
        raise ValueError(text)
    return value


def _to_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        # Accept integral floats ("3.0", "1e3"): exporters write the ints of a column with
        # gaps that way. A fractional value ("3.5") still raises.
        number = float(text)
        if not (math.isfinite(number) and number.is_integer()):
            raise ValueError(text) from None
        value = int(number)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


def _from_typed(column: Column, cells: pa.Array) -> Cells:
    kind, dtype = cells.type, column.dtype
    missing = _mask(cells.is_null())
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or \
        pa.types.is_decimal(kind) or pa.types.is_boolean(kind)
    if dtype == "string" and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        values = cells.cast(pa.large_binary())
    elif dtype == "string" and pa.types.is_integer(kind):
        values = cells.cast(pa.large_string()).cast(pa.large_binary())
    elif dtype == "float" and numeric:
        values = pc.cast(cells, pa.float32(), safe=False)
        return _result(values, cells, missing, _not_finite(values) & ~missing)
    elif dtype == "int" and numeric:
        return _typed_int(cells, missing)
    else:
        raise CellTypeError(f"column {column.name!r} holds {kind} values, which cannot be read "
                            f"as its declared dtype {dtype!r}")
    return _result(values, cells, missing, np.zeros(len(cells), bool))


def _typed_int(cells: pa.Array, missing: np.ndarray) -> Cells:
    if pa.types.is_integer(cells.type) or pa.types.is_boolean(cells.type):
        too_big = pa.types.is_unsigned_integer(cells.type) and cells.type.bit_width == 64
        bad = _mask(pc.greater(cells, 2**63 - 1)) if too_big else np.zeros(len(cells), bool)
        safe = pc.if_else(pa.array(bad), None, cells) if bad.any() else cells
        return _result(pc.cast(safe, pa.int64()), cells, missing, bad)
    floats = pc.cast(cells, pa.float64())
    integral = pc.and_(pc.is_finite(floats), pc.equal(pc.floor(floats), floats))
    in_range = pc.and_(pc.greater_equal(floats, -(2.0**63)), pc.less(floats, 2.0**63))
    ok = _mask(pc.and_(integral, in_range))
    values = pc.cast(pc.if_else(pa.array(ok), floats, None), pa.int64())
    return _result(values, cells, missing, ~ok & ~missing)
