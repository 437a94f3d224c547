"""The evaluate step: metrics on the eval split, measured through the exported serving model,
and the blessing that decides whether the push step may publish it.

Raw eval examples go through the SavedModel's ``serving_default`` signature (the exact path
serving takes), and labels come from its ``transform_features`` signature (the same tf.Transform
graph that made the training labels), so what is measured is what users will get. In the same
pass over the examples it scores the *baseline*, the model served at the push target (its
highest complete version), and reads the raw value of each ``EvalSpec.slices`` column. A
baseline pushed by estflow carries its own outputs on the rows it was evaluated on; when this
evaluation reads the same rows, those are used instead of loading and scoring it again
(:mod:`estflow.components.evaluate.outputs`).

Outputs, in the evaluation directory:

* ``metrics.json``: ``{"head", "name", "model", "metrics": {...}, "slices": {column: {value:
  metrics}}}``; each slice's metrics include its ``examples`` count (small slices are noisy);
  an absent raw value is the slice ``"<missing>"``; undefined metrics (AUC of a single class)
  are ``null``.
* ``blessing.json``: see :mod:`estflow.components.evaluate.blessing`.
* ``report.html``: a self-contained report with inline SVG plots.
* ``kfp_metrics.json`` and ``kfp_classification.json``, which :func:`log_to_kfp` logs to KFP
  ``Metrics`` / ``ClassificationMetrics`` artifacts.
* ``eval_outputs.npz``: the model's output on each eval row and what identifies the rows;
  the push step publishes it with the model.

``python -m estflow.components.evaluate --spec S --examples DIR --model DIR --evaluation DIR``
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from estflow.components._io import lineage
from estflow.components._io import model_repo
from estflow.components._io.jsonfile import write_json
from estflow.components._io.raw_features import TF_DTYPES
from estflow.components._runtime import entry as _runtime
from estflow.components.evaluate import blessing as _blessing
from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate import outputs as _outputs
from estflow.components.evaluate import report as _report
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.models import head_of
from estflow.dsl.pipeline import Pipeline

__all__ = ["Scores", "run", "main", "evaluate_saved_model", "score_eval_split", "slice_metrics",
           "curves", "log_to_kfp", "MISSING", "ROC_POINTS"]

MISSING = "<missing>"
"""The slice value of examples without the slice column."""
MAX_SLICE_VALUES = 100
"""Per slice column, metrics for at most this many values (the most frequent)."""
ROC_POINTS = 200


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
    """

    labels: np.ndarray
    outputs: np.ndarray
    slices: dict[str, np.ndarray]
    baseline: np.ndarray | None = None
    baseline_error: str | None = None
    digest: str | None = None


def score_eval_split(export_dir: str, eval_files: list[str], *, label: str, head: str,
                   slice_dtypes: dict[str, str] | None = None, baseline_dir: str | None = None,
                   batch_size: int = 512, max_batches: int | None = None) -> Scores:
    """Score serialized raw tf.Examples from ``eval_files`` (GZIP TFRecords) with a SavedModel
    (and the baseline SavedModel at ``baseline_dir``, if any), in one pass.

    Args:
        slice_dtypes: raw slice column -> its declared dtype (``float``, ``int``, ``string``).

    Raises:
        ValueError: no examples, or the SavedModel lacks a signature or output of the contract.
    """
    tf = _tensorflow()
    loaded = tf.saved_model.load(export_dir)
    serve = _signature(loaded, "serving_default", export_dir)
    transform = _signature(loaded, "transform_features", export_dir)
    baseline, error = _load_baseline(baseline_dir)
    labels, outputs, base_out = [], [], []
    slices: dict[str, list] = {column: [] for column in slice_dtypes or {}}
    digest = _outputs.RowDigest()
    for batch in _eval_batches(tf, eval_files, batch_size, max_batches):
        digest.update(batch.numpy())
        transformed = transform(examples=batch)
        if label not in transformed:
            raise ValueError(f"transform_features of {export_dir}: expected the label "
                             f"{label!r} among its outputs. Received: {sorted(transformed)}")
        labels.append(transformed[label].numpy().reshape(-1))
        outputs.append(_score(serve(examples=batch), head, export_dir))
        if baseline is not None and error is None:
            try:
                base_out.append(_score(baseline(examples=batch), head, baseline_dir))
            except Exception as e:  # noqa: BLE001 - any failure: the baseline is unusable
                error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        for column, values in _slice_values(tf, batch, slice_dtypes or {}).items():
            slices[column].append(values)
    if not labels:
        raise ValueError(f"the eval split is empty: no examples in {eval_files}")
    base = np.concatenate(base_out) if baseline is not None and error is None else None
    return Scores(np.concatenate(labels), np.concatenate(outputs),
                  {c: np.concatenate(v) for c, v in slices.items()}, base, error,
                  digest.hexdigest())


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
        loaded = _tensorflow().saved_model.load(baseline_dir)
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
                         batch_size: int = 512, max_batches: int | None = None) -> dict:
    """The head's metrics (see :mod:`estflow.components.evaluate.metrics`) of a SavedModel on
    ``eval_files``."""
    scores = score_eval_split(export_dir, eval_files, label=label, head=head,
                            batch_size=batch_size, max_batches=max_batches)
    return metrics_lib.head_metrics(head, scores.labels, scores.outputs)


