"""The train step's serving export: the SavedModel signatures (see ``components/train/__main__.py``'s
docstring), the raw feature types beside it, swapped in atomically."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from estflow.components._io import raw_features
from estflow.components._io.raw_features import raw_feature_spec
from estflow.components.train import warm_start
from estflow.dsl import models as m
from estflow.dsl.pipeline import Pipeline
from estflow.estimator import Estimator
from estflow.estimator import export as export_lib

__all__ = ["RAW_SIGNATURE", "export_serving_model"]

_EXAMPLES = "examples"
_STRINGS = tf.TensorSpec([None], tf.string)
RAW_SIGNATURE = "predict_raw"


def _raw_spec(tft_output, pipeline: Pipeline) -> dict:
    """The raw parsing spec: the transform output's raw schema, or (when the transform step did
    not write one) the same spec rebuilt from the declarations."""
    try:
        return dict(tft_output.raw_feature_spec())
    except OSError:
        return dict(raw_feature_spec(pipeline))


def _training_only(pipeline: Pipeline) -> set[str]:
    """Raw columns a serving request does not send: the label's (when it is raw) and the
    weight column's when no feature reads it."""
    read = {getattr(f, "column", None) for f in pipeline.features}
    dropped = {pipeline.label.column} - set(pipeline.derived_names())
    weight = getattr(pipeline.model, "weight_column", None)
    if weight is not None and weight not in read:
        dropped.add(weight)
    return dropped


def _dense(value):
    if isinstance(value, tf.SparseTensor):
        return tf.sparse.to_dense(value)
    if isinstance(value, tf.RaggedTensor):
        return value.to_tensor()
    return value


def export_serving_model(estimator: Estimator, tft_output, pipeline: Pipeline,
                         export_dir: str | os.PathLike) -> Path:
    """Write the serving SavedModel (signatures in the module docstring) and the raw feature
    types to ``export_dir``, replacing an older export only once the new one is complete."""
    raw_spec = _raw_spec(tft_output, pipeline)
    serving_spec = {k: v for k, v in raw_spec.items() if k not in _training_only(pipeline)}
    layer = tft_output.transform_features_layer()
    not_features = {pipeline.label.name, getattr(pipeline.model, "weight_column", None)}

    def transform(examples, spec):
        return layer(tf.io.parse_example(examples, spec))

    def predict_transformed(parsed):
        transformed = layer(parsed)
        features = {k: v for k, v in transformed.items() if k not in not_features}
        return export_lib.as_outputs(estimator.predictions(features))

    # The signatures predicting (serving_default, predict_raw, classify/regress) share one
    # trace of the tf.Transform layer and the model_fn's PREDICT graph: a function over the
    # parsed raw features that each calls, rather than a trace of its own.
    parsed_specs = _parsed_specs(serving_spec)
    predict_parsed = predict_transformed if parsed_specs is None else tf.function(
        predict_transformed, input_signature=[parsed_specs], autograph=False)

    def predict(inputs):
        return predict_parsed(tf.io.parse_example(inputs[_EXAMPLES], serving_spec))

    signatures = {
        "serving_default": export_lib.signature_function(predict, {_EXAMPLES: _STRINGS}),
        "transform_features": export_lib.signature_function(
            lambda inputs: {k: _dense(v) for k, v in
                            transform(inputs[_EXAMPLES], raw_spec).items()},
            {_EXAMPLES: _STRINGS}),
    }
    raw_inputs = _raw_input_specs({k: v for k, v in serving_spec.items()
                                   if k in _read_by_features(pipeline, serving_spec)})
    if raw_inputs:
        signatures[RAW_SIGNATURE] = export_lib.signature_function(
            lambda inputs: predict_parsed(_as_parsed(inputs, serving_spec)), raw_inputs)
    method_names = _add_serving_api_signatures(signatures, predict, pipeline)
    module = export_lib.export_module(estimator, {"transform_layer": _transform_resources(layer)})

    def write(tmp: Path) -> Path:
        path = export_lib.save(module, estimator, tmp, signatures, method_names)
        raw_features.write_types(Path(path), serving_spec, pipeline)
        if pipeline.train.warm_start is not None:  # what the next run warm-starts from
            warm_start.copy_checkpoint(estimator, Path(path))
        return path

    return _replace_dir(export_dir, write)


def _parsed_specs(serving_spec: dict) -> dict | None:
    """The structure ``tf.io.parse_example`` gives for ``serving_spec`` (what
    :func:`_as_parsed` builds too), as specs; None for a feature kind with no fixed one."""
    specs = {}
    for name, feature in serving_spec.items():
        if isinstance(feature, tf.io.FixedLenFeature):
            specs[name] = tf.TensorSpec([None, *feature.shape], feature.dtype)
        elif isinstance(feature, tf.io.VarLenFeature):
            specs[name] = tf.SparseTensorSpec([None, None], feature.dtype)
        else:
            return None
    return specs or None


