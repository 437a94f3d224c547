"""Scoring the eval split through the exported SavedModel, the path serving takes.

Raw eval examples go through the SavedModel's ``serving_default`` signature, and labels (and
the model's ``weight_column``, when it has one) come from its ``transform_features`` signature
(the same tf.Transform graph that made the training labels and weights). In the same pass over
the examples it scores the *baseline* (the model served at the push target), when one is
given, and reads the raw value of each slice column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from estflow.components._io import storage
from estflow.components._io.raw_features import TF_DTYPES
from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate import outputs as _outputs

__all__ = ["Scores", "score_eval_split", "score_baseline", "evaluate_saved_model", "MISSING"]

MISSING = "<missing>"
"""The slice value of examples without the slice column."""


@dataclasses.dataclass(frozen=True)
class Scores:
    """Labels and model outputs for the eval examples (one entry per example).

    Attributes:
        outputs: P(class 1) (binary), [N, n_classes] probabilities (multi-class) or
            predictions (regression).
        slices: slice column -> the raw value of each example, as a string.
        baseline: the baseline's outputs, or None (no baseline, or ``baseline_error``).
        digest: the digest of the serialized examples scored, in order
            (:class:`~estflow.components.evaluate.outputs.RowDigest`).
        weights: each example's weight (the model's ``weight_column`` as training read it),
            or None: the model weighs every example 1.
    """

    labels: np.ndarray
    outputs: np.ndarray
    slices: dict[str, np.ndarray]
    baseline: np.ndarray | None = None
    baseline_error: str | None = None
    digest: str | None = None
    weights: np.ndarray | None = None


def score_eval_split(export_dir: str, eval_files: list[str], *, label: str, head: str,
                     slice_dtypes: dict[str, str] | None = None,
                     baseline_dir: str | None = None, batch_size: int = 512,
                     max_batches: int | None = None,
                     on_rows: Callable[[int], None] | None = None,
                     weight: str | None = None) -> Scores:
    """Score serialized raw tf.Examples from ``eval_files`` (GZIP TFRecords) with a SavedModel
    (and the baseline SavedModel at ``baseline_dir``, if any), in one pass.

    Args:
        slice_dtypes: raw slice column -> its declared dtype (``float``, ``int``, ``string``).
        on_rows: called with the rows of each batch scored (the progress reports).
        weight: the model's ``weight_column``: each example's weight is its value among the
            ``transform_features`` outputs, the value the train step weighted it by.

    Raises:
        ValueError: no examples, or the SavedModel lacks a signature or output of the contract.
    """
    tf = _tensorflow()
    loaded = tf.saved_model.load(export_dir)
    serve = _signature(loaded, "serving_default", export_dir)
    transform = _signature(loaded, "transform_features", export_dir)
    baseline, error = _load_baseline(baseline_dir)
    labels, outputs, base_out, weights = [], [], [], []
    slices: dict[str, list] = {column: [] for column in slice_dtypes or {}}
    digest = _outputs.RowDigest()
    for batch in _eval_batches(tf, eval_files, batch_size, max_batches):
        digest.update(batch.numpy())
        transformed = transform(examples=batch)
        if label not in transformed:
            raise ValueError(f"transform_features of {export_dir}: expected the label "
                             f"{label!r} among its outputs. Received: {sorted(transformed)}")
        labels.append(transformed[label].numpy().reshape(-1))
        if weight is not None:
            weights.append(_weight(transformed, weight, export_dir))
        outputs.append(_score(serve(examples=batch), head, export_dir))
        if baseline is not None and error is None:
            try:
                base_out.append(_score(baseline(examples=batch), head, baseline_dir))
            except Exception as e:  # noqa: BLE001 - any failure: the baseline is unusable
                error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        for column, values in _slice_values(tf, batch, slice_dtypes or {}).items():
            slices[column].append(values)
        if on_rows is not None:
            on_rows(len(labels[-1]))
    if not labels:
        raise ValueError(f"the eval split is empty: no examples in {eval_files}")
    base = np.concatenate(base_out) if baseline is not None and error is None else None
    return Scores(np.concatenate(labels), np.concatenate(outputs),
                  {c: np.concatenate(v) for c, v in slices.items()}, base, error,
                  digest.hexdigest(), np.concatenate(weights) if weight is not None else None)


def _weight(transformed: dict, weight: str, export_dir: str) -> np.ndarray:
    """One batch's weights: the weight column as the model was trained on it, one per row."""
    if weight not in transformed:
        raise ValueError(f"transform_features of {export_dir}: expected the model's "
                         f"weight_column {weight!r} among its outputs (the transform step "
                         f"outputs it for training). Received: {sorted(transformed)}")
    return transformed[weight].numpy().astype(np.float64).reshape(-1)


