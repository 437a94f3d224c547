"""TF Serving's ``BatchingParameters`` message (``tensorflow_serving/servables/tensorflow/
session_bundle_config.proto``), which the ``tensorflow-serving-api`` package does not ship:
built from its field list, so ``--batching_parameters_file`` is read by protobuf's own text
format parser, exactly as TF Serving reads it."""

from __future__ import annotations

import functools

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from google.protobuf import wrappers_pb2

__all__ = ["batching_parameters_class"]

_WRAPPED = {  # name -> (number, wrapper type)
    "max_batch_size": (1, "Int64Value"),
    "batch_timeout_micros": (2, "Int64Value"),
    "max_enqueued_batches": (3, "Int64Value"),
    "num_batch_threads": (4, "Int64Value"),
    "thread_pool_name": (5, "StringValue"),
    "enable_large_batch_splitting": (8, "BoolValue"),
    "max_execution_batch_size": (9, "Int64Value"),
}


@functools.cache
def batching_parameters_class() -> type:
    """The generated message class of ``tensorflow.serving.BatchingParameters``."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="estflow/serve/batching_parameters.proto", package="tensorflow.serving",
        syntax="proto3", dependency=[wrappers_pb2.DESCRIPTOR.name])
    message = proto.message_type.add(name="BatchingParameters")
    for name, (number, wrapper) in _WRAPPED.items():
        message.field.add(name=name, number=number, label=field.LABEL_OPTIONAL,
                          type=field.TYPE_MESSAGE, type_name=f".google.protobuf.{wrapper}")
    message.field.add(name="allowed_batch_sizes", number=6, label=field.LABEL_REPEATED,
                      type=field.TYPE_INT64)
    message.field.add(name="pad_variable_length_inputs", number=7, label=field.LABEL_OPTIONAL,
                      type=field.TYPE_BOOL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    return message_factory.GetMessageClass(descriptor)
