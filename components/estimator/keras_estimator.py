"""``model_to_estimator``: a compiled Keras 3 model as an Estimator (tf.estimator's
``tf.keras.estimator.model_to_estimator``).

The model_fn rebuilds the Keras model from its config on every call (same architecture,
fresh layers), so the engine's variable store owns the clone's variables and
checkpoints them like any model_fn's. The first clone (the engine's first PREDICT trace)
starts from the given model's current weights; after that the model_dir's checkpoints hold
the state, and the given model object is never modified.

From the model's compile configuration (``model.get_compile_config()``) the model_fn takes:

- the loss (a name, a ``keras.losses`` function or ``Loss`` object), averaged over the batch,
  plus the model's regularization losses (``model.losses``);
- the optimizer (a fresh copy, built by the engine and checkpointed with the model);
- the metrics (names like ``"accuracy"``, ``"auc"``, or metric objects) as
  ``eval_metric_ops``; ``"accuracy"`` picks binary, sparse categorical or categorical accuracy
  from the output width and the labels' shape, as Keras ``fit`` does.

Features: a dict keyed by the model's input names (a single-input model also takes a dict
with one entry, or a tensor). Predictions: ``{output name: output}`` (the output layer's
name). Single-output models only.

Example::

    model = keras.Sequential([keras.Input((2,), name="x"), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    est = model_to_estimator(model, model_dir="/tmp/keras_est")
    est.train(lambda: dataset_of_x_dict_and_y, max_steps=100)
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from estflow.components.estimator.estimator import Estimator
from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys

__all__ = ["model_to_estimator"]

_ACCURACY = ("accuracy", "acc")


def _check_model(model: Any) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"Expected keras_model to be a keras.Model; received "
                        f"{type(model).__name__}")
    if getattr(model, "optimizer", None) is None or not model.get_compile_config():
        raise ValueError("Expected a compiled Keras model (call model.compile(optimizer, loss, "
                         "metrics) first); received an uncompiled model")
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        outputs = None
    if not outputs:
        raise ValueError("Expected a functional or Sequential Keras model with known inputs "
                         "(built, e.g. from keras.Input); received a subclassed or unbuilt "
                         f"model {type(model).__name__}, which cannot be cloned")
    if len(model.outputs) != 1:
        raise ValueError(f"Expected a single-output Keras model; received one with "
                         f"{len(model.outputs)} outputs")


def _inputs(model: keras.Model, features) -> Any:
    """``features`` as the model's call expects them."""
    names = [t.name for t in model.inputs]
    if not isinstance(features, Mapping):
        return features
    if len(names) == 1:
        if names[0] in features:
            return features[names[0]]
        if len(features) == 1:
            return next(iter(features.values()))
        raise ValueError(f"Expected features keyed by the model's input {names[0]!r}; "
                         f"received {sorted(features)}")
    missing = sorted(set(names) - set(features))
    if missing:
        raise ValueError(f"Expected features for the model inputs {names}; missing {missing}")
    return {name: features[name] for name in names}


def _accuracy(outputs: tf.Tensor, labels: tf.Tensor) -> keras.metrics.Metric:
    if outputs.shape[-1] == 1:
        return keras.metrics.BinaryAccuracy(name="accuracy")
    if labels.shape.rank is not None and (labels.shape.rank < outputs.shape.rank
                                          or labels.shape[-1] == 1):
        return keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    return keras.metrics.CategoricalAccuracy(name="accuracy")


def _metric(config: Any, outputs: tf.Tensor, labels: tf.Tensor) -> keras.metrics.Metric:
    """A fresh metric object from one entry of the compile config's ``metrics``."""
    if isinstance(config, str) and config in _ACCURACY:
        return _accuracy(outputs, labels)
    metric = keras.metrics.get(config)
    if isinstance(metric, keras.metrics.Metric):  # named as compiled ("mae"), like fit's logs
        name = config if isinstance(config, str) else metric.name
        return metric.__class__.from_config({**metric.get_config(), "name": name})
    name = config if isinstance(config, str) else getattr(metric, "__name__", "metric")
    return keras.metrics.MeanMetricWrapper(metric, name=name)


