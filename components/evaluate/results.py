"""What an evaluation reports from the scores: the head's metrics on the whole eval split and
per slice value, and the plots' data (ROC, precision-recall, calibration, confusion matrix),
all in strict JSON (an undefined metric, the AUC of a single class, is ``null``).

With a model ``weight_column`` (:attr:`Scores.weights`) the metrics, per slice too, and the
curves are weighted as tf.estimator weighs its eval metrics; ``examples``, the calibration
bins' ``count`` and the confusion matrix count rows. ``metrics.json`` then says so under
``weight`` (the column, and the weight of the examples).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate.scoring import Scores
from estflow.dsl.pipeline import Pipeline

__all__ = ["evaluation", "plots", "slice_metrics", "curves", "json_safe", "weight_summary",
           "MAX_SLICE_VALUES", "ROC_POINTS"]

MAX_SLICE_VALUES = 100
"""Per slice column, metrics for at most this many values (the most frequent)."""
ROC_POINTS = 200


def evaluation(pipeline: Pipeline, head: str, export_dir: str, scores: Scores) -> dict:
    """``metrics.json``: the head's metrics of the scores, overall and per slice value (and,
    for a weighted model, its ``weight``)."""
    with np.errstate(all="ignore"):
        metrics = json_safe(metrics_lib.head_metrics(head, scores.labels, scores.outputs,
                                                     scores.weights))
    out = {"head": head, "metrics": metrics, "model": export_dir, "name": pipeline.eval.name,
           "slices": json_safe(slice_metrics(head, scores.labels, scores.outputs,
                                             scores.slices, scores.weights))}
    if scores.weights is not None:
        out["weight"] = weight_summary(getattr(pipeline.model, "weight_column", None),
                                       scores.weights)
    return out


def weight_summary(column: str | None, weights: np.ndarray) -> dict[str, Any]:
    """What ``metrics.json`` says of the weights: the column, their sum (every mean's
    denominator), and how many examples weigh 0 (they count in no metric but ``examples``)."""
    return json_safe({"column": column, "sum": float(np.sum(weights)),
                      "zero": int(np.sum(weights == 0))})


def plots(pipeline: Pipeline, head: str, scores: Scores) -> dict[str, Any]:
    """The candidate's :func:`curves`, and the baseline's under ``"baseline"`` (if scored)."""
    categories = _categories(pipeline, head, scores.outputs)
    out = json_safe(curves(head, scores.labels, scores.outputs, categories, scores.weights))
    if scores.baseline is not None:  # drawn next to the candidate's curves in the report
        out["baseline"] = json_safe(curves(head, scores.labels, scores.baseline, categories,
                                           scores.weights))
    return out


def slice_metrics(head: str, labels: np.ndarray, outputs: np.ndarray,
                  slices: dict[str, np.ndarray],
                  weights: np.ndarray | None = None) -> dict[str, dict[str, dict]]:
    """``{column: {value: metrics}}``: the head's metrics on the examples of each value (the
    :data:`MAX_SLICE_VALUES` most frequent values of each column, by rows), weighted by
    ``weights`` when given."""
    result: dict[str, dict[str, dict]] = {}
    for column, values in slices.items():
        names, counts = np.unique(values.astype(str), return_counts=True)
        order = sorted(range(len(names)), key=lambda i: (-counts[i], names[i]))
        per_value = {}
        for i in order[:MAX_SLICE_VALUES]:
            members = values == names[i]
            with np.errstate(all="ignore"):
                per_value[str(names[i])] = metrics_lib.head_metrics(
                    head, labels[members], outputs[members],
                    None if weights is None else weights[members])
        result[column] = per_value
    return result


def curves(head: str, labels: np.ndarray, outputs: np.ndarray, categories: list[str],
           weights: np.ndarray | None = None) -> dict[str, Any]:
    """Plot data: ``roc`` and ``pr`` (binary, at most :data:`ROC_POINTS` points each; rates of
    weight), ``calibration`` bins (binary, regression; weighted means) and
    ``confusion_matrix`` (classifiers; counts of rows)."""
    out: dict[str, Any] = {}
    if head == "binary":
        fpr, tpr, thresholds = metrics_lib.roc_curve(labels, outputs, weights)
        if np.isfinite(fpr).all() and np.isfinite(tpr).all():  # both classes present
            out["roc"] = dict(zip(("fpr", "tpr", "thresholds"), metrics_lib.downsample(
                fpr, tpr, thresholds, max_points=ROC_POINTS), strict=True))
            precision, recall, pr_thresholds = metrics_lib.pr_curve(labels, outputs, weights)
            out["pr"] = dict(zip(("precision", "recall", "thresholds"), metrics_lib.downsample(
                precision, recall, pr_thresholds, max_points=ROC_POINTS), strict=True))
        out["calibration"] = metrics_lib.calibration_bins(labels, outputs, 10, (0.0, 1.0),
                                                          weights)
        predicted = (outputs > 0.5).astype(np.int64)  # binary_metrics' threshold
    elif head == "multi_class":
        predicted = np.argmax(outputs, axis=1)
    else:
        out["calibration"] = metrics_lib.calibration_bins(labels, outputs, 10,
                                                          weights=weights)
        return out
    out["confusion_matrix"] = {"categories": categories, "matrix": metrics_lib.confusion_matrix(
        labels, predicted, len(categories))}
    return out


def _categories(pipeline: Pipeline, head: str, outputs: np.ndarray) -> list[str]:
    n = 2 if head == "binary" else int(outputs.shape[1]) if head == "multi_class" else 0
    vocabulary = list(pipeline.label.vocabulary)
    return vocabulary if len(vocabulary) == n else [str(i) for i in range(n)]


def json_safe(value: Any) -> Any:
    """NaN/inf -> None (strict JSON, readable by any tool), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
