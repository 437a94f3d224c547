"""What the trees split on: every input becomes one or more integer *bucket* features.

tf.estimator's boosted trees flatten the feature columns (sorted by name) into features with
ids ``0..F-1``: a ``bucketized_column`` is one feature (its bucket); an ``indicator_column`` is
one 0/1 feature per category; a ``numeric_column`` is one float feature per element, bucketized
by the quantile sketch's boundaries (``num_quantiles = int(1 / quantile_sketch_epsilon)``
buckets). Features are grouped by their number of buckets (indicators: 2; bucketized: the most
any bucketized column has, at least 2; numeric: ``num_quantiles``), one statistics tensor per
group, as the original did.

A :class:`Layout` is static (built with the Estimator); :meth:`Layout.values` reads a batch:
float ``[batch]`` tensors for numeric features, int32 buckets for the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping

import tensorflow as tf

from estflow.estimator._fc.dense import BucketizedColumn
from estflow.estimator._fc.dense import IndicatorColumn
from estflow.estimator._fc.dense import NumericColumn

__all__ = ["Feature", "Layout", "layout_of_columns", "bucketize", "SUPPORTED"]

SUPPORTED = "bucketized_column, indicator_column or numeric_column"


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature the trees split on: ``name`` (its column), ``numeric`` (bucketized by the
    quantile sketch) and ``num_buckets`` (its group)."""

    name: str
    numeric: bool
    num_buckets: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """The features in id order and how to read them from a batch.

    ``read(features) -> list`` returns one tensor per feature: float32 ``[batch]`` for numeric
    features, int32 ``[batch]`` buckets for the others.
    """

    features: tuple[Feature, ...]
    read: Callable[[Mapping], list]

    @property
    def numeric_ids(self) -> tuple[int, ...]:
        return tuple(i for i, f in enumerate(self.features) if f.numeric)

    @property
    def groups(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """``((num_buckets, feature ids), ...)``, in order of first appearance."""
        out: dict[int, list[int]] = {}
        for i, f in enumerate(self.features):
            out.setdefault(f.num_buckets, []).append(i)
        return tuple((b, tuple(ids)) for b, ids in out.items())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)


def bucketize(values: tf.Tensor, boundaries: tf.Tensor) -> tf.Tensor:
    """``BoostedTreesBucketize``: the first boundary >= value (the last one past the end); 0
    with no boundaries."""
    size = tf.size(boundaries)
    ids = tf.searchsorted(boundaries, values, side="left", out_type=tf.int32)
    return tf.where(size > 0, tf.minimum(ids, size - 1), tf.zeros_like(ids))


def layout_of_columns(columns, num_quantiles: int) -> Layout:
    """The layout of name-sorted feature columns (``feature_column`` columns)."""
    bucketized = [c for c in columns if isinstance(c, BucketizedColumn)]
    bucket_size = max([2] + [len(c.boundaries) + 1 for c in bucketized])
    features: list[Feature] = []
    for col in columns:
        if isinstance(col, IndicatorColumn):
            features += [Feature(col.name, False, 2)] * col.width
        elif isinstance(col, BucketizedColumn):
            features.append(Feature(col.name, False, bucket_size))
        elif isinstance(col, NumericColumn):
            features += [Feature(col.name, True, num_quantiles)] * col.width
        else:  # checked by the caller
            raise TypeError(f"unsupported column {col!r}; expected {SUPPORTED}")

    def read(batch) -> list:
        out = []
        for col in columns:
            if isinstance(col, IndicatorColumn):
                dense = tf.cast(col.dense_tensor(batch), tf.int32)
                out += [dense[:, i] for i in range(col.width)]
            elif isinstance(col, BucketizedColumn):
                values = col.source_column.dense_tensor(batch)
                ids = tf.raw_ops.Bucketize(input=values, boundaries=list(col.boundaries))
                out.append(tf.cast(ids[:, 0], tf.int32))
            else:
                values = col.dense_tensor(batch)
                out += [values[:, i] for i in range(col.width)]
        return out

    return Layout(tuple(features), read)