def slice_metrics(head: str, labels: np.ndarray, outputs: np.ndarray,
                  slices: dict[str, np.ndarray]) -> dict[str, dict[str, dict]]:
    """``{column: {value: metrics}}``: the head's metrics on the examples of each value (the
    :data:`MAX_SLICE_VALUES` most frequent values of each column)."""
    result: dict[str, dict[str, dict]] = {}
    for column, values in slices.items():
        names, counts = np.unique(values.astype(str), return_counts=True)
        order = sorted(range(len(names)), key=lambda i: (-counts[i], names[i]))
        per_value = {}
        for i in order[:MAX_SLICE_VALUES]:
            members = values == names[i]
            with np.errstate(all="ignore"):
                per_value[str(names[i])] = metrics_lib.head_metrics(
                    head, labels[members], outputs[members])
        result[column] = per_value
    return result


def curves(head: str, labels: np.ndarray, outputs: np.ndarray,
           categories: list[str]) -> dict[str, Any]:
    """Plot data: ``roc`` and ``pr`` (binary, at most :data:`ROC_POINTS` points each),
    ``calibration`` bins (binary, regression) and ``confusion_matrix`` (classifiers)."""
    out: dict[str, Any] = {}
    if head == "binary":
        fpr, tpr, thresholds = metrics_lib.roc_curve(labels, outputs)
        if np.isfinite(fpr).all() and np.isfinite(tpr).all():  # both classes present
            out["roc"] = dict(zip(("fpr", "tpr", "thresholds"), metrics_lib.downsample(
                fpr, tpr, thresholds, max_points=ROC_POINTS), strict=True))
            precision, recall, pr_thresholds = metrics_lib.pr_curve(labels, outputs)
            out["pr"] = dict(zip(("precision", "recall", "thresholds"), metrics_lib.downsample(
                precision, recall, pr_thresholds, max_points=ROC_POINTS), strict=True))
        out["calibration"] = metrics_lib.calibration_bins(labels, outputs, 10, (0.0, 1.0))
        predicted = (outputs > 0.5).astype(np.int64)  # binary_metrics' threshold
    elif head == "multi_class":
        predicted = np.argmax(outputs, axis=1)
    else:
        out["calibration"] = metrics_lib.calibration_bins(labels, outputs, 10)
        return out
    out["confusion_matrix"] = {"categories": categories, "matrix": metrics_lib.confusion_matrix(
        labels, predicted, len(categories))}
    return out


def _categories(pipeline: Pipeline, head: str, outputs: np.ndarray) -> list[str]:
    n = 2 if head == "binary" else int(outputs.shape[1]) if head == "multi_class" else 0
    vocabulary = list(pipeline.label.vocabulary)
    return vocabulary if len(vocabulary) == n else [str(i) for i in range(n)]