def score_baseline(baseline_dir: str, eval_files: list[str], *, head: str,
                   batch_size: int = 512,
                   max_batches: int | None = None) -> tuple[np.ndarray | None, str | None]:
    """The baseline's outputs on ``eval_files`` in a pass of its own: (outputs, None), or
    (None, why it cannot be scored)."""
    tf = _tensorflow()
    baseline, error = _load_baseline(baseline_dir)
    if error is not None:
        return None, error
    try:
        return np.concatenate([_score(baseline(examples=batch), head, baseline_dir) for batch
                               in _eval_batches(tf, eval_files, batch_size, max_batches)]), None
    except Exception as e:  # noqa: BLE001 - any failure: the baseline is unusable
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:300]


def _eval_batches(tf, eval_files: list[str], batch_size: int, max_batches: int | None):
    """The serialized eval examples, in batches (the first ``max_batches`` of them)."""
    data = tf.data.TFRecordDataset(eval_files, compression_type="GZIP").batch(batch_size)
    return data if max_batches is None else data.take(max_batches)


def _tensorflow():
    import tensorflow as tf

    return tf


def _signature(loaded, name: str, path: str):
    if name not in loaded.signatures:
        raise ValueError(f"the SavedModel at {path}: expected a {name!r} signature. Received "
                         f"signatures: {sorted(loaded.signatures)}")
    return loaded.signatures[name]


def _load_baseline(baseline_dir: str | None):
    """(serving function, None), or (None, why it cannot be used); (None, None) if no dir."""
    if baseline_dir is None:
        return None, None
    try:
        # a bucket's version is downloaded first: TensorFlow reads s3:// only through
        # tensorflow-io, which has no build for this TensorFlow
        loaded = _tensorflow().saved_model.load(storage.materialize(baseline_dir))
        serve = _signature(loaded, "serving_default", baseline_dir)
    except Exception as e:  # noqa: BLE001 - a broken baseline is reported, not fatal
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:300]

    def call(examples, _loaded=loaded):  # _loaded keeps the function's variables alive
        return serve(examples=examples)

    return call, None


_HEAD_OUTPUT = {"binary": "logistic", "multi_class": "probabilities",
                "regression": "predictions"}


def _score(predictions: dict, head: str, path: str | None) -> np.ndarray:
    key = _HEAD_OUTPUT[head]
    if key not in predictions:
        raise ValueError(f"serving_default of {path}: expected the {head} head's output "
                         f"{key!r}. Received outputs: {sorted(predictions)}")
    value = predictions[key].numpy()
    return value if head == "multi_class" else value.reshape(-1)


def _slice_values(tf, batch, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    """Each example's raw value of each slice column, as a string (:data:`MISSING` if absent;
    the first value of a multi-valued feature)."""
    if not dtypes:
        return {}
    spec = {c: tf.io.VarLenFeature(TF_DTYPES[d]) for c, d in dtypes.items()}
    parsed = tf.io.parse_example(batch, spec)
    out = {}
    for column, sparse in parsed.items():
        values = np.full(int(tf.shape(batch)[0]), MISSING, dtype=object)
        indices, raw = sparse.indices.numpy(), sparse.values.numpy()
        first = indices[:, 1] == 0
        values[indices[first, 0]] = [_as_text(v) for v in raw[first]]
        out[column] = values
    return out


def _as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    return str(int(value))


def evaluate_saved_model(export_dir: str, eval_files: list[str], *, label: str, head: str,
                         batch_size: int = 512, max_batches: int | None = None,
                         weight: str | None = None) -> dict:
    """The head's metrics (see :mod:`estflow.components.evaluate.metrics`) of a SavedModel on
    ``eval_files``, weighted by the ``weight`` column when given."""
    scores = score_eval_split(export_dir, eval_files, label=label, head=head,
                              batch_size=batch_size, max_batches=max_batches, weight=weight)
    return metrics_lib.head_metrics(head, scores.labels, scores.outputs, scores.weights)
