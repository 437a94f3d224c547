"""TF Serving's protos <-> arrays for the gRPC API of ``estflow serve``.

* ``TensorProto`` inputs become numpy arrays (``tf.make_ndarray``: ``tensor_content`` and the
  typed ``*_val`` fields alike); a dtype other than the signature input's is INVALID_ARGUMENT
  naming the input, as TF Serving refuses it (it feeds tensors without casting).
* Outputs are ``TensorProto``s with the typed ``*_val`` fields, as TF Serving writes them by
  default (``AsProtoField``); ``tf.make_ndarray`` reads them back.
* ``Input`` (``example_list`` or ``example_list_with_context``) becomes serialized
  ``tf.Example``s; with a context, each example is the context's serialization followed by the
  example's, which protobuf parses as the merge of the two (the example's value wins for a
  feature in both): TF Serving's own construction.
* The inference core's classifications and regressions (see
  :meth:`estflow.components.serve.models.ServedModel.classify`) become ``ClassificationResult``
  / ``RegressionResult``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import input_pb2
from tensorflow_serving.apis import model_pb2
from tensorflow_serving.apis import regression_pb2

from estflow.components.serve.errors import ServingError

__all__ = ["to_array", "to_tensor_proto", "serialized_examples", "classification_result",
           "regression_result", "model_spec", "version_status"]

_FIELDS = {
    tf.float32: "float_val", tf.float64: "double_val", tf.int32: "int_val",
    tf.int16: "int_val", tf.int8: "int_val", tf.uint8: "int_val", tf.uint16: "int_val",
    tf.int64: "int64_val", tf.uint32: "uint32_val", tf.uint64: "uint64_val",
    tf.bool: "bool_val", tf.string: "string_val",
}
_HALVES = (tf.float16, tf.bfloat16)  # half_val holds their bits as integers


def _bad(message: str) -> ServingError:
    return ServingError(400, message)


def _dtype_name(enum: int) -> str:
    try:
        return types_pb2.DataType.Name(enum)
    except ValueError:
        return f"dtype {enum}"


def to_array(proto: tensor_pb2.TensorProto, name: str, dtype: tf.DType) -> np.ndarray:
    """The value of input ``name`` (a 400 when its dtype is not ``dtype`` or it is
    malformed)."""
    if proto.dtype != dtype.as_datatype_enum:
        raise _bad(f"input {name!r}: expected {_dtype_name(dtype.as_datatype_enum)}, got "
                   f"{_dtype_name(proto.dtype)}")
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError) as e:
        raise _bad(f"input {name!r}: malformed TensorProto: {e}") from None


def to_tensor_proto(array: np.ndarray) -> tensor_pb2.TensorProto:
    """``array`` as a TensorProto with the typed value field (``tensor_content`` for dtypes
    that have none, e.g. complex)."""
    dtype = tf.as_dtype(array.dtype) if array.dtype != object else tf.string
    field = _FIELDS.get(dtype)
    if field is None and dtype not in _HALVES:
        return tf.make_tensor_proto(array)
    proto = tensor_pb2.TensorProto(dtype=dtype.as_datatype_enum)
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    flat = array.reshape(-1)
    if dtype in _HALVES:
        proto.half_val.extend(flat.view(np.uint16).tolist())
    elif dtype == tf.string:
        proto.string_val.extend(item if isinstance(item, bytes) else str(item).encode()
                                for item in flat)
    else:
        getattr(proto, field).extend(flat.tolist())
    return proto


def serialized_examples(request_input: input_pb2.Input) -> np.ndarray:
    """The request's examples, serialized (1-D object array); 400 when there are none."""
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples, context = request_input.example_list.examples, b""
    elif kind == "example_list_with_context":
        examples = request_input.example_list_with_context.examples
        context = request_input.example_list_with_context.context.SerializeToString()
    else:
        examples = ()
    if not examples:
        raise _bad("Input is empty: set input.example_list.examples or "
                   "input.example_list_with_context.examples")
    serialized = np.empty(len(examples), dtype=object)
    serialized[:] = [context + example.SerializeToString() for example in examples]
    return serialized


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def classification_result(rows: list[list[tuple[Any, float]]]
                          ) -> classification_pb2.ClassificationResult:
    """The core's ``(label, score)`` pairs per example as a ``ClassificationResult`` (a label
    that is not UTF-8 has its bad bytes replaced: proto3 strings are text)."""
    result = classification_pb2.ClassificationResult()
    for row in rows:
        classifications = result.classifications.add()
        for label, score in row:
            classifications.classes.add(label=_text(label), score=score)
    return result


def regression_result(values: list[float]) -> regression_pb2.RegressionResult:
    """The core's one value per example as a ``RegressionResult``."""
    result = regression_pb2.RegressionResult()
    for value in values:
        result.regressions.add(value=value)
    return result


def model_spec(name: str, version: int, signature: str | None = None) -> model_pb2.ModelSpec:
    """The ``model_spec`` of an answer: the model, the version that answered, the signature
    used (TF Serving names the default one when the request left it empty)."""
    spec = model_pb2.ModelSpec(name=name, signature_name=signature or "")
    spec.version.value = version
    return spec


def version_status(entries: list[dict[str, Any]]) -> get_model_status_pb2.GetModelStatusResponse:
    """The registry's ``model_version_status`` entries (REST's JSON) as the proto answer."""
    response = get_model_status_pb2.GetModelStatusResponse()
    json_format.ParseDict({"model_version_status": entries}, response)
    return response
