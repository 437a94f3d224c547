"""Metrics computed in NumPy from labels and model outputs (exact, not streaming estimates).

Kept free of TensorFlow so the same code scores any model output, e.g. from a served model.
"""

from __future__ import annotations

import numpy as np

__all__ = ["binary_metrics", "multi_class_metrics", "regression_metrics", "roc_auc"]

_EPS = 1e-7


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


def binary_metrics(labels: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> dict:
    """Loss (log loss), accuracy, AUC, precision, recall, means, for P(class 1) = ``probs``."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64).ravel(), _EPS, 1 - _EPS)
    pred = p > threshold
    tp = float(np.sum(pred & (y == 1)))
    return {
        "loss": float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))),
        "accuracy": float(np.mean(pred == (y == 1))),
        "auc": roc_auc(y, p),
        "precision": tp / max(float(pred.sum()), 1.0),
        "recall": tp / max(float((y == 1).sum()), 1.0),
        "label/mean": float(y.mean()),
        "prediction/mean": float(p.mean()),
        "examples": int(len(y)),
    }


def multi_class_metrics(labels: np.ndarray, probs: np.ndarray) -> dict:
    """Cross-entropy loss and accuracy for class-id ``labels`` and [N, n_classes] ``probs``."""
    y = np.asarray(labels, dtype=np.int64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64), _EPS, 1.0)
    return {
        "loss": float(-np.mean(np.log(p[np.arange(len(y)), y]))),
        "accuracy": float(np.mean(np.argmax(p, axis=1) == y)),
        "examples": int(len(y)),
    }


def regression_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict:
    """Mean squared error (the loss), RMSE, MAE and means."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(predictions, dtype=np.float64).ravel()
    mse = float(np.mean((y - p) ** 2))
    return {
        "loss": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": float(np.mean(np.abs(y - p))),
        "label/mean": float(y.mean()),
        "prediction/mean": float(p.mean()),
        "examples": int(len(y)),
    }
