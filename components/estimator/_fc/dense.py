"""Dense feature columns: ``dense_tensor(features, state) -> float32 [batch, width]``.

Numeric, bucketized (also categorical), indicator, embedding and shared-embedding columns.
Columns that own variables (embeddings) describe them with ``state_specs()``; the layer using
the column (:class:`DenseFeatures`, :class:`LinearModel`) creates them and passes them back in
``state`` (``{spec name: tf.Variable}``), so columns stay plain, hashable values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from estflow.estimator._fc.categorical import CategoricalColumn
from estflow.estimator._fc.inputs import IdWeightPair
from estflow.estimator._fc.inputs import StateSpec
from estflow.estimator._fc.inputs import dense_2d
from estflow.estimator._fc.inputs import raw_feature

__all__ = ["DenseColumn", "NumericColumn", "BucketizedColumn", "IndicatorColumn",
           "EmbeddingColumn", "SharedEmbeddingGroup", "SharedEmbeddingColumn"]


class DenseColumn:
    """Marker base of columns producing ``[batch, width]`` float tensors."""

    name: str

    @property
    def width(self) -> int:
        raise NotImplementedError

    def state_specs(self) -> tuple[StateSpec, ...]:
        return ()

    def dense_tensor(self, features, state) -> tf.Tensor:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class NumericColumn(DenseColumn):
    """See :func:`feature_column.numeric_column`."""

    key: str
    shape: tuple[int, ...] = (1,)
    default_value: Any = None
    dtype: tf.DType = tf.float32
    normalizer_fn: Callable | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def width(self) -> int:
        return int(np.prod(self.shape))

    @property
    def variable_shape(self) -> tf.TensorShape:
        return tf.TensorShape(self.shape)

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: tf.io.FixedLenFeature(self.shape, self.dtype, self.default_value)}

    def dense_tensor(self, features, state=None) -> tf.Tensor:
        raw = raw_feature(features, self.key, self.name)
        if raw.dtype == tf.string:
            raise TypeError(f"feature {self.key!r} of numeric column {self.name!r} holds "
                            "strings; expected numbers")
        default = self.default_value
        vector = default is not None and np.ndim(default) > 0
        value = dense_2d(raw, self.width, None if vector else default, self.key, self.name)
        if vector and isinstance(raw, tf.SparseTensor):
            present = tf.SparseTensor(raw.indices, tf.ones_like(raw.values), raw.dense_shape)
            mask = dense_2d(present, self.width, 0, self.key, self.name)
            fill = tf.constant(np.reshape(default, [1, -1]), value.dtype)
            value = tf.where(tf.cast(mask, tf.bool), value, fill)
        if self.normalizer_fn is not None:
            value = self.normalizer_fn(value)
        return tf.ensure_shape(tf.cast(value, tf.float32), [None, self.width])


@dataclasses.dataclass(frozen=True)
class BucketizedColumn(DenseColumn, CategoricalColumn):
    """See :func:`feature_column.bucketized_column`: dense as a one-hot per element,
    categorical as ids ``bucket + element * (len(boundaries) + 1)``."""

    source_column: NumericColumn
    boundaries: tuple[float, ...]

    @property
    def name(self) -> str:
        return f"{self.source_column.name}_bucketized"

    @property
    def num_buckets(self) -> int:
        return (len(self.boundaries) + 1) * self.source_column.width

    @property
    def width(self) -> int:
        return self.num_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.source_column.parse_example_spec

    def _buckets(self, features) -> tf.Tensor:
        values = self.source_column.dense_tensor(features)
        buckets = tf.raw_ops.Bucketize(input=values, boundaries=list(self.boundaries))
        return tf.cast(buckets, tf.int64)

    def dense_tensor(self, features, state=None) -> tf.Tensor:
        one_hot = tf.one_hot(self._buckets(features), len(self.boundaries) + 1)
        return tf.reshape(one_hot, [-1, self.width])

    def sparse_ids(self, features) -> IdWeightPair:
        buckets = self._buckets(features)
        offsets = tf.range(self.source_column.width, dtype=tf.int64) * (
            len(self.boundaries) + 1)
        ids = buckets + offsets[tf.newaxis, :]
        indices = tf.where(tf.ones_like(ids, tf.bool))
        return IdWeightPair(tf.SparseTensor(indices, tf.reshape(ids, [-1]),
                                            tf.shape(ids, out_type=tf.int64)), None)


def _rows_and_ids(pair: IdWeightPair, num_buckets: int):
    """(row, id, weight) of every valid id (negative ids mean "missing" and are dropped)."""
    ids = pair.id_tensor
    weights = (pair.weight_tensor.values if pair.weight_tensor is not None
               else tf.ones_like(ids.values, tf.float32))
    valid = tf.logical_and(ids.values >= 0, ids.values < num_buckets)
    rows = tf.boolean_mask(ids.indices[:, 0], valid)
    return rows, tf.boolean_mask(ids.values, valid), tf.boolean_mask(weights, valid)


@dataclasses.dataclass(frozen=True)
class IndicatorColumn(DenseColumn):
    """See :func:`feature_column.indicator_column`: a multi-hot ``[batch, num_buckets]``
    holding id counts (or summed weights for a weighted column)."""

    categorical_column: CategoricalColumn

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_indicator"

    @property
    def width(self) -> int:
        return self.categorical_column.num_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    def dense_tensor(self, features, state=None) -> tf.Tensor:
        ids = self.categorical_column.dense_ids(features)
        if ids is not None:  # dense input: a one-hot per value (-1 and others: all zeros)
            hot = tf.one_hot(ids, self.width, dtype=tf.float32)
            counts = hot[:, 0] if ids.shape[1] == 1 else tf.reduce_sum(hot, axis=1)
            return tf.ensure_shape(counts, [None, self.width])
        pair = self.categorical_column.sparse_ids(features)
        rows, ids, weights = _rows_and_ids(pair, self.width)
        shape = tf.stack([pair.id_tensor.dense_shape[0], self.width])
        dense = tf.scatter_nd(tf.stack([rows, ids], axis=1), weights, shape)
        return tf.ensure_shape(dense, [None, self.width])


def default_embedding_initializer(dimension: int):
    """tf.feature_column's default: truncated normal, stddev ``1/sqrt(dimension)``."""
    return keras.initializers.TruncatedNormal(stddev=1.0 / math.sqrt(dimension))