def _metrics(compile_config: dict, outputs, labels) -> dict[str, keras.metrics.Metric]:
    entries = compile_config.get("metrics") or []
    if isinstance(entries, Mapping):  # {output name: metrics}: one output here
        entries = [m for group in entries.values() for m in
                   (group if isinstance(group, (list, tuple)) else [group])]
    metrics = [_metric(entry, outputs, labels) for entry in entries]
    return {metric.name: metric for metric in metrics}


def _loss(compile_config: dict, model: keras.Model, labels, outputs) -> tf.Tensor:
    loss_fn = keras.losses.get(compile_config["loss"])  # Keras losses cast the labels
    loss = tf.reduce_mean(loss_fn(labels, outputs))
    extra = [tf.cast(x, loss.dtype) for x in model.losses]
    return tf.add_n([loss, *extra]) if extra else loss


def _model_fn_for(keras_model: keras.Model):
    compile_config = keras_model.get_compile_config()
    model_class, model_config = type(keras_model), keras_model.get_config()
    optimizer_class = type(keras_model.optimizer)
    optimizer_config = keras_model.optimizer.get_config()  # eagerly: it reads variables
    output_name = keras_model.layers[-1].name
    initial = {"weights": keras_model.get_weights()}  # copied into the first clone only

    def model_fn(features, labels, mode):
        # From the config, not keras.models.clone_model: that recompiles a compiled model,
        # which reads optimizer values eagerly and fails inside the trace.
        model = model_class.from_config(copy.deepcopy(model_config))  # it consumes the dict
        outputs = model(_inputs(model, features), training=mode == ModeKeys.TRAIN)
        if "weights" in initial:
            with tf.init_scope():  # the store created the clone's variables eagerly
                model.set_weights(initial.pop("weights"))
        predictions = {output_name: outputs}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        loss = _loss(compile_config, model, labels, outputs)
        if mode == ModeKeys.EVAL:
            metrics = _metrics(compile_config, outputs, labels)
            for metric in metrics.values():
                metric.update_state(labels, outputs)
            return EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics,
                                 predictions=predictions)
        optimizer = optimizer_class.from_config(optimizer_config)
        return EstimatorSpec(mode, loss=loss, optimizer=optimizer, predictions=predictions)

    return model_fn


def model_to_estimator(keras_model: keras.Model | None = None,
                       keras_model_path: str | os.PathLike | None = None,
                       custom_objects: dict | None = None,
                       model_dir: str | os.PathLike | None = None, config: Any = None,
                       **estimator_kwargs) -> Estimator:
    """An Estimator whose model_fn runs ``keras_model`` (or the model saved at
    ``keras_model_path``), trained with its compiled optimizer, loss and metrics.

    Args:
        keras_model: a compiled functional or Sequential Keras model.
        keras_model_path: instead, a saved ``.keras`` model (loaded with ``custom_objects``).
        custom_objects: for loading ``keras_model_path``.
        model_dir: the Estimator's model_dir.
        config: a RunConfig (engine or dsl).
        **estimator_kwargs: passed to :class:`Estimator` (``warm_start_from``, ``progress``).

    Raises:
        ValueError: neither or both model arguments, an uncompiled, subclassed or
            multi-output model.
    """
    if (keras_model is None) == (keras_model_path is None):
        raise ValueError("Expected exactly one of keras_model and keras_model_path; received "
                         f"keras_model={type(keras_model).__name__}, "
                         f"keras_model_path={keras_model_path!r}")
    if keras_model is None:
        keras_model = keras.models.load_model(keras_model_path, custom_objects=custom_objects)
    _check_model(keras_model)
    return Estimator(_model_fn_for(keras_model), model_dir, config, **estimator_kwargs)
