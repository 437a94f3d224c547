"""Deterministic split assignment: a hash of the row (or of its declared key) picks the split.

The hash is CRC32C (a standard, so the same on every machine, runner and Python version; never
Python's salted ``hash()``) finished with the splitmix64 mixer, then mapped to [0, 1) and cut at
the declared ratios. The row hash is the CRC of the row's encoded raw Example (which the
TFRecord framing computes anyway; TFX hashes the serialized Example the same way), so a row's
split depends on its typed values, not on how a file formatted them (``1.50`` and ``1.5`` land
together) nor on which source format held it. Declaring another raw column changes the
Examples and so the row hashes: declare ``Split(key=...)`` (a row id) to keep an eval set
fixed while the declarations evolve. The key hash is the CRC of the key's typed value: UTF-8
bytes of a string, the 8 little-endian bytes of an int, the 4 of a float32; a missing key
takes its declared default.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from estflow.components._io.example_codec import masked_crc32c
from estflow.dsl.features import Column
from estflow.dsl.specs import Split

__all__ = ["assign_splits", "scalar_values", "to_unit_interval"]


def to_unit_interval(crc: np.ndarray) -> np.ndarray:
    """splitmix64-mix 32-bit hashes and map them to [0, 1) (float64, 53 bits)."""
    z = crc.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def assign_splits(split: Split, batch: pa.RecordBatch, key: Column | None,
                  row_crcs: np.ndarray) -> np.ndarray:
    """The split index (into :meth:`Split.names`) of each row of ``batch``.

    Args:
        split: the declared split.
        batch: validated rows (raw-example layout).
        key: the raw column declared as ``split.key``, or None to hash the whole row.
        row_crcs: the CRC of each row's encoded raw Example.
    """
    crcs = row_crcs if key is None else _key_crcs(batch, key)
    bounds = np.cumsum([fraction for _, fraction in split.fractions()])
    index = np.searchsorted(bounds, to_unit_interval(crcs), side="right")
    return np.minimum(index, len(bounds) - 1)


def scalar_values(lists: pa.Array) -> pa.Array:
    """The one value of each row of a list column, null where the row has none."""
    present = np.asarray(pc.list_value_length(lists).fill_null(0), dtype=np.int64) > 0
    index = np.cumsum(present) - 1
    return pc.list_flatten(lists).take(pa.array(index, mask=~present))


def _key_crcs(batch: pa.RecordBatch, key: Column) -> np.ndarray:
    values = scalar_values(batch.column(key.name))
    if key.default is not None and values.null_count:
        default = key.default.encode() if key.dtype == "string" else key.default
        values = values.fill_null(pa.scalar(default, values.type))
    if key.dtype == "string":
        binary = values.cast(pa.large_binary())
        offsets = np.frombuffer(binary.buffers()[1], np.int64, len(binary) + 1,
                                binary.offset * 8)
        data = np.frombuffer(binary.buffers()[2] or b"\0", np.uint8)
        return masked_crc32c(data, offsets[:-1], np.diff(offsets))
    width = 8 if key.dtype == "int" else 4
    fixed = values.to_numpy(zero_copy_only=False).astype("<i8" if width == 8 else "<f4")
    flat = fixed.view(np.uint8)
    return masked_crc32c(flat, np.arange(len(fixed), dtype=np.int64) * width,
                         np.full(len(fixed), width, dtype=np.int64))
