"""Scored rows in each output format: one payload per chunk of rows, no loop per row.

A row is the ``keys`` columns passed through, then the signature's outputs by name. Formats
(``BatchPredict.format``):

* ``jsonl``: one JSON object per line, ``{"trip_id": "t1", "class_ids": [1], ...}``; each
  output's value is the REST server's ``:predict`` value for the row (see :mod:`.text`);
* ``csv``: a header, then one cell per key and per output value: an output of one value per
  row keeps its name, one of several is spread over ``name_0``, ``name_1``, ... (row-major
  for more dimensions);
* ``parquet``: a column per key (its type as read) and per output (its dtype; a fixed-size
  list per row for outputs of several values, nested for more dimensions);
* ``tfrecord``: GZIP TFRecords of ``tf.train.Example``, a feature per key and per output
  (its values flattened).

Keys come as Arrow arrays (null where the input row had no value: ``null``, an empty CSV
cell, a null Parquet value, an absent feature); outputs as numpy arrays ``[rows, *shape]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from tfx_bsl.coders import example_coder

from estflow.components._io.example_codec import frame_records
from estflow.components.predict import text
from estflow.components.predict.model import OutputSpec

__all__ = ["FormatError", "Formatter", "formatter_for", "EXTENSIONS"]

EXTENSIONS = {"jsonl": ".jsonl", "csv": ".csv", "parquet": ".parquet",
              "tfrecord": ".tfrecord.gz"}
_ARROW = {"float32": pa.float32(), "float64": pa.float64(), "float16": pa.float16(),
          "int64": pa.int64(), "int32": pa.int32(), "int16": pa.int16(), "int8": pa.int8(),
          "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(),
          "uint64": pa.uint64(), "bool": pa.bool_()}


class FormatError(ValueError):
    """The outputs cannot be written in the chosen format (e.g. CSV of unknown widths)."""


def _flat(values: np.ndarray):
    """A numpy array's values in row-major order (strings as an Arrow binary array)."""
    flat = values.reshape(-1)
    if flat.dtype == object or flat.dtype.kind == "S":
        return pa.array(flat.tolist(), pa.large_binary())
    return flat


class Formatter:
    """How chunks of scored rows become the bytes (or Arrow table) of one output format.

    Args:
        format: one of :data:`EXTENSIONS`.
        keys: ``(name, Arrow type)`` of each key column, in output order.
        outputs: the signature's outputs (names sorted), with their per-row shapes.
    """

    def __init__(self, format: str, keys: tuple[tuple[str, pa.DataType], ...],
                 outputs: tuple[OutputSpec, ...]) -> None:
        self.format, self.keys, self.outputs = format, keys, outputs
        self.extension = EXTENSIONS[format]
        clash = {k for k, _ in keys} & {o.name for o in outputs}
        if clash:
            raise FormatError(f"key column(s) {sorted(clash)} have the name of an output of "
                              "the signature; rename the column in the data, or leave it out "
                              "of keys")
        if format == "csv":
            unknown = [o.name for o in outputs if o.shape is None]
            if unknown:
                raise FormatError(f"outputs {unknown} have no fixed number of values per row, "
                                  "so they have no CSV columns; write jsonl or parquet")

    def header(self) -> bytes:
        """What starts every file (the CSV header; nothing for the other formats)."""
        if self.format != "csv":
            return b""
        names = [name for name, _ in self.keys] + [c for o in self.outputs
                                                   for c in _csv_columns(o)]
        cells = text.csv_values(pa.array([n.encode() for n in names], pa.large_binary()))
        return (",".join(cells.to_pylist()) + "\n").encode()

    def schema(self) -> pa.Schema:
        """The Arrow schema of parquet chunks."""
        fields = [pa.field(name, kind) for name, kind in self.keys]
        return pa.schema(fields + [pa.field(o.name, _output_type(o)) for o in self.outputs])

    def payload(self, keys: Mapping[str, pa.Array], outputs: Mapping[str, np.ndarray]):
        """One chunk of rows: bytes to append to a file, or a table (parquet)."""
        if self.format == "jsonl":
            return self._jsonl(keys, outputs)
        if self.format == "csv":
            return self._csv(keys, outputs)
        if self.format == "parquet":
            return self._table(keys, outputs)
        return self._examples(keys, outputs)

    def _jsonl(self, keys, outputs) -> bytes:
        pieces: list = []
        for name, _ in self.keys:
            pieces += [json.dumps(name) + ":", text.json_values(keys[name])]
        for spec in self.outputs:
            values = outputs[spec.name]
            texts = text.json_values(_flat(values), as_b64=spec.name.endswith("_bytes"))
            pieces += [json.dumps(spec.name) + ":", text.json_nested(texts, values.shape[1:])]
        return _lines(pieces, "{", ",", "}\n")

    def _csv(self, keys, outputs) -> bytes:
        pieces = [text.csv_values(keys[name]) for name, _ in self.keys]
        for spec in self.outputs:
            values = outputs[spec.name]
            width = int(np.prod(values.shape[1:], dtype=np.int64))
            if values.shape[1:] != spec.shape:
                raise FormatError(f"output {spec.name!r} has {list(values.shape[1:])} values "
                                  f"per row here and {list(spec.shape)} in the header")
            cells = text.csv_values(_flat(values))
            pieces += [cells.take(pa.array(np.arange(j, len(cells), width)))
                       for j in range(width)]
        return _lines(pieces, "", ",", "\n")

    def _table(self, keys, outputs) -> pa.Table:
        schema = self.schema()
        columns = [keys[name].cast(kind) for name, kind in self.keys]
        for spec in self.outputs:
            columns.append(_arrow_values(outputs[spec.name], schema.field(spec.name).type))
        return pa.Table.from_arrays(columns, schema=schema)

    def _examples(self, keys, outputs) -> bytes:
        names, arrays = [], []
        for name, _ in self.keys:
            values = keys[name]
            offsets = np.concatenate([[0], np.cumsum(np.asarray(values.is_valid()))])
            names.append(name)
            arrays.append(pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)),
                                                        values.drop_null()))
        for spec in self.outputs:
            values = outputs[spec.name]
            width = int(np.prod(values.shape[1:], dtype=np.int64))
            flat = _flat(values.astype(np.int64) if values.dtype.kind == "b" else values)
            offsets = np.arange(0, len(values) * width + 1, max(width, 1), dtype=np.int64)
            names.append(spec.name)
            arrays.append(pa.LargeListArray.from_arrays(pa.array(offsets), flat))
        batch = pa.RecordBatch.from_arrays(arrays, names)
        return frame_records(example_coder.RecordBatchToExamplesEncoder().encode(batch))


