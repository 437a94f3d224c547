"""``predict.json``, the summary of a batch prediction, and the lines the step prints from it.

It is ingest's summary of what was read (line accounting, rejects, column statistics), without
its splits, plus what was scored, how fast, with which model, and where.
"""

from __future__ import annotations

from estflow.components._sources.report import summarize as summarize_read
from estflow.components.predict.model import ModelInfo
from estflow.components.predict.schema import ScoringSchema
from estflow.dsl.batch import BatchPredict
from estflow.dsl.contracts import Files

__all__ = ["summarize", "summary_lines"]


def summarize(schema: ScoringSchema, files: list[str], stats: dict, model: ModelInfo,
              spec: BatchPredict, dest: str, seconds: float) -> dict:
    """The summary of the job's merged statistics (``output_files`` is added on publishing)."""
    summary = summarize_read(schema, files, stats, seconds)
    for name in (*schema.split.names(), "splits", "split"):
        summary.pop(name, None)
    scored = int(stats["scored"])
    return {**summary, "complete": True, "scored": scored,
            "rows_per_second": round(scored / seconds, 1) if seconds else None,
            "model": {"path": model.path, "version": model.version,
                      "signature": model.signature},
            "output": dest, "format": spec.format, "keys": list(spec.keys)}


def summary_lines(summary: dict) -> list[str]:
    """What the step prints at its end."""
    lines = summary["lines"]
    rate = summary["rows_per_second"]
    out = [f"scored {summary['scored']} rows, rejected {summary['rejected']} "
           f"({lines['read']} lines read: {lines['header']} header, {lines['kept']} kept, "
           f"{lines['rejected']} rejected, {lines['blank']} blank), "
           f"{rate:,.0f} rows/s" if rate else "scored 0 rows"]
    if summary["rejected_by_reason"]:
        out.append("rejected by reason: " + ", ".join(
            f"{k} {v}" for k, v in summary["rejected_by_reason"].items()))
    out.append(f"predictions: {summary['output']} ({len(summary['output_files'])} "
               f"{summary['format']} file(s), {Files.REJECTED}, {Files.PREDICT_RESULT})")
    return out
