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
with their count, fraction and an example, and shows the first rejected rows (``file:line:
reason``, the earliest of each kind of reason first) read back from ``rejected.jsonl``, so the
terminal says what was wrong without opening it. When no row at all was kept, the declaration
most likely does not fit the data (a label declared ``int`` over class names): the message says
so, naming the columns whose type every row broke, and a source that allows every row to be
rejected (``max_rejected_fraction=1``) still fails: there is nothing to train on."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from estflow.components._sources.cells import WHAT
from estflow.dsl.pipeline import Pipeline

__all__ = ["IngestError", "DataRejected", "summarize", "summary_lines", "check_summary",
           "check_rows_kept", "type_error_lines", "first_rejected_lines", "FIRST_REJECTED"]

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


FIRST_REJECTED = 5
"""The most rejected rows a failure shows (``file:line: reason``)."""


def _kind(reason: str) -> str:
    """A reason without the cell it quotes: rows rejected for the same kind of reason (the same
    column's type, the same field count) share it."""
    return re.sub(r",? got .*$", "", str(reason))


def _where(path: str) -> str:
    """A rejected row's file as a reader types it: relative to the current directory when under
    it, else as recorded (absolute, or a bucket URI)."""
    if "://" in path or not os.path.isabs(path):
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def first_rejected_lines(rows: Sequence[dict], limit: int = FIRST_REJECTED) -> list[str]:
    """``file:line: reason`` of the first rejected ``rows`` (``rejected.jsonl``'s records, or
    its first part): in file and line order, the earliest row of each kind of reason first,
    then the next earliest, at most ``limit``."""
    ordered = sorted((r for r in rows if isinstance(r, dict)),
                     key=lambda r: (str(r.get("file", "")), int(r.get("line") or 0)))
    chosen, kinds = [], set()
    for row in ordered:  # one of each kind of reason, earliest first
        if len(chosen) < limit and _kind(row.get("reason", "")) not in kinds:
            kinds.add(_kind(row.get("reason", "")))
            chosen.append(row)
    for row in ordered:  # then the earliest others
        if len(chosen) >= limit:
            break
        if row not in chosen:
            chosen.append(row)
    chosen.sort(key=lambda r: (str(r.get("file", "")), int(r.get("line") or 0)))
    return [f"{_where(str(r.get('file', '?')))}:{r.get('line', '?')}: {r.get('reason', '?')}"
            for r in chosen]


def _every_row_broke(summary: dict) -> list[str]:
    """The columns whose declared type every row read broke (the likely mistake when no row
    was kept)."""
    return [name for name, entry in summary["schema"]["columns"].items()
            if entry.get("checked") and entry.get("type_errors") == entry["checked"]]


def _shown_rows(examples: Sequence[dict], summary: dict) -> str:
    if not examples:
        return ""
    lines = first_rejected_lines(examples)
    return (f"\n  first rejected rows ({len(lines)} of {summary['rejected']}):"
            + "".join(f"\n    {line}" for line in lines))


def _advice(summary: dict) -> str:
    """What to do: a new run once the data or the declaration is fixed (never a resume: it
    reads the same data with the same declaration)."""
    if summary["lines"]["kept"]:
        return ("the data is at fault: fix it at the source (or change the declaration) and "
                "start a new run; running again, or resuming, reads the same data")
    columns = _every_row_broke(summary)
    named = (f" (every row breaks the type declared for "
             f"{', '.join(repr(c) for c in columns)})" if columns else "")
    return (f"no row was kept, so the declaration most likely does not fit the data{named}: "
            "fix the pipeline file (or the data) and start a new run; running again, or "
            "resuming, reads the same data with the same declaration")


def check_summary(pipeline: Pipeline, summary: dict, rejected_path: str,
                  examples: Sequence[dict] = ()) -> None:
    """Enforce ``max_rejected_fraction`` and the schema check.

    Args:
        examples: rejected rows (``rejected.jsonl``'s records, or its first part) to show
            the first of in the message (none: none shown).

    Raises:
        IngestError: a file's lines do not add up, or no rows.
        DataRejected: too many rejected lines (pointing to ``rejected_path``, naming the
            columns with cells of another type, showing the first rejected rows), or a schema
            check violation (listing all of them).
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
            + "".join(f"\n  {line}" for line in typed) + _shown_rows(examples, summary)
            + f"\n{_advice(summary)}")
    violations = summary["schema"]["violations"]
    if violations:
        raise DataRejected("the data does not pass source.schema_check:\n" + "\n".join(
            f"  - {v}" for v in violations) + f"\n{_advice(summary)}")


def check_rows_kept(summary: dict, rejected_path: str, examples: Sequence[dict] = ()) -> None:
    """A training source must keep a row: even where ``max_rejected_fraction`` allows every row
    to be rejected, no row kept is nothing to train on.

    Raises:
        DataRejected: every data row was rejected (the first of them shown).
    """
    if summary["read"] and not summary["lines"]["kept"]:
        typed = type_error_lines(summary)
        raise DataRejected(
            f"every one of the {summary['read']} rows read was rejected: nothing to train on; "
            f"every rejected row with its file, line and reason is in {rejected_path}"
            + "".join(f"\n  {line}" for line in typed) + _shown_rows(examples, summary)
            + f"\n{_advice(summary)}")
