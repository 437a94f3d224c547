"""The raw features of a pipeline as TensorFlow sees them: the declared dtypes and the parsing
spec of the raw tf.Examples that ingest writes, transform reads, and serving parses."""

from __future__ import annotations

import tensorflow as tf

from estflow.dsl.pipeline import Pipeline

__all__ = ["TF_DTYPES", "raw_feature_spec"]

TF_DTYPES = {"float": tf.float32, "int": tf.int64, "string": tf.string}
"""Declared column dtype -> the dtype of its tf.Example feature."""


def raw_feature_spec(pipeline: Pipeline) -> dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature]:
    """The parsing spec of the raw Examples ingest writes (also what serving parses): a
    required column is a fixed scalar, a column with a default may be absent."""
    spec: dict = {}
    for column in pipeline.raw_columns():
        dtype = TF_DTYPES[column.dtype]
        spec[column.name] = (tf.io.FixedLenFeature([], dtype) if column.default is None
                             else tf.io.VarLenFeature(dtype))
    return spec
