"""Metrics computed in NumPy from labels and model outputs (exact, not streaming estimates).

Kept free of TensorFlow so the same code scores any model output, e.g. from a served model.

``average_loss`` is tf.estimator's (2.15) metric of that name for the head: the mean over the
examples of each example's loss (log loss, cross-entropy, squared error). It is *not*
tf.estimator's eval ``loss``, the mean of the eval batches' losses, which the train step's
evaluations also report (``train.json``, TensorBoard): that one weighs a short last batch as
much as a full one and so depends on the eval batch size; the evaluate step does not compute
it. The loss is computed from the model's float32 outputs, so it is tf.estimator's (which
starts from the logits) to the float32 rounding of the true class's probability: to ~1e-7
while that probability is a normal float32 (an example's loss up to ~87), except for a binary
example of class 0, whose 1 - P(class 1) is known only to float32's spacing below 1 (6e-8): a
loss of 10 is then within ~1e-3 of tf.estimator's, and a P(class 1) that rounds to 1 (a logit
above ~17) counts -log(2**-25), about 17.3.

Besides the scalar metrics of each head, it computes the curves the evaluation report and
Kubeflow's ``ClassificationMetrics`` show: ROC and precision-recall points, the confusion
matrix and calibration (reliability) bins.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HEADS", "MAIN_METRIC", "head_metrics", "metric_names", "binary_metrics", "multi_class_metrics",
           "regression_metrics", "roc_auc", "average_precision", "roc_curve", "pr_curve",
           "downsample", "confusion_matrix", "calibration_bins"]

# The smallest probability of the true class a loss is computed for: float32 outputs round
# smaller ones (and underflow to 0), so the loss of one example is at most -log(this), ~87.3.
_TINY = float(np.finfo(np.float32).tiny)
# 1 - P(class 1) below this is a float32 P(class 1) of 1.0: the loss of such an example of
# class 0 counts as if 1 - P(class 1) were this (half the float32 spacing below 1), ~17.3.
_BELOW_ONE = 2.0 ** -25
HEADS = ("binary", "multi_class", "regression")
MAIN_METRIC = {"binary": "auc", "multi_class": "accuracy", "regression": "rmse"}
"""The metric the report charts per slice, by head."""


def head_metrics(head: str, labels: np.ndarray, outputs: np.ndarray) -> dict:
    """The metrics of ``head`` (one of :data:`HEADS`) for its model ``outputs``: P(class 1)
    for ``binary``, [N, n_classes] probabilities for ``multi_class``, predictions otherwise."""
    if head == "binary":
        return binary_metrics(labels, outputs)
    if head == "multi_class":
        return multi_class_metrics(labels, outputs)
    if head == "regression":
        return regression_metrics(labels, outputs)
    raise ValueError(f"Received an invalid value for `head`, expected one of {list(HEADS)}. "
                     f"Received: head={head!r}")


def metric_names(head: str) -> tuple[str, ...]:
    """The names :func:`head_metrics` returns for ``head`` (what thresholds may refer to)."""
    # Computed on two examples rather than listed, so the names cannot drift from the code.
    tiny = {"binary": ([0, 1], [0.2, 0.7]), "multi_class": ([0, 1], [[0.6, 0.4], [0.3, 0.7]]),
            "regression": ([0.0, 1.0], [0.5, 0.5])}
    if head not in tiny:
        head_metrics(head, np.zeros(0), np.zeros(0))  # raises the invalid-head error
    labels, outputs = tiny[head]
    with np.errstate(all="ignore"):
        return tuple(head_metrics(head, np.asarray(labels), np.asarray(outputs)))


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Exact ROC AUC (Mann-Whitney U with tied scores sharing their average rank)."""
    labels = np.asarray(labels).astype(bool).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    n_pos, n_neg = labels.sum(), (~labels).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # average rank for ties: find runs of equal scores
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(scores)]])
    avg = (starts + ends + 1) / 2.0  # 1-based average rank of each run
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _counts_by_threshold(labels: np.ndarray, scores: np.ndarray):
    """True and false positives when predicting positive for ``score >= t``, for each distinct
    score ``t`` from the highest down (ties move together)."""
    y = np.asarray(labels).astype(bool).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last_of_run = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]
    tps = np.cumsum(y)[last_of_run].astype(np.float64)
    fps = (last_of_run + 1) - tps
    return tps, fps, s[last_of_run], float(y.sum()), float((~y).sum())


