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
name).

Multi-output models (outputs a list or a dict): labels are a dict keyed by the output names
(``model.output_names``), or a list/tuple in that order; the loss is the sum over outputs of
``loss_weights[name] * mean(loss[name](labels[name], output))`` (``loss`` and
``loss_weights`` as compiled: one for all, a dict by output name or a list in order; an output
whose loss is None is not trained), plus the regularization losses; metrics compiled as a dict
by output name, a list of lists in order, or one flat list for every output are reported as
``<output>_<metric>`` (``click_accuracy``), like Keras ``fit``'s logs.

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

from estflow.dsl.model_fn import EstimatorSpec
from estflow.dsl.model_fn import ModeKeys
from estflow.estimator.estimator import Estimator

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


def _metric(config: Any, outputs: tf.Tensor, labels: tf.Tensor,
            prefix: str = "") -> keras.metrics.Metric:
    """A fresh metric object from one entry of the compile config's ``metrics``, named as
    compiled (``"mae"``; ``"click_mae"`` with ``prefix="click_"``), like fit's logs."""
    if isinstance(config, str) and config in _ACCURACY:
        metric = _accuracy(outputs, labels)
        name = "accuracy"
    else:
        metric = keras.metrics.get(config)
        if isinstance(metric, keras.metrics.Metric):
            name = config if isinstance(config, str) else metric.name
        else:
            name = config if isinstance(config, str) else getattr(metric, "__name__", "metric")
            return keras.metrics.MeanMetricWrapper(metric, name=prefix + name)
    if not prefix and name == metric.name:
        return metric
    return metric.__class__.from_config({**metric.get_config(), "name": prefix + name})


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


# -- multi-output models -------------------------------------------------------------------
def _per_output(value: Any, names: list[str], field: str, listed: bool = True) -> dict:
    """A compile setting per output name: a dict by name, a list in output order (when
    ``listed``), or one value for all."""
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"Expected the compiled {field} keyed by the model's outputs "
                             f"{names}; received keys {unknown} that are none of them")
        return {name: value.get(name) for name in names}
    if listed and isinstance(value, (list, tuple)):
        if len(value) != len(names):
            raise ValueError(f"Expected the compiled {field} as one entry per output "
                             f"{names}; received {len(value)} entries")
        return dict(zip(names, value, strict=True))
    return {name: value for name in names}


def _labels_by_output(labels: Any, names: list[str]) -> dict:
    if isinstance(labels, Mapping):
        missing = [name for name in names if name not in labels]
        if not missing:
            return {name: labels[name] for name in names}
        raise ValueError(f"Expected labels for the model outputs {names}; missing {missing} "
                         f"(received keys {sorted(labels)})")
    if isinstance(labels, (list, tuple)) and len(labels) == len(names):
        return dict(zip(names, labels, strict=True))
    raise ValueError(f"Expected labels as a dict keyed by the model's output names {names} "
                     f"(or a list in that order); received {type(labels).__name__}")


def _outputs_by_name(model: keras.Model, outputs: Any) -> dict:
    names = list(model.output_names)
    if isinstance(outputs, Mapping):
        return {name: outputs[name] for name in names}
    return dict(zip(names, outputs, strict=True))


def _multi_loss(compile_config: dict, model: keras.Model, labels: dict, outputs: dict):
    names = list(outputs)
    losses = _per_output(compile_config.get("loss"), names, "loss")
    weights = _per_output(compile_config.get("loss_weights"), names, "loss_weights")
    terms = []
    for name, loss in losses.items():
        if loss is None:
            continue
        weight = 1.0 if weights[name] is None else float(weights[name])
        value = tf.reduce_mean(keras.losses.get(loss)(labels[name], outputs[name]))
        terms.append(weight * tf.cast(value, tf.float32))
    if not terms:
        raise ValueError(f"Expected a compiled loss for at least one of the outputs {names}")
    terms += [tf.cast(x, tf.float32) for x in model.losses]
    return tf.add_n(terms)


def _multi_metrics(compile_config: dict, labels: dict, outputs: dict) -> dict:
    names = list(outputs)
    entries = compile_config.get("metrics") or []
    nested = isinstance(entries, (list, tuple)) and bool(entries) and all(
        isinstance(e, (list, tuple)) or e is None for e in entries)
    per = _per_output(entries, names, "metrics", listed=nested)
    metrics = {}
    for name, group in per.items():
        group = group if isinstance(group, (list, tuple)) else ([] if group is None else [group])
        for entry in group:
            metric = _metric(entry, outputs[name], labels[name], prefix=f"{name}_")
            metric.update_state(labels[name], outputs[name])
            metrics[metric.name] = metric
    return metrics


def _multi_output_model_fn(clone, seed, compile_config: dict, optimizer_factory):
    def model_fn(features, labels, mode):
        model = clone()
        outputs = _outputs_by_name(model, model(_inputs(model, features),
                                                training=mode == ModeKeys.TRAIN))
        seed(model)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=outputs)
        by_output = _labels_by_output(labels, list(outputs))
        loss = _multi_loss(compile_config, model, by_output, outputs)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, loss=loss, predictions=outputs,
                                 eval_metric_ops=_multi_metrics(compile_config, by_output,
                                                                outputs))
        return EstimatorSpec(mode, loss=loss, optimizer=optimizer_factory(),
                             predictions=outputs)

    return model_fn


def _model_fn_for(keras_model: keras.Model):
    compile_config = keras_model.get_compile_config()
    model_class, model_config = type(keras_model), keras_model.get_config()
    optimizer_class = type(keras_model.optimizer)
    optimizer_config = keras_model.optimizer.get_config()  # eagerly: it reads variables
    output_name = keras_model.layers[-1].name
    initial = {"weights": keras_model.get_weights()}  # copied into the first clone only

    def clone() -> keras.Model:
        # From the config, not keras.models.clone_model: that recompiles a compiled model,
        # which reads optimizer values eagerly and fails inside the trace.
        return model_class.from_config(copy.deepcopy(model_config))  # it consumes the dict

    def seed(model: keras.Model) -> None:
        """After the clone's first call: the given model's weights, into the first clone."""
        if "weights" in initial:
            with tf.init_scope():  # the store created the clone's variables eagerly
                model.set_weights(initial.pop("weights"))

    if len(keras_model.outputs) > 1:
        return _multi_output_model_fn(clone, seed, compile_config,
                                      lambda: optimizer_class.from_config(optimizer_config))

    def model_fn(features, labels, mode):
        model = clone()
        outputs = model(_inputs(model, features), training=mode == ModeKeys.TRAIN)
        seed(model)
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
        ValueError: neither or both model arguments, an uncompiled or subclassed model.
    """
    if (keras_model is None) == (keras_model_path is None):
        raise ValueError("Expected exactly one of keras_model and keras_model_path; received "
                         f"keras_model={type(keras_model).__name__}, "
                         f"keras_model_path={keras_model_path!r}")
    if keras_model is None:
        keras_model = keras.models.load_model(keras_model_path, custom_objects=custom_objects)
    _check_model(keras_model)
    return Estimator(_model_fn_for(keras_model), model_dir, config, **estimator_kwargs)
