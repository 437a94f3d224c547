"""Tiny exported models and raw eval examples with the train step's export contract.

* ``serving_default(examples: tf.string[None])``: serialized raw tf.Examples -> the binary
  head's ``logits``, ``logistic`` [N,1], ``probabilities`` [N,2], ``class_ids`` [N,1];
* ``transform_features(examples)``: -> the "transformed" features and the label
  ``big_tipper``.

The raw columns are ``fare`` (float), ``payment_type`` (string, sometimes absent), ``noise``
(float, independent of the label) and the label ``big_tipper`` (int). Labels are drawn from
:data:`TRUE_WEIGHTS`, so :func:`good_model` is the best possible model and
:func:`random_model` (which only looks at ``noise``) scores like random guessing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

import estflow.dsl as ef

__all__ = ["TRUE_WEIGHTS", "Row", "make_rows", "write_examples", "save_model", "good_model",
           "random_model", "pipeline", "PAYMENT_TYPES"]

PAYMENT_TYPES = ("Cash", "Credit Card", "Mobile", None)  # None: the feature is absent
TRUE_WEIGHTS = {"w_fare": 0.12, "w_card": 2.0, "bias": -2.5, "w_noise": 0.0}

_SPEC = {
    "fare": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
    "payment_type": tf.io.FixedLenFeature([1], tf.string, default_value=[""]),
    "noise": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
}
_LABEL_SPEC = {"big_tipper": tf.io.FixedLenFeature([1], tf.int64, default_value=[0])}


@dataclasses.dataclass(frozen=True)
class Row:
    fare: float
    payment_type: str | None
    noise: float
    big_tipper: int


def _logit(w: dict, fare, card, noise):
    return w["w_fare"] * fare + w["w_card"] * card + w["bias"] + w["w_noise"] * noise


def make_rows(n: int = 600, seed: int = 0) -> list[Row]:
    """Rows whose labels follow :data:`TRUE_WEIGHTS` (``payment_type`` weights: 60% Credit
    Card, 25% Cash, 10% Mobile, 5% absent)."""
    rng = np.random.default_rng(seed)
    fares = rng.uniform(2.0, 40.0, n)
    kinds = rng.choice(len(PAYMENT_TYPES), n, p=[0.25, 0.6, 0.1, 0.05])
    noise = rng.normal(size=n)
    rows = []
    for fare, kind, eps in zip(fares, kinds, noise, strict=True):
        payment = PAYMENT_TYPES[kind]
        p = 1 / (1 + np.exp(-_logit(TRUE_WEIGHTS, fare, payment == "Credit Card", eps)))
        rows.append(Row(float(np.float32(fare)), payment, float(np.float32(eps)),
                        int(rng.random() < p)))
    return rows


def _example(row: Row) -> bytes:
    feature = {
        "fare": tf.train.Feature(float_list=tf.train.FloatList(value=[row.fare])),
        "noise": tf.train.Feature(float_list=tf.train.FloatList(value=[row.noise])),
        "big_tipper": tf.train.Feature(int64_list=tf.train.Int64List(value=[row.big_tipper])),
    }
    if row.payment_type is not None:
        feature["payment_type"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[row.payment_type.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_examples(examples_dir: Path, rows: list[Row], shards: int = 2) -> Path:
    """Write ``rows`` as the ingest step does: GZIP TFRecords under ``<examples_dir>/eval/``."""
    folder = examples_dir / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for shard in range(shards):
        path = folder / f"data-{shard:05d}-of-{shards:05d}.gz"
        with tf.io.TFRecordWriter(str(path), options) as writer:
            for row in rows[shard::shards]:
                writer.write(_example(row))
    return examples_dir


class EvalModel(tf.Module):
    """Logistic regression on the raw features, with the export contract's two signatures."""

    def __init__(self, w_fare: float, w_card: float, bias: float, w_noise: float) -> None:
        super().__init__()
        self.w = {k: tf.Variable(v, dtype=tf.float32) for k, v in
                  dict(w_fare=w_fare, w_card=w_card, bias=bias, w_noise=w_noise).items()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serving_default(self, examples):
        f = tf.io.parse_example(examples, _SPEC)
        card = tf.cast(tf.equal(f["payment_type"], "Credit Card"), tf.float32)
        logits = _logit(self.w, f["fare"], card, f["noise"])
        logistic = tf.sigmoid(logits)
        return {"logits": logits, "logistic": logistic,
                "probabilities": tf.concat([1.0 - logistic, logistic], axis=1),
                "class_ids": tf.cast(logistic > 0.5, tf.int64)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, examples):
        f = tf.io.parse_example(examples, {**_SPEC, **_LABEL_SPEC})
        return {name: tf.reshape(value, [-1]) for name, value in f.items()}


def save_model(export_dir: Path, **weights: float) -> Path:
    """Save an :class:`EvalModel` (``w_fare``, ``w_card``, ``bias``, ``w_noise``)."""
    model = EvalModel(**{**dict.fromkeys(TRUE_WEIGHTS, 0.0), **weights})
    tf.saved_model.save(model, str(export_dir), signatures={
        "serving_default": model.serving_default,
        "transform_features": model.transform_features})
    return export_dir


def good_model(export_dir: Path) -> Path:
    return save_model(export_dir, **TRUE_WEIGHTS)


def random_model(export_dir: Path) -> Path:
    """Predicts from ``noise`` only: what a model trained on shuffled labels learns."""
    return save_model(export_dir, w_noise=0.8)


def pipeline(serving: Path | None, *, thresholds=(), slices=("payment_type",),
             **push) -> ef.Pipeline:
    """A Pipeline over these columns, pushing to ``serving`` (None: no push target)."""
    return ef.Pipeline(
        name="evaltest",
        source=ef.CsvSource("unused.csv"),
        features=(ef.Numeric("fare", default=0.0), ef.CategoricalVocab("payment_type", default=""),
                  ef.Numeric("noise", default=0.0)),
        label=ef.Label("big_tipper"),
        model=ef.LinearClassifier(feature_columns=("fare", "payment_type", "noise")),
        train=ef.TrainSpec(max_steps=1),
        eval=ef.EvalSpec(thresholds=tuple(thresholds), slices=tuple(slices)),
        push=ef.PushTarget(str(serving), "taxi", **push) if serving else None,
    )
