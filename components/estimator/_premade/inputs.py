"""Dense and linear inputs from *transformed* features (what tf.feature_column did, over the
ids tf.Transform already computed).

Transformed features are ``[batch]`` (or ``[batch, 1]``) tensors: float32 for numeric
features, int64 ids in ``[0, cardinality)`` for categorical ones (vocabulary, hash, identity,
bucketized, crossed). The cardinalities come from the transform step (``transform.json``).

- :class:`InputLayer` (DNN inputs): a numeric feature by name is one column; ``Indicator`` is a
  one-hot of the id; ``Embedding`` looks the id up in a ``[cardinality, dimension]`` variable.
- :class:`LinearLayer` (linear model): one weight per numeric feature and per categorical id
  (tf.feature_column's ``sparse_combiner="sum"``), plus a bias.

Both are plain ``tf.Module``s creating ``tf.Variable``s at construction, so they work eagerly,
inside ``tf.function`` and in exported SavedModels; built inside a model_fn, the engine's store
gives every trace the same variables. Widths are static (from the declarations), never read
from the batch shape, so an unknown batch dimension loses nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Sequence

import keras
import tensorflow as tf

from estflow.dsl.models import Embedding
from estflow.dsl.models import Indicator

__all__ = ["InputLayer", "LinearLayer", "cardinality_of"]


def cardinality_of(name: str, cardinalities: Mapping[str, int], what: str) -> int:
    """The number of ids of categorical feature ``name``, or a clear error."""
    if name not in cardinalities:
        raise ValueError(f"{what} {name!r} needs the feature's cardinality (categorical ids), "
                         f"but the transform reported cardinalities only for "
                         f"{sorted(cardinalities)}")
    return int(cardinalities[name])


def _feature(features, name: str) -> tf.Tensor:
    if name not in features:
        raise KeyError(f"feature {name!r} is not in the input features {sorted(features)}")
    value = features[name]
    if isinstance(value, tf.SparseTensor):
        raise TypeError(f"feature {name!r} is sparse; the transform step writes dense "
                        "[batch] features")
    return value


def _ids(features, name: str) -> tf.Tensor:
    value = _feature(features, name)
    if value.dtype.is_floating:
        raise TypeError(f"categorical feature {name!r} must hold int ids, got {value.dtype.name}")
    return tf.reshape(tf.cast(value, tf.int64), [-1])


def _numeric(features, name: str) -> tf.Tensor:
    return tf.reshape(tf.cast(_feature(features, name), tf.float32), [-1, 1])


def _variable(name: str, shape, initializer) -> tf.Variable:
    return tf.Variable(lambda: initializer(shape, dtype="float32"), name=name, trainable=True)


class InputLayer(tf.Module):
    """Concatenated DNN inputs, ``[batch, width]``.

    Args:
        columns: feature names (numeric), :class:`Embedding` or :class:`Indicator` usages.
        cardinalities: ids per categorical feature.
    """

    def __init__(self, columns: Sequence[str | Embedding | Indicator],
                 cardinalities: Mapping[str, int], name: str = "input_layer") -> None:
        super().__init__(name=name)
        self.columns = tuple(columns)
        self.embeddings: dict[str, tf.Variable] = {}
        self.sizes: dict[str, int] = {}
        for col in self.columns:
            if isinstance(col, Embedding):
                card = cardinality_of(col.feature, cardinalities, "Embedding")
                init = keras.initializers.TruncatedNormal(stddev=1.0 / math.sqrt(col.dimension))
                self.embeddings[col.feature] = _variable(
                    f"{col.feature}_embedding_weights", [card, col.dimension], init)
            elif isinstance(col, Indicator):
                self.sizes[col.feature] = cardinality_of(col.feature, cardinalities, "Indicator")

    @property
    def width(self) -> int:
        total = 0
        for col in self.columns:
            if isinstance(col, Embedding):
                total += col.dimension
            elif isinstance(col, Indicator):
                total += self.sizes[col.feature]
            else:
                total += 1
        return total

    def __call__(self, features) -> tf.Tensor:
        parts = []
        for col in self.columns:
            if isinstance(col, Embedding):
                parts.append(tf.gather(self.embeddings[col.feature], _ids(features, col.feature)))
            elif isinstance(col, Indicator):
                parts.append(tf.one_hot(_ids(features, col.feature), self.sizes[col.feature],
                                        dtype=tf.float32))
            else:
                parts.append(_numeric(features, col))
        return tf.ensure_shape(tf.concat(parts, axis=1), [None, self.width])


class LinearLayer(tf.Module):
    """Linear logits ``[batch, units]``: numeric features times a weight, categorical ids
    looked up in a weight table, plus a bias (all initialised to zero, as tf.estimator did).

    Args:
        columns: feature names; those in ``cardinalities`` are categorical.
        cardinalities: ids per categorical feature.
        units: number of logits.
    """

    def __init__(self, columns: Sequence[str], cardinalities: Mapping[str, int], units: int,
                 name: str = "linear") -> None:
        super().__init__(name=name)
        self.columns = tuple(columns)
        self.units = units
        zeros = keras.initializers.Zeros()
        self.weights = {}
        for col in self.columns:
            rows = int(cardinalities[col]) if col in cardinalities else 1
            self.weights[col] = _variable(f"linear_{col}_weights", [rows, units], zeros)
        self.bias = _variable("linear_bias", [units], zeros)
        self._categorical = {c for c in self.columns if c in cardinalities}

    def __call__(self, features) -> tf.Tensor:
        logits = []
        for col in self.columns:
            if col in self._categorical:
                logits.append(tf.gather(self.weights[col], _ids(features, col)))
            else:
                logits.append(_numeric(features, col) * self.weights[col])
        return tf.add_n(logits) + self.bias