def _embed(pair: IdWeightPair, weights: tf.Variable, combiner: str, max_norm,
           dimension: int) -> tf.Tensor:
    out = tf.nn.safe_embedding_lookup_sparse(weights, pair.id_tensor, pair.weight_tensor,
                                             combiner=combiner, max_norm=max_norm)
    return tf.ensure_shape(out, [None, dimension])


@dataclasses.dataclass(frozen=True)
class EmbeddingColumn(DenseColumn):
    """See :func:`feature_column.embedding_column`."""

    categorical_column: CategoricalColumn
    dimension: int
    combiner: str = "mean"
    initializer: Callable | None = None
    max_norm: float | None = None
    trainable: bool = True

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_embedding"

    @property
    def width(self) -> int:
        return self.dimension

    @property
    def variable_shape(self) -> tf.TensorShape:
        return tf.TensorShape([self.dimension])

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    def state_specs(self) -> tuple[StateSpec, ...]:
        init = self.initializer or default_embedding_initializer(self.dimension)
        return (StateSpec(self, f"{self.name}_weights",
                          (self.categorical_column.num_buckets, self.dimension), init,
                          self.trainable),)

    def dense_tensor(self, features, state) -> tf.Tensor:
        pair = self.categorical_column.sparse_ids(features)
        return _embed(pair, state[f"{self.name}_weights"], self.combiner, self.max_norm,
                      self.dimension)


@dataclasses.dataclass(frozen=True)
class SharedEmbeddingGroup:
    """The one embedding table behind a set of :class:`SharedEmbeddingColumn`s."""

    name: str
    num_buckets: int
    dimension: int
    combiner: str = "mean"
    initializer: Callable | None = None
    max_norm: float | None = None
    trainable: bool = True


@dataclasses.dataclass(frozen=True)
class SharedEmbeddingColumn(DenseColumn):
    """See :func:`feature_column.shared_embeddings`."""

    categorical_column: CategoricalColumn
    group: SharedEmbeddingGroup

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def width(self) -> int:
        return self.group.dimension

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    def state_specs(self) -> tuple[StateSpec, ...]:
        group = self.group
        init = group.initializer or default_embedding_initializer(group.dimension)
        return (StateSpec(group, group.name, (group.num_buckets, group.dimension), init,
                          group.trainable),)

    def dense_tensor(self, features, state) -> tf.Tensor:
        pair = self.categorical_column.sparse_ids(features)
        group = self.group
        return _embed(pair, state[group.name], group.combiner, group.max_norm,
                      group.dimension)
