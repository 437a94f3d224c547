"""What ingest reports and enforces once its job has run: the summary written to
``ingest.json``, the lines printed at the end of the step, the line accounting of each file,
the rejected-lines threshold and the optional schema check.

``max_rejected_fraction`` bounds rejected *lines* among data lines (a rejected row spanning
five lines costs five; header and blank lines are not data), so the threshold measures what
was lost, whatever the parser made of it. A row of a typed source is one line.

Data that breaks ``max_rejected_fraction`` or the schema check raises :class:`DataRejected`:
the data is at fault, so the step exits with the data checks' status (4), and running again
on the same data gives the same answer. The message names, per column, the cells that were
not a value of its type (``UNEXPECTED_DATA_TYPE``, TFDV's kind: text in a numeric column),
with their count, fraction and an example."""

from __future__ import annotations

from estflow.components._sources.cells import WHAT
from estflow.dsl.pipeline import Pipeline

__all__ = ["IngestError", "DataRejected", "summarize", "summary_lines", "check_summary",
           "type_error_lines"]

_LINES = ("read", "header", "kept", "rejected", "blank")
"""The line accounting of each file: read = header + kept + rejected + blank."""


class IngestError(RuntimeError):
    """The data cannot be ingested as declared (no file, missing column, too many bad rows)."""


class DataRejected(IngestError):
    """The data broke a check the source declares (``max_rejected_fraction``, its schema
    check): a data anomaly, not a failure a rerun or a resume could get past."""


def summarize(pipeline: Pipeline, files: list[str], stats: dict, elapsed: float) -> dict:
    """The ``ingest.json`` content from the job's merged statistics."""
    names = pipeline.split.names()
    splits = {name: int(stats["splits"].get(name, 0)) for name in names}
    rejected = sum(stats["rejected_by_reason"].values())
    raw = pipeline.raw_columns()
    columns = stats["columns"]
    per_file = {path: stats["files"][path] for path in sorted(stats["files"])}
    lines = {key: sum(entry[key] for entry in per_file.values()) for key in _LINES}
    return {
        "source": type(pipeline.source).__name__,
        "source_files": files,
        "read": stats["read"],
        **splits,
        "splits": splits,
        "rejected": rejected,
        "lines": lines,
        "files": per_file,
        "rejected_by_reason": dict(sorted(stats["rejected_by_reason"].items())),
        "missing_by_column": {c.name: columns[c.name]["written_missing"] for c in raw},
        "blank_lines": stats["blank_lines"],
        "columns": {c.name: c.dtype for c in raw},
        "statistics": {c.name: _column_statistics(columns[c.name], c.dtype) for c in raw},
        "schema": _schema_report(pipeline, stats),
        "split": {"fractions": dict(pipeline.split.fractions()),
                  "eval_fraction": pipeline.split.eval_fraction, "key": pipeline.split.key},
        "elapsed_s": round(elapsed, 3),
    }


def _column_statistics(entry: dict, dtype: str) -> dict:
    out = {"count": entry["count"], "missing": entry["written_missing"]}
    if dtype != "string":
        count = entry["count"]
        out.update(min=entry["min"], max=entry["max"],
                   mean=entry["sum"] / count if count else None)
    return out


def _schema_report(pipeline: Pipeline, stats: dict) -> dict:
    check = pipeline.source.schema_check
    columns, violations = {}, []
    for column in pipeline.raw_columns():
        entry = stats["columns"][column.name]
        checked = max(entry["checked"], 1)
        missing, errors = entry["missing"] / checked, entry["type_errors"] / checked
        columns[column.name] = {"dtype": column.dtype, "checked": entry["checked"],
                                "missing_fraction": round(missing, 6),
                                "type_errors": entry["type_errors"],
                                "type_error_fraction": round(errors, 6),
                                "type_error_example": entry.get("type_error_example")}
        if check is not None and missing > check.max_missing_fraction:
            violations.append(f"column {column.name!r} is missing in {missing:.2%} of rows, "
                              f"more than max_missing_fraction={check.max_missing_fraction}")
        if check is not None and errors > check.max_type_error_fraction:
            violations.append(f"column {column.name!r}: {errors:.2%} of rows are not "
                              f"{column.dtype!r} values, more than "
                              f"max_type_error_fraction={check.max_type_error_fraction}")
    unseen = stats["unseen_columns"]
    if check is not None and unseen and not check.allow_unseen_columns:
        violations.append(f"the data has columns no declaration reads: {unseen} "
                          "(allow_unseen_columns=False)")
    return {"checked": check is not None, "columns": columns, "unseen_columns": unseen,
            "violations": violations}


