"""SavedModel export: serving signatures over the trained model, written atomically.

TF 2 has no placeholders, so tf.estimator's ``serving_input_receiver_fn`` returns a
:class:`ServingInputReceiver` describing the signature's inputs (``receiver_specs``) and how to
turn them into the model_fn's features (``features_fn``, traced inside the signature). Objects
the features_fn uses that own resources (a tf.Transform layer and its tables, vocabularies)
go in ``trackables`` so the SavedModel carries them.

Signatures are traced on a plain ``tf.Module`` that tracks only what serving needs: the model
variables (no optimizer slots) and the trackables. TF 2's ``tf.saved_model.save`` writes every
signature with the predict method name; :func:`save` rewrites the method names given to it
(e.g. ``tensorflow/serving/classify``) in ``saved_model.pb`` so TF Serving's Classify and
Regress APIs accept them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

__all__ = ["ServingInputReceiver", "parsing_serving_input_receiver_fn", "export_module",
           "save", "export_saved_model", "as_outputs", "signature_function"]


@dataclasses.dataclass(frozen=True)
class ServingInputReceiver:
    """The inputs of a serving signature and how they become features.

    Args:
        features_fn: receiver tensors (a dict keyed like ``receiver_specs``) -> the model_fn's
            features; runs inside the signature's trace.
        receiver_specs: ``{input name: tf.TensorSpec}``, the signature's inputs.
        trackables: objects ``features_fn`` uses that the SavedModel must carry (layers with
            lookup tables, assets).
    """

    features_fn: Callable[[dict], Any]
    receiver_specs: Mapping[str, tf.TensorSpec]
    trackables: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def parsing_serving_input_receiver_fn(feature_spec: Mapping[str, Any],
                                      name: str = "examples") -> Callable[[], ServingInputReceiver]:
    """A receiver fn taking serialized ``tf.Example``s (string ``[None]``) parsed with
    ``feature_spec`` (tf.estimator's ``build_parsing_serving_input_receiver_fn``)."""
    spec = dict(feature_spec)

    def receiver_fn() -> ServingInputReceiver:
        return ServingInputReceiver(
            features_fn=lambda inputs: tf.io.parse_example(inputs[name], spec),
            receiver_specs={name: tf.TensorSpec([None], tf.string, name=name)})

    return receiver_fn


def as_outputs(predictions) -> dict[str, tf.Tensor]:
    """Signature outputs from predictions: a dict as is, a single tensor as ``predictions``."""
    if isinstance(predictions, Mapping):
        return dict(predictions)
    return {"predictions": predictions}


def signature_function(fn: Callable[[dict], dict], input_specs: Mapping[str, tf.TensorSpec]):
    """A concrete function whose inputs are named like ``input_specs``'s keys (the
    SignatureDef input names) calling ``fn(inputs_dict)``."""

    def signature(**inputs):
        return fn(inputs)

    return tf.function(signature, autograph=False).get_concrete_function(**dict(input_specs))


def export_module(estimator, trackables: Mapping[str, Any] | None = None) -> tf.Module:
    """A module to hang signatures on; call :func:`save` after tracing them (it then tracks
    the serving variables, which the traces may have created)."""
    module = tf.Module(name="export")
    module.assets = dict(trackables or {})
    return module


def _patch_method_names(export_dir: Path, method_names: Mapping[str, str]) -> None:
    path = export_dir / "saved_model.pb"
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(path.read_bytes())
    for meta_graph in proto.meta_graphs:
        for name, method in method_names.items():
            if name in meta_graph.signature_def:
                meta_graph.signature_def[name].method_name = method
    path.write_bytes(proto.SerializeToString())
    # The fingerprint hashes saved_model.pb; it is optional (SavedModels before TF 2.12 have
    # none), so drop the stale one rather than ship a wrong checksum.
    (export_dir / "fingerprint.pb").unlink(missing_ok=True)


def save(module: tf.Module, estimator, export_dir: str | os.PathLike,
         signatures: Mapping[str, Any], method_names: Mapping[str, str] | None = None,
         checkpoint_path: str | None = None) -> Path:
    """Write ``module`` with ``signatures`` (tf.functions with input signatures, or concrete
    functions) to ``export_dir`` atomically: into a temporary sibling, then renamed.

    Raises:
        FileExistsError: ``export_dir`` exists.
    """
    target = Path(export_dir)
    if target.exists():
        raise FileExistsError(f"export directory {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    concrete = {name: fn.get_concrete_function() if hasattr(fn, "get_concrete_function")
                else fn for name, fn in signatures.items()}
    module.model_variables = list(estimator.serving_variables())
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with estimator.weights(checkpoint_path):
            tf.saved_model.save(module, str(tmp), signatures=concrete)
        if method_names:
            _patch_method_names(tmp, method_names)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def export_saved_model(estimator, export_dir_base: str | os.PathLike,
                       serving_input_receiver_fn: Callable[[], ServingInputReceiver],
                       checkpoint_path: str | None = None) -> str:
    """``serving_default`` (receiver inputs -> predictions) under
    ``export_dir_base/<unix timestamp>``, like tf.estimator's export layout."""
    receiver = serving_input_receiver_fn()
    module = export_module(estimator, receiver.trackables)

    serve = signature_function(lambda inputs: as_outputs(
        estimator.predictions(receiver.features_fn(inputs))), receiver.receiver_specs)
    module.serve = serve
    base = Path(export_dir_base)
    stamp = int(time.time())
    while (base / str(stamp)).exists():
        stamp += 1
    return str(save(module, estimator, base / str(stamp), {"serving_default": serve},
                    checkpoint_path=checkpoint_path))
