"""``tf.compat.v1.estimator.inputs``: ``numpy_input_fn`` and ``pandas_input_fn`` as ``tf.data``
pipelines that read what TF 1's queues read (the engine reads a ``tf.data.Dataset``).

tf.estimator 2.15 fed a queue from a Python thread: ``num_epochs`` passes over the rows in
order, ``batch_size`` rows per enqueue, a batch crossing from one pass into the next, the last
batch smaller (``num_epochs=None``: forever). With ``shuffle=False`` the queue is a FIFO: the
dataset here is ``from_tensor_slices(...).repeat(num_epochs).batch(batch_size)``, the same
batches in the same order (``tests/compat/test_surface.py`` checks them against 2.15's, recorded
in ``tf215_surface.json``). With ``shuffle=True`` the thread starts at a random row and the
queue is a ``RandomShuffleQueue`` of ``queue_capacity`` rows, dequeued at random, so rows of one
pass mix with the next's: here the same, a random start and a ``queue_capacity`` shuffle
buffer after the repeat (the order cannot be 2.15's: its start came from Python's unseeded
``random``). ``num_threads`` threads each read every pass (2.15 warned that ``num_epochs`` is
per thread): ``num_threads * num_epochs`` passes, each thread from its own start.

The arguments are read when the input_fn is made, as in 2.15 (``x.copy()``; ``y`` as it is
then), and checked the same way. ``estflow migrate`` rewrites ``tf.estimator.inputs.*`` calls
to these functions.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np
import tensorflow as tf

__all__ = ["numpy_input_fn", "pandas_input_fn"]


def _check(batch_size, num_epochs, shuffle, num_threads) -> None:
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean (it is "
                         f"recommended to set it as True for training); got {shuffle!r}")
    for name, value, allow_none in (("batch_size", batch_size, False),
                                    ("num_epochs", num_epochs, True),
                                    ("num_threads", num_threads, False)):
        if value is None and allow_none:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{name}: expected a positive integer"
                             + (" or None" if allow_none else "") + f"; received {value!r}")


def _input_fn(elements, rows: int, batch_size: int, num_epochs: int | None, shuffle: bool,
              queue_capacity: int, num_threads: int) -> Callable:
    batch_size, threads = int(batch_size), int(num_threads)
    epochs = None if num_epochs is None else int(num_epochs)

    def input_fn():
        if not shuffle and threads == 1:  # a FIFO queue: the rows in order, pass after pass
            return tf.data.Dataset.from_tensor_slices(elements).repeat(epochs).batch(
                batch_size)
        # Each thread's rows: from a random start (unshuffled: row 0), in order, wrapping.
        tensors = tf.nest.map_structure(tf.convert_to_tensor, elements)
        count = tf.constant(rows, tf.int64)

        def thread(_):
            start = tf.random.uniform([], 0, count, tf.int64) if shuffle \
                else tf.constant(0, tf.int64)
            stop = start + count * epochs if epochs is not None else tf.int64.max
            return tf.data.Dataset.range(start, stop).map(lambda i: i % count)

        if threads == 1:
            ids = thread(0)
        else:  # the threads feed one queue, batch by batch
            ids = tf.data.Dataset.range(threads).interleave(
                thread, cycle_length=threads, block_length=batch_size)
        if shuffle:
            ids = ids.shuffle(queue_capacity)
        return ids.batch(batch_size).map(
            lambda batch: tf.nest.map_structure(lambda t: tf.gather(t, batch), tensors))

    return input_fn


def _capacity(queue_capacity, shuffle: bool, rows: int) -> int:
    """``queue_capacity``, or 2.15's default for None (4 passes when shuffling, else one)."""
    if queue_capacity is None:
        return max(4 * rows if shuffle else rows, 1)
    return int(queue_capacity)


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                   num_threads=1) -> Callable:
    """tf.compat.v1.estimator.inputs.numpy_input_fn: ``x`` a dict of arrays (or one array: the
    features are then that tensor), ``y`` an array, a dict of arrays or None (no labels).

    Raises:
        ValueError: ``shuffle`` is not a bool, a count is not positive, ``x`` or ``y`` is an
            empty dict, ``x`` and ``y`` share keys, or the arrays' lengths differ (each named
            with its length).
        TypeError: ``x`` is neither a dict nor an array.
    """
    _check(batch_size, num_epochs, shuffle, num_threads)
    if isinstance(x, dict):
        if not x:
            raise ValueError("x cannot be an empty dict")
        features = {k: np.asarray(v) for k, v in x.items()}
    elif isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError("x cannot be an empty array")
        features = x
    else:
        raise TypeError(f"x must be a dict or array; got {type(x).__name__}")
    if isinstance(y, dict):
        if not y:
            raise ValueError("y cannot be empty dict, use None instead.")
        shared = set(y) & set(features) if isinstance(features, dict) else set()
        if shared:
            raise ValueError(f"{len(shared)} duplicate keys are found in both x and y: "
                             f"{shared}")
        labels = {k: np.asarray(v) for k, v in y.items()}
    else:
        labels = None if y is None else np.asarray(y)
    parts = {"x": features} if labels is None else {"x": features, "y": labels}
    lengths = {f"{part}[{key!r}]" if isinstance(v, dict) else part: len(value)
               for part, v in parts.items()
               for key, value in (v.items() if isinstance(v, dict) else [(None, v)])}
    if len(set(lengths.values())) > 1:
        raise ValueError("Length of tensors in x and y is mismatched. All elements in x and y "
                         f"must have the same length; received {lengths}")
    elements = features if labels is None else (features, labels)
    rows = next(iter(lengths.values()))
    return _input_fn(elements, rows, batch_size, num_epochs, shuffle,
                     _capacity(queue_capacity, shuffle, rows), num_threads)


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                    num_threads=1, target_column="target") -> Callable:
    """tf.compat.v1.estimator.inputs.pandas_input_fn: the DataFrame ``x``'s columns are the
    features; ``y`` (index equal to ``x``'s) the labels: a Series, or a DataFrame (labels a dict
    by its columns). Rows are read by position. ``target_column`` is checked as 2.15 did (it
    named the column ``y`` travelled under in ``x``'s queue).

    Raises:
        ValueError: as :func:`numpy_input_fn`, ``y``'s index differs from ``x``'s, or ``x``
            has a column named ``target_column`` (a Series ``y``).
        TypeError: ``target_column`` is not a string.
    """
    _check(batch_size, num_epochs, shuffle, num_threads)
    if not isinstance(target_column, str):
        raise TypeError("target_column must be a string type")
    x = x.copy()
    labels = None
    if y is not None:
        if not hasattr(y, "columns") and target_column in x:
            raise ValueError(f"Cannot use name {target_column} for target column: DataFrame "
                             f"already has a column with that name: {x.columns}")
        if not np.array_equal(np.asarray(x.index), np.asarray(y.index)):
            raise ValueError(f"Index for x and y are mismatched.\nIndex for x: {x.index}\n"
                             f"Index for y: {y.index}\n")
        labels = {name: column.to_numpy() for name, column in y.items()} \
            if hasattr(y, "columns") else y.to_numpy()
    features = {name: column.to_numpy() for name, column in x.items()}
    elements = features if labels is None else (features, labels)
    rows = len(x)
    return _input_fn(elements, rows, batch_size, num_epochs, shuffle,
                     _capacity(queue_capacity, shuffle, rows), num_threads)
