"""A tiny taxi-like SavedModel with the serving contract the train step exports.

The module mirrors the export of ``estflow.components.train``:

* ``serving_default(examples: tf.string[None])`` parses raw serialized ``tf.Example``s with a
  feature spec and returns the binary head's outputs ``logistic`` [N,1], ``probabilities``
  [N,2], ``class_ids`` [N,1] and ``logits`` [N,1];
* ``classify(inputs)`` returns ``classes`` (string [N,2]) and ``scores`` (float [N,2]);
* ``regress(inputs)`` returns ``outputs`` (float [N]);
* ``assets.extra/estflow_raw_features.json`` lists the raw columns and their dtypes.

Versions differ only in their weights, so a test can tell which version answered.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

__all__ = ["FEATURE_SPEC", "RAW_FEATURES", "WEIGHTS", "TaxiModel", "save_version", "http_request",
           "save_estimator_style", "write_versions", "serialize_example", "drop_raw_features"]

FEATURE_SPEC = {
    "fare": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
    "trip_seconds": tf.io.FixedLenFeature([1], tf.int64, default_value=[0]),
    "payment_type": tf.io.FixedLenFeature([1], tf.string, default_value=[""]),
}

RAW_FEATURES = {"columns": [
    {"name": "fare", "dtype": "float"},
    {"name": "trip_seconds", "dtype": "int"},
    {"name": "payment_type", "dtype": "string"},
]}

# version -> (w_fare, w_seconds, cash_bias, bias)
WEIGHTS = {
    1: (0.05, 0.001, 0.7, -0.9),
    2: (0.11, -0.0005, -0.4, 0.2),
    3: (-0.07, 0.002, 1.3, 0.5),
}


class TaxiModel(tf.Module):
    """Logistic regression on three raw features, parsed from serialized tf.Examples."""

    def __init__(self, w_fare: float, w_seconds: float, cash_bias: float, bias: float) -> None:
        super().__init__()
        self.w_fare = tf.Variable(w_fare, dtype=tf.float32)
        self.w_seconds = tf.Variable(w_seconds, dtype=tf.float32)
        self.cash_bias = tf.Variable(cash_bias, dtype=tf.float32)
        self.bias = tf.Variable(bias, dtype=tf.float32)

    def _head(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(examples, FEATURE_SPEC)
        cash = tf.cast(tf.equal(features["payment_type"], "Cash"), tf.float32)
        logits = (self.w_fare * features["fare"]
                  + self.w_seconds * tf.cast(features["trip_seconds"], tf.float32)
                  + self.cash_bias * cash + self.bias)
        logistic = tf.sigmoid(logits)
        return {
            "logits": logits,
            "logistic": logistic,
            "probabilities": tf.concat([1.0 - logistic, logistic], axis=1),
            "class_ids": tf.cast(logistic > 0.5, tf.int64),
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serving_default(self, examples):
        return self._head(examples)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs):
        probabilities = self._head(inputs)["probabilities"]
        classes = tf.tile(tf.constant([["0", "1"]]), [tf.shape(inputs)[0], 1])
        return {"classes": classes, "scores": probabilities}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(self, inputs):
        return {"outputs": tf.reshape(self._head(inputs)["logistic"], [-1])}


def save_version(export_dir: Path, version: int) -> Path:
    """Save the model with ``WEIGHTS[version]`` as a SavedModel at ``export_dir``."""
    model = TaxiModel(*WEIGHTS[version])
    signatures = {
        "serving_default": model.serving_default,
        "classify": model.classify,
        "regress": model.regress,
    }
    tf.saved_model.save(model, str(export_dir), signatures=signatures)
    extra = export_dir / "assets.extra"
    extra.mkdir(exist_ok=True)
    (extra / "estflow_raw_features.json").write_text(json.dumps(RAW_FEATURES))
    return export_dir


def save_estimator_style(export_dir: Path, version: int) -> Path:
    """Like :func:`save_version`, but with tf.estimator's signature keys (``classification``,
    ``regression``) and their TF Serving method names written into ``saved_model.pb``."""
    model = TaxiModel(*WEIGHTS[version])
    signatures = {"serving_default": model.serving_default, "classification": model.classify,
                  "regression": model.regress}
    tf.saved_model.save(model, str(export_dir), signatures=signatures)
    path = export_dir / "saved_model.pb"
    proto = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    defs = proto.meta_graphs[0].signature_def
    defs["classification"].method_name = "tensorflow/serving/classify"
    defs["regression"].method_name = "tensorflow/serving/regress"
    path.write_bytes(proto.SerializeToString())
    (export_dir / "fingerprint.pb").unlink(missing_ok=True)  # it hashes the old saved_model.pb
    return export_dir


def write_versions(model_base: Path, versions: tuple[int, ...] = (1, 2)) -> Path:
    """Save ``versions`` under ``model_base/<version>/`` (TF Serving's layout)."""
    for version in versions:
        save_version(model_base / str(version), version)
    return model_base


def drop_raw_features(version_dir: Path, target: Path) -> Path:
    """Copy a version without its ``estflow_raw_features.json`` (features typed from JSON)."""
    shutil.copytree(version_dir, target)
    (target / "assets.extra" / "estflow_raw_features.json").unlink()
    return target


def serialize_example(fare: float | None = None, trip_seconds: int | None = None,
                      payment_type: str | None = None) -> bytes:
    """A raw serialized tf.Example; features left as None are absent (model defaults apply)."""
    feature = {}
    if fare is not None:
        feature["fare"] = tf.train.Feature(float_list=tf.train.FloatList(value=[fare]))
    if trip_seconds is not None:
        feature["trip_seconds"] = tf.train.Feature(
            int64_list=tf.train.Int64List(value=[trip_seconds]))
    if payment_type is not None:
        feature["payment_type"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[payment_type.encode()]))
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString()


def http_request(host: str, port: int, method: str, path: str, body=None, *,
                 raw: bytes | None = None, connection=None, headers=None,
                 timeout: float = 30.0) -> tuple[int, dict]:
    """(status, decoded JSON) of one request on loopback; ``body`` is JSON-encoded (NaN allowed,
    as TF Serving's clients may send it), ``raw`` is sent as is."""
    import http.client

    conn = connection or http.client.HTTPConnection(host, port, timeout=timeout)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=data,
                 headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    payload = json.loads(response.read())
    if connection is None:
        conn.close()
    return response.status, payload
