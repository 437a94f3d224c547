"""The scalars of TensorBoard event files, read without TensorFlow (the search's process
imports none): the evaluations a trial's train step writes to ``checkpoints/eval``.

An event file is a TFRecord file (each record: its length as a little-endian uint64, that
length's CRC, the data, the data's CRC) of ``Event`` protos; a scalar is a summary value's
``simple_value`` (TF 1) or a float tensor (``tf.summary.scalar``). A record cut short (a
writer still writing, or killed) ends the file's reading there; the CRCs are not checked.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

__all__ = ["read_scalars"]

_HEADER = struct.Struct("<QI")
_DT_FLOAT, _DT_DOUBLE, _DT_HALF = 1, 2, 19


def _records(data: bytes) -> Iterable[bytes]:
    at = 0
    while at + _HEADER.size <= len(data):
        (length, _) = _HEADER.unpack_from(data, at)
        start, end = at + _HEADER.size, at + _HEADER.size + length
        if end + 4 > len(data):
            return
        yield data[start:end]
        at = end + 4


def _scalar(value) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    tensor = value.tensor
    if tensor.tensor_shape.dim and any(d.size != 1 for d in tensor.tensor_shape.dim):
        return None
    if tensor.dtype == _DT_FLOAT:
        if tensor.float_val:
            return float(tensor.float_val[0])
        if len(tensor.tensor_content) == 4:
            return struct.unpack("<f", tensor.tensor_content)[0]
    elif tensor.dtype == _DT_DOUBLE:
        if tensor.double_val:
            return float(tensor.double_val[0])
        if len(tensor.tensor_content) == 8:
            return struct.unpack("<d", tensor.tensor_content)[0]
    return None


def read_scalars(folder: str | Path) -> dict[int, dict[str, float]]:
    """``{step: {tag: value}}`` of every event file in ``folder`` (none: ``{}``)."""
    from tensorboard.compat.proto import event_pb2  # protobuf only: no TensorFlow

    by_step: dict[int, dict[str, float]] = {}
    for path in sorted(Path(folder).glob("events.out.tfevents.*")):
        for record in _records(path.read_bytes()):
            try:
                event = event_pb2.Event.FromString(record)
            except Exception:  # noqa: BLE001 - a damaged record: the rest of the file is unread
                break
            for value in event.summary.value:
                scalar = _scalar(value)
                if scalar is not None:
                    by_step.setdefault(int(event.step), {})[value.tag] = scalar
    return by_step