def _lines(pieces: list, start: str, separator: str, end: str) -> bytes:
    """Rows from alternating pieces: constants (str) and columns of text."""
    parts: list = []
    constant = start
    for i, piece in enumerate(pieces):
        if isinstance(piece, str):
            constant += piece
            continue
        if parts or constant:
            parts.append(text.lit(constant))
        parts.append(piece)
        constant = separator if i + 1 < len(pieces) else ""
    parts.append(text.lit(constant + end))
    return text.to_bytes(text.join_lines(parts))


def _csv_columns(spec: OutputSpec) -> list[str]:
    if int(np.prod(spec.shape, dtype=np.int64)) == 1:
        return [spec.name]
    return [f"{spec.name}_{'_'.join(map(str, index))}" for index in np.ndindex(*spec.shape)]


def _output_type(spec: OutputSpec) -> pa.DataType:
    if spec.kind == "S":
        kind = pa.binary() if spec.name.endswith("_bytes") else pa.string()
    else:
        kind = _ARROW.get(spec.dtype)
        if kind is None:
            raise FormatError(f"output {spec.name!r} is {spec.dtype}, which parquet files of "
                              "predictions do not hold")
    if spec.shape is None:
        return pa.large_list(kind)
    for width in reversed(spec.shape):
        kind = pa.list_(kind, width)
    return kind


def _arrow_values(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    inner = kind
    while pa.types.is_fixed_size_list(inner) or pa.types.is_large_list(inner):
        inner = inner.value_type
    flat = _flat(values)
    array = flat.cast(inner) if isinstance(flat, pa.Array) else pa.array(flat, inner)
    if pa.types.is_large_list(kind):  # unknown per-row shape: each row's values, flattened
        width = int(np.prod(values.shape[1:], dtype=np.int64))
        offsets = np.arange(0, len(values) * width + 1, max(width, 1), dtype=np.int64)
        return pa.LargeListArray.from_arrays(pa.array(offsets), array)
    for width in reversed(values.shape[1:]):
        array = pa.FixedSizeListArray.from_arrays(array, width)
    return array


def formatter_for(format: str, keys: tuple[tuple[str, pa.DataType], ...],
                  outputs: tuple[OutputSpec, ...]) -> Formatter:
    """The formatter of ``format`` (see :class:`Formatter`).

    Raises:
        FormatError: a key is named like an output, or the outputs do not fit the format.
    """
    return Formatter(format, keys, outputs)
