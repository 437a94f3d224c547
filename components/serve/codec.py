"""JSON <-> tensors for ``estflow serve``, following TF Serving's REST JSON mapping.

* Predict inputs are converted to the dtype of the signature's input ``TensorSpec``:
  ``DT_STRING`` takes JSON strings (UTF-8 encoded) or ``{"b64": ...}`` (decoded bytes); floats
  take JSON numbers (``NaN``/``Infinity`` included); integers take JSON integers (no ``2.0``);
  ``DT_BOOL`` takes ``true``/``false``. Anything else is a 400 naming the input and the dtype.
* Outputs: numbers as JSON numbers, ``DT_STRING`` as UTF-8 text, or ``{"b64": ...}`` when the
  output name ends in ``_bytes`` or the bytes are not UTF-8.
* ``:classify``/``:regress`` examples become serialized ``tf.Example``s: features typed by the
  model's ``estflow_raw_features.json`` when it lists them (see
  :func:`estflow.components._io.raw_features.read_types`), otherwise from the JSON values
  like TF Serving (integers and booleans -> ``int64_list``, any decimal -> ``float_list``,
  strings and ``{"b64": ...}`` -> ``bytes_list``). When the model lists its features, a
  feature it does not list is refused (400, naming the known ones) rather than silently
  ignored by the model's parser, which would score the example with defaults.
* Bodies are bounded: JSON nested more than :data:`MAX_JSON_DEPTH` levels is refused (400)
  before anything walks it, as is a number Python cannot parse (an integer literal of more than
  4300 digits); the HTTP layer bounds the body's bytes (413).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from estflow.components.serve import json_fast
from estflow.components.serve.errors import ServingError
from estflow.components.serve.models import Signature

__all__ = ["parse_body", "signature_name", "predict_inputs", "predict_response",
           "serialized_examples", "classify_response", "regress_response", "MAX_JSON_DEPTH"]

MAX_JSON_DEPTH = 64
"""Levels of JSON nesting a request may have (the body's object is level 1): room for tensors
of rank 60, and a bound on the work (and recursion) a request can cause."""

_B64 = "b64"
_INT_RANGES = {dtype: (int(np.iinfo(dtype.as_numpy_dtype).min),
                       int(np.iinfo(dtype.as_numpy_dtype).max))
               for dtype in (tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16,
                             tf.uint32, tf.uint64)}
_FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _bad(message: str) -> ServingError:
    return ServingError(400, message)


def _brief(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_body(body: bytes) -> dict[str, Any]:
    """The request's JSON object (``NaN``/``Infinity`` accepted, as by TF Serving)."""
    if not body:
        raise _bad("the request body is empty; expected a JSON object")
    try:
        doc = json_fast.loads(body)  # orjson where it means what json.loads means
    except RecursionError:  # deeper than the interpreter's recursion limit (~1000)
        raise _too_deep() from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a 4300+ digit integer
        raise _bad(f"malformed JSON in request body: {e}") from None
    _check_depth(doc)
    if not isinstance(doc, dict):
        raise _bad(f"the request body must be a JSON object, got {type(doc).__name__}")
    return doc


def _too_deep() -> ServingError:
    return _bad(f"the request JSON is nested more than {MAX_JSON_DEPTH} levels deep")


def _check_depth(doc: Any) -> None:
    """A 400 if ``doc`` nests lists/objects deeper than MAX_JSON_DEPTH (iterative: a deep
    document cannot exhaust the stack here)."""
    if not isinstance(doc, (list, dict)):
        return
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        for child in (value.values() if isinstance(value, dict) else value):
            if isinstance(child, (list, dict)):
                if depth >= MAX_JSON_DEPTH:
                    raise _too_deep()
                stack.append((child, depth + 1))


def signature_name(doc: dict[str, Any], default: str) -> str:
    name = doc.get("signature_name", default)
    if not isinstance(name, str):
        raise _bad(f"'signature_name' must be a string, got {_brief(name)}")
    return name or default


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(_B64), str)


