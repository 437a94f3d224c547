"""Deterministic split assignment: a hash of the row (or of its declared key) picks the split.

A 32-bit hash of each row (the same on every machine, runner and Python version; never
Python's salted ``hash()``) is finished with the splitmix64 mixer, mapped to [0, 1) and cut at
the declared ratios.

Without a key the hash is that of the row *as read*, which the readers compute with
:func:`text_hashes`: a CSV row's bytes (line ending removed, CR LF inside a multi-line value
read as LF), a TFRecord record's bytes. So declaring one more column, or dropping one, moves
no row between splits (it once did, when the hash was over the encoded Example, and an
evaluation then scored rows the model had trained on). Parquet and BigQuery rows have no text
as read; they hash their encoded raw Example (its masked CRC32C, which the TFRecord framing
computes anyway), so there the split follows the declared columns: declare
``Split(key=...)`` to keep it fixed. The key hash is the masked CRC32C of the key's typed
value: UTF-8 bytes of a string, the 8 little-endian bytes of an int, the 4 of a float32; a
missing key takes its declared default.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from estflow.components._io.example_codec import masked_crc32c
from estflow.dsl.features import Column
from estflow.dsl.specs import Split

__all__ = ["assign_splits", "scalar_values", "text_hashes", "to_unit_interval"]

_P = 0x01000193  # FNV's 32-bit prime: odd, so invertible modulo 2**32
_P_INVERSE = pow(_P, -1, 1 << 32)
_powers = (np.ones(1, np.uint32), np.ones(1, np.uint32), np.zeros(1, np.uint32))
_WINDOW = 1 << 18  # bytes hashed per step (bounds the tables: 3 x 4 B x 2 windows)


def text_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The hash of each slice ``data[starts[i]:ends[i]]`` of a byte array (uint32):
    ``sum((byte_j + 1) * P**j for j, byte_j in enumerate(slice)) mod 2**32`` with
    ``P = 0x01000193``. Vectorised over all slices at once (prefix sums, no loop over rows);
    it depends on the slice's bytes only, not on where they are."""
    out = np.zeros(len(starts), np.uint32)
    if not len(starts):
        return out
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    window = max(_WINDOW, int((ends - starts).max()))  # bounds the tables and temporaries
    i = 0
    while i < len(starts):
        j = max(int(np.searchsorted(starts, starts[i] + window, side="right")), i + 1)
        low, high = int(starts[i]), int(ends[i:j].max())
        forward, backward, ones = _power_tables(high - low + 1)
        prefix = np.zeros(high - low + 1, np.uint32)
        np.cumsum(forward[:high - low] * data[low:high], out=prefix[1:])  # sum byte_j * P**j
        first, last = starts[i:j] - low, ends[i:j] - low
        out[order[i:j]] = (prefix[last] - prefix[first] + ones[last] - ones[first]) * \
            backward[first]
        i = j
    return out


def _power_tables(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P**j`` and ``P**-j`` modulo 2**32 for ``j < size``, and the prefix sums of the
    first (the "+ 1" of every byte); grown as needed, then kept."""
    global _powers
    if len(_powers[0]) < size:
        size = max(size, min(2 * len(_powers[0]), 2 * _WINDOW + 1))
        forward, backward = (np.cumprod(np.concatenate([[1], np.full(size - 1, base)]).astype(
            np.uint32), dtype=np.uint32) for base in (_P, _P_INVERSE))
        ones = np.zeros(size, np.uint32)
        np.cumsum(forward[:-1], out=ones[1:])
        _powers = (forward, backward, ones)
    return _powers


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
        row_crcs: the CRC of each row as read (or of its encoded raw Example, see above).
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
