"""Rows checked against the declared columns: each bad row rejected with one reason, the good
rows as an Arrow RecordBatch in the raw-example layout.

Shared by every source. A row's reason is its first failure in declaration order (a missing
required value before a bad value of the same column), then the label check, as the rejected
rows file has always reported them.

The batch has one ``large_list`` column per raw column, holding one value, or none where the
cell was missing and the column declares a default: the feature stays *absent* from the raw
Example and the transform graph fills the default, exactly as at serving time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from estflow.components._sources.cells import ARROW_TYPES
from estflow.components._sources.cells import Cells
from estflow.components._sources.cells import convert
from estflow.dsl.features import Column
from estflow.dsl.pipeline import Pipeline

__all__ = ["Validated", "arrow_schema", "validate", "empty_stats", "merge_stats"]


@dataclasses.dataclass
class Validated:
    """``batch``: the good rows; ``rows``: their index in the input; ``rejected``:
    ``(input row, kind, message)`` per bad row; ``stats``: see :func:`empty_stats`."""

    batch: pa.RecordBatch
    rows: np.ndarray
    rejected: list[tuple[int, str, str]]
    stats: dict


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of validated batches (also what tf.Transform is told it receives)."""
    return pa.schema([(c.name, pa.large_list(ARROW_TYPES[c.dtype])) for c in columns])


def validate(pipeline: Pipeline, cells: Mapping[str, pa.Array], num_rows: int, *,
             na: Mapping[str, tuple[str, ...]] | None = None) -> Validated:
    """Convert the cells of every raw column, reject bad rows, keep the others.

    Args:
        pipeline: supplies the raw columns (dtype, default) and the label.
        cells: raw column name -> one cell per input row (text or typed Arrow arrays).
        num_rows: the number of input rows.
        na: raw column name -> the text cells that mean "missing" in it (CSV); default: only
            the empty cell.

    Raises:
        CellTypeError: a column's source type cannot hold its declared dtype.
    """
    raw = pipeline.raw_columns()
    na = na or {}
    converted = {c.name: convert(c, cells[c.name], na.get(c.name)) for c in raw}
    failure = np.full(num_rows, -1, dtype=np.int64)
    checks = []
    for column in raw:
        result = converted[column.name]
        if column.default is None:
            checks.append((column, "missing", result.missing))
        checks.append((column, "bad", result.bad))
    label_bad = _label_check(pipeline, converted)
    if label_bad is not None:
        checks.append((pipeline.label, "label", label_bad))
    for index, (_, _, mask) in enumerate(checks):
        failure[(failure < 0) & mask] = index
    good = failure < 0
    rejected = [_reason(checks[failure[row]], converted, row)
                for row in np.flatnonzero(~good).tolist()]
    batch = _batch(raw, converted, good)
    return Validated(batch, np.flatnonzero(good), rejected, _stats(raw, converted, good))


def _label_check(pipeline: Pipeline, converted: dict[str, Cells]) -> np.ndarray | None:
    label = pipeline.label
    if label.dtype != "string" or label.column not in converted:
        return None
    # Rejected here, where the row can be named; in the graph it could only become -1.
    cells = converted[label.column]
    known = pc.is_in(cells.values, value_set=pa.array([v.encode() for v in label.vocabulary],
                                                      pa.large_binary()))
    return ~np.asarray(known.fill_null(True), dtype=bool)


def _reason(check, converted: dict[str, Cells], row: int) -> tuple[int, str, str]:
    column, what, _ = check
    if what == "missing":
        return row, f"missing_required:{column.name}", (
            f"missing required column {column.name!r} (it declares no default)")
    if what == "bad":
        return row, f"bad_value:{column.name}", converted[column.name].describe_bad(column, row)
    value = converted[column.column].values[row].as_py().decode("utf-8", "backslashreplace")
    return row, "label_not_in_vocabulary", (
        f"label column {column.column!r}: {value!r} is not one of the declared classes "
        f"{column.vocabulary}")


def _batch(raw: tuple[Column, ...], converted: dict[str, Cells], good: np.ndarray
           ) -> pa.RecordBatch:
    keep = pa.array(good)
    arrays = []
    for column in raw:
        values = converted[column.name].values.filter(keep)
        present = np.asarray(values.is_valid(), dtype=bool)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(present, out=offsets[1:])
        arrays.append(pa.LargeListArray.from_arrays(
            pa.array(offsets), values.drop_null() if values.null_count else values))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(raw))


# --- statistics of one batch, merged across batches ---------------------------------------------

_EXAMPLE_CHARS = 64
"""The most characters of a bad cell kept as a column's ``type_error_example``."""


def empty_stats(raw: tuple[Column, ...]) -> dict:
    """Per column: ``checked`` rows, ``missing`` and ``type_errors`` among them (for the schema
    check and the data checks), ``type_error_example`` (the smallest bad cell as text, at most
    64 characters, so every bundling picks the same one; None: none), and over written rows
    ``written_missing``, ``count``, ``sum``, ``min``, ``max``."""
    return {c.name: {"checked": 0, "missing": 0, "type_errors": 0, "type_error_example": None,
                     "written_missing": 0, "count": 0, "sum": 0.0, "min": None, "max": None}
            for c in raw}


def _example(result: Cells) -> str | None:
    """The smallest of a column's bad cells, as text (None: none)."""
    rows = np.flatnonzero(result.bad)
    if not len(rows):
        return None
    texts = []
    for value in result.source.take(pa.array(rows)).to_pylist():
        text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) \
            else str(value)
        texts.append(text[:_EXAMPLE_CHARS])
    return min(texts)


def _stats(raw: tuple[Column, ...], converted: dict[str, Cells], good: np.ndarray) -> dict:
    stats = empty_stats(raw)
    keep = pa.array(good)
    for column in raw:
        result, entry = converted[column.name], stats[column.name]
        entry["checked"] = len(good)
        entry["missing"] = int(result.missing.sum())
        entry["type_errors"] = int(result.bad.sum())
        entry["type_error_example"] = _example(result)
        entry["written_missing"] = int((result.missing & good).sum())
        entry["count"] = int(good.sum()) - entry["written_missing"]
        if column.dtype != "string" and entry["count"]:
            written = result.values.filter(keep)
            low, high = pc.min_max(written).values()
            entry.update(sum=float(pc.sum(written.cast(pa.float64())).as_py()),
                         min=float(low.as_py()), max=float(high.as_py()))
    return stats


def merge_stats(left: dict, right: dict) -> dict:
    """Add two stats dicts of :func:`empty_stats`'s shape (left is updated and returned)."""
    for name, other in right.items():
        entry = left.setdefault(name, dict(other))
        if entry is other:
            continue
        for key in ("checked", "missing", "type_errors", "written_missing", "count", "sum"):
            entry[key] += other[key]
        for key, pick in (("min", min), ("max", max), ("type_error_example", min)):
            values = [v for v in (entry.get(key), other.get(key)) if v is not None]
            entry[key] = pick(values) if values else None
    return left
