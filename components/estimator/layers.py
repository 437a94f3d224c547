"""``tf.compat.v1.layers``' functional layers, with TF 1's variable sharing by scope name.

``tf.compat.v1.layers`` is gone with Keras 3 (TF 2.16+). ``estflow migrate`` turns most calls
into a Keras layer built and called at once (``tf.keras.layers.Conv2D(32, 5)(x)``). That loses
one TF 1 behaviour: a network built twice inside ``tf.compat.v1.variable_scope(name,
reuse=True)`` (train and test graphs, Siamese towers), or a layer called with ``name=...,
reuse=tf.compat.v1.AUTO_REUSE``, shared one set of variables, found by the variable scope's
name. The functions here keep it::

    from estflow.estimator import layers

    def conv_net(x, reuse, is_training):
        with tf.compat.v1.variable_scope("ConvNet", reuse=reuse):
            x = layers.conv2d(x, 32, 5, activation=tf.nn.relu)
            x = layers.flatten(layers.max_pooling2d(x, 2, 2))
            return layers.dense(layers.dropout(x, 0.25, training=is_training), 10)

Each call opens the variable scope TF 1's layer opened (``name``, else the layer's default
name made unique: ``ConvNet/conv2d``, ``ConvNet/conv2d_1``, ...; re-entering ``ConvNet``
starts the count again, so the second build gets the same names). Where that scope reuses
(``reuse=True``, or ``AUTO_REUSE`` while tracing a graph), the call gets the Keras layer built
under that name earlier in the same graph (the same model_fn call, in an Estimator), else a new
one. The arguments are TF 1's, in its order; ``training`` goes to the layer's call (TF 1's
default ``False``); ``fused`` is ignored (a speed hint); initializers, regularizers and
constraints given as ``None`` take Keras' defaults (TF 1's). Batch renormalisation
(``renorm``...) has no Keras 3 equivalent and is refused.
"""

from __future__ import annotations

import keras
import tensorflow as tf

__all__ = [
    "dense", "flatten", "dropout", "batch_normalization", "conv1d", "conv2d", "conv3d",
    "conv2d_transpose", "conv3d_transpose", "separable_conv1d", "separable_conv2d",
    "max_pooling1d", "max_pooling2d", "max_pooling3d", "average_pooling1d",
    "average_pooling2d", "average_pooling3d",
]

_INIT = ("kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
         "activity_regularizer", "kernel_constraint", "bias_constraint", "trainable", "name",
         "reuse")
_CONV = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
         "activation", "use_bias", *_INIT)
_TRANSPOSE = ("filters", "kernel_size", "strides", "padding", "data_format", "activation",
              "use_bias", *_INIT)
_SEPARABLE = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
              "depth_multiplier", "activation", "use_bias", "depthwise_initializer",
              "pointwise_initializer", "bias_initializer", "depthwise_regularizer",
              "pointwise_regularizer", "bias_regularizer", "activity_regularizer",
              "depthwise_constraint", "pointwise_constraint", "bias_constraint", "trainable",
              "name", "reuse")
_POOL = ("pool_size", "strides", "padding", "data_format", "name")
_BATCH_NORM = ("axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
               "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer",
               "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
               "training", "trainable", "name", "reuse", "renorm", "renorm_clipping",
               "renorm_momentum", "fused", "virtual_batch_size", "adjustment")
_UNSUPPORTED = ("renorm", "renorm_clipping", "renorm_momentum", "virtual_batch_size",
                "adjustment")
_DEFAULTS_WHEN_NONE = ("initializer", "regularizer", "constraint")
# The graph collection holding {variable scope name: Keras layer} (a model_fn call's
# collections start empty and are dropped when it returns).
_REGISTRY = "__estflow_v1_layers"


def _registry() -> dict:
    ref = tf.compat.v1.get_default_graph().get_collection_ref(_REGISTRY)
    if not ref:
        ref.append({})
    return ref[0]


