"""Feature columns on TF 2.21: tf.feature_column's names and semantics, over plain TF ops.

Code written against ``tf.feature_column`` ports by changing the import::

    from estflow.estimator import feature_column as fc

    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    columns = [fc.numeric_column("x"), fc.embedding_column(color, dimension=4)]

    def model_fn(features, labels, mode):
        net = fc.DenseFeatures(columns)(features)   # build it inside the model_fn
        ...

Inputs may be dense ``[batch]`` / ``[batch, n]`` tensors, ``SparseTensor``s (from
``tf.io.VarLenFeature``) or ``RaggedTensor``s; in dense categorical inputs ``""`` and ``-1``
mean "missing". Vocabulary lookups are constant ops (see ``_fc_lookup``): nothing to track, so
models export with ``tf.saved_model.save`` and ``Estimator.export_saved_model`` as they are.
Ids match tf.feature_column's (vocabulary order, Fingerprint64 OOV and hash buckets,
``tf.sparse.cross_hashed`` crosses), so warm starts from old checkpoints keep their meaning.

Differences from tf.feature_column: ``DenseFeatures``/``LinearModel`` are ``tf.Module``s
(not Keras layers) that create their variables when constructed; shared embeddings share one
table within one layer; ``embedding_column`` has no ``ckpt_to_load_from`` (use the
Estimator's warm start); no sequence columns.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from estflow.estimator._fc.categorical import CategoricalColumn
from estflow.estimator._fc.categorical import CrossedColumn
from estflow.estimator._fc.categorical import HashedCategoricalColumn
from estflow.estimator._fc.categorical import IdentityCategoricalColumn
from estflow.estimator._fc.categorical import VocabularyFileColumn
from estflow.estimator._fc.categorical import VocabularyListColumn
from estflow.estimator._fc.categorical import WeightedCategoricalColumn
from estflow.estimator._fc.dense import BucketizedColumn
from estflow.estimator._fc.dense import DenseColumn
from estflow.estimator._fc.dense import EmbeddingColumn
from estflow.estimator._fc.dense import IndicatorColumn
from estflow.estimator._fc.dense import NumericColumn
from estflow.estimator._fc.dense import SharedEmbeddingColumn
from estflow.estimator._fc.dense import SharedEmbeddingGroup
from estflow.estimator._fc.layers import DenseFeatures
from estflow.estimator._fc.layers import LinearModel
from estflow.estimator._fc.layers import input_layer
from estflow.estimator._fc.layers import linear_model
from estflow.estimator._fc.layers import make_parse_example_spec
from estflow.estimator._fc.lookup import vocabulary_dtype

__all__ = [
    "numeric_column", "bucketized_column", "categorical_column_with_vocabulary_list",
    "categorical_column_with_vocabulary_file", "categorical_column_with_hash_bucket",
    "categorical_column_with_identity", "weighted_categorical_column", "crossed_column",
    "embedding_column", "shared_embeddings", "indicator_column", "make_parse_example_spec",
    "input_layer", "linear_model", "DenseFeatures", "LinearModel", "CategoricalColumn",
    "DenseColumn",
]

_COMBINERS = ("mean", "sqrtn", "sum")


def _invalid(field: str, expected: str, value: Any) -> ValueError:
    return ValueError(f"Received an invalid value for `{field}`, expected {expected}. "
                      f"Received: {field}={value!r}")


def _key(key: Any, field: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise _invalid(field, "a non-empty feature name", key)
    return key


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(field, "a positive integer", value)
    return value


def _categorical(column: Any, field: str = "categorical_column") -> CategoricalColumn:
    if not isinstance(column, CategoricalColumn):
        raise _invalid(field, "a categorical column (categorical_column_with_*, "
                       "bucketized_column, crossed_column, weighted_categorical_column)", column)
    return column


def numeric_column(key: str, shape: int | Sequence[int] = (1,), default_value=None,
                   dtype=tf.float32, normalizer_fn: Callable | None = None) -> NumericColumn:
    """Real-valued feature(s): ``[batch, prod(shape)]`` floats.

    Args:
        key: the feature name.
        shape: values per example (an int or a shape).
        default_value: fills missing values of a parsed ``FixedLenFeature`` and of sparse
            inputs (0 when None).
        dtype: the input type (float or integer); the output is float32.
        normalizer_fn: applied to the ``[batch, width]`` values (e.g. ``lambda x: (x-3)/2``).

    Example:
        >>> import tensorflow as tf
        >>> col = numeric_column("x", shape=2, normalizer_fn=lambda v: v * 10)
        >>> DenseFeatures([col])({"x": tf.constant([[1., 2.]])}).numpy().tolist()
        [[10.0, 20.0]]
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not shape or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape):
        raise _invalid("shape", "positive integer dimension(s)", shape)
    dtype = tf.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer):
        raise _invalid("dtype", "a float or integer dtype", dtype.name)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise _invalid("normalizer_fn", "a callable or None", normalizer_fn)
    return NumericColumn(_key(key), shape, default_value, dtype, normalizer_fn)


