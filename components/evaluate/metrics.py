"""Metrics computed in NumPy from labels, model outputs and example weights, over every example
at once (not streaming estimates).

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

Weights: with a model ``weight_column`` every metric is weighted as tf.estimator 2.15's heads
weight theirs: each example's weight multiplies its term and the means divide by the sum of the
weights (``average_loss`` is sum(weight x loss) / sum(weight), not / examples); precision,
recall and accuracy count weight instead of examples, and the AUCs accumulate weight per
threshold. ``examples`` still counts rows. A mean over a total weight of 0 is undefined (NaN,
``null`` in JSON) where tf.estimator's metrics say 0.

AUCs under tf.estimator's names are tf.estimator's (Keras's ``AUC``, which its heads use):
``auc`` is the trapezoidal ROC area and ``auc_precision_recall`` the precision-recall area with
Davis & Goadrich's interpolation, both from the confusion counts at 200 evenly spaced
thresholds (:func:`threshold_auc`): an approximation that takes the probabilities between two
neighbouring thresholds as equal. ``auc_exact`` (the area under
the exact ROC curve, ties of equal probability counting half) and ``auc_pr`` (average
precision, the area under the exact precision-recall step curve) are estflow's exact ones,
under names of their own so that one name means one number in every step. An AUC undefined on
the examples (one class only) is NaN (``null``), where Keras says 0.

Besides the scalar metrics of each head, it computes the curves the evaluation report and
Kubeflow's ``ClassificationMetrics`` show: ROC and precision-recall points, the confusion
matrix and calibration (reliability) bins.
"""


from __future__ import annotations

import numpy as np

__all__ = ["HEADS", "MAIN_METRIC", "AUC_THRESHOLDS", "head_metrics", "metric_names",
           "binary_metrics", "multi_class_metrics", "regression_metrics", "roc_auc",
           "average_precision", "threshold_auc", "roc_curve", "pr_curve", "downsample",
           "confusion_matrix", "calibration_bins"]

# The smallest probability of the true class a loss is computed for: float32 outputs round
# smaller ones (and underflow to 0), so the loss of one example is at most -log(this), ~87.3.
_TINY = float(np.finfo(np.float32).tiny)
# 1 - P(class 1) below this is a float32 P(class 1) of 1.0: the loss of such an example of
# class 0 counts as if 1 - P(class 1) were this (half the float32 spacing below 1), ~17.3.
_BELOW_ONE = 2.0 ** -25
HEADS = ("binary", "multi_class", "regression")
MAIN_METRIC = {"binary": "auc", "multi_class": "accuracy", "regression": "rmse"}
"""The metric the report charts per slice, by head."""
AUC_THRESHOLDS = 200
"""The thresholds of tf.estimator's ``auc`` and ``auc_precision_recall`` (Keras's ``AUC``
default ``num_thresholds``)."""


def head_metrics(head: str, labels: np.ndarray, outputs: np.ndarray,
                 weights: np.ndarray | None = None) -> dict:
    """The metrics of ``head`` (one of :data:`HEADS`) for its model ``outputs``: P(class 1)
    for ``binary``, [N, n_classes] probabilities for ``multi_class``, predictions otherwise;
    each example weighted by ``weights`` (None: 1 each)."""
    if head == "binary":
        return binary_metrics(labels, outputs, weights=weights)
    if head == "multi_class":
        return multi_class_metrics(labels, outputs, weights=weights)
    if head == "regression":
        return regression_metrics(labels, outputs, weights=weights)
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


def _weights(weights: np.ndarray | None, n: int) -> np.ndarray:
    """``weights`` as float64 ``[n]`` (ones when None)."""
    if weights is None:
        return np.ones(n)
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size != n:
        raise ValueError(f"Received an invalid value for `weights`, expected one weight per "
                         f"example ({n}). Received: {w.size} weights")
    return w


def _mean(values: np.ndarray, w: np.ndarray) -> float:
    """The ``w``-weighted mean of ``values`` (NaN for a total weight of 0)."""
    total = float(w.sum())
    return float(np.sum(values * w) / total) if total != 0 else float("nan")


def _ratio(part: float, whole: float) -> float:
    """``part / whole``, 0 when ``whole`` is 0 (Keras's precision and recall)."""
    return part / whole if whole != 0 else 0.0


