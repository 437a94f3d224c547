"""Scoring chunks of validated rows with the SavedModel, in a Beam DoFn.

Why not ``apache_beam.ml.inference.RunInference``: it takes one element per example and
batches them again with ``BatchElements``, paying Beam's per-element cost several times per row
(more than the model itself costs for a small model). Here the elements are already batches:
each chunk of validated rows (an Arrow RecordBatch in the raw-example layout) is encoded to
serialized ``tf.Example`` records vectorised (:func:`~estflow.components._io.example_codec.
encode_examples`, the bytes ingest writes), cut into ``batch_size`` examples with one
``tf.strings.substr`` (no Python object per row) and fed to the signature; the outputs are
formatted (:mod:`.formats`) into one payload per chunk. What RunInference gives is kept:
the model is loaded once per worker process (``apache_beam.utils.shared``: every DoFn instance
and bundle of the process reuses it) and examples are scored in batches.

The work of a chunk runs on a background thread while the caller reads and validates the next
one: TensorFlow and Arrow release the GIL, so on two cores reading and scoring overlap. At most
:data:`PENDING` chunks are in flight per DoFn, so memory stays flat however many rows there are.
"""

from __future__ import annotations

import collections
import concurrent.futures

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils import shared

from estflow.components._io import storage
from estflow.components._io.example_codec import encode_examples
from estflow.components.predict.formats import Formatter

__all__ = ["PENDING", "ScoreChunks", "load_model", "signature_outputs", "key_values"]

PENDING = 2
"""Chunks scored ahead of the one being read, per DoFn instance."""


class _Loaded:
    """A loaded SavedModel (weakly referenceable, as ``shared.Shared`` needs)."""

    def __init__(self, path: str) -> None:
        # gs:// and s3:// are downloaded first (each worker process once): TensorFlow has no
        # filesystem for them without tensorflow-io.
        self.model = tf.saved_model.load(storage.materialize(path))


def load_model(handle: shared.Shared, path: str):
    """The SavedModel at ``path``, loaded once per process for ``handle``."""
    return handle.acquire(lambda: _Loaded(path), tag=path).model


def signature_outputs(function, input_name: str, data: np.ndarray, starts: np.ndarray,
                   lengths: np.ndarray, batch_size: int) -> dict[str, np.ndarray]:
    """Outputs of ``function`` for the serialized Examples ``data[starts[i]:+lengths[i]]``,
    called on ``batch_size`` examples at a time."""
    blob = tf.constant(data.tobytes())
    parts: dict[str, list[np.ndarray]] = collections.defaultdict(list)
    for start in range(0, len(starts), batch_size):
        end = start + batch_size
        examples = tf.strings.substr(blob, starts[start:end], lengths[start:end])
        for name, tensor in function(**{input_name: examples}).items():
            parts[name].append(tensor.numpy())
    return {name: arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
            for name, arrays in parts.items()}


def key_values(batch: pa.RecordBatch, name: str) -> pa.Array:
    """A key column of the raw-example layout (a list of at most one value per row) as a flat
    array, null where the row had no value."""
    lists = batch.column(name)
    offsets = np.frombuffer(lists.buffers()[1], np.int64, len(lists) + 1, lists.offset * 8)
    present = np.diff(offsets) > 0
    values = lists.flatten()
    index = np.cumsum(present) - 1
    return values.take(pa.array(index, mask=~present))


class ScoreChunks(beam.DoFn):
    """RowChunk -> ``(kind, payload, rows)`` for the writer: ``(predictions_kind, payload,
    rows)`` (bytes, or an Arrow table for parquet) and ``(rejected_kind, JSON lines, 0)``; the
    chunk's statistics (``{"scored": n, **chunk statistics}``) are a tagged output.

    Args:
        handle: the ``shared.Shared`` the model is kept in.
        model_path: the SavedModel directory.
        signature, input_name: the signature and its one input (serialized Examples).
        columns: the raw features the model parses (encoded into the Examples).
        keys: the key columns passed through.
        formatter: turns keys and outputs into a payload.
        batch_size: examples per call of the model.
        kinds: the kinds of (predictions, rejected rows) elements.
        stats_tag: the tagged output of the statistics.
    """

    def __init__(self, handle: shared.Shared, model_path: str, signature: str, input_name: str,
                 columns: tuple[str, ...], keys: tuple[str, ...], formatter: Formatter,
                 batch_size: int, kinds: tuple[str, str], stats_tag: str) -> None:
        self._handle, self._path = handle, model_path
        self._signature, self._input = signature, input_name
        self._columns, self._keys, self._formatter = list(columns), keys, formatter
        self._batch_size = batch_size
        (self._predictions, self._rejected), self._stats_tag = kinds, stats_tag

    def setup(self) -> None:
        self._function = load_model(self._handle, self._path).signatures[self._signature]
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "estflow-score")

    def start_bundle(self) -> None:
        self._pending: collections.deque = collections.deque()

    def process(self, chunk):
        if chunk.rejected:
            yield self._rejected, "".join(line + "\n" for line in chunk.rejected).encode(), 0
        yield beam.pvalue.TaggedOutput(self._stats_tag,
                                       {**chunk.stats, "scored": chunk.batch.num_rows})
        if chunk.batch.num_rows:
            self._pending.append(self._pool.submit(self._score, chunk.batch))
        while len(self._pending) > PENDING:
            yield self._pending.popleft().result()

    def finish_bundle(self):
        while self._pending:
            yield GlobalWindows.windowed_value(self._pending.popleft().result())

    def teardown(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)

    def _score(self, batch: pa.RecordBatch) -> tuple[str, object, int]:
        examples = encode_examples(batch, self._columns)
        outputs = signature_outputs(self._function, self._input, examples.data, examples.starts,
                                 examples.lengths, self._batch_size)
        keys = {name: key_values(batch, name) for name in self._keys}
        return self._predictions, self._formatter.payload(keys, outputs), batch.num_rows