def summary_lines(summary: dict) -> list[str]:
    """The statistics shown at the end of the step."""
    splits = ", ".join(f"{n} {c}" for n, c in summary["splits"].items())
    count = summary["lines"]
    lines = [f"read {summary['read']} rows: {splits}, {summary['rejected']} rejected, "
             f"{summary['blank_lines']} blank lines skipped",
             f"{count['read']} lines read: {count['header']} header, {count['kept']} kept, "
             f"{count['rejected']} rejected, {count['blank']} blank "
             f"({len(summary['files'])} file(s), each balanced)"]
    if summary["rejected_by_reason"]:
        lines.append("rejected by reason: " + ", ".join(
            f"{k} {v}" for k, v in summary["rejected_by_reason"].items()))
    for name, entry in summary["statistics"].items():
        if "mean" in entry and entry["mean"] is not None:
            lines.append(f"  {name}: count {entry['count']}, missing {entry['missing']}, "
                         f"min {entry['min']:.6g}, max {entry['max']:.6g}, "
                         f"mean {entry['mean']:.6g}")
        else:
            lines.append(f"  {name}: missing {entry['missing']}")
    return lines


def type_error_lines(summary: dict) -> list[str]:
    """Per column with cells that were not a value of its type: an ``UNEXPECTED_DATA_TYPE``
    line with their count, fraction of the rows read and the smallest of them."""
    lines = []
    for name, entry in summary["schema"]["columns"].items():
        count = entry.get("type_errors") or 0
        if count:
            example = entry.get("type_error_example")
            lines.append(f"{name}: UNEXPECTED_DATA_TYPE: {count} of {entry['checked']} rows "
                         f"({entry['type_error_fraction']:.2%}) are not {WHAT[entry['dtype']]}"
                         + (f", e.g. {example!r}" if example is not None else ""))
    return lines


_NOT_RESUMABLE = ("the data is at fault: fix it at the source (or change the declaration) and "
                  "start a new run; running again, or resuming, reads the same data")


def check_summary(pipeline: Pipeline, summary: dict, rejected_path: str) -> None:
    """Enforce ``max_rejected_fraction`` and the schema check.

    Raises:
        IngestError: a file's lines do not add up, or no rows.
        DataRejected: too many rejected lines (pointing to ``rejected_path``, naming the
            columns with cells of another type), or a schema check violation (listing all of
            them).
    """
    for path, entry in summary["files"].items():
        if entry["read"] != sum(entry[key] for key in _LINES[1:]):
            raise IngestError(  # a bug, never bad data: no line may go unaccounted for
                f"the lines of {path} do not add up: {entry['read']} read, but "
                f"{entry['header']} header + {entry['kept']} kept + {entry['rejected']} "
                f"rejected + {entry['blank']} blank")
    if summary["read"] == 0:
        raise IngestError(f"no data rows in {', '.join(summary['source_files']) or 'the source'}")
    lines = summary["lines"]
    data_lines = lines["kept"] + lines["rejected"]
    fraction = lines["rejected"] / data_lines if data_lines else 0.0
    limit = pipeline.source.max_rejected_fraction
    if fraction > limit:
        top = sorted(summary["rejected_by_reason"].items(), key=lambda kv: -kv[1])[:5]
        rows = summary["rejected"]  # a row may span several lines
        typed = type_error_lines(summary)
        raise DataRejected(
            f"{lines['rejected']} of {data_lines} data lines rejected ({fraction:.2%}; "
            f"{rows} of {summary['read']} rows rejected), more than "
            f"source.max_rejected_fraction={limit} allows; most common reasons: "
            f"{', '.join(f'{k}: {n}' for k, n in top)}; every rejected row with its file, "
            f"line and reason is in {rejected_path}"
            + "".join(f"\n  {line}" for line in typed) + f"\n{_NOT_RESUMABLE}")
    violations = summary["schema"]["violations"]
    if violations:
        raise DataRejected("the data does not pass source.schema_check:\n" + "\n".join(
            f"  - {v}" for v in violations) + f"\n{_NOT_RESUMABLE}")