def roc_auc(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Exact ROC AUC: the weighted share of (positive, negative) pairs the scores order right,
    a tie counting half (Mann-Whitney U); NaN unless both classes have weight."""
    tps, fps, _, n_pos, n_neg = _counts_by_threshold(labels, scores, weights)
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    tps, fps = np.r_[0.0, tps], np.r_[0.0, fps]
    return float(np.sum(np.diff(fps) * (tps[1:] + tps[:-1])) / (2.0 * n_pos * n_neg))


def _counts_by_threshold(labels: np.ndarray, scores: np.ndarray,
                         weights: np.ndarray | None = None):
    """The weight of true and false positives when predicting positive for ``score >= t``,
    for each distinct score ``t`` from the highest down (ties move together), and the weight
    of the positives and of the negatives."""
    y = np.asarray(labels).astype(bool).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    w = _weights(weights, len(s))
    order = np.argsort(-s, kind="mergesort")
    s, y, w = s[order], y[order], w[order]
    last_of_run = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]
    tps = np.cumsum(w * y)[last_of_run]
    fps = np.cumsum(w * ~y)[last_of_run]
    return tps, fps, s[last_of_run], float(np.sum(w * y)), float(np.sum(w * ~y))


def threshold_auc(labels: np.ndarray, probs: np.ndarray, weights: np.ndarray | None = None,
                  curve: str = "ROC") -> float:
    """tf.estimator's ``auc`` (``curve="ROC"``) or ``auc_precision_recall`` (``"PR"``): Keras's
    ``AUC`` with its defaults, which tf.estimator's heads update with the example weights.

    The weight of positives and negatives is counted at :data:`AUC_THRESHOLDS` thresholds
    evenly spaced over [0, 1] (an example counts at the thresholds its probability exceeds:
    bucket ``ceil(p * 199) - 1`` in float32, as Keras computes it); ROC is the trapezoidal
    area of (false positive rate, recall), PR Davis & Goadrich's interpolation between the
    thresholds. NaN when no weight is positive (or, for ROC, none negative), where Keras
    says 0.
    """
    p = np.clip(np.asarray(probs, dtype=np.float32).ravel(), 0.0, 1.0)
    y = np.asarray(labels).ravel() != 0
    w = _weights(weights, len(p))
    n = AUC_THRESHOLDS
    bucket = np.maximum(np.ceil(p * np.float32(n - 1)) - 1, 0).astype(np.int64)
    tp = np.cumsum(np.bincount(bucket, w * y, minlength=n)[::-1])[::-1]
    fp = np.cumsum(np.bincount(bucket, w * ~y, minlength=n)[::-1])[::-1]
    positives, negatives = float(np.sum(w * y)), float(np.sum(w * ~y))
    if positives == 0 or (curve == "ROC" and negatives == 0):
        return float("nan")
    if curve == "ROC":
        recall, fpr = tp / positives, fp / negatives
        return float(np.sum((fpr[:-1] - fpr[1:]) * (recall[:-1] + recall[1:]) / 2.0))
    return _interpolated_pr_auc(tp, fp, positives)


def _interpolated_pr_auc(tp: np.ndarray, fp: np.ndarray, positives: float) -> float:
    """Keras's ``AUC.interpolate_pr_auc``: precision taken as varying with the predicted
    positives' weight linearly in TP between thresholds (Davis & Goadrich 2006)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = np.where(np.maximum(dp, 0) != 0, dtp / np.maximum(dp, 0), 0.0)
        intercept = tp[1:] - slope * p[1:]
        both = (p[:-1] > 0) & (p[1:] > 0)
        ratio = np.where(both, p[:-1] / np.where(both, p[1:], 1.0), 1.0)
        return float(np.sum(slope * (dtp + intercept * np.log(ratio))) / positives)


def roc_curve(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None):
    """ROC points ``(fpr, tpr, thresholds)``, from (0, 0) to (1, 1), rates of weight.

    Point ``i`` predicts positive for ``score >= thresholds[i]``; the first threshold is just
    above the highest score (nothing predicted positive), so every value is finite (JSON-safe).
    Rates are NaN when the labels hold a single class.
    """
    tps, fps, thresholds, n_pos, n_neg = _counts_by_threshold(labels, scores, weights)
    top = np.nextafter(thresholds[0], np.inf) if len(thresholds) else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = np.r_[0.0, fps / n_neg]
        tpr = np.r_[0.0, tps / n_pos]
    return fpr, tpr, np.r_[top, thresholds]


def pr_curve(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None):
    """Precision-recall points ``(precision, recall, thresholds)`` by decreasing threshold,
    starting at recall 0 (precision 1, by convention); a threshold above which all examples
    weigh 0 (precision undefined) has no point."""
    tps, fps, thresholds, n_pos, _n_neg = _counts_by_threshold(labels, scores, weights)
    kept = (tps + fps) != 0
    tps, fps, thresholds = tps[kept], fps[kept], thresholds[kept]
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.r_[1.0, tps / (tps + fps)]
        recall = np.r_[0.0, tps / n_pos]
    top = np.nextafter(thresholds[0], np.inf) if len(thresholds) else 1.0
    return precision, recall, np.r_[top, thresholds]


def average_precision(labels: np.ndarray, scores: np.ndarray,
                      weights: np.ndarray | None = None) -> float:
    """Area under the precision-recall curve as a step function (sum over thresholds of
    precision x recall increase); NaN without positives."""
    precision, recall, _ = pr_curve(labels, scores, weights)
    if len(recall) < 2 or not np.isfinite(recall[-1]):
        return float("nan")
    return float(np.sum(np.diff(recall) * precision[1:]))


def downsample(*curves: np.ndarray, max_points: int = 200) -> list[list[float]]:
    """The same (at most ``max_points``) evenly spaced points of each curve, ends included."""
    n = len(curves[0])
    keep = np.unique(np.linspace(0, n - 1, min(n, max_points)).round().astype(int))
    return [[float(v) for v in np.asarray(c)[keep]] for c in curves]


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, n_classes: int) -> list[list[int]]:
    """``matrix[actual][predicted]`` counts of rows (unweighted: Kubeflow's matrix holds
    counts), rows the label, columns the prediction."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    p = np.asarray(predicted, dtype=np.int64).ravel()
    valid = (y >= 0) & (y < n_classes) & (p >= 0) & (p < n_classes)
    counts = np.bincount(y[valid] * n_classes + p[valid], minlength=n_classes * n_classes)
    return counts.reshape(n_classes, n_classes).tolist()


def calibration_bins(labels: np.ndarray, predictions: np.ndarray, bins: int = 10,
                     value_range: tuple[float, float] | None = None,
                     weights: np.ndarray | None = None) -> list[dict]:
    """Reliability bins: the predictions cut into ``bins`` equal-width intervals over
    ``value_range`` (default: their min..max); for each bin holding weight, its bounds,
    example count, and weighted mean prediction and mean label. A calibrated model has mean
    label = mean prediction in every bin."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(predictions, dtype=np.float64).ravel()
    w = _weights(weights, len(p))
    low, high = value_range or (float(p.min()), float(p.max()))
    edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        members = index == b
        if members.any() and w[members].sum() != 0:
            out.append({"lower": float(edges[b]), "upper": float(edges[b + 1]),
                        "count": int(members.sum()),
                        "mean_prediction": _mean(p[members], w[members]),
                        "mean_label": _mean(y[members], w[members])})
    return out


