"""The evaluation directory's files: written by the step (``blessing.json`` last), and the KFP
ones logged to KFP's UI artifacts by :func:`log_to_kfp`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from estflow.components._io.jsonfile import write_json
from estflow.components.evaluate import blessing as _blessing
from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate import report as _report
from estflow.dsl.contracts import Files

__all__ = ["write", "log_to_kfp"]


def write(folder: Path, result: dict, blessing: _blessing.Blessing, plots: dict,
          title: str) -> None:
    """Write ``metrics.json``, the KFP files, ``report.html``, then ``blessing.json``."""
    write_json(folder / Files.METRICS, result)
    write_json(folder / Files.KFP_METRICS, {
        k: v for k, v in result["metrics"].items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)})
    write_json(folder / Files.KFP_CLASSIFICATION, {
        k: plots[k] for k in ("roc", "confusion_matrix") if k in plots})
    html = _report.render(title=title, evaluation=result, blessing=blessing.to_json(),
                          plots=plots, main_metric=metrics_lib.MAIN_METRIC[result["head"]])
    (folder / Files.REPORT).write_text(html)
    # Last: the push step (and the KFP condition) act on blessing.json alone.
    write_json(folder / Files.BLESSING, blessing.to_json())


def log_to_kfp(evaluation_dir: str, metrics_artifact: Any = None,
               classification_artifact: Any = None) -> None:
    """Log the evaluation to KFP artifacts, from a KFP component body.

    Duck-typed, so this module never imports kfp: ``metrics_artifact`` needs
    ``log_metric(name, value)`` (``kfp.dsl.Metrics``) and ``classification_artifact``
    ``log_roc_curve(fpr, tpr, threshold)`` and ``log_confusion_matrix(categories, matrix)``
    (``kfp.dsl.ClassificationMetrics``); either may be None. Regression has no ROC curve or
    confusion matrix, and a binary eval split with a single class has no ROC curve.

    Example:
        >>> def evaluate(evaluation: Output[Artifact], metrics: Output[Metrics],
        ...              classification: Output[ClassificationMetrics]):  # doctest: +SKIP
        ...     log_to_kfp(evaluation.path, metrics, classification)
    """
    folder = Path(evaluation_dir)
    if metrics_artifact is not None:
        for name, value in sorted(json.loads((folder / Files.KFP_METRICS).read_text()).items()):
            metrics_artifact.log_metric(name, value)
    if classification_artifact is not None:
        data = json.loads((folder / Files.KFP_CLASSIFICATION).read_text())
        if "roc" in data:
            roc = data["roc"]
            classification_artifact.log_roc_curve(roc["fpr"], roc["tpr"], roc["thresholds"])
        if "confusion_matrix" in data:
            matrix = data["confusion_matrix"]
            classification_artifact.log_confusion_matrix(matrix["categories"], matrix["matrix"])
