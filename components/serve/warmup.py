"""Replaying a version's warm-up requests (``assets.extra/tf_serving_warmup_requests``,
TF Serving's format: a TFRecord of ``PredictionLog``) before the version is served.

Each record's request goes through the inference core as a real request would (predict,
classify, regress, multi-inference logs; at most :data:`MAX_RECORDS`, as TF Serving). Unlike
TF Serving, which fails the version's load, a malformed file or a request the model refuses is
logged as a warning naming the file and the record, and the version is served all the same
(it is only colder).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from estflow.components.serve import grpc_codec
from estflow.components.serve.errors import ServingError
from estflow.dsl.contracts import Files

__all__ = ["WARMUP_FILE", "MAX_RECORDS", "replay"]

log = logging.getLogger("estflow.serve")

WARMUP_FILE = Files.SERVED_WARMUP
MAX_RECORDS = 1000


def replay(model: Any) -> int:
    """Replay ``model``'s warm-up file, if it has one; the number of requests replayed."""
    path = Path(model.path) / WARMUP_FILE
    if not path.is_file():
        return 0
    where = f"model {model.name} version {model.version}: {WARMUP_FILE}"
    replayed = 0
    try:
        for i, record in enumerate(tf.data.TFRecordDataset(str(path)).as_numpy_iterator()):
            if i >= MAX_RECORDS:
                log.warning("%s has more than %d records; the rest are not replayed", where,
                            MAX_RECORDS)
                break
            _replay_one(model, prediction_log_pb2.PredictionLog.FromString(record))
            replayed += 1
    except (tf.errors.OpError, ServingError, ValueError) as e:
        message = getattr(e, "message", None) or str(e)
        log.warning("%s: record %d cannot be replayed (%s); serving the version without the "
                    "rest of its warm-up", where, replayed, message.splitlines()[0][:300])
        return replayed
    log.info("%s: replayed %d warm-up requests", where, replayed)
    return replayed


def _replay_one(model: Any, entry: prediction_log_pb2.PredictionLog) -> None:
    kind = entry.WhichOneof("log_type")
    if kind == "predict_log":
        request = entry.predict_log.request
        signature = model.signature(request.model_spec.signature_name or None)
        inputs = {name: grpc_codec.to_array(proto, name, signature.inputs[name].dtype)
                  if name in signature.inputs else proto
                  for name, proto in request.inputs.items()}
        model.predict(signature.name, inputs, tuple(request.output_filter))
    elif kind in ("classify_log", "regress_log"):
        request = getattr(entry, kind).request
        run = model.classify if kind == "classify_log" else model.regress
        run(request.model_spec.signature_name or None,
            grpc_codec.serialized_examples(request.input))
    elif kind == "multi_inference_log":
        request = entry.multi_inference_log.request
        examples = grpc_codec.serialized_examples(request.input)
        for task in request.tasks:
            run = model.classify if task.method_name.endswith("classify") else model.regress
            run(task.model_spec.signature_name or None, examples)
    else:
        raise ValueError(f"a PredictionLog of kind {kind or 'none'} cannot be replayed; "
                         "expected predict_log, classify_log, regress_log or "
                         "multi_inference_log")