def _json_safe(value: Any) -> Any:
    """NaN/inf -> None (strict JSON, readable by any tool), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _find_baseline(pipeline: Pipeline) -> tuple[int, str] | None:
    """(version, path) of the model served at the push target, or None."""
    if pipeline.push is None:
        return None
    destination = model_repo.destination_for(pipeline.push.base_path,
                                                pipeline.push.model_name)
    version = model_repo.latest_servable(destination)
    return None if version is None else (version, f"{destination.model_base}/{version}")


def _baseline(found: tuple[int, str] | None, scores: Scores, head: str,
              reused: bool = False) -> _blessing.Baseline | None:
    if found is None:
        return None
    version, path = found
    fingerprint = (lineage.read_lineage(path) or {}).get("fingerprint")
    if scores.baseline is None:
        return _blessing.Baseline(version, path, None, scores.baseline_error,
                                  fingerprint=fingerprint)
    with np.errstate(all="ignore"):
        metrics = metrics_lib.head_metrics(head, scores.labels, scores.baseline)
    return _blessing.Baseline(version, path, _json_safe(metrics),
                              outputs="stored" if reused else "scored", fingerprint=fingerprint)


def run(pipeline: Pipeline, examples_dir: str, model_dir: str, evaluation_dir: str,
        progress: _runtime.Progress | None = None) -> dict:
    """Evaluate the exported model (and the baseline) on the eval split, bless it or not, and
    write the evaluation directory (see the module docstring)."""
    progress = progress or _runtime.Progress("evaluate")
    head = head_of(pipeline.model)
    _blessing.check_metric_names(pipeline.eval.thresholds, metrics_lib.metric_names(head))
    eval_files = sorted(str(p) for p in (Path(examples_dir) / Files.EVAL_EXAMPLES).glob("*"))
    export_dir = str(Path(model_dir) / Files.EXPORT)
    found = _find_baseline(pipeline)
    batches = {"batch_size": pipeline.eval.batch_size, "max_batches": pipeline.eval.steps}
    limit = None if pipeline.eval.steps is None else \
        pipeline.eval.steps * pipeline.eval.batch_size
    stored, why = _outputs.read_matching(found[1], head=head, eval_files=eval_files,
                                         limit=limit) if found else (None, "")
    if found is None:
        baseline = "no baseline (no model served at the push target)"
    elif stored is not None:
        baseline = (f"baseline: version {found[0]} at {found[1]} (its stored outputs are for "
                    "eval files like these: read, not scored, if the rows are the same)")
    else:
        baseline = f"baseline: version {found[0]} at {found[1]} ({why}: scored in the same pass)"
    progress(f"scoring {len(eval_files)} eval file(s) through {export_dir} ({head} head); "
             f"{baseline}")
    dtypes = {c.name: c.dtype for c in pipeline.raw_columns()}
    scores = score_eval_split(export_dir, eval_files, label=pipeline.label.name, head=head,
                            slice_dtypes={c: dtypes[c] for c in pipeline.eval.slices},
                            baseline_dir=found[1] if found and stored is None else None,
                            **batches)
    reused = False
    if stored is not None:
        if stored.same_rows(scores.digest, len(scores.labels)):
            scores = dataclasses.replace(scores, baseline=stored.outputs)
            reused = True
            progress(f"baseline: version {found[0]}'s outputs on these {len(scores.labels)} "
                     "rows were stored with it when it was evaluated: reused")
        else:
            progress(f"baseline: version {found[0]}'s stored outputs are for other rows "
                     "(another digest): scoring it")
            base, error = score_baseline(found[1], eval_files, head=head, **batches)
            scores = dataclasses.replace(scores, baseline=base, baseline_error=error)
    _outputs.write(evaluation_dir, scores.outputs, head=head, digest=scores.digest,
                   eval_files=eval_files, limit=limit)
    with np.errstate(all="ignore"):
        metrics = _json_safe(metrics_lib.head_metrics(head, scores.labels, scores.outputs))
    result = {"head": head, "metrics": metrics, "model": export_dir, "name": pipeline.eval.name,
              "slices": _json_safe(slice_metrics(head, scores.labels, scores.outputs,
                                                 scores.slices))}
    blessing = _blessing.bless(pipeline.eval.thresholds, metrics,
                               _baseline(found, scores, head, reused))
    categories = _categories(pipeline, head, scores.outputs)
    plots = _json_safe(curves(head, scores.labels, scores.outputs, categories))
    if scores.baseline is not None:  # drawn next to the candidate's curves in the report
        plots["baseline"] = _json_safe(curves(head, scores.labels, scores.baseline, categories))
    _write(Path(evaluation_dir), result, blessing, plots, pipeline.name)
    _show(result, blessing, Path(evaluation_dir), progress)
    return result


def _write(folder: Path, result: dict, blessing: _blessing.Blessing, plots: dict,
           title: str) -> None:
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


def _show(result: dict, blessing: _blessing.Blessing, folder: Path,
          progress: _runtime.Progress) -> None:
    metrics = result["metrics"]
    shown = ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
    progress(f"{metrics['examples']} examples: {shown}")
    main = metrics_lib.MAIN_METRIC[result["head"]]
    for column, values in result["slices"].items():
        shown = ", ".join(f"{value} {_fmt(m.get(main))} (n={m['examples']})"
                          for value, m in list(values.items())[:8])
        more = f", ... {len(values) - 8} more" if len(values) > 8 else ""
        progress(f"{main} by {column}: {shown}{more}")
    n_failed = len(blessing.failures)
    progress("BLESSED: every check passed" if blessing.blessed else
             f"NOT BLESSED: {n_failed} of {len(blessing.checks)} check(s) failed; the push "
             "step will not push this model")
    for reason in blessing.reasons:
        progress(f"  {reason}")
    progress(f"report: {folder / Files.REPORT}")


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}"


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


def main(argv: list[str] | None = None) -> int:
    parser = _runtime.step_parser(step_named("evaluate"), __doc__)
    args = parser.parse_args(argv)
    run(_runtime.load_pipeline(args.spec), args.examples, args.model, args.evaluation)
    return 0


if __name__ == "__main__":
    _runtime.exit_after(main)