def roc_curve(labels: np.ndarray, scores: np.ndarray):
    """ROC points ``(fpr, tpr, thresholds)``, from (0, 0) to (1, 1).

    Point ``i`` predicts positive for ``score >= thresholds[i]``; the first threshold is just
    above the highest score (nothing predicted positive), so every value is finite (JSON-safe).
    Rates are NaN when the labels hold a single class.
    """
    tps, fps, thresholds, n_pos, n_neg = _counts_by_threshold(labels, scores)
    top = np.nextafter(thresholds[0], np.inf) if len(thresholds) else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = np.r_[0.0, fps / n_neg]
        tpr = np.r_[0.0, tps / n_pos]
    return fpr, tpr, np.r_[top, thresholds]


def pr_curve(labels: np.ndarray, scores: np.ndarray):
    """Precision-recall points ``(precision, recall, thresholds)`` by decreasing threshold,
    starting at recall 0 (precision 1, by convention)."""
    tps, fps, thresholds, n_pos, _n_neg = _counts_by_threshold(labels, scores)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.r_[1.0, tps / (tps + fps)]
        recall = np.r_[0.0, tps / n_pos]
    top = np.nextafter(thresholds[0], np.inf) if len(thresholds) else 1.0
    return precision, recall, np.r_[top, thresholds]


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the precision-recall curve as a step function (sum over thresholds of
    precision x recall increase); NaN without positives."""
    precision, recall, _ = pr_curve(labels, scores)
    if not np.isfinite(recall[-1]):
        return float("nan")
    return float(np.sum(np.diff(recall) * precision[1:]))


def downsample(*curves: np.ndarray, max_points: int = 200) -> list[list[float]]:
    """The same (at most ``max_points``) evenly spaced points of each curve, ends included."""
    n = len(curves[0])
    keep = np.unique(np.linspace(0, n - 1, min(n, max_points)).round().astype(int))
    return [[float(v) for v in np.asarray(c)[keep]] for c in curves]


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, n_classes: int) -> list[list[int]]:
    """``matrix[actual][predicted]`` counts (rows: the label, columns: the prediction)."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    p = np.asarray(predicted, dtype=np.int64).ravel()
    valid = (y >= 0) & (y < n_classes) & (p >= 0) & (p < n_classes)
    counts = np.bincount(y[valid] * n_classes + p[valid], minlength=n_classes * n_classes)
    return counts.reshape(n_classes, n_classes).tolist()


def calibration_bins(labels: np.ndarray, predictions: np.ndarray, bins: int = 10,
                     value_range: tuple[float, float] | None = None) -> list[dict]:
    """Reliability bins: the predictions cut into ``bins`` equal-width intervals over
    ``value_range`` (default: their min..max); for each non-empty bin, its bounds, example
    count, mean prediction and mean label. A calibrated model has mean label = mean
    prediction in every bin."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(predictions, dtype=np.float64).ravel()
    low, high = value_range or (float(p.min()), float(p.max()))
    edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        members = index == b
        if members.any():
            out.append({"lower": float(edges[b]), "upper": float(edges[b + 1]),
                        "count": int(members.sum()),
                        "mean_prediction": float(p[members].mean()),
                        "mean_label": float(y[members].mean())})
    return out


def binary_metrics(labels: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> dict:
    """``average_loss`` (the mean log loss), accuracy, ROC AUC, PR AUC (average precision),
    precision, recall and means, for P(class 1) = ``probs``."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64).ravel(), 0.0, 1.0)
    pred = p > threshold
    tp = float(np.sum(pred & (y == 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        per_example = -(y * np.log(np.maximum(p, _TINY))
                        + (1 - y) * np.log(np.maximum(1 - p, _BELOW_ONE)))
    return {
        "average_loss": float(np.mean(per_example)),
        "accuracy": float(np.mean(pred == (y == 1))),
        "auc": roc_auc(y, p),
        "auc_pr": average_precision(y, p),
        "precision": tp / max(float(pred.sum()), 1.0),
        "recall": tp / max(float((y == 1).sum()), 1.0),
        "label/mean": float(y.mean()),
        "prediction/mean": float(p.mean()),
        "examples": int(len(y)),
    }


def multi_class_metrics(labels: np.ndarray, probs: np.ndarray) -> dict:
    """``average_loss`` (the mean cross-entropy) and accuracy for class-id ``labels`` and
    [N, n_classes] ``probs``."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64), _TINY, 1.0)
    return {
        "average_loss": float(-np.mean(np.log(p[np.arange(len(y)), y]))),
        "accuracy": float(np.mean(np.argmax(p, axis=1) == y)),
        "examples": int(len(y)),
    }


def regression_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict:
    """``average_loss`` (the mean squared error), RMSE, MAE and means."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(predictions, dtype=np.float64).ravel()
    mse = float(np.mean((y - p) ** 2))
    return {
        "average_loss": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": float(np.mean(np.abs(y - p))),
        "label/mean": float(y.mean()),
        "prediction/mean": float(p.mean()),
        "examples": int(len(y)),
    }