def _transform_resources(layer):
    """What the SavedModel must carry for the signatures' tf.Transform calls: the layer's
    loaded transform graph (its tables, assets and functions), which is all the layer tracks
    itself. Not the layer: a Keras model, which ``tf.saved_model.save`` would serialize the
    Keras way, tracing its call once more with autograph (seconds) for functions and metadata
    no signature uses."""
    resources = getattr(layer, "_saved_model_loader_tracked_dict", None)
    return layer if resources is None else resources


def _read_by_features(pipeline: Pipeline, serving_spec: dict) -> set[str]:
    """The raw columns a ``predict_raw`` request sends: those the features read (every serving
    column when a feature reads a derived column: ``derive`` may read any)."""
    read = {f.column for f in pipeline.features if hasattr(f, "column")}
    if read & set(pipeline.derived_names()):
        return set(serving_spec)
    return read & set(serving_spec)


def _raw_input_specs(serving_spec: dict) -> dict[str, tf.TensorSpec] | None:
    """The inputs of ``predict_raw``: one tensor per raw feature, a value per example (a
    fixed-length feature of shape ``[k]``: ``[None, k]``); None when a feature's kind has no
    such tensor (the signature is then left out)."""
    specs = {}
    for name, feature in sorted(serving_spec.items()):
        if isinstance(feature, tf.io.FixedLenFeature):
            specs[name] = tf.TensorSpec([None, *feature.shape], feature.dtype, name=name)
        elif isinstance(feature, tf.io.VarLenFeature):
            specs[name] = tf.TensorSpec([None], feature.dtype, name=name)
        else:
            return None
    return specs


def _as_parsed(inputs: dict, serving_spec: dict) -> dict:
    """Raw feature tensors as ``tf.io.parse_example`` gives them for ``serving_spec``: a
    variable-length feature is a SparseTensor ``[N, 1]`` holding each example's one value; a
    column no feature reads (not an input) is absent (empty), or zeros when it is required."""
    batch = tf.shape(next(iter(inputs.values())), out_type=tf.int64)[0]
    parsed = {}
    for name, feature in serving_spec.items():
        value = inputs.get(name)
        if isinstance(feature, tf.io.VarLenFeature):
            if value is None:
                value = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0], feature.dtype),
                                        tf.stack([batch, tf.constant(0, tf.int64)]))
            else:
                rows = tf.range(batch, dtype=tf.int64)
                value = tf.SparseTensor(tf.stack([rows, tf.zeros_like(rows)], axis=1), value,
                                        tf.stack([batch, tf.constant(1, tf.int64)]))
        elif value is None:
            value = tf.zeros(tf.concat([[batch], tf.constant(feature.shape, tf.int64)], 0),
                             feature.dtype)
        parsed[name] = value
    return parsed


def _classes(pipeline: Pipeline, n_classes: int) -> tf.Tensor:
    names = pipeline.label.vocabulary or tuple(str(i) for i in range(n_classes))
    return tf.constant(list(names)[:n_classes])


def _add_serving_api_signatures(signatures: dict, predict, pipeline: Pipeline) -> dict:
    """Add ``classify`` or ``regress`` when the predictions allow it; their method names."""
    outputs = signatures["serving_default"].structured_outputs
    head = _head_kind(pipeline.model)
    probabilities = outputs.get("probabilities")
    if head in ("binary", "multi_class") and probabilities is not None \
            and probabilities.shape[-1] is not None:
        classes = _classes(pipeline, int(probabilities.shape[-1]))

        def classify(inputs):
            scores = predict({_EXAMPLES: inputs["inputs"]})["probabilities"]
            tiled = tf.tile(classes[tf.newaxis], [tf.shape(scores)[0], 1])
            return {"classes": tiled, "scores": scores}

        signatures["classify"] = export_lib.signature_function(classify, {"inputs": _STRINGS})
        return {"classify": tf.saved_model.CLASSIFY_METHOD_NAME}
    values = outputs.get("predictions")
    if head == "regression" and values is not None and values.shape[-1] in (1, None):
        signatures["regress"] = export_lib.signature_function(
            lambda inputs: {"outputs": tf.reshape(
                predict({_EXAMPLES: inputs["inputs"]})["predictions"], [-1])},
            {"inputs": _STRINGS})
        return {"regress": tf.saved_model.REGRESS_METHOD_NAME}
    return {}


def _head_kind(model) -> str:
    if isinstance(model, m.CustomModel):
        return model.head
    if hasattr(model, "n_classes"):
        return "binary" if model.n_classes == 2 else "multi_class"
    return "regression"


def _replace_dir(target: str | os.PathLike, write: Callable[[Path], Path]) -> Path:
    """``write`` a complete new directory next to ``target``, then swap it in: readers see the
    old export or the new one, and a failed export leaves the old one in place."""
    target = Path(target)
    staged = target.with_name(f".{target.name}-new-{os.getpid()}")
    retired = target.with_name(f".{target.name}-old-{os.getpid()}")
    for leftover in (staged, retired):
        shutil.rmtree(leftover, ignore_errors=True)
    write(staged)
    if target.exists():
        os.replace(target, retired)
    os.replace(staged, target)
    shutil.rmtree(retired, ignore_errors=True)
    return target


