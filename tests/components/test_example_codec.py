"""The vectorised tf.Example encoder and TFRecord framing, checked against TensorFlow's own
parser and reader: every value kind, absent cells, long strings, batches larger than one
encoding slice, and corruption detection."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components._io import example_codec as codec


def _lists(values, kind) -> pa.Array:
    return pa.array([None if v is None else [v] for v in values], pa.large_list(kind))


def _read(path) -> list[tf.train.Example]:
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


def test_every_kind_round_trips_through_tensorflow_and_absent_cells_stay_absent(tmp_path):
    long_text = "é" * 100  # 200 bytes: multi-byte varint lengths
    batch = pa.RecordBatch.from_arrays([
        _lists([1.5, None, -0.0, 3.4e38], pa.float32()),
        _lists([0, -1, 2**63 - 1, None], pa.int64()),
        _lists([b"", None, long_text.encode(), b"x"], pa.large_binary()),
        pa.array([True, False, None, True]),
    ], ["f", "i", "s", "zé"])
    framed = codec.encode_batch(batch)
    (tmp_path / "t.tfrecord").write_bytes(framed.take(np.arange(4)))
    rows = [ex.features.feature for ex in _read(tmp_path / "t.tfrecord")]
    assert list(rows[0]["f"].float_list.value) == [1.5]
    assert list(rows[2]["i"].int64_list.value) == [2**63 - 1]
    assert list(rows[1]["i"].int64_list.value) == [-1]
    assert list(rows[0]["s"].bytes_list.value) == [b""]  # an empty string is a value
    assert rows[2]["s"].bytes_list.value[0].decode() == long_text
    assert list(rows[3]["zé"].int64_list.value) == [1]
    assert "f" not in rows[1] and "s" not in rows[1] and "i" not in rows[3] and "zé" not in rows[2]
    # The same bytes as protobuf's deterministic serialisation.
    assert all(ex.SerializeToString(deterministic=True) == raw for ex, raw in zip(
        _read(tmp_path / "t.tfrecord"), codec.unframe_records(framed.take(np.arange(4)))[0],
        strict=True))


def test_large_batches_are_encoded_in_slices_and_taken_in_row_order(tmp_path):
    n = 150_000  # more than two encoding slices
    batch = pa.RecordBatch.from_arrays([_lists(list(range(n)), pa.int64())], ["id"])
    framed = codec.encode_batch(batch)
    rows = np.arange(0, n, 7)
    (tmp_path / "t.tfrecord").write_bytes(framed.take(rows))
    ids = [ex.features.feature["id"].int64_list.value[0] for ex in _read(tmp_path / "t.tfrecord")]
    assert ids == rows.tolist()


def test_several_values_in_a_row_are_refused():
    batch = pa.RecordBatch.from_arrays([pa.array([[1, 2]], pa.large_list(pa.int64()))], ["v"])
    with pytest.raises(codec.EncodeError, match="'v' has rows with 2 values"):
        codec.encode_batch(batch)


def test_unframing_reads_tensorflow_files_and_detects_corruption(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "t.tfrecord")) as writer:
        for i in range(5):
            writer.write(f"record {i}".encode() * (i + 1))
    data = (tmp_path / "t.tfrecord").read_bytes()
    records, used = codec.unframe_records(data[:-3])  # the last record is incomplete
    assert records == [f"record {i}".encode() * (i + 1) for i in range(4)]
    assert used == len(data) - (16 + len(b"record 4" * 5))  # what the caller must keep
    corrupt = bytearray(data)
    corrupt[20] ^= 0xFF  # a byte of the first record's data
    with pytest.raises(ValueError, match="CRC mismatch"):
        codec.unframe_records(bytes(corrupt))
    assert codec.frame_records(codec.unframe_records(data)[0]) == data


_VALUES = {
    "float": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "int": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "bytes": (pa.large_binary(), st.binary(max_size=300)),
}


@settings(max_examples=200, deadline=None)
@given(data=st.data(), rows=st.integers(0, 12))
def test_any_batch_encodes_as_protobuf_serializes_it(data, rows):
    """Generated batches (any mix of kinds, missing cells anywhere, columns missing in every
    row, no rows) against protobuf's own serialisation of the same Examples. (An int column
    with no value in a block once crashed the encoder: a CSV block whose int cells were all
    blank.)"""
    names = data.draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4,
                               unique=True))
    arrays, columns = [], {}
    for name in names:
        arrow, values = _VALUES[data.draw(st.sampled_from(sorted(_VALUES)))]
        cells = data.draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        arrays.append(_lists(cells, arrow))
        columns[name] = (arrow, cells)
    batch = pa.RecordBatch.from_arrays(arrays, names)
    serialized = codec.encode_examples(batch)
    framed = codec.encode_batch(batch)
    ours = [serialized.data[a:a + n].tobytes()
            for a, n in zip(serialized.starts, serialized.lengths, strict=True)]
    assert codec.unframe_records(framed.take(np.arange(rows)))[0] == ours
    for row in range(rows):
        example = tf.train.Example()
        example.features.SetInParent()  # an Example with no feature still has its features
        for name in sorted(names, key=lambda n: n.encode("utf-8")):
            arrow, cells = columns[name]
            value = cells[row]
            if value is None:
                continue
            feature = example.features.feature[name]
            if arrow == pa.float32():
                feature.float_list.value.append(value)
            elif arrow == pa.int64():
                feature.int64_list.value.append(value)
            else:
                feature.bytes_list.value.append(value)
        assert tf.train.Example.FromString(ours[row]) == example
