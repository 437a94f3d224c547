"""Model versions for ``estflow serve``: loading (:func:`load_model`) and the inference core
(:meth:`ServedModel.predict`, :meth:`ServedModel.classify`, :meth:`ServedModel.regress`), which
REST and gRPC both call, on a :class:`Signature` (:mod:`.signature`, re-exported here). Which
versions are served is :mod:`.registry`'s (:class:`~.registry.ModelRegistry`).

A TF 2 SavedModel is loaded with ``tf.saved_model.load``; a TF 1 SavedModel (no object graph),
or one ``tf.saved_model.load`` refuses, runs in a Session as in TF Serving
(:mod:`.session_model`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from estflow.components._io import raw_features
from estflow.components.serve import warmup
from estflow.components.serve.config import MODEL_NAME_PATTERN
from estflow.components.serve.errors import ServingError
from estflow.components.serve.session_model import SessionModel as _SessionTypes
from estflow.components.serve.session_model import load_session
from estflow.components.serve.signature import CLASSIFY
from estflow.components.serve.signature import PREDICT
from estflow.components.serve.signature import REGRESS
from estflow.components.serve.signature import Signature

__all__ = ["ServingError", "Signature", "ServedModel", "load_model",
           "read_raw_features", "RAW_FEATURES_FILE", "MODEL_NAME_PATTERN", "PREDICT", "CLASSIFY",
           "REGRESS"]

log = logging.getLogger("estflow.serve")

RAW_FEATURES_FILE = raw_features.TYPES_FILE
read_raw_features = raw_features.read_types
_INTERNAL_SIGNATURES = ("__saved_model_init_op",)
_TF_BOILERPLATE = ("Graph execution error", "Detected at node", "<stack traces", "[[", "File ")


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A loaded, warmed model version: what a request is served from.

    The inference core is :meth:`predict` / :meth:`classify` / :meth:`regress`: REST and gRPC
    both call them with arrays (they differ only in how they decode requests and encode
    answers), so their answers are equal by construction.

    Attributes:
        signature_defs: the SavedModel's signature defs as TF Serving's metadata JSON.
        raw_features: feature name -> ``"float" | "int" | "string"`` from
            ``assets.extra/estflow_raw_features.json``, or None when the file is absent.
        warmup_replayed: how many warm-up records were replayed when it was loaded.
    """

    name: str
    version: int
    path: Path
    signatures: dict[str, Signature]
    signature_defs: dict[str, Any]
    raw_features: dict[str, str] | None
    loaded: Any = dataclasses.field(repr=False)  # keeps the variables the functions capture alive
    warmup_replayed: int = 0  # records of assets.extra/tf_serving_warmup_requests replayed

    def signature(self, name: str | None, method: str = PREDICT) -> Signature:
        """The signature ``name`` (empty or None: :meth:`default_signature` for ``method``)."""
        name = name or self.default_signature(method)
        try:
            return self.signatures[name]
        except KeyError:
            raise ServingError(400, f"model {self.name!r} version {self.version} has no "
                               f"signature {name!r}; available signatures: "
                               f"{', '.join(sorted(self.signatures))}") from None

    def default_signature(self, method: str = PREDICT) -> str:
        """The signature a request that names none gets.

        TF Serving sends every request to ``serving_default``. estflow's ``serving_default``
        is predict-shaped, so a classify/regress request whose ``serving_default`` has another
        method gets the first signature with that method name, else the one named
        ``classify``/``regress``, else ``serving_default``.
        """
        if method == PREDICT or self._method("serving_default") == method:
            return "serving_default"
        for name in self.signatures:
            if self._method(name) == method:
                return name
        short = method.rsplit("/", 1)[-1]
        return short if short in self.signatures else "serving_default"

    def _method(self, name: str) -> str | None:
        return self.signature_defs.get(name, {}).get("method_name")

    def predict(self, signature_name: str | None, inputs: dict[str, Any],
                output_filter: tuple[str, ...] = ()) -> tuple[Signature, dict[str, np.ndarray]]:
        """THE inference core: run a signature on named input arrays.

        Args:
            signature_name: the signature (empty/None: ``serving_default``).
            inputs: input name -> array (or nested lists); converted to the input's dtype.
                Every input of the signature must be given, and nothing else.
            output_filter: output names to return (empty: all of them).

        Returns:
            The signature and output name -> numpy array, sorted by name.

        Raises:
            ServingError: 400 for an unknown signature, input or output, a value that does not
                convert, or an input the model rejects (TensorFlow's message, cleaned).
        """
        signature = self.signature(signature_name, PREDICT)
        missing = sorted(signature.inputs.keys() - inputs.keys())
        unknown = sorted(inputs.keys() - signature.inputs.keys())
        if missing or unknown:
            raise ServingError(400, f"the inputs must be exactly those of signature "
                               f"{signature.name!r} ({', '.join(signature.inputs) or 'none'}); "
                               f"missing: {', '.join(missing) or 'none'}; unknown: "
                               f"{', '.join(unknown) or 'none'}")
        bad = sorted(set(output_filter) - set(signature.outputs))
        if bad:
            raise ServingError(400, f"output {bad[0]!r} is not an output of signature "
                               f"{signature.name!r} (outputs: {', '.join(signature.outputs)})")
        outputs = _call(signature, inputs)
        keep = output_filter or signature.outputs
        return signature, {name: outputs[name] for name in sorted(keep)}

    def _examples(self, signature_name: str | None, serialized: Any,
                  method: str) -> tuple[Signature, dict[str, np.ndarray]]:
        signature = self.signature(signature_name, method)
        spec = next(iter(signature.inputs.values()), None)
        # The Session path feeds the examples whatever dtype the TensorInfo claims, as TF
        # Serving does (saved_model_half_plus_three's regress input says DT_FLOAT).
        if len(signature.inputs) != 1 or (spec.dtype != tf.string and spec.shape.rank is not None):
            raise ServingError(400, f"signature {signature.name!r} cannot serve "
                               f":{method.rsplit('/', 1)[-1]}: it must take a single DT_STRING "
                               "input of serialized tf.Examples (it takes "
                               f"{', '.join(signature.inputs) or 'nothing'})")
        serialized = np.asarray(serialized, dtype=object)
        return signature, _call(signature, {next(iter(signature.inputs)): serialized},
                                examples=True)

    def classify(self, signature_name: str | None,
                 serialized: Any) -> tuple[Signature, list[list[tuple[bytes, float]]]]:
        """Classify serialized tf.Examples: per example, ``(class label, score)`` pairs (label
        ``b""`` when the signature has no ``classes`` output, score 0 without ``scores``)."""
        signature, outputs = self._examples(signature_name, serialized, CLASSIFY)
        return signature, _classes(outputs, signature.name)

    def regress(self, signature_name: str | None,
                serialized: Any) -> tuple[Signature, list[float]]:
        """Regress serialized tf.Examples: one value per example."""
        signature, outputs = self._examples(signature_name, serialized, REGRESS)
        return signature, _values(outputs, signature.name)