def _b64decode(value: dict, where: str) -> bytes:
    try:
        return base64.b64decode(value[_B64], validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{where}: {_brief(value)} is not valid base64") from None


def _leaf(value: Any, dtype: tf.DType, where: str) -> Any:
    """One JSON scalar converted for ``dtype``, or a 400 naming ``where`` and the dtype."""
    if dtype == tf.string:
        if isinstance(value, str):
            return value.encode()
        if _is_b64(value):
            return _b64decode(value, where)
    elif dtype in _FLOATS:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif dtype in _INT_RANGES:
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGES[dtype]
            if low <= value <= high:
                return value
            raise _bad(f"{where}: {value} is out of range for {_dtype_name(dtype)}")
    elif dtype == tf.bool:
        if isinstance(value, bool):
            return value
    else:
        raise _bad(f"{where}: inputs of type {_dtype_name(dtype)} are not supported over JSON")
    raise _bad(f"{where}: expected {_dtype_name(dtype)}, got {_brief(value)}")


def _flatten(value: Any, dtype: tf.DType, where: str) -> tuple[list, tuple[int, ...]]:
    """Leaves (converted) and shape of a nested JSON list; 400 if it is ragged."""
    if not isinstance(value, list):
        return [_leaf(value, dtype, where)], ()
    if not value:
        return [], (0,)
    leaves, shape = _flatten(value[0], dtype, where)
    for item in value[1:]:
        more, item_shape = _flatten(item, dtype, where)
        if item_shape != shape:
            raise _bad(f"{where}: ragged lists: found a list of shape {list(item_shape)} next "
                       f"to one of shape {list(shape)}; tensors must be rectangular")
        leaves.extend(more)
    return leaves, (len(value), *shape)


def _to_array(value: Any, spec: tf.TensorSpec, where: str) -> np.ndarray:
    leaves, shape = _flatten(value, spec.dtype, where)
    if not spec.shape.is_compatible_with(shape):
        raise _bad(f"{where}: expected shape {_shape_text(spec.shape)} "
                   f"({_dtype_name(spec.dtype)}), got {list(shape)}")
    if spec.dtype == tf.string:
        array = np.empty(len(leaves), dtype=object)
        array[:] = leaves
        return array.reshape(shape)
    try:
        return np.asarray(leaves, dtype=spec.dtype.as_numpy_dtype).reshape(shape)
    except (OverflowError, ValueError) as e:
        raise _bad(f"{where}: cannot convert to {_dtype_name(spec.dtype)}: {e}") from None


def predict_inputs(doc: dict[str, Any], signature: Signature) -> tuple[dict[str, np.ndarray],
                                                                        bool]:
    """The signature's input arrays from a ``:predict`` body, and whether it used row format
    (``instances``) rather than columnar format (``inputs``)."""
    has_instances, has_inputs = "instances" in doc, "inputs" in doc
    if has_instances == has_inputs:
        raise _bad("the request must have exactly one of 'instances' (row format) or 'inputs' "
                   f"(columnar format); got {'both' if has_inputs else 'neither'}")
    specs = signature.inputs
    if has_instances:
        return _row_inputs(doc["instances"], specs, signature.name), True
    return _columnar_inputs(doc["inputs"], specs, signature.name), False


def _named(value: Any) -> bool:
    return isinstance(value, dict) and not _is_b64(value)


def _row_inputs(instances: Any, specs: dict[str, tf.TensorSpec], sig: str) -> dict:
    if not isinstance(instances, list) or not instances:
        raise _bad(f"'instances' must be a non-empty list, got {_brief(instances)}")
    if not _named(instances[0]):
        if len(specs) > 1:
            raise _bad(f"signature {sig!r} has inputs {', '.join(map(repr, specs))}: each "
                       "instance must be an object keyed by input name")
        (name, spec), = specs.items()
        if any(_named(item) for item in instances):
            raise _bad("'instances' mixes plain values and objects; use one or the other")
        return {name: _to_array(instances, spec, f"input {name!r}")}
    columns: dict[str, list] = {name: [] for name in specs}
    for i, item in enumerate(instances):
        if not _named(item):
            raise _bad(f"instance {i} is not an object keyed by input name: {_brief(item)}")
        if item.keys() != specs.keys():
            raise _bad(f"instance {i} must have exactly the inputs of signature {sig!r} "
                       f"({', '.join(specs)}); got {', '.join(item) or 'none'}")
        for name in specs:
            columns[name].append(item[name])
    return {name: _to_array(columns[name], specs[name], f"input {name!r}") for name in specs}


def _columnar_inputs(inputs: Any, specs: dict[str, tf.TensorSpec], sig: str) -> dict:
    if not _named(inputs):
        if len(specs) > 1:
            raise _bad(f"signature {sig!r} has inputs {', '.join(map(repr, specs))}: 'inputs' "
                       "must be an object keyed by input name")
        (name, spec), = specs.items()
        return {name: _to_array(inputs, spec, f"input {name!r}")}
    missing, unknown = specs.keys() - inputs.keys(), inputs.keys() - specs.keys()
    if missing or unknown:
        raise _bad(f"'inputs' must have exactly the inputs of signature {sig!r} "
                   f"({', '.join(specs)}); missing: {', '.join(sorted(missing)) or 'none'}; "
                   f"unknown: {', '.join(sorted(unknown)) or 'none'}")
    return {name: _to_array(inputs[name], specs[name], f"input {name!r}") for name in specs}


def _jsonable(name: str, array: np.ndarray) -> Any:
    if array.dtype != object:
        return array.tolist()
    as_b64 = name.endswith("_bytes")
    flat = np.empty(array.size, dtype=object)
    flat[:] = [_text(item, as_b64) for item in array.reshape(-1)]
    return flat.reshape(array.shape).tolist()


def _text(value: bytes, as_b64: bool) -> Any:
    if not as_b64:
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass
    return {_B64: base64.b64encode(value).decode()}


def predict_response(outputs: dict[str, np.ndarray], row_format: bool) -> dict[str, Any]:
    """TF Serving's response: ``predictions`` (row) or ``outputs`` (columnar); a lone output
    is given as its value, several as objects keyed by output name."""
    values = {name: _jsonable(name, array) for name, array in outputs.items()}
    if not row_format:
        return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    sizes = {name: (array.shape[0] if array.ndim else None) for name, array in outputs.items()}
    if None in sizes.values() or len(set(sizes.values())) != 1:
        raise _bad(f"outputs {sizes} do not share a batch (first) dimension, so they cannot be "
                   "returned as rows; send the request in columnar format ('inputs')")
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    (batch,) = set(sizes.values())
    return {"predictions": [{name: column[i] for name, column in values.items()}
                            for i in range(batch)]}


def serialized_examples(doc: dict[str, Any], raw_features: dict[str, str] | None,
                        owner: str = "the model") -> np.ndarray:
    """The ``examples`` of a ``:classify``/``:regress`` body as serialized tf.Examples, each
    with the ``context`` features added (a feature may not be in both, as in TF Serving).

    With ``raw_features`` (the model's features and their types), a feature name it does not
    list is a 400 naming the known ones (``owner`` says whose: ``model 'taxi' version 2``).
    """
    examples, context = doc.get("examples"), doc.get("context", {})
    if not isinstance(examples, list) or not examples:
        raise _bad(f"'examples' must be a non-empty list of objects, got {_brief(examples)}")
    if not isinstance(context, dict):
        raise _bad(f"'context' must be an object of features, got {_brief(context)}")
    types = raw_features or {}
    _known(context, raw_features, "context", owner)
    shared = {name: _feature(name, value, types.get(name), "context")
              for name, value in context.items()}
    serialized = np.empty(len(examples), dtype=object)
    for i, example in enumerate(examples):
        if not isinstance(example, dict):
            raise _bad(f"examples[{i}] must be an object of features, got {_brief(example)}")
        _known(example, raw_features, f"examples[{i}]", owner)
        features = dict(shared)
        for name, value in example.items():
            if name in shared:
                raise _bad(f"feature {name!r} is in both 'context' and examples[{i}]; a "
                           "context feature must not be repeated in the examples")
            features[name] = _feature(name, value, types.get(name), f"examples[{i}]")
        proto = tf.train.Example(features=tf.train.Features(feature=features))
        serialized[i] = proto.SerializeToString()
    return serialized


def _known(features: dict, raw_features: dict[str, str] | None, where: str, owner: str) -> None:
    if raw_features is None or features.keys() <= raw_features.keys():
        return
    unknown = sorted(features.keys() - raw_features.keys())
    raise _bad(f"{where} feature {unknown[0][:100]!r} is not a feature of {owner}; known "
               f"features: {', '.join(sorted(raw_features))}")


def _feature(name: str, value: Any, dtype: str | None, where: str) -> tf.train.Feature:
    values = value if isinstance(value, list) else [value]
    what = f"{where} feature {name!r}"
    for item in values:
        if not (isinstance(item, (str, int, float)) or _is_b64(item)):
            raise _bad(f"{what}: expected a number, string, {{\"b64\": ...}} or a list of "
                       f"them, got {_brief(value)}")
    kind = dtype or _json_kind(values, what)
    if kind == "string":
        if not all(isinstance(v, str) or _is_b64(v) for v in values):
            raise _bad(f"{what}: expected strings ({_typed_by(dtype)}), got {_brief(value)}")
        data = [v.encode() if isinstance(v, str) else _b64decode(v, what) for v in values]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
    if not all(isinstance(v, (int, float)) for v in values):
        noun = "floats" if kind == "float" else "integers"
        raise _bad(f"{what}: expected {noun} ({_typed_by(dtype)}), got {_brief(value)}")
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    for v in values:
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            raise _bad(f"{what}: expected integers ({_typed_by(dtype)}), got {_brief(value)}")
        if not -2**63 <= v < 2**63:
            raise _bad(f"{what}: {v} is out of the int64 range")
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _json_kind(values: list, what: str) -> str:
    """TF Serving's typing of an untyped feature from its JSON values."""
    strings = [isinstance(v, str) or _is_b64(v) for v in values]
    if all(strings) and values:
        return "string"
    if any(strings):
        raise _bad(f"{what}: mixes strings and numbers: {_brief(values)}")
    return "float" if any(isinstance(v, float) for v in values) else "int"


def _typed_by(dtype: str | None) -> str:
    return (f"the model declares it {dtype} in estflow_raw_features.json" if dtype
            else "typed from the first values")


def classify_response(results: list[list[tuple[bytes, float]]]) -> dict[str, Any]:
    """TF Serving's ``{"results": [[[class, score], ...], ...]}`` from
    :meth:`.models.ServedModel.classify`."""
    return {"results": [[[_text(label, False), score] for label, score in row]
                        for row in results]}


def regress_response(values: list[float]) -> dict[str, Any]:
    """TF Serving's ``{"results": [value, ...]}`` from :meth:`.models.ServedModel.regress`."""
    return {"results": values}


def _dtype_name(dtype: tf.DType) -> str:
    return types_pb2.DataType.Name(dtype.as_datatype_enum)


def _shape_text(shape: tf.TensorShape) -> str:
    if shape.rank is None:
        return "[?]"
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape) + "]"
