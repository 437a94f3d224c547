"""The eval rows a pushed version's warm-up requests are built from.

The evaluate step keeps the first :data:`MAX_ROWS` eval rows it scored, as serialized raw
``tf.Example``s holding only the features the serving signature parses (no label), in
``evaluation/warmup_examples.tfrecord`` (an uncompressed TFRecord); the push step builds TF
Serving's warm-up file (``assets.extra/tf_serving_warmup_requests``) from them for the version
it publishes (:mod:`estflow.components.push.warmup`).
"""

from __future__ import annotations

from pathlib import Path

from estflow.dsl.contracts import Files

__all__ = ["MAX_ROWS", "write_rows", "read_rows"]

MAX_ROWS = 5
"""Rows per warm-up request: enough to trace the batch shapes a server sees, few enough that
replaying them on load is instant."""


def write_rows(folder: str | Path, rows: list[bytes]) -> Path | None:
    """Write ``folder/warmup_examples.tfrecord`` (the first :data:`MAX_ROWS` rows); None when
    there are none (nothing is written)."""
    import tensorflow as tf  # noqa: PLC0415 - the steps that call this run TensorFlow

    if not rows:
        return None
    path = Path(folder) / Files.WARMUP_EXAMPLES
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows[:MAX_ROWS]:
            writer.write(row)
    return path


def read_rows(folder: str | Path) -> list[bytes]:
    """The rows kept in ``folder`` (an evaluation directory); [] when it has none (an
    evaluation made before the file existed)."""
    path = Path(folder) / Files.WARMUP_EXAMPLES
    if not path.is_file():
        return []
    import tensorflow as tf  # noqa: PLC0415 - only when there are rows to read
    return list(tf.data.TFRecordDataset(str(path)).take(MAX_ROWS).as_numpy_iterator())