def _call(signature: Signature, inputs: dict[str, Any],
          examples: bool = False) -> dict[str, np.ndarray]:
    """Run ``signature`` (``examples``: on serialized tf.Examples, fed as they are); what the
    model rejects (TensorFlow's argument errors, a shape a function's input signature refuses)
    is a 400."""
    try:
        args = {name: value if examples and signature.inputs[name].shape.rank is None
                else _as_input(name, value, signature.inputs[name])
                for name, value in inputs.items()}
        outputs = signature.function(**args)
    except (tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError) as e:
        raise ServingError(400, f"signature {signature.name!r} rejected the input: "
                           f"{_tf_message(e.message)}") from None
    except (TypeError, ValueError) as e:
        raise ServingError(400, f"signature {signature.name!r} rejected the input: "
                           f"{_tf_message(str(e))}") from None
    return {name: np.asarray(value.numpy() if hasattr(value, "numpy") else value)
            for name, value in sorted(outputs.items())}


def _as_input(name: str, value: Any, spec: tf.TensorSpec) -> Any:
    """A tensor of the input's dtype (the object-graph path), or an array of it fed as sent
    (the Session path: a spec of unknown rank)."""
    if spec.shape.rank is None:
        if spec.dtype == tf.string:
            return np.asarray(value, dtype=object)
        return np.asarray(value, dtype=spec.dtype.as_numpy_dtype)
    if not spec.shape.is_compatible_with(np.shape(value)):
        raise ValueError(f"input {name!r}: expected shape {_shape_text(spec.shape)}, got "
                         f"{list(np.shape(value))}")
    return tf.constant(value, dtype=spec.dtype)


def _shape_text(shape: tf.TensorShape) -> str:
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape) + "]"


def _tf_message(message: str) -> str:
    """The useful lines of a TensorFlow op error (not the node/stack-trace boilerplate)."""
    lines = [line.strip() for line in message.splitlines()]
    useful = [line for line in lines if line and not line.startswith(_TF_BOILERPLATE)]
    text = "; ".join(useful) or message.strip()
    return re.sub(r"\s*\[Op:[^\]]*\]$", "", text)[:1000]


