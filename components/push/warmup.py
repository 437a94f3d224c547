"""SavedModel warm-up requests for a pushed version: ``assets.extra/tf_serving_warmup_requests``.

TF Serving's format (its ``saved_model_warmup.md``): a TFRecord file of
``tensorflow_serving.apis.prediction_log_pb2.PredictionLog`` records, each one request that
the server replays when it loads the version, before it reports it AVAILABLE, so that the
first real request does not pay for graph optimisation. TF Serving, KServe (which runs TF
Serving) and ``estflow serve`` all read it.

The requests are built from a few eval rows (serialized ``tf.Example``s): a ``PredictLog`` for
``serving_default`` when it takes serialized examples (estflow's export), and a
``ClassifyLog`` / ``RegressLog`` for each signature whose method is classify / regress. The
file lies under ``assets.extra``, which the version's fingerprint (``fingerprint.pb``: the
graph and variables) does not cover.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.apis import regression_pb2

from estflow.components._io.warmup_rows import MAX_ROWS
from estflow.dsl.contracts import Files

__all__ = ["WARMUP_FILE", "MAX_ROWS", "warmup_logs", "write_warmup", "build_warmup"]

WARMUP_FILE = Files.SERVED_WARMUP
_CLASSIFY, _REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"


def warmup_logs(signature_defs: dict, examples: list[bytes]) -> list[prediction_log_pb2.PredictionLog]:
    """The warm-up requests for a model with these SignatureDefs (name -> proto), from
    ``examples`` (serialized tf.Examples; the first :data:`MAX_ROWS` are used)."""
    rows = list(examples[:MAX_ROWS])
    logs = []
    default = signature_defs.get("serving_default")
    if default is not None and _takes_examples(default):
        request = predict_pb2.PredictRequest()
        request.model_spec.signature_name = "serving_default"
        (key,) = default.inputs
        request.inputs[key].CopyFrom(tf.make_tensor_proto(rows, dtype=tf.string))
        logs.append(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)))
    for name in sorted(signature_defs):
        method = signature_defs[name].method_name
        if method == _CLASSIFY:
            request = classification_pb2.ClassificationRequest()
            field = "classify_log"
        elif method == _REGRESS:
            request = regression_pb2.RegressionRequest()
            field = "regress_log"
        else:
            continue
        request.model_spec.signature_name = name
        for row in rows:
            request.input.example_list.examples.add().ParseFromString(row)
        log = prediction_log_pb2.PredictionLog()
        getattr(log, field).request.CopyFrom(request)
        logs.append(log)
    return logs


def _takes_examples(signature_def) -> bool:
    inputs = list(signature_def.inputs.values())
    return len(inputs) == 1 and inputs[0].dtype == tf.string.as_datatype_enum


def write_warmup(export_dir: Path, examples: list[bytes]) -> Path | None:
    """Write the warm-up file into ``export_dir`` (a SavedModel); None when there are no rows
    or no signature that takes examples."""
    return build_warmup(export_dir, examples, Path(export_dir) / WARMUP_FILE)


def build_warmup(export_dir: Path, examples: list[bytes], path: Path) -> Path | None:
    """Write the warm-up requests for the SavedModel at ``export_dir`` to ``path``; None (and
    nothing written) when there are no rows or no signature that takes examples.

    Raises:
        OSError, google.protobuf.message.DecodeError: ``saved_model.pb`` cannot be read.
    """
    if not examples:
        return None
    proto = saved_model_pb2.SavedModel.FromString(
        (Path(export_dir) / "saved_model.pb").read_bytes())
    logs = warmup_logs(dict(proto.meta_graphs[0].signature_def), examples) \
        if proto.meta_graphs else []
    if not logs:
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path
