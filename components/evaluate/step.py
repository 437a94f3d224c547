"""The evaluate step: score the eval split (and the baseline), measure, bless, write the
evaluation directory, and say what was found.

:func:`run` is what ``python -m estflow.components.evaluate`` calls, and tests call directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from estflow.components._runtime import entry as _runtime
from estflow.components._runtime import progress as _progress
from estflow.components.evaluate import baseline as _baseline
from estflow.components.evaluate import blessing as _blessing
from estflow.components.evaluate import files as _files
from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate import outputs as _outputs
from estflow.components.evaluate import results as _results
from estflow.components.evaluate import scoring as _scoring
from estflow.components.evaluate import warmup_rows as _warmup_rows
from estflow.dsl.contracts import Files
from estflow.dsl.models import head_of
from estflow.dsl.pipeline import Pipeline

__all__ = ["run"]


def run(pipeline: Pipeline, examples_dir: str, model_dir: str, evaluation_dir: str,
        progress: _runtime.Progress | None = None) -> dict:
    """Evaluate the exported model (and the baseline) on the eval split, bless it or not, and
    write the evaluation directory (see :mod:`estflow.components.evaluate.__main__`).

    Returns:
        What ``metrics.json`` holds.

    Raises:
        ValueError: a threshold names a metric the head does not have, the eval split is
            empty, or the SavedModel lacks a signature or output of the contract.
    """
    progress = progress or _runtime.Progress("evaluate")
    head = head_of(pipeline.model)
    _blessing.check_metric_names(pipeline.eval.thresholds, metrics_lib.metric_names(head))
    eval_files = sorted(str(p) for p in (Path(examples_dir) / Files.EVAL_EXAMPLES).glob("*"))
    export_dir = str(Path(model_dir) / Files.EXPORT)
    batches = {"batch_size": pipeline.eval.batch_size, "max_batches": pipeline.eval.steps}
    limit = None if pipeline.eval.steps is None else \
        pipeline.eval.steps * pipeline.eval.batch_size
    served = _baseline.find_served(pipeline, head=head, eval_files=eval_files, limit=limit)
    progress(f"scoring {len(eval_files)} eval file(s) through {export_dir} ({head} head); "
             f"{_baseline.describe(served)}")
    dtypes = {c.name: c.dtype for c in pipeline.raw_columns()}
    rows = (_progress.split_rows(examples_dir) or {}).get(Files.EVAL_EXAMPLES)
    with _progress.Reporter(progress, rows if limit is None or rows is None
                            else min(rows, limit)) as reporter:
        scores = _scoring.score_eval_split(
            export_dir, eval_files, label=pipeline.label.name, head=head,
            slice_dtypes={c: dtypes[c] for c in pipeline.eval.slices},
            baseline_dir=served and served.scored_in_pass(),
            on_rows=lambda n: reporter.tally.add("scored", n),
            weight=getattr(pipeline.model, "weight_column", None), **batches)
    scores, reused = _baseline.use_stored(served, scores, lambda path: _scoring.score_baseline(
        path, eval_files, head=head, **batches), progress)
    _outputs.write(evaluation_dir, scores.outputs, head=head, digest=scores.digest,
                   eval_files=eval_files, limit=limit)
    # a few rows as a client sends them: the pushed version's warm-up requests
    _warmup_rows.keep(export_dir, eval_files, evaluation_dir, label_column=pipeline.label.column)
    result = _results.evaluation(pipeline, head, export_dir, scores)
    blessing = _blessing.bless(pipeline.eval.thresholds, result["metrics"],
                               _baseline.blessing_baseline(served, scores, head, reused))
    _files.write(Path(evaluation_dir), result, blessing,
                 _results.plots(pipeline, head, scores), pipeline.name)
    _data_statistics(Path(examples_dir), served, Path(evaluation_dir))
    _show(result, blessing, Path(evaluation_dir), progress)
    return result


def _data_statistics(examples: Path, served, folder: Path) -> None:
    """Keep the run's data statistics with the evaluation (push stores them with the version:
    the served model's training data is then known), and show them in the report next to the
    served version's."""
    from estflow.components._statistics import report as data_report  # noqa: PLC0415
    from estflow.components._statistics import statistics as data_stats  # noqa: PLC0415

    if not (examples / Files.STATISTICS).is_file():
        return
    shutil.copyfile(examples / Files.STATISTICS, folder / Files.STATISTICS)
    stored = f"{served.path}/{Files.SERVED_STATISTICS}" if served is not None else None
    baseline = data_stats.read_statistics(stored) if stored and Path(stored).is_file() \
        else None
    report = folder / Files.REPORT
    section = data_report.side_by_side(data_stats.read_statistics(str(examples)), baseline)
    report.write_text(report.read_text().replace("</body>", section + "</body>", 1))


def _show(result: dict, blessing: _blessing.Blessing, folder: Path,
          progress: _runtime.Progress) -> None:
    """The step's last lines: the metrics (and the examples' total weight, when weighted), the
    main metric by slice, the verdict."""
    metrics = result["metrics"]
    shown = ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
    weight = result.get("weight")
    weighted = "" if weight is None else \
        f" weighing {_fmt(weight['sum'])} (weight_column {weight['column']!r})"
    progress(f"{metrics['examples']} examples{weighted}: {shown}")
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
