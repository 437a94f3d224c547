"""The tf.Transform ``preprocessing_fn`` of a pipeline, built from its declarations.

Raw columns with a default are read as ``VarLenFeature`` (a missing cell is an absent feature
in the raw Example) and densified here with the default; required columns are
``FixedLenFeature([])``. Every output (feature, label, weight) is a dense rank-1 ``[batch]``
tensor keyed by its declared name. Because the same graph runs at serving time, a missing
feature in a serving request gets exactly the default that training saw.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping

import tensorflow as tf
import tensorflow_transform as tft

from estflow.components._io.raw_features import TF_DTYPES
from estflow.components._runtime import entry
from estflow.dsl import features as f
from estflow.dsl.pipeline import Pipeline

__all__ = ["UNKNOWN_LABEL", "CROSS_SEPARATOR", "densify",
           "derive_columns", "label_ids", "identity_ids", 
           "build_preprocessing_fn"]

UNKNOWN_LABEL = -1
"""Id of a string label outside the declared vocabulary. Ingest rejects such rows, so it only
appears when the graph sees examples that did not come through ingest."""

CROSS_SEPARATOR = "_X_"


def densify(value, dtype: str, default) -> tf.Tensor:
    """A raw column as a dense ``[batch]`` tensor; absent cells get ``default``.

    Args:
        value: a ``[batch]`` Tensor (required column) or a ``[batch, <=1]`` SparseTensor.
        dtype: the column's declared dtype.
        default: the column's declared default (ignored for dense input).
    """
    if not isinstance(value, tf.SparseTensor):
        return value
    fill = tf.constant(default, TF_DTYPES[dtype])
    dense = tft.sparse_tensor_to_dense_with_shape(value, [None, 1], default_value=fill)
    return tf.squeeze(dense, axis=1)


def derive_columns(fn: Callable, outputs, columns: Mapping[str, tf.Tensor]) -> dict:
    """Call the user's derive function and check it returned each declared output.

    Args:
        fn: the resolved ``Derive.fn``.
        outputs: the declared output ``Column``s.
        columns: the dense raw columns.

    Returns:
        ``{name: dense [batch] tensor}`` for each declared output, cast to its declared dtype.

    Raises:
        ValueError: an output is missing, not rank 1, or not convertible to its dtype.
    """
    result = fn(dict(columns))
    if not isinstance(result, Mapping):
        raise ValueError(f"derive fn {_name(fn)} must return a dict of tensors, returned "
                         f"{type(result).__name__}")
    derived = {}
    for column in outputs:
        if column.name not in result:
            raise ValueError(f"derive fn {_name(fn)} did not return declared output "
                             f"{column.name!r}; it returned {sorted(result)}")
        derived[column.name] = _as_column(fn, column, tf.convert_to_tensor(result[column.name]))
    return derived


def _as_column(fn: Callable, column, value: tf.Tensor) -> tf.Tensor:
    if value.shape.rank == 2 and value.shape[1] == 1:
        value = tf.squeeze(value, axis=1)
    if value.shape.rank != 1:
        raise ValueError(f"derive fn {_name(fn)} output {column.name!r} must be a [batch] "
                         f"tensor, got shape {value.shape}")
    dtype = TF_DTYPES[column.dtype]
    if (value.dtype == tf.string) != (dtype == tf.string):
        raise ValueError(f"derive fn {_name(fn)} output {column.name!r} is declared "
                         f"{column.dtype!r} but the fn returned {value.dtype.name}")
    return tf.cast(value, dtype)


def _name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}"


def label_ids(value: tf.Tensor, vocabulary: tuple[str, ...]) -> tf.Tensor:
    """Index of each string in ``vocabulary`` (int64), :data:`UNKNOWN_LABEL` when absent.

    A comparison against the (small) class list rather than a lookup table: no table
    initialisation to track in the transform graph.
    """
    matches = tf.equal(tf.expand_dims(value, 1), tf.constant(list(vocabulary))[tf.newaxis])
    index = tf.argmax(tf.cast(matches, tf.int32), axis=1, output_type=tf.int64)
    return tf.where(tf.reduce_any(matches, axis=1), index, tf.constant(UNKNOWN_LABEL, tf.int64))


def identity_ids(value: tf.Tensor, num_buckets: int) -> tf.Tensor:
    """Ids in ``[0, num_buckets)`` kept; anything else (negatives too) becomes ``num_buckets``."""
    value = tf.cast(value, tf.int64)
    inside = tf.logical_and(value >= 0, value < num_buckets)
    return tf.where(inside, value, tf.constant(num_buckets, tf.int64))


def _as_string(value: tf.Tensor) -> tf.Tensor:
    return value if value.dtype == tf.string else tf.strings.as_string(value)


def _numeric(feature: f.Numeric, x: tf.Tensor) -> tf.Tensor:
    x = tf.cast(x, tf.float32)
    if feature.normalize == "z_score":
        return tft.scale_to_z_score(x, name=f"z_score_{feature.name}")
    if feature.normalize == "min_max":
        return tft.scale_to_0_1(x, name=f"min_max_{feature.name}")
    if feature.normalize == "log":
        return tf.math.log1p(tf.maximum(x, 0.0))
    return x


def _bucketized(feature: f.Bucketized, x: tf.Tensor) -> tf.Tensor:
    x = tf.cast(x, tf.float32)
    if feature.boundaries:
        return tft.apply_buckets(x, tf.constant([list(feature.boundaries)], tf.float32))
    return tft.bucketize(x, feature.num_buckets, name=f"bucketize_{feature.name}")


EMPTY_TOKEN = "__estflow_empty__"
"""Stands for the empty string in vocabularies (tft's text vocabulary files cannot hold "")."""


def _vocab(feature: f.CategoricalVocab, x: tf.Tensor) -> tf.Tensor:
    # Text vocabularies, because the tft layer of a tfrecord_gzip vocabulary cannot be saved in
    # a SavedModel on TF 2.21 ("Attempting to capture an EagerTensor"). The text format drops ""
    # and breaks on newlines, so "" gets its own token and newlines become spaces: a common
    # declared default ("") keeps its own id instead of sharing the OOV bucket.
    x = _as_string(x)
    x = tf.where(tf.equal(x, ""), EMPTY_TOKEN, tf.strings.regex_replace(x, "[\r\n]", " "))
    # Unit weights give the same counts, order and thresholds, but tf.Transform then reduces
    # each batch to (token, count) in the graph; without weights it emits one Python element
    # per row to count in Beam, the slowest part of analysing a large dataset.
    return tft.compute_and_apply_vocabulary(
        x, top_k=feature.top_k, frequency_threshold=feature.frequency_threshold,
        num_oov_buckets=feature.num_oov_buckets, vocab_filename=feature.name,
        weights=tf.ones(tf.shape(x), tf.float32), name=f"vocab_{feature.name}")


def _transform(feature, columns: Mapping[str, tf.Tensor], done: dict[str, tf.Tensor]):
    """One feature's output; Crossed reads the already-transformed ids of its keys."""
    if isinstance(feature, f.Crossed):
        joined = tf.strings.join([_as_string(done[k]) for k in feature.keys],
                                 separator=CROSS_SEPARATOR)
        return tf.strings.to_hash_bucket_fast(joined, feature.hash_buckets)
    x = columns[feature.column]
    if isinstance(feature, f.Numeric):
        return _numeric(feature, x)
    if isinstance(feature, f.Bucketized):
        return _bucketized(feature, x)
    if isinstance(feature, f.CategoricalVocab):
        return _vocab(feature, x)
    if isinstance(feature, f.CategoricalHash):
        return tf.strings.to_hash_bucket_fast(_as_string(x), feature.hash_buckets)
    if isinstance(feature, f.CategoricalIdentity):
        return identity_ids(x, feature.num_buckets)
    raise TypeError(f"unsupported feature declaration {type(feature).__name__}")


def _label(pipeline: Pipeline, columns: Mapping[str, tf.Tensor]) -> tf.Tensor:
    label = pipeline.label
    value = columns[label.column]
    if label.dtype == "string":
        return label_ids(value, label.vocabulary)
    return tf.cast(value, tf.int64 if label.dtype == "int" else tf.float32)


def build_preprocessing_fn(pipeline: Pipeline) -> Callable[[dict], dict]:
    """The ``preprocessing_fn`` for ``tft_beam.AnalyzeAndTransformDataset``.

    Resolves the derive function now (an import error surfaces before Beam starts) and checks
    the output names; the returned function builds the graph when tf.Transform traces it.
    """
    raw = pipeline.raw_columns()
    derive = pipeline.derive
    derive_fn = entry.resolve(derive.fn) if derive else None
    # The dsl guarantees distinct output names and that a cross follows its keys, so the
    # declaration order is a valid evaluation order.
    ordered = pipeline.features
    weight = getattr(pipeline.model, "weight_column", None)

    def preprocessing_fn(inputs: dict) -> dict:
        columns = {c.name: densify(inputs[c.name], c.dtype, c.default) for c in raw}
        if derive_fn is not None:
            columns.update(derive_columns(derive_fn, derive.outputs, columns))
        outputs: dict[str, tf.Tensor] = {}
        for feature in ordered:
            outputs[feature.name] = _transform(feature, columns, outputs)
        outputs[pipeline.label.name] = _label(pipeline, columns)
        if weight is not None:
            outputs[weight] = tf.cast(columns[weight], tf.float32)
        return outputs

    return preprocessing_fn
