"""What batch prediction reads a source for: the model's raw features, then the key columns no
feature is, passed through to the predictions with their type.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from estflow.components._sources import registry as sources
from estflow.dsl import sources as s
from estflow.dsl.features import Column
from estflow.dsl.specs import Split

__all__ = ["ScoringSchema", "key_columns", "arrow_keys"]

_ARROW_KEYS = {"float": pa.float32(), "int": pa.int64(), "string": pa.string()}
_DEFAULTS = {"float": 0.0, "int": 0, "string": ""}


@dataclasses.dataclass(frozen=True)
class _NoLabel:
    dtype: None = None
    column: None = None


@dataclasses.dataclass(frozen=True)
class ScoringSchema:
    """What ingest's readers read a pipeline for, when scoring: the source and the raw columns
    (the model's raw features, then the keys no feature is). Nothing is trained: no label, and
    one split nobody uses (ingest's summary wants one)."""

    source: s.Source
    columns: tuple[Column, ...]
    label: _NoLabel = _NoLabel()
    split: Split = Split()

    def raw_columns(self) -> tuple[Column, ...]:
        return self.columns


def key_columns(source: s.Source, files: list[str], keys: tuple[str, ...],
                model_columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The key columns that are not model features: of the type the source's own schema gives
    them (its reader's ``column_dtypes``: a Parquet column's number type), else text (a key
    may be missing in a row: it is then null in the output)."""
    known = {c.name for c in model_columns}
    dtypes = sources.reader_for(source).column_dtypes(files, keys)
    columns = []
    for name in keys:
        if name in known:
            continue
        dtype = dtypes.get(name, "string")
        columns.append(Column(name, dtype, _DEFAULTS[dtype]))
    return tuple(columns)


def arrow_keys(columns: tuple[Column, ...],
               keys: tuple[str, ...]) -> tuple[tuple[str, pa.DataType], ...]:
    """``(name, Arrow type)`` of each key column, in the order the keys are declared."""
    dtypes = {c.name: c.dtype for c in columns}
    return tuple((name, _ARROW_KEYS[dtypes[name]]) for name in keys)