def _classes(outputs: dict[str, np.ndarray], signature: str) -> list[list[tuple[bytes, float]]]:
    """``[(class, score), ...]`` per example from the ``classes`` and/or ``scores`` outputs."""
    scores, classes = outputs.get("scores"), outputs.get("classes")
    if scores is None and classes is None:
        raise ServingError(400, f"signature {signature!r} is not a classification signature: "
                           f"it has no 'classes' or 'scores' output (outputs: "
                           f"{', '.join(outputs)})")
    like = scores if scores is not None else classes
    like = like.reshape(len(like), -1)
    scores = (np.zeros(like.shape, np.float32) if scores is None
              else scores.reshape(like.shape))
    labels = (np.full(like.shape, b"", dtype=object) if classes is None
              else classes.reshape(like.shape))
    return [list(zip(row_labels, row_scores, strict=True))
            for row_labels, row_scores in zip(labels.tolist(), scores.tolist(), strict=True)]


def _values(outputs: dict[str, np.ndarray], signature: str) -> list[float]:
    """One value per example from the ``outputs`` output (or the signature's only output)."""
    values = outputs.get("outputs")
    if values is None and len(outputs) == 1:
        (values,) = outputs.values()
    if values is None or values.ndim == 0 or values.size != values.shape[0]:
        raise ServingError(400, f"signature {signature!r} is not a regression signature: it "
                           "needs one 'outputs' output with one value per example (outputs: "
                           f"{', '.join(f'{k} {list(v.shape)}' for k, v in outputs.items())})")
    return values.reshape(-1).tolist()


def _signature_defs(version_dir: Path) -> dict[str, Any]:
    """The SignatureDefs as TF Serving prints them (proto JSON, proto field names)."""
    proto = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    defs = proto.meta_graphs[0].signature_def
    return {name: json_format.MessageToDict(defs[name], preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True)
            for name in sorted(defs) if name not in _INTERNAL_SIGNATURES}


def _warm_up(signature: Signature) -> None:
    """Run a signature once on an empty batch, so that graph optimisation happens now rather
    than on the first request; signatures that cannot take an empty batch are left cold."""
    args = {}
    for name, spec in signature.inputs.items():
        if spec.shape.rank is None:
            return
        args[name] = tf.zeros([d if d is not None else 0 for d in spec.shape], spec.dtype)
    try:
        signature.function(**args)
    except Exception as e:  # noqa: BLE001 - warm-up is best effort; real requests report errors
        log.debug("no warm-up for signature %s: %s", signature.name, e)


def load_model(name: str, version: int, version_dir: Path) -> ServedModel:
    """Load, describe and warm up one model version.

    A TF 2 SavedModel (one with an object graph) is loaded with ``tf.saved_model.load``; a
    TF 1 SavedModel, or one that cannot be loaded so, runs in a ``tf.compat.v1.Session`` as in
    TF Serving (:mod:`.session_model`), which feeds tensors as sent.
    """
    raw_features = read_raw_features(version_dir)
    defs = _signature_defs(version_dir)
    if _has_object_graph(version_dir):
        try:
            loaded, signatures = _load_object_graph(version_dir, defs)
        except Exception as e:  # noqa: BLE001 - TF Serving's loader takes what this cannot
            log.info("model %s version %s: tf.saved_model.load failed (%s); serving it through "
                     "a TF 1 Session", name, version, str(e).splitlines()[0][:200])
            loaded = None
    else:
        loaded = None
    if loaded is None:
        loaded, signatures = load_session(version_dir, defs)
    if not signatures:
        raise ValueError(f"the SavedModel version {version} of model {name!r} has no serving "
                         "signatures")
    if not isinstance(loaded, _SessionTypes):  # a Session signature may change state (counter)
        for signature in signatures.values():
            _warm_up(signature)
    model = ServedModel(name, version, version_dir, signatures, defs, raw_features, loaded)
    # TF Serving's assets.extra/tf_serving_warmup_requests, if present
    return dataclasses.replace(model, warmup_replayed=warmup.replay(model))


def _has_object_graph(version_dir: Path) -> bool:
    proto = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    return bool(proto.meta_graphs[0].object_graph_def.nodes)


def _load_object_graph(version_dir: Path, defs: dict[str, Any]) -> tuple[Any, dict]:
    loaded = tf.saved_model.load(str(version_dir))
    signatures = {}
    for key, function in loaded.signatures.items():
        _args, kwargs = function.structured_input_signature
        method = defs.get(key, {}).get("method_name") or PREDICT
        signatures[key] = Signature(key, function, dict(sorted(kwargs.items())),
                                    tuple(sorted(function.structured_outputs)), method)
    return loaded, signatures