def bucketized_column(source_column: NumericColumn,
                      boundaries: Sequence[float]) -> BucketizedColumn:
    """A numeric column cut into buckets ``(-inf, b0), [b0, b1), ..., [bn, inf)``.

    Dense (in :class:`DenseFeatures`) it is a one-hot per value; categorical (embedding,
    indicator, crossed, linear) its ids are ``bucket + i * (len(boundaries) + 1)`` for value i.

    Example:
        >>> import tensorflow as tf
        >>> age = bucketized_column(numeric_column("age"), [18, 65])
        >>> DenseFeatures([age])({"age": tf.constant([10., 30., 70.])}).numpy().tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    if not isinstance(source_column, NumericColumn):
        raise _invalid("source_column", "a numeric_column", source_column)
    bounds = tuple(float(b) for b in boundaries) if isinstance(boundaries, (list, tuple)) \
        else None
    if not bounds or any(a >= b for a, b in zip(bounds, bounds[1:], strict=False)):
        raise _invalid("boundaries", "a non-empty, strictly increasing list of numbers",
                       boundaries)
    return BucketizedColumn(source_column, bounds)


def _oov(default_value: int, num_oov_buckets: int) -> None:
    if not isinstance(num_oov_buckets, int) or num_oov_buckets < 0:
        raise _invalid("num_oov_buckets", "an integer >= 0", num_oov_buckets)
    if num_oov_buckets and default_value != -1:
        raise ValueError("Can't specify both `default_value` and `num_oov_buckets`: "
                         f"default_value={default_value}, num_oov_buckets={num_oov_buckets}")


def _vocabulary(vocabulary_list) -> Any:
    """A vocabulary as a tuple of Python values: lists and tuples, and NumPy arrays or pandas
    ``Series``/``Index`` (``df[name].unique()``, as tf.feature_column accepted them: NumPy
    scalars become Python ``str``/``int``). Anything else is returned as is (and rejected)."""
    if isinstance(vocabulary_list, (str, bytes)):
        raise _invalid("vocabulary_list", "a sequence of strings or of integers",
                       vocabulary_list)
    if isinstance(vocabulary_list, (list, tuple)):
        return tuple(v.item() if isinstance(v, np.generic) else v for v in vocabulary_list)
    if callable(getattr(vocabulary_list, "tolist", None)) and np.ndim(vocabulary_list) == 1:
        return tuple(vocabulary_list.tolist())
    return vocabulary_list


def categorical_column_with_vocabulary_list(key: str, vocabulary_list: Sequence, dtype=None,
                                            default_value: int = -1,
                                            num_oov_buckets: int = 0) -> VocabularyListColumn:
    """Ids from an in-memory vocabulary (strings or integers): the index in the list; others
    get ``default_value`` (-1: dropped downstream) or one of ``num_oov_buckets`` hash buckets.

    Example:
        >>> import tensorflow as tf
        >>> col = categorical_column_with_vocabulary_list("c", ["a", "b"], num_oov_buckets=1)
        >>> DenseFeatures([indicator_column(col)])({"c": tf.constant(["b", "z", ""])}
        ...                                        ).numpy().tolist()
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    """
    vocabulary = _vocabulary(vocabulary_list)
    inferred = vocabulary_dtype(vocabulary)
    if dtype is not None and (tf.as_dtype(dtype) == tf.string) != (inferred == tf.string):
        raise _invalid("dtype", f"{inferred.name} to match the vocabulary", dtype)
    _oov(default_value, num_oov_buckets)
    return VocabularyListColumn(_key(key), inferred, vocabulary, default_value,
                                num_oov_buckets)


def categorical_column_with_vocabulary_file(key: str, vocabulary_file: str,
                                            vocabulary_size: int | None = None,
                                            dtype=tf.string, default_value: int | None = None,
                                            num_oov_buckets: int = 0) -> VocabularyFileColumn:
    """Ids from a vocabulary file (one entry per line, id = line number), read now.

    Args:
        vocabulary_size: use only the first lines (all when None).
        dtype: ``tf.string`` or an integer type (then each line is an integer).
        default_value: id of out-of-vocabulary values (-1 when None), or use
            ``num_oov_buckets``.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> with open(path, "w") as f:
        ...     _ = f.write("red\\ngreen\\n")
        >>> categorical_column_with_vocabulary_file("c", path).num_buckets
        2
    """
    default = -1 if default_value is None else default_value
    _oov(default, num_oov_buckets)
    dtype = tf.as_dtype(dtype)
    if dtype != tf.string and not dtype.is_integer:
        raise _invalid("dtype", "tf.string or an integer dtype", dtype.name)
    if vocabulary_size is not None:
        _positive(vocabulary_size, "vocabulary_size")
    return VocabularyFileColumn(_key(key), tf.string if dtype == tf.string else tf.int64,
                                str(vocabulary_file), vocabulary_size, default,
                                num_oov_buckets)


def categorical_column_with_hash_bucket(key: str, hash_bucket_size: int,
                                        dtype=tf.string) -> HashedCategoricalColumn:
    """Ids ``Fingerprint64(str(value)) % hash_bucket_size`` (tf.feature_column's).

    Example:
        >>> col = categorical_column_with_hash_bucket("user", 1000)
        >>> col.name, col.num_buckets
        ('user', 1000)
    """
    dtype = tf.as_dtype(dtype)
    if dtype != tf.string and not dtype.is_integer:
        raise _invalid("dtype", "tf.string or an integer dtype", dtype.name)
    return HashedCategoricalColumn(_key(key), _positive(hash_bucket_size, "hash_bucket_size"),
                                   tf.string if dtype == tf.string else tf.int64)


def categorical_column_with_identity(key: str, num_buckets: int,
                                     default_value: int | None = None
                                     ) -> IdentityCategoricalColumn:
    """Integer inputs used as ids in ``[0, num_buckets)``; others get ``default_value``, or
    fail the step when it is None.

    Example:
        >>> import tensorflow as tf
        >>> col = categorical_column_with_identity("hour", 4, default_value=0)
        >>> DenseFeatures([indicator_column(col)])({"hour": tf.constant([3, 9])}
        ...                                        ).numpy().tolist()
        [[0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]
    """
    _positive(num_buckets, "num_buckets")
    if default_value is not None and (isinstance(default_value, bool) or not isinstance(
            default_value, int) or not 0 <= default_value < num_buckets):
        raise _invalid("default_value", f"None or an id in [0, {num_buckets})", default_value)
    return IdentityCategoricalColumn(_key(key), num_buckets, default_value)


def weighted_categorical_column(categorical_column: CategoricalColumn,
                                weight_feature_key: str,
                                dtype=tf.float32) -> WeightedCategoricalColumn:
    """A categorical column whose ids carry weights from feature ``weight_feature_key`` (one
    weight per id): embeddings average with them, indicators and linear models sum them.

    Example:
        >>> import tensorflow as tf
        >>> words = categorical_column_with_identity("w", 3)
        >>> col = weighted_categorical_column(words, "tf_idf")
        >>> DenseFeatures([indicator_column(col)])(
        ...     {"w": tf.constant([[0, 2]]), "tf_idf": tf.constant([[0.5, 2.0]])}
        ... ).numpy().tolist()
        [[0.5, 0.0, 2.0]]
    """
    dtype = tf.as_dtype(dtype)
    if not dtype.is_floating:
        raise _invalid("dtype", "a float dtype", dtype.name)
    return WeightedCategoricalColumn(_categorical(categorical_column),
                                     _key(weight_feature_key, "weight_feature_key"), dtype)


def crossed_column(keys: Sequence, hash_bucket_size: int,
                   hash_key: int | None = None) -> CrossedColumn:
    """Hashed crosses of string features and/or categorical columns
    (``tf.sparse.cross_hashed``; hashed columns cannot be crossed, as in tf.feature_column).

    Example:
        >>> cross = crossed_column(["country", bucketized_column(numeric_column("age"), [30])],
        ...                        hash_bucket_size=100)
        >>> cross.name
        'age_bucketized_X_country'
    """
    keys = tuple(keys) if isinstance(keys, (list, tuple)) else keys
    if not isinstance(keys, tuple) or len(keys) < 2:
        raise _invalid("keys", "at least 2 feature names or categorical columns", keys)
    for i, key in enumerate(keys):
        if isinstance(key, HashedCategoricalColumn) or not isinstance(
                key, (str, CategoricalColumn)):
            raise _invalid(f"keys[{i}]", "a feature name or a categorical column that is not "
                           "hashed (cross the raw feature instead)", key)
    return CrossedColumn(keys, _positive(hash_bucket_size, "hash_bucket_size"), hash_key)


def _embedding_options(dimension: int, combiner: str, initializer, max_norm) -> None:
    _positive(dimension, "dimension")
    if combiner not in _COMBINERS:
        raise _invalid("combiner", f"one of {list(_COMBINERS)}", combiner)
    if initializer is not None and not callable(initializer):
        raise _invalid("initializer", "a callable initializer(shape, dtype) or None",
                       initializer)
    if max_norm is not None and not (isinstance(max_norm, (int, float)) and max_norm > 0):
        raise _invalid("max_norm", "a positive number or None", max_norm)


def embedding_column(categorical_column: CategoricalColumn, dimension: int,
                     combiner: str = "mean", initializer: Callable | None = None,
                     max_norm: float | None = None, trainable: bool = True) -> EmbeddingColumn:
    """A learned ``[num_buckets, dimension]`` embedding of a categorical column; several ids
    per example are combined with ``combiner`` (``"mean"``, ``"sqrtn"``, ``"sum"``).

    Args:
        initializer: ``initializer(shape, dtype)``; default truncated normal with stddev
            ``1/sqrt(dimension)``.
        max_norm: clip each looked-up embedding to this L2 norm.
        trainable: False freezes the table.

    Example:
        >>> import tensorflow as tf
        >>> col = embedding_column(categorical_column_with_identity("id", 10), 3,
        ...                        initializer=tf.keras.initializers.Ones())
        >>> DenseFeatures([col])({"id": tf.constant([4])}).numpy().tolist()
        [[1.0, 1.0, 1.0]]
    """
    _embedding_options(dimension, combiner, initializer, max_norm)
    return EmbeddingColumn(_categorical(categorical_column), dimension, combiner, initializer,
                           max_norm, bool(trainable))


def shared_embeddings(categorical_columns: Sequence[CategoricalColumn], dimension: int,
                      combiner: str = "mean", initializer: Callable | None = None,
                      shared_embedding_collection_name: str | None = None,
                      max_norm: float | None = None,
                      trainable: bool = True) -> list[SharedEmbeddingColumn]:
    """Embedding columns of several categorical columns (same ``num_buckets``) that share one
    table: put them in the same :class:`DenseFeatures`.

    Example:
        >>> a = categorical_column_with_identity("query", 5)
        >>> b = categorical_column_with_identity("doc", 5)
        >>> [c.name for c in shared_embeddings([a, b], dimension=2)]
        ['query_shared_embedding', 'doc_shared_embedding']
    """
    columns = list(categorical_columns) if isinstance(categorical_columns, (list, tuple)) \
        else None
    if not columns or len(columns) < 2:
        raise _invalid("categorical_columns", "at least 2 categorical columns",
                       categorical_columns)
    for i, col in enumerate(columns):
        _categorical(col, f"categorical_columns[{i}]")
    sizes = {col.num_buckets for col in columns}
    if len(sizes) != 1:
        raise _invalid("categorical_columns", "columns with the same num_buckets",
                       {col.name: col.num_buckets for col in columns})
    _embedding_options(dimension, combiner, initializer, max_norm)
    name = shared_embedding_collection_name or (
        "_".join(sorted(col.name for col in columns)) + "_shared_embedding")
    group = SharedEmbeddingGroup(name, sizes.pop(), dimension, combiner, initializer,
                                 max_norm, bool(trainable))
    return [SharedEmbeddingColumn(col, group) for col in columns]


def indicator_column(categorical_column: CategoricalColumn) -> IndicatorColumn:
    """A categorical column as a multi-hot ``[batch, num_buckets]`` (counts of each id, or
    summed weights of a weighted column).

    Example:
        >>> import tensorflow as tf
        >>> col = indicator_column(categorical_column_with_identity("id", 3))
        >>> DenseFeatures([col])({"id": tf.ragged.constant([[0, 2, 2], []])}
        ...                     ).numpy().tolist()
        [[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """
    return IndicatorColumn(_categorical(categorical_column))
