"""``tf.compat.v1.estimator.inputs``: ``numpy_input_fn`` and ``pandas_input_fn`` as ``tf.data``
pipelines (TF 1 built queues; the engine reads a ``tf.data.Dataset``).

Each returns an input_fn whose dataset is ``from_tensor_slices((features, labels))``, shuffled
through a ``queue_capacity`` buffer when ``shuffle``, repeated ``num_epochs`` times (None:
forever) and batched by ``batch_size`` with the last, smaller batch kept, as TF 1's queues
dequeued it. ``estflow migrate`` rewrites calls to these into the same pipeline inline.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

__all__ = ["numpy_input_fn", "pandas_input_fn"]


def _check(batch_size, num_epochs, shuffle) -> None:
    if not isinstance(shuffle, bool):
        raise ValueError(f"shuffle: expected True or False (TF 1 had no default); received "
                         f"{shuffle!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size: expected a positive integer; received {batch_size!r}")
    if num_epochs is not None and (not isinstance(num_epochs, int) or num_epochs <= 0):
        raise ValueError(f"num_epochs: expected None or a positive integer; received "
                         f"{num_epochs!r}")


def _input_fn(elements, batch_size, num_epochs, shuffle, queue_capacity) -> Callable:
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(elements)
        if shuffle:
            dataset = dataset.shuffle(queue_capacity)
        return dataset.repeat(num_epochs).batch(batch_size)

    return input_fn


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                   num_threads=1) -> Callable:
    """tf.compat.v1.estimator.inputs.numpy_input_fn: ``x`` a dict of arrays (or one array: the
    features are then that tensor), ``y`` an array, a dict of arrays or None (no labels).
    ``num_threads`` is accepted and unused (tf.data parallelises itself).

    Raises:
        ValueError: ``shuffle`` is not a bool, a count is not positive, or the arrays' lengths
            differ (each named with its length).
    """
    _check(batch_size, num_epochs, shuffle)
    features = dict(x) if isinstance(x, dict) else x
    parts = {"x": features} if y is None else {"x": features, "y": y}
    lengths = {f"{part}[{key!r}]" if isinstance(v, dict) else part: len(value)
               for part, v in parts.items()
               for key, value in (v.items() if isinstance(v, dict) else [(None, v)])}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"numpy_input_fn: the arrays' lengths differ: {lengths}")
    as_array = lambda v: {k: np.asarray(a) for k, a in v.items()} if isinstance(v, dict) \
        else np.asarray(v)  # noqa: E731
    elements = as_array(features) if y is None else (as_array(features), as_array(y))
    return _input_fn(elements, batch_size, num_epochs, shuffle, queue_capacity)


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                    num_threads=1, target_column="target") -> Callable:
    """tf.compat.v1.estimator.inputs.pandas_input_fn: the DataFrame ``x``'s columns are the
    features, the Series ``y`` (index aligned with ``x``'s) the labels. ``target_column`` and
    ``num_threads`` are accepted (TF 1 used the first to carry ``y`` through its queue).

    Raises:
        ValueError: as :func:`numpy_input_fn`, or ``y``'s index differs from ``x``'s.
    """
    _check(batch_size, num_epochs, shuffle)
    if y is not None and not np.array_equal(np.asarray(x.index), np.asarray(y.index)):
        raise ValueError("pandas_input_fn: y's index must equal x's; received x.index "
                         f"{list(x.index)[:5]}..., y.index {list(y.index)[:5]}...")
    features = {str(name): column.to_numpy() for name, column in x.items()}
    elements = features if y is None else (features, np.asarray(y))
    return _input_fn(elements, batch_size, num_epochs, shuffle, queue_capacity)
