"""Reading feature-column inputs: dense ``[batch]``/``[batch, n]`` tensors, ``SparseTensor``s
(``tf.io.VarLenFeature``) and ``RaggedTensor``s, normalised to what the columns compute on.

- categorical inputs become rank-2 ``SparseTensor``s; in dense inputs the "missing" marker is
  dropped (``""`` for strings, ``-1`` for integers), as tf.feature_column does;
- numeric inputs become float ``[batch, width]`` tensors; sparse ones are densified with the
  column's default value and cut or padded to ``width``.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping

import tensorflow as tf

__all__ = ["IdWeightPair", "StateSpec", "raw_feature", "as_sparse", "dense_2d",
           "aligned_weights", "batch_size"]

IdWeightPair = collections.namedtuple("IdWeightPair", ("id_tensor", "weight_tensor"))
"""What a categorical column produces: int64 ids and optional float weights (both sparse,
rank 2, same indices)."""

StateSpec = collections.namedtuple("StateSpec", ("key", "name", "shape", "initializer",
                                                 "trainable"))
"""A variable a dense column needs; layers create one per distinct ``key``."""


def raw_feature(features, key: str, column: str):
    """``features[key]`` as a Tensor or SparseTensor, or an error naming the column."""
    if not isinstance(features, Mapping):
        raise TypeError(f"feature columns read a dict of features; received "
                        f"{type(features).__name__}")
    if key not in features:
        raise KeyError(f"feature column {column!r} reads feature {key!r}, which is not among "
                       f"the input features {sorted(features)}")
    value = features[key]
    if isinstance(value, tf.RaggedTensor):
        return value.to_sparse()
    if isinstance(value, tf.SparseTensor):
        return value
    return tf.convert_to_tensor(value)


def batch_size(value) -> tf.Tensor:
    """The first dimension (int64) of a dense or sparse input; 1 for a scalar (a dataset of
    unbatched scalars, ``Dataset.from_tensors({"x": 3.})``, which tf.estimator took: one
    example)."""
    if isinstance(value, tf.SparseTensor):
        return value.dense_shape[0]
    if getattr(value, "shape", None) is not None and value.shape.rank == 0:
        return tf.constant(1, tf.int64)
    return tf.shape(value, out_type=tf.int64)[0]


def _missing(dtype: tf.DType):
    if dtype == tf.string:
        return ""
    if dtype.is_integer:
        return -1
    return None


def as_sparse(value, key: str) -> tf.SparseTensor:
    """A rank-2 SparseTensor of ``value``; dense missing markers (``""``, ``-1``) dropped."""
    if isinstance(value, tf.SparseTensor):
        rank = value.shape.rank
        if rank == 1:
            return tf.sparse.expand_dims(value, axis=1)
        if rank is not None and rank > 2:
            return tf.sparse.reshape(value, tf.stack([value.dense_shape[0], -1]))
        return value
    if value.shape.rank == 0:
        raise ValueError(f"feature {key!r} is a scalar; expected a batch ([batch] or "
                         "[batch, n])")
    if value.shape.rank == 1:
        value = value[:, tf.newaxis]
    elif value.shape.rank is None or value.shape.rank > 2:
        value = tf.reshape(value, tf.stack([tf.shape(value)[0], -1]))
    marker = _missing(value.dtype)
    keep = (tf.not_equal(value, tf.constant(marker, value.dtype)) if marker is not None
            else tf.ones_like(value, tf.bool))
    indices = tf.where(keep)
    return tf.SparseTensor(indices, tf.gather_nd(value, indices),
                           tf.shape(value, out_type=tf.int64))


def dense_2d(value, width: int, default, key: str, column: str) -> tf.Tensor:
    """``value`` as ``[batch, width]``: dense inputs reshaped (their static size checked),
    sparse ones densified with ``default`` and cut or padded to ``width``."""
    if isinstance(value, tf.SparseTensor):
        value = as_sparse(value, key)
        fill = tf.constant(0 if default is None else default, value.dtype)
        dense = tf.sparse.to_dense(value, default_value=fill)[:, :width]
        pad = width - tf.shape(dense)[1]
        dense = tf.pad(dense, [[0, 0], [0, pad]], constant_values=fill)
        return tf.ensure_shape(dense, [None, width])
    shape = value.shape
    if shape.rank == 0:
        raise ValueError(f"feature {key!r} of {column!r} is a scalar; expected a batch")
    if shape.rank is not None and shape[1:].is_fully_defined() and \
            shape[1:].num_elements() != width:
        raise ValueError(f"feature {key!r} of numeric column {column!r} has shape {shape}; "
                         f"expected [batch] + the column's shape ({width} value(s) per "
                         "example)")
    return tf.reshape(value, [-1, width])


def aligned_weights(value, ids: tf.SparseTensor, key: str) -> tf.SparseTensor:
    """Weights for ``ids`` (same indices): gathered from a dense input, or taken value by
    value from a sparse one (parallel ``VarLenFeature`` lists)."""
    if isinstance(value, tf.SparseTensor):
        weights = as_sparse(value, key)
        check = tf.debugging.assert_equal(
            tf.shape(weights.values), tf.shape(ids.values),
            message=f"weight feature {key!r} must have one value per categorical id")
        with tf.control_dependencies([check] if check is not None else []):
            values = tf.identity(weights.values)
    else:
        if value.shape.rank == 1:
            value = value[:, tf.newaxis]
        elif value.shape.rank is None or value.shape.rank > 2:
            value = tf.reshape(value, tf.stack([tf.shape(value)[0], -1]))
        values = tf.gather_nd(value, ids.indices)
    return tf.SparseTensor(ids.indices, tf.cast(values, tf.float32), ids.dense_shape)
