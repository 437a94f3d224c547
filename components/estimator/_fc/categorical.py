"""Categorical feature columns: values -> sparse int64 ids in ``[0, num_buckets)``.

Each column is a frozen, hashable value (like tf.feature_column's namedtuples) with
``name``, ``num_buckets``, ``parse_example_spec`` and ``sparse_ids(features)`` returning an
:class:`IdWeightPair`. Build them with the functions of
:mod:`estflow.estimator.feature_column`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from estflow.estimator._fc.inputs import IdWeightPair
from estflow.estimator._fc.inputs import aligned_weights
from estflow.estimator._fc.inputs import as_sparse
from estflow.estimator._fc.inputs import raw_feature
from estflow.estimator._fc.lookup import VocabularyLookup

__all__ = ["CategoricalColumn", "VocabularyListColumn", "VocabularyFileColumn",
           "HashedCategoricalColumn", "IdentityCategoricalColumn",
           "WeightedCategoricalColumn", "CrossedColumn"]


class CategoricalColumn:
    """Marker base of columns producing sparse ids (``sparse_ids``, ``num_buckets``)."""

    name: str
    num_buckets: int

    def sparse_ids(self, features) -> IdWeightPair:
        raise NotImplementedError

    def dense_ids(self, features) -> tf.Tensor | None:
        """Ids as a dense ``[batch, n]`` tensor (-1: none) when the column can give them
        cheaply (a fast path for indicator columns); None otherwise."""
        del features
        return None


def _checked_dtype(value, want: tf.DType, column: str, key: str) -> None:
    ok = value.dtype == tf.string if want == tf.string else value.dtype.is_integer
    if not ok:
        raise TypeError(f"feature {key!r} of column {column!r} must hold "
                        f"{'strings' if want == tf.string else 'integers'}; received "
                        f"{value.dtype.name}")


def _map_values(sparse: tf.SparseTensor, fn) -> tf.SparseTensor:
    return tf.SparseTensor(sparse.indices, fn(sparse.values), sparse.dense_shape)


@dataclasses.dataclass(frozen=True)
class _LookupColumn(CategoricalColumn):
    """Shared by the vocabulary columns: ``lookup`` maps input values to ids."""

    key: str
    dtype: tf.DType

    @property
    def name(self) -> str:
        return self.key

    @property
    def num_buckets(self) -> int:
        return self.lookup.size

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: tf.io.VarLenFeature(self.dtype)}

    def sparse_ids(self, features) -> IdWeightPair:
        value = as_sparse(raw_feature(features, self.key, self.name), self.key)
        _checked_dtype(value, self.dtype, self.name, self.key)
        return IdWeightPair(_map_values(value, self.lookup), None)

    def dense_ids(self, features) -> tf.Tensor | None:
        """``[batch, n]`` ids of a dense ``[batch]``/``[batch, n]`` input, -1 where the input
        is missing (``""``/``-1``); None for sparse or ragged inputs."""
        value = raw_feature(features, self.key, self.name)
        if isinstance(value, tf.SparseTensor) or value.shape.rank not in (1, 2):
            return None
        _checked_dtype(value, self.dtype, self.name, self.key)
        if value.shape.rank == 1:
            value = value[:, tf.newaxis]
        marker = tf.constant("" if value.dtype == tf.string else -1, value.dtype)
        return tf.where(tf.equal(value, marker), tf.constant(-1, tf.int64), self.lookup(value))


@dataclasses.dataclass(frozen=True)
class VocabularyListColumn(_LookupColumn):
    """See :func:`feature_column.categorical_column_with_vocabulary_list`."""

    vocabulary_list: tuple = ()
    default_value: int = -1
    num_oov_buckets: int = 0
    lookup: VocabularyLookup = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookup", VocabularyLookup(
            self.vocabulary_list, self.num_oov_buckets, self.default_value))


@dataclasses.dataclass(frozen=True)
class VocabularyFileColumn(_LookupColumn):
    """See :func:`feature_column.categorical_column_with_vocabulary_file`. The file is read
    when the column is built; its entries are then part of every graph using the column."""

    vocabulary_file: str = ""
    vocabulary_size: int | None = None
    default_value: int = -1
    num_oov_buckets: int = 0
    lookup: VocabularyLookup = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        entries = _read_vocabulary(self.vocabulary_file, self.vocabulary_size, self.dtype)
        object.__setattr__(self, "lookup", VocabularyLookup(
            entries, self.num_oov_buckets, self.default_value, field="vocabulary_file"))


def _read_vocabulary(path: str, size: int | None, dtype: tf.DType) -> tuple:
    if not tf.io.gfile.exists(path):
        raise ValueError(f"Received an invalid value for `vocabulary_file`, expected an "
                         f"existing file. Received: vocabulary_file={path!r}")
    with tf.io.gfile.GFile(path, "rb") as f:
        lines = [line.rstrip(b"\r\n").decode("utf-8") for line in f]
    if size is not None:
        if size > len(lines):
            raise ValueError(f"Received an invalid value for `vocabulary_size`, expected at "
                             f"most the {len(lines)} lines of {path}. Received: "
                             f"vocabulary_size={size}")
        lines = lines[:size]
    if dtype == tf.string:
        return tuple(lines)
    try:
        return tuple(int(line) for line in lines)
    except ValueError as err:
        raise ValueError(f"vocabulary_file {path} has a line that is not an integer "
                         f"(dtype={dtype.name}): {err}") from None


@dataclasses.dataclass(frozen=True)
class HashedCategoricalColumn(CategoricalColumn):
    """See :func:`feature_column.categorical_column_with_hash_bucket`."""

    key: str
    hash_bucket_size: int
    dtype: tf.DType = tf.string

    @property
    def name(self) -> str:
        return self.key

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: tf.io.VarLenFeature(self.dtype)}

    def sparse_ids(self, features) -> IdWeightPair:
        value = as_sparse(raw_feature(features, self.key, self.name), self.key)
        _checked_dtype(value, self.dtype, self.name, self.key)

        def hashed(values):
            text = values if values.dtype == tf.string else tf.strings.as_string(values)
            return tf.strings.to_hash_bucket_fast(text, self.hash_bucket_size)

        return IdWeightPair(_map_values(value, hashed), None)


@dataclasses.dataclass(frozen=True)
class IdentityCategoricalColumn(CategoricalColumn):
    """See :func:`feature_column.categorical_column_with_identity`."""

    key: str
    number_buckets: int  # tf.feature_column's field name; ``num_buckets`` reads it
    default_value: int | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def num_buckets(self) -> int:
        return self.number_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: tf.io.VarLenFeature(tf.int64)}

    def sparse_ids(self, features) -> IdWeightPair:
        value = as_sparse(raw_feature(features, self.key, self.name), self.key)
        _checked_dtype(value, tf.int64, self.name, self.key)
        values = tf.cast(value.values, tf.int64)
        inside = tf.logical_and(values >= 0, values < self.number_buckets)
        if self.default_value is not None:
            values = tf.where(inside, values, tf.constant(self.default_value, tf.int64))
        else:
            check = tf.debugging.Assert(tf.reduce_all(inside), [
                f"column {self.name!r}: ids must be in [0, {self.number_buckets}); "
                "received", values], summarize=10)
            with tf.control_dependencies([check] if check is not None else []):
                values = tf.identity(values)
        return IdWeightPair(tf.SparseTensor(value.indices, values, value.dense_shape), None)


@dataclasses.dataclass(frozen=True)
class WeightedCategoricalColumn(CategoricalColumn):
    """See :func:`feature_column.weighted_categorical_column`."""

    categorical_column: CategoricalColumn
    weight_feature_key: str
    dtype: tf.DType = tf.float32

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def num_buckets(self) -> int:
        return self.categorical_column.num_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {**self.categorical_column.parse_example_spec,
                self.weight_feature_key: tf.io.VarLenFeature(self.dtype)}

    def sparse_ids(self, features) -> IdWeightPair:
        ids = self.categorical_column.sparse_ids(features).id_tensor
        raw = raw_feature(features, self.weight_feature_key, self.name)
        return IdWeightPair(ids, aligned_weights(raw, ids, self.weight_feature_key))


@dataclasses.dataclass(frozen=True)
class CrossedColumn(CategoricalColumn):
    """See :func:`feature_column.crossed_column`."""

    keys: tuple
    hash_bucket_size: int
    hash_key: int | None = None

    @property
    def name(self) -> str:
        return "_X_".join(sorted(k if isinstance(k, str) else k.name for k in self.keys))

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        for key in self.keys:
            spec.update({key: tf.io.VarLenFeature(tf.string)} if isinstance(key, str)
                        else key.parse_example_spec)
        return spec

    def sparse_ids(self, features) -> IdWeightPair:
        inputs = []
        for key in self.keys:
            if isinstance(key, str):
                inputs.append(as_sparse(raw_feature(features, key, self.name), key))
            else:
                inputs.append(key.sparse_ids(features).id_tensor)
        inputs = [_map_values(s, lambda v: tf.cast(v, tf.int64)) if s.dtype.is_integer
                  else s for s in inputs]
        crossed = tf.sparse.cross_hashed(inputs, num_buckets=self.hash_bucket_size,
                                         hash_key=self.hash_key)
        return IdWeightPair(crossed, None)
