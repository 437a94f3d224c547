"""``DenseFeatures`` and ``LinearModel``: feature columns -> a dense input / linear logits.

Both are plain ``tf.Module``s (no Keras: ``tf_keras.layers.DenseFeatures`` cannot sit in a
Keras 3 model, and ``tf.compat.v1.feature_column.input_layer`` re-creates its variables on
every call and fails in ``tf.function``). They create their variables with ``tf.Variable``
when constructed, so

- built inside a model_fn, the Estimator's variable store hands every trace the same
  variables (build them in the model_fn, as Estimator code always did);
- built outside, they are ordinary modules: eager, ``tf.function``, gradients, and
  ``tf.saved_model.save`` of a module holding them (lookups are plain ops, nothing to track).

Columns are ordered by name, as tf.feature_column orders them; widths are static.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import MutableMapping
from typing import Any

import tensorflow as tf

from estflow.estimator._fc.categorical import CategoricalColumn
from estflow.estimator._fc.dense import DenseColumn

__all__ = ["DenseFeatures", "LinearModel", "normalize_columns", "make_parse_example_spec",
           "input_layer", "linear_model"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_COMBINERS = ("sum", "mean", "sqrtn")


def normalize_columns(columns, kinds: tuple[type, ...], what: str, owner: str,
                      field: str = "feature_columns") -> tuple:
    """Columns as a name-sorted tuple; a clear error (naming ``field`` of ``owner``) for wrong
    kinds or duplicate names."""
    if isinstance(columns, (DenseColumn, CategoricalColumn)):
        columns = [columns]
    if isinstance(columns, (dict, str)) or not isinstance(columns, Iterable):
        raise ValueError(f"Received an invalid value for `{field}` of {owner}, "
                         f"expected a list of {what}. Received: {columns!r}")
    columns = list(columns)
    if not columns:
        raise ValueError(f"Received an invalid value for `{field}` of {owner}, "
                         "expected at least one column. Received: []")
    names: dict[str, object] = {}
    for i, col in enumerate(columns):
        if not isinstance(col, kinds):
            raise ValueError(f"Received an invalid value for `{field}[{i}]` of "
                             f"{owner}, expected one of {what}{_hint(col)}. Received: {col!r}")
        if col.name in names and names[col.name] != col:
            raise ValueError(f"Received an invalid value for `{field}` of {owner}, "
                             f"expected distinct column names. Received two columns named "
                             f"{col.name!r}")
        names[col.name] = col
    return tuple(sorted(names.values(), key=lambda c: c.name))


def _hint(col) -> str:
    if isinstance(col, CategoricalColumn):
        return " (wrap a categorical column in embedding_column or indicator_column)"
    if type(col).__module__.startswith(("tensorflow.", "keras.", "tf_keras.")):
        return (" (a tf.feature_column column: build columns with "
                "estflow.estimator.feature_column instead)")
    return ""


def _create_state(columns, trainable: bool) -> dict[str, tf.Variable]:
    """One variable per distinct state spec (a shared embedding group is created once)."""
    state: dict[str, tf.Variable] = {}
    owners: dict[str, object] = {}
    for col in columns:
        for spec in (col.state_specs() if isinstance(col, DenseColumn) else ()):
            if spec.name in state:
                if owners[spec.name] != spec.key:
                    raise ValueError(f"two feature columns need different variables named "
                                     f"{spec.name!r}; rename one (shared embedding names "
                                     "must be unique)")
                continue
            owners[spec.name] = spec.key
            state[spec.name] = tf.Variable(
                lambda spec=spec: spec.initializer(list(spec.shape), dtype="float32"),
                trainable=trainable and spec.trainable, name=_UNSAFE.sub("_", spec.name))
    return state


class DenseFeatures(tf.Module):
    """Dense columns -> one ``[batch, width]`` float tensor (tf.keras.layers.DenseFeatures).

    Args:
        feature_columns: dense columns (numeric, bucketized, indicator, embedding,
            shared embedding).
        trainable: False makes every variable of the layer non-trainable.
        name: the module name.

    Raises:
        ValueError: no columns, a categorical column not wrapped in an embedding or
            indicator column, or two different columns with one name.

    Example:
        >>> import tensorflow as tf
        >>> from estflow.estimator import feature_column as fc
        >>> color = fc.categorical_column_with_vocabulary_list("color", ["red", "blue"])
        >>> layer = fc.DenseFeatures([fc.numeric_column("x"), fc.indicator_column(color)])
        >>> layer({"x": tf.constant([1.5, 2.0]),
        ...        "color": tf.constant(["blue", "red"])}).numpy().tolist()
        [[0.0, 1.0, 1.5], [1.0, 0.0, 2.0]]
    """

    def __init__(self, feature_columns, trainable: bool = True,
                 name: str = "dense_features") -> None:
        super().__init__(name=name)
        self._columns = normalize_columns(feature_columns, (DenseColumn,), "dense columns",
                                          "DenseFeatures")
        self.state = _create_state(self._columns, trainable)

    @property
    def feature_columns(self) -> tuple:
        """The columns, in output order (sorted by name)."""
        return self._columns

    @property
    def width(self) -> int:
        """Number of output values per example."""
        return sum(col.width for col in self._columns)

    def __call__(self, features, cols_to_output_tensors: MutableMapping | None = None,
                 training: bool | None = None) -> tf.Tensor:
        """``[batch, width]``: the columns' dense tensors side by side.

        Args:
            features: ``{feature name: Tensor | SparseTensor | RaggedTensor}``.
            cols_to_output_tensors: if given, filled with ``{column: its tensor}``.
            training: unused (tf.keras.layers.DenseFeatures compatibility).
        """
        del training
        parts = []
        for col in self._columns:
            part = col.dense_tensor(features, self.state)
            if cols_to_output_tensors is not None:
                cols_to_output_tensors[col] = part
            parts.append(part)
        return tf.ensure_shape(tf.concat(parts, axis=1), [None, self.width])


class LinearModel(tf.Module):
    """Linear logits over columns (tf.estimator's linear model; all weights start at 0).

    Categorical columns (bucketized included) look their ids up in a
    ``[num_buckets, units]`` weight table, combined per example with ``sparse_combiner``;
    dense columns are multiplied by a ``[width, units]`` weight matrix; then a bias.

    Args:
        feature_columns: categorical and dense columns.
        units: number of logits.
        sparse_combiner: ``"sum"`` (default, as tf.estimator), ``"mean"`` or ``"sqrtn"``.
        trainable: False makes every variable non-trainable.
        name: the module name.

    Raises:
        ValueError: invalid ``units`` or ``sparse_combiner``, no columns, or duplicates.

    Example:
        >>> import tensorflow as tf
        >>> from estflow.estimator import feature_column as fc
        >>> model = fc.LinearModel([fc.numeric_column("x"),
        ...                         fc.categorical_column_with_identity("id", 3)])
        >>> model({"x": tf.constant([1.0]), "id": tf.constant([2])}).numpy().tolist()
        [[0.0]]
    """

    def __init__(self, feature_columns, units: int = 1, sparse_combiner: str = "sum",
                 trainable: bool = True, name: str = "linear_model") -> None:
        super().__init__(name=name)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError("Received an invalid value for `units`, expected a positive "
                             f"integer. Received: units={units!r}")
        if sparse_combiner not in _COMBINERS:
            raise ValueError(f"Received an invalid value for `sparse_combiner`, expected one "
                             f"of {list(_COMBINERS)}. Received: "
                             f"sparse_combiner={sparse_combiner!r}")
        self._columns = normalize_columns(feature_columns, (DenseColumn, CategoricalColumn),
                                          "feature columns", "LinearModel")
        self.units = units
        self.sparse_combiner = sparse_combiner
        self.state = _create_state(self._columns, trainable)
        self.weights = {col.name: tf.Variable(
            lambda col=col: tf.zeros([_rows(col), units]), trainable=trainable,
            name=_UNSAFE.sub("_", f"linear_{col.name}_weights")) for col in self._columns}
        self.bias = tf.Variable(lambda: tf.zeros([units]), trainable=trainable,
                                name="linear_bias_weights")

    @property
    def feature_columns(self) -> tuple:
        """The columns, sorted by name."""
        return self._columns

    def __call__(self, features) -> tf.Tensor:
        """``[batch, units]`` logits."""
        parts = []
        for col in self._columns:
            weights = self.weights[col.name]
            if isinstance(col, CategoricalColumn):
                pair = col.sparse_ids(features)
                parts.append(tf.nn.safe_embedding_lookup_sparse(
                    weights, pair.id_tensor, pair.weight_tensor,
                    combiner=self.sparse_combiner))
            else:
                parts.append(tf.matmul(col.dense_tensor(features, self.state), weights))
        logits = tf.add_n(parts) + self.bias
        return tf.ensure_shape(logits, [None, self.units])


def _rows(col) -> int:
    return col.num_buckets if isinstance(col, CategoricalColumn) else col.width


def make_parse_example_spec(feature_columns) -> dict[str, Any]:
    """The ``tf.io.parse_example`` spec the columns read (numeric: ``FixedLenFeature``,
    categorical: ``VarLenFeature``).

    Raises:
        ValueError: two columns need different specs for one feature.

    Example:
        >>> from estflow.estimator import feature_column as fc
        >>> spec = make_parse_example_spec([fc.numeric_column("x", default_value=0.0),
        ...                                 fc.categorical_column_with_hash_bucket("c", 10)])
        >>> sorted(spec), type(spec["c"]).__name__
        (['c', 'x'], 'VarLenFeature')
    """
    spec: dict[str, Any] = {}
    columns = normalize_columns(feature_columns, (DenseColumn, CategoricalColumn),
                                "feature columns", "make_parse_example_spec")
    for col in columns:
        for key, value in col.parse_example_spec.items():
            if key in spec and spec[key] != value:
                raise ValueError(f"feature columns contain different parse specs for key "
                                 f"{key!r}: {spec[key]} and {value}")
            spec[key] = value
    return spec


def input_layer(features, feature_columns, trainable: bool = True,
                cols_to_output_tensors: dict | None = None) -> tf.Tensor:
    """``tf.compat.v1.feature_column.input_layer``: a :class:`DenseFeatures` built and
    called at once. Call it inside the model_fn (the Estimator gives every call the same
    variables); elsewhere each call creates new variables.

    Example:
        >>> import tensorflow as tf
        >>> from estflow.estimator import feature_column as fc
        >>> input_layer({"x": tf.constant([[1.0], [2.0]])}, [fc.numeric_column("x")]).shape
        TensorShape([2, 1])
    """
    layer = DenseFeatures(feature_columns, trainable=trainable)
    return layer(features, cols_to_output_tensors=cols_to_output_tensors)


def linear_model(features, feature_columns, units: int = 1, sparse_combiner: str = "sum",
                 cols_to_vars: dict | None = None, trainable: bool = True) -> tf.Tensor:
    """``tf.compat.v1.feature_column.linear_model``: a :class:`LinearModel` built and called
    at once (call it inside the model_fn). ``cols_to_vars``, if given, receives
    ``{column: [weights]}`` plus ``{"bias": [bias]}``.

    Example:
        >>> import tensorflow as tf
        >>> from estflow.estimator import feature_column as fc
        >>> linear_model({"x": tf.constant([1.0, 2.0])}, [fc.numeric_column("x")]).shape
        TensorShape([2, 1])
    """
    model = LinearModel(feature_columns, units, sparse_combiner, trainable)
    if cols_to_vars is not None:
        for col in model.feature_columns:
            cols_to_vars[col] = [model.weights[col.name]]
        cols_to_vars["bias"] = [model.bias]
    return model(features)