def binary_metrics(labels: np.ndarray, probs: np.ndarray, threshold: float = 0.5,
                   weights: np.ndarray | None = None) -> dict:
    """``average_loss`` (the mean log loss), accuracy, tf.estimator's ``auc`` and
    ``auc_precision_recall``, the exact ROC AUC and average precision (``auc_exact``,
    ``auc_pr``), precision, recall and means, for P(class 1) = ``probs``, each example
    weighted by ``weights``."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    raw = np.asarray(probs).ravel()
    p = np.clip(raw.astype(np.float64), 0.0, 1.0)
    w = _weights(weights, len(y))
    pred = p > threshold
    positive = y == 1
    with np.errstate(divide="ignore", invalid="ignore"):
        per_example = -(y * np.log(np.maximum(p, _TINY))
                        + (1 - y) * np.log(np.maximum(1 - p, _BELOW_ONE)))
    true_positives = float(np.sum(w * (pred & positive)))
    return {
        "average_loss": _mean(per_example, w),
        "accuracy": _mean(pred == positive, w),
        "auc": threshold_auc(y, raw, w, "ROC"),
        "auc_precision_recall": threshold_auc(y, raw, w, "PR"),
        "auc_exact": roc_auc(y, p, w),
        "auc_pr": average_precision(y, p, w),
        "precision": _ratio(true_positives, float(np.sum(w * pred))),
        "recall": _ratio(true_positives, float(np.sum(w * positive))),
        "label/mean": _mean(y, w),
        "prediction/mean": _mean(p, w),
        "examples": int(len(y)),
    }


def multi_class_metrics(labels: np.ndarray, probs: np.ndarray,
                        weights: np.ndarray | None = None) -> dict:
    """``average_loss`` (the mean cross-entropy) and accuracy for class-id ``labels`` and
    [N, n_classes] ``probs``, each example weighted by ``weights``."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64), _TINY, 1.0)
    w = _weights(weights, len(y))
    return {
        "average_loss": _mean(-np.log(p[np.arange(len(y)), y]), w),
        "accuracy": _mean(np.argmax(p, axis=1) == y, w),
        "examples": int(len(y)),
    }


def regression_metrics(labels: np.ndarray, predictions: np.ndarray,
                       weights: np.ndarray | None = None) -> dict:
    """``average_loss`` (the mean squared error), RMSE, MAE and means, each example weighted
    by ``weights``."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(predictions, dtype=np.float64).ravel()
    w = _weights(weights, len(y))
    mse = _mean((y - p) ** 2, w)
    return {
        "average_loss": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": _mean(np.abs(y - p), w),
        "label/mean": _mean(y, w),
        "prediction/mean": _mean(p, w),
        "examples": int(len(y)),
    }
