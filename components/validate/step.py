"""The validate step's run: the run's data checked before a model trains on it
(``Pipeline.checks``).

It reads the statistics ingest wrote (``examples/statistics.pb``), the schema the checks name
(or infers one from these statistics, written to ``validation/schema.pbtxt`` for the user to
commit), and the statistics of the served model's training data (stored with each pushed
version, ``assets.extra/estflow_statistics.pb``). Every check is computed over the whole span,
as TFDV validates one dataset: the statistics' ``All Examples`` dataset (every split together,
:func:`~estflow.components._statistics.statistics.span_dataset`), the served version's likewise
for drift. It finds every anomaly, once: the data against the schema, the number of examples
(``min_examples``: the span's rows; an empty split is one too), missing values, drift against
the served model's training data, and a column whose cells ingest rejected for their type (text
in a numeric column) more often than in the served model's training data (UNEXPECTED_DATA_TYPE:
those rows are in no statistics, so no other check sees them). Each is printed with its column,
TFDV kind and observed vs allowed value; those that ``warn_only`` does not name block: the step
writes ``validation.json`` and ``data_report.html``, then exits with :data:`EXIT_BLOCKED` so
nothing after it trains or pushes (``estflow run`` exits with the same status; on Kubeflow the
failed task stops the run before the train task).

``python -m estflow.components.validate --spec S --examples DIR --validation DIR``
(:mod:`.__main__`, the entry point) calls :func:`run`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from apache_beam.io.filesystems import FileSystems

from estflow.components._io import model_repo
from estflow.components._sources.spans import EXIT_BLOCKED
from estflow.components._statistics import anomalies as _anomalies
from estflow.components._statistics import report as _report
from estflow.components._statistics import schema as _schema
from estflow.components._statistics import statistics as _statistics
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "family_of", "EXIT_BLOCKED"]



def family_of(kind: str) -> str:
    """The check family (``DataChecks.warn_only``'s words) an anomaly kind belongs to
    (INVALID_FEATURE_SHAPE is ``missing``: a column with one value a row breaks its fixed
    shape by being missing in some rows, besides FEATURE_TYPE_LOW_FRACTION_PRESENT)."""
    if kind.startswith("COMPARATOR_"):
        return "drift"
    if kind.startswith("DATASET_"):
        return "examples"
    if kind.startswith("FEATURE_TYPE_LOW_") or kind == "INVALID_FEATURE_SHAPE":
        return "missing"
    if kind.startswith("SPAN_"):
        return "span"
    return "schema"


def run(pipeline: Pipeline, examples_dir: str, validation_dir: str, *, source_root: Path,
        progress=print) -> dict:
    """Check the run's statistics; write ``validation.json`` and the report; return the
    summary (``passed``: no blocking anomaly)."""
    checks = pipeline.checks
    stats = _statistics.read_statistics(os.path.join(examples_dir, Files.STATISTICS))
    os.makedirs(validation_dir, exist_ok=True)
    schema, schema_path = _schema_for(checks.schema, stats, source_root, validation_dir,
                                      checks.min_examples)
    progress(f"schema: {schema_path}")
    span = _statistics.span_dataset(stats)
    splits = ", ".join(f"{d.name} {d.num_examples}" for d in _statistics.split_datasets(stats))
    progress(f"checks over the whole span: {span.num_examples} rows ({splits})")
    found = _anomalies.validate(stats, schema,
                                thresholds={"min_examples": _min_examples(checks, schema)})
    found += _missing(span, checks.max_missing_fraction)
    served, served_at = _served_statistics(pipeline)
    if served is None:
        progress(f"drift: not checked ({served_at})")
        progress(f"cells rejected for their type: not compared ({served_at})")
    else:
        progress(f"drift: against the training data of {served_at}")
        found += _anomalies.drift(stats, served, schema=schema,
                                  thresholds=_drift_thresholds(checks, stats))
        if _anomalies.records_rejects(served):
            progress(f"cells rejected for their type: against the training data of {served_at}")
            found += _anomalies.rejected_types(stats, served)
        else:
            progress("cells rejected for their type: not compared (the served version's "
                     "statistics predate their record)")
    rows = [_row(a, checks.blocks(a.column or None, a.kind, family=family_of(a.kind)))
            for a in found]
    blocking = [r for r in rows if r["blocks"]]
    for r in rows:
        progress(("ANOMALY" if r["blocks"] else "warning") + ": " + _report.line(r))
    summary = {"passed": not blocking, "anomalies": blocking,
               "warnings": [r for r in rows if not r["blocks"]], "schema": schema_path,
               "baseline": served_at if served is not None else None,
               "examples": {d.name: d.num_examples for d in stats.datasets},
               "checked_over": span.name}
    with open(os.path.join(validation_dir, Files.VALIDATION), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    Path(validation_dir, Files.DATA_REPORT).write_text(
        _report.render(pipeline.name, summary, stats, served))
    progress(f"data report: {os.path.join(validation_dir, Files.DATA_REPORT)}")
    return summary


def _schema_for(declared: str | None, stats, source_root: Path, out: str, min_examples: int):
    """The declared schema (relative to the pipeline's directory), or one inferred from these
    statistics (its ``min_examples_count``: ``min_examples``) and written to ``out`` for the
    user to commit."""
    if declared is not None:
        path = declared if "://" in declared else str(source_root / declared)
        return _schema.read_schema(path), path
    inferred = _schema.infer_schema(stats, min_examples=min_examples)
    path = os.path.join(out, Files.INFERRED_SCHEMA)
    _schema.write_schema(inferred, path)
    return inferred, f"{path} (inferred from this run: commit it and declare " \
        "DataChecks(schema=...) to check later runs against it)"


def _min_examples(checks, schema) -> int:
    """The fewest rows the span may have: ``min_examples``, or the schema's
    ``min_examples_count`` when it asks for more (both are lower bounds)."""
    declared = schema.dataset_constraints.min_examples_count if \
        schema.dataset_constraints.HasField("min_examples_count") else 0
    return max(checks.min_examples, declared)


def _missing(span, limit: float | None) -> list:
    """Columns missing in more than ``limit`` of the span's rows."""
    if limit is None or not span.num_examples:
        return []
    found = []
    for feature in span.features:
        stat = feature.string_stats if feature.HasField("string_stats") else feature.num_stats
        fraction = stat.common_stats.num_missing / span.num_examples
        if fraction > limit:
            name = _schema.feature_name(feature)
            found.append(_anomalies.Anomaly(
                name, "FEATURE_TYPE_LOW_FRACTION_PRESENT", f"{fraction:.4g} missing",
                f"<= {limit:g} missing", span.name,
                description=f"column {name!r} is missing in {fraction:.1%} of the rows"))
    return found


def _drift_thresholds(checks, stats) -> dict:
    """The drift thresholds: the declared ones per column, the defaults for the rest (none
    declared: that kind of column is not checked)."""
    never = math.inf
    linf = {"*": never if checks.drift_linf is None else checks.drift_linf}
    js = {"*": never if checks.drift_js is None else checks.drift_js}
    for column, limit in (checks.drift or {}).items():
        linf[column] = js[column] = limit
    return {"linf": linf, "js_divergence": js, "min_examples": checks.min_examples}


def _served_statistics(pipeline: Pipeline):
    """The statistics stored with the served version, and where (or why there are none)."""
    if pipeline.push is None:
        return None, "no push target"
    destination = model_repo.destination_for(pipeline.push.base_path,
                                             pipeline.push.model_name)
    version = model_repo.latest_servable(destination)
    if version is None:
        return None, "no model served yet"
    path = f"{destination.model_base}/{version}/{Files.SERVED_STATISTICS}"
    if not FileSystems.exists(path):
        return None, f"version {version} was pushed without statistics"
    return _statistics.read_statistics(path), f"version {version} ({path})"


def _row(anomaly, blocks: bool) -> dict:
    return {"column": anomaly.column, "kind": anomaly.kind, "split": anomaly.split,
            "observed": anomaly.observed, "allowed": anomaly.allowed,
            "family": family_of(anomaly.kind), "blocks": blocks,
            "description": anomaly.description}
