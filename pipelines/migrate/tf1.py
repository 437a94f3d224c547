"""``estflow migrate``'s TF 1 tables: ``tf.compat.v1.layers``, RNN cells, private estimator
modules, TF 1 dataset iterators (used by :mod:`.migrate`; no TensorFlow imported).

- Every functional layer of ``tf.compat.v1.layers`` / ``tf.layers`` (gone with Keras 3) becomes
  the Keras layer built and called at once: ``tf.layers.conv2d(x, 32, 5, padding="same")`` ->
  ``tf.keras.layers.Conv2D(32, 5, padding="same")(x)``. The arguments keep their names (the
  TF 1 layers were the Keras ones); ``dropout``'s and ``batch_normalization``'s ``training``
  moves to the call, ``training=False`` (TF 1's default: no dropout, moving statistics) when
  the program left it out. A layer with variables called with ``reuse=...`` or inside a
  ``variable_scope(..., reuse=...)`` (TF 1 shared its variables by scope name; Keras layers
  share by object) goes to ``estflow.estimator.layers.<name>`` instead, its arguments kept:
  that module shares by scope name as TF 1 did. The batch-renormalisation arguments cannot be
  carried: reported with the replacement.
- ``tf.compat.v1.nn.rnn_cell.*`` / ``tf.contrib.rnn.*`` cells (Keras 3 removed
  ``tf.compat.v1.nn.rnn_cell``) -> ``estflow.estimator.rnn_cell``'s (TF's own TF 1 cells);
  ``tf.contrib.rnn.static_rnn`` & co. and TF 2-spelled ``tf.nn.dynamic_rnn`` ->
  ``estimator.rnn_cell.dynamic_rnn`` (``tf.compat.v1.nn.dynamic_rnn``, kept where spelled so);
  ``from tensorflow.contrib import rnn`` -> ``from estflow.estimator import rnn_cell as rnn``.
  contrib-only cells (``LSTMBlockCell``, ...) are reported with the Keras replacement.
- ``from tensorflow.python.estimator.<module> import X`` (and ``tensorflow_estimator.python
  .estimator``): the public name from ``estflow.estimator``, or reported.
- ``from tensorflow.python.feature_column import feature_column[_v2] as fc``: estflow's
  ``feature_column`` module under the same name, and ``fc.<TF class>`` estflow's class
  (``isinstance`` on TF's classes never matches estflow's columns).
- ``dataset.make_one_shot_iterator()`` (a TF 1 ``Dataset`` method) ->
  ``tf.compat.v1.data.make_one_shot_iterator(dataset)``, whose ``get_next()`` tensors the
  engine reads as the dataset (the code after ``get_next()`` runs on every batch).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LAYERS", "PRIVATE_COLUMN_CLASSES", "RNN_REPLACEMENTS", "Layer",
           "private_estimator_target"]

_INIT = ["kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
         "activity_regularizer", "kernel_constraint", "bias_constraint", "trainable", "name",
         "reuse"]
_CONV = ["filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
         "activation", "use_bias", *_INIT]
_TRANSPOSE = ["filters", "kernel_size", "strides", "padding", "data_format", "activation",
              "use_bias", *_INIT]
_SEPARABLE = ["filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
              "depth_multiplier", "activation", "use_bias", "depthwise_initializer",
              "pointwise_initializer", "bias_initializer", "depthwise_regularizer",
              "pointwise_regularizer", "bias_regularizer", "activity_regularizer",
              "depthwise_constraint", "pointwise_constraint", "bias_constraint", "trainable",
              "name", "reuse"]
_POOL = ["pool_size", "strides", "padding", "data_format", "name"]
_BATCH_NORM = ["axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
               "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer",
               "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
               "training", "trainable", "name", "reuse", "renorm", "renorm_clipping",
               "renorm_momentum", "fused", "virtual_batch_size", "adjustment"]


@dataclass(frozen=True)
class Layer:
    """A functional TF 1 layer: ``name(inputs, *params)``.

    Attributes:
        keras: the Keras class.
        params: its parameters after ``inputs``, in TF 1's order.
        aligned: how many leading ``params`` the Keras constructor takes in the same position
            (later positional arguments are written as keywords).
        call: parameters that go to the layer's call, with TF 1's default.
        unsupported: parameters Keras 3 has no equivalent for (reported).
        dropped: parameters without effect on the result, left out (``fused``: a speed hint).
    """

    keras: str
    params: tuple[str, ...]
    aligned: int
    call: tuple[tuple[str, str], ...] = ()
    unsupported: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()


_TRAINING = (("training", "False"),)
LAYERS: dict[str, Layer] = {
    "dense": Layer("Dense", ("units", "activation", "use_bias", *_INIT), 2),
    "flatten": Layer("Flatten", ("name", "data_format"), 0),
    "dropout": Layer("Dropout", ("rate", "noise_shape", "seed", "training", "name"), 3,
                     _TRAINING),
    "batch_normalization": Layer(
        "BatchNormalization", tuple(_BATCH_NORM), 13, _TRAINING,
        frozenset({"renorm", "renorm_clipping", "renorm_momentum", "virtual_batch_size",
                   "adjustment"}), frozenset({"fused"})),
    **{f"conv{d}d": Layer(f"Conv{d}D", tuple(_CONV), 6) for d in (1, 2, 3)},
    **{f"conv{d}d_transpose": Layer(f"Conv{d}DTranspose", tuple(_TRANSPOSE), 5) for d in (2, 3)},
    **{f"separable_conv{d}d": Layer(f"SeparableConv{d}D", tuple(_SEPARABLE), 6)
       for d in (1, 2)},
    **{f"max_pooling{d}d": Layer(f"MaxPooling{d}D", tuple(_POOL), 4) for d in (1, 2, 3)},
    **{f"average_pooling{d}d": Layer(f"AveragePooling{d}D", tuple(_POOL), 4)
       for d in (1, 2, 3)},
}

# TF 1 RNN cells and functions -> what replaces them with Keras 3 (reported, not rewritten).
_CELL = "inside tf.keras.layers.RNN(cell, return_sequences=True, return_state=True)"
RNN_REPLACEMENTS = {
    "BasicLSTMCell": f"tf.keras.layers.LSTMCell(num_units) {_CELL} (states come back [h, c])",
    "LSTMCell": f"tf.keras.layers.LSTMCell(num_units) {_CELL} (states come back [h, c])",
    "LSTMBlockCell": f"tf.keras.layers.LSTMCell(num_units) {_CELL}",
    "LayerNormBasicLSTMCell": f"tf.keras.layers.LSTMCell(num_units) {_CELL} with a "
                              "tf.keras.layers.LayerNormalization",
    "GRUCell": f"tf.keras.layers.GRUCell(num_units) {_CELL}",
    "GRUBlockCell": f"tf.keras.layers.GRUCell(num_units) {_CELL}",
    "BasicRNNCell": f"tf.keras.layers.SimpleRNNCell(num_units) {_CELL}",
    "RNNCell": "a tf.keras.layers.AbstractRNNCell subclass",
    "MultiRNNCell": "tf.keras.layers.StackedRNNCells([cells])",
    "DropoutWrapper": "the Keras cell's dropout=1-input_keep_prob / "
                      "recurrent_dropout=1-state_keep_prob arguments",
    "ResidualWrapper": "a residual connection around the tf.keras.layers.RNN layer",
    "LSTMStateTuple": "a [h, c] list (Keras' order; TF 1's LSTMStateTuple is (c, h))",
    "dynamic_rnn": "tf.keras.layers.RNN(cell, return_sequences=True, return_state=True)"
                   "(inputs): outputs, *states",
    "static_rnn": "tf.keras.layers.RNN(cell, return_sequences=True, return_state=True) on the "
                  "stacked inputs",
    "bidirectional_dynamic_rnn": "tf.keras.layers.Bidirectional(tf.keras.layers.RNN(cell, "
                                 "return_sequences=True))(inputs)",
}
RNN_FUNCTIONS = frozenset({"dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn",
                           "static_bidirectional_rnn", "raw_rnn", "static_state_saving_rnn"})
# What estflow.estimator.rnn_cell has (TF's own TF 1 cells, and tf.compat.v1.nn's functions):
# tf.nn.rnn_cell.X / tf.contrib.rnn.X become estimator.rnn_cell.X.
ENGINE_RNN_NAMES = frozenset({
    "BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell", "LSTMCell",
    "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper", *RNN_FUNCTIONS})

# Private tf.estimator modules whose public names estflow.estimator has (module -> estflow).
_WHOLE_ENGINE = frozenset({"estimator", "estimator_lib", "model_fn", "run_config", "training",
                           "exporter", "run_config_lib", "model_fn_lib"})
_EXPORT_MODULES = frozenset({"export", "export_lib", "export_output"})
LEGACY_ESTIMATOR_ROOTS = (("tensorflow", "python", "estimator"),
                          ("tensorflow_estimator", "python", "estimator"))

# TF's private feature-column modules (tensorflow.python.feature_column's feature_column,
# feature_column_v2, feature_column_lib): imports become estflow.estimator.feature_column under
# the same name, and their class names estflow's (TF 1's _X and TF 2's X spellings), so
# isinstance filters select estflow's columns.
PRIVATE_COLUMN_MODULES = frozenset({"feature_column", "feature_column_v2", "feature_column_lib"})
PRIVATE_COLUMN_CLASSES = {
    **{f"{p}{name}": name for p in ("", "_") for name in (
        "NumericColumn", "BucketizedColumn", "CrossedColumn", "EmbeddingColumn",
        "IndicatorColumn", "DenseColumn", "CategoricalColumn", "SharedEmbeddingColumn")},
    **{f"{p}{name}": name for p in ("", "_") for name in (
        "IdentityCategoricalColumn", "HashedCategoricalColumn", "WeightedCategoricalColumn")},
    "VocabularyListCategoricalColumn": "VocabularyListColumn",
    "_VocabularyListCategoricalColumn": "VocabularyListColumn",
    "VocabularyFileCategoricalColumn": "VocabularyFileColumn",
    "_VocabularyFileCategoricalColumn": "VocabularyFileColumn",
}


def private_estimator_target(module: tuple[str, ...], name: str, estimator_names: frozenset,
                             export_names: frozenset) -> str | None:
    """What ``from <module> import <name>`` becomes (the text after ``from``/``import``, as
    ``"from estflow.estimator import ModeKeys"``), or None when estflow has no such name.
    ``module`` starts with one of :data:`LEGACY_ESTIMATOR_ROOTS`."""
    if name in estimator_names:
        return f"from estflow.estimator import {name}"
    if name in export_names:
        return f"from estflow.estimator.export import {name}"
    if name in _WHOLE_ENGINE or (name == "estimator" and len(module) == 3):
        return "import estflow.estimator"
    if name in _EXPORT_MODULES:
        return "from estflow.estimator import export"
    return None


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def rewrite_layer_call(m, call, name: str) -> None:
    """``tf.compat.v1.layers.<name>(inputs, ...)`` -> ``tf.keras.layers.<Class>(...)(inputs)``
    (module docstring); ``m`` is the migrator (its render/replace/note/tf_name)."""
    import ast

    layer = LAYERS[name]
    shown = f"tf.compat.v1.layers.{name}"
    params = ("inputs", *layer.params)
    if len(call.args) > len(params) or any(isinstance(a, ast.Starred) for a in call.args):
        m.note(call, "could not", f"{shown}(...): arguments not understood; replace with "
               f"tf.keras.layers.{layer.keras}(...)(inputs)")
        return
    bound = dict(zip(params, call.args, strict=False))
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg not in params or keyword.arg in bound:
            m.note(call, "could not", f"{shown}(...): argument {keyword.arg or '**'} not "
                   f"understood; replace with tf.keras.layers.{layer.keras}(...)(inputs)")
            return
        bound[keyword.arg] = keyword.value
    reuse = bound.pop("reuse", None)
    unsupported = sorted(set(bound) & layer.unsupported)
    if unsupported or "inputs" not in bound:
        what = ", ".join(unsupported) or "no inputs"
        m.note(call, "could not", f"{shown}(...): {what} has no Keras 3 equivalent; replace "
               f"with tf.keras.layers.{layer.keras}(...)(inputs) without it")
        return
    if reuse is not None and not (isinstance(reuse, ast.Constant) and not reuse.value):
        _share_by_scope(m, call, name, "reuse=...")
        return
    scope = _reusing_scope(m, call) if "trainable" in layer.params else None  # has variables
    if scope is not None:
        _share_by_scope(m, call, name, f"inside variable_scope(..., reuse=...) (line "
                        f"{scope.lineno})")
        return
    if not m.replace(call, _layer_text(m, call, layer, bound)):
        return
    notes = []
    for param, default in layer.call:
        if param in bound:
            notes.append(f"{param}={_short(m.original(bound[param]), 40)} goes to the call")
        else:
            notes.append(f"{param}={default} at the call: TF 1's default")
    notes += [f"{p} left out: a speed hint" for p in sorted(set(bound) & layer.dropped)]
    m.note(call, "changed", f"{shown}(...) -> tf.keras.layers.{layer.keras}(...)(inputs)"
           + "".join(f" ({n})" for n in notes))


def _share_by_scope(m, call, name: str, why: str) -> None:
    """TF 1 shared this layer's variables with another call by variable scope name; Keras
    layers share by object: the call goes to ``estflow.estimator.layers``, which shares as
    TF 1 did (the arguments are TF 1's, kept as they are)."""
    new = f"{m.estimator_name()}.layers.{name}"
    old = m.original(call.func)
    if m.replace(call.func, new):
        m.note(call, "changed", f"{old}(...) {why} -> {new}(...) (shares variables by "
               "variable scope name as TF 1 did; Keras layers share by object)")


def _reusing_scope(m, call):
    """The ``variable_scope(..., reuse=X)`` call around ``call`` (X not False/None), or None:
    TF 1 layers built twice in such a scope share one set of variables."""
    import ast

    node = call
    while node in m.parents:
        node = m.parents[node]
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            expr = item.context_expr
            resolved = m.resolve(expr.func) if isinstance(expr, ast.Call) else None
            if resolved is None or m.canonical(resolved[0]) != ("tensorflow", "variable_scope"):
                continue
            reuse = next((k.value for k in expr.keywords if k.arg == "reuse"), None)
            if reuse is not None and not (isinstance(reuse, ast.Constant) and not reuse.value):
                return expr
    return None


def _layer_text(m, call, layer: Layer, bound: dict) -> str:
    positional = [p for p, a in zip(("inputs", *layer.params), call.args, strict=False)
                  if p != "inputs"]
    call_names = {p for p, _ in layer.call}
    args = []
    for i, param in enumerate(layer.params):
        if param not in bound or param in call_names or param in layer.dropped:
            continue
        if param in positional and i < layer.aligned and all(
                p in positional for p in layer.params[:i]):
            args.append(m.render(bound[param]))
        else:
            args.append(f"{param}={m.render(bound[param])}")
    at_call = [f"{p}={m.render(bound[p]) if p in bound else default}"
               for p, default in layer.call]
    inputs = ", ".join([m.render(bound["inputs"]), *at_call])
    return f"{m.tf_name()}.keras.layers.{layer.keras}({', '.join(args)})({inputs})"