def _shared_layer(base: str, name, reuse, build):
    """The Keras layer for this call: the one built under the same variable scope name when
    that scope reuses, else ``build()`` (kept under the name)."""
    if reuse:  # TF 1's Layer._set_scope: an explicit reuse takes the name as it is
        scope_cm = tf.compat.v1.variable_scope(name or base, reuse=reuse)
    else:
        scope_cm = tf.compat.v1.variable_scope(name, default_name=base)
    with scope_cm as scope:
        key = scope.name
        sharing = scope.reuse is True or (scope.reuse == tf.compat.v1.AUTO_REUSE
                                          and not tf.executing_eagerly())
    registry = _registry()
    layer = registry.get(key) if sharing else None
    if layer is None:
        layer = build()
        registry[key] = layer
    return layer


def _bind(fn: str, params: tuple[str, ...], args: tuple, kwargs: dict) -> dict:
    if len(args) > len(params):
        raise TypeError(f"{fn}() takes at most {len(params) + 1} positional arguments "
                        f"(inputs, {', '.join(params)}); received {len(args) + 1}")
    bound = dict(zip(params, args, strict=False))
    for key, value in kwargs.items():
        if key not in params:
            raise TypeError(f"{fn}() got an unexpected keyword argument {key!r} (it takes "
                            f"{', '.join(params)})")
        if key in bound:
            raise TypeError(f"{fn}() got multiple values for argument {key!r}")
        bound[key] = value
    return bound


def _functional(fn: str, keras_class: str, params: tuple[str, ...], training: bool = False):
    def layer_fn(inputs, *args, **kwargs):
        bound = _bind(fn, params, args, kwargs)
        for key in _UNSUPPORTED:
            if bound.get(key):
                raise ValueError(f"estflow.estimator.layers.{fn}({key}=...): batch "
                                 "renormalisation has no Keras 3 equivalent; leave it out")
            bound.pop(key, None)
        bound.pop("fused", None)
        name, reuse = bound.pop("name", None), bound.pop("reuse", None)
        call = {"training": bound.pop("training", False)} if training else {}
        config = {k: v for k, v in bound.items()
                  if v is not None or not k.endswith(_DEFAULTS_WHEN_NONE)}
        cls = getattr(keras.layers, keras_class)
        layer = _shared_layer(fn, name, reuse, lambda: cls(**config))
        return layer(inputs, **call)

    layer_fn.__name__ = layer_fn.__qualname__ = fn
    layer_fn.__doc__ = (f"``tf.compat.v1.layers.{fn}(inputs, {', '.join(params)})``: "
                        f"``keras.layers.{keras_class}``, shared by variable scope name (see "
                        "the module docstring).")
    return layer_fn


dense = _functional("dense", "Dense", ("units", "activation", "use_bias", *_INIT))
flatten = _functional("flatten", "Flatten", ("name", "data_format"))
dropout = _functional("dropout", "Dropout", ("rate", "noise_shape", "seed", "training", "name"),
                      training=True)
batch_normalization = _functional("batch_normalization", "BatchNormalization", _BATCH_NORM,
                                  training=True)
conv1d = _functional("conv1d", "Conv1D", _CONV)
conv2d = _functional("conv2d", "Conv2D", _CONV)
conv3d = _functional("conv3d", "Conv3D", _CONV)
conv2d_transpose = _functional("conv2d_transpose", "Conv2DTranspose", _TRANSPOSE)
conv3d_transpose = _functional("conv3d_transpose", "Conv3DTranspose", _TRANSPOSE)
separable_conv1d = _functional("separable_conv1d", "SeparableConv1D", _SEPARABLE)
separable_conv2d = _functional("separable_conv2d", "SeparableConv2D", _SEPARABLE)
max_pooling1d = _functional("max_pooling1d", "MaxPooling1D", _POOL)
max_pooling2d = _functional("max_pooling2d", "MaxPooling2D", _POOL)
max_pooling3d = _functional("max_pooling3d", "MaxPooling3D", _POOL)
average_pooling1d = _functional("average_pooling1d", "AveragePooling1D", _POOL)
average_pooling2d = _functional("average_pooling2d", "AveragePooling2D", _POOL)
average_pooling3d = _functional("average_pooling3d", "AveragePooling3D", _POOL)
