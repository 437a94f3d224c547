"""The data report: every anomaly (column, kind, observed vs allowed), then the statistics of
this run's data next to those of the served model's training data, column by column.

:func:`side_by_side` is the statistics table alone, which the evaluation report shows too.
"""

from __future__ import annotations

import html

from estflow.components._statistics.statistics import ALL_EXAMPLES
from estflow.components._statistics.statistics import span_dataset

__all__ = ["line", "render", "side_by_side"]


def _value(value) -> str:
    """An observed or allowed value in the report: a float in at most 6 significant digits
    (``0.0`` is ``0``), anything else as it is."""
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:.6g}"
    return str(value)


def line(row: dict) -> str:
    """One anomaly as one line: ``column: KIND (split): observed X, allowed Y``."""
    column = row["column"] or "(all rows)"
    return (f"{column}: {row['kind']} ({row['split']}): observed {row['observed']}, allowed "
            f"{row['allowed']}" + (f" - {row['description']}" if row.get("description")
                                    else ""))


def _esc(value) -> str:
    return html.escape(str(value))


# The anomaly tables' columns: (heading, the row's cell). Only an empty column name means the
# whole split ("(all rows)"); the description carries the anomaly's example values.
_ANOMALY_COLUMNS = (
    ("column", lambda r: r["column"] or "(all rows)"),
    ("kind", lambda r: r["kind"]),
    ("split", lambda r: r["split"]),
    ("observed", lambda r: _value(r["observed"])),
    ("allowed", lambda r: _value(r["allowed"])),
    ("what it means", lambda r: r.get("description") or ""),
)


def _anomaly_table(rows: list[dict], title: str, kind: str) -> str:
    if not rows:
        return f"<h2>{_esc(title)}</h2><p>none</p>"
    head = "".join(f"<th>{h}</th>" for h, _ in _ANOMALY_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{_esc(cell(r))}</td>" for _, cell in _ANOMALY_COLUMNS)
                   + "</tr>" for r in rows)
    return (f"<h2>{_esc(title)}</h2><table class='anomalies {kind}'><tr>{head}</tr>{body}"
            "</table>")


# Small and inline (the report is one file, opened from disk or a KFP artifact): readable
# tables, the verdict coloured.
_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em auto;
max-width:75em;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.3em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
tr:first-child th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
td:nth-child(4),td:nth-child(5){font-family:ui-monospace,Menlo,Consolas,monospace;
white-space:nowrap}
.blocking td:first-child{border-left:4px solid #c62828}
.warnings td:first-child{border-left:4px solid #ef8f00}
.verdict{font-weight:bold;padding:.4em .7em;border-radius:4px;display:inline-block}
.passed{background:#e8f5e9;color:#1b5e20}.stopped{background:#ffebee;color:#b71c1c}
.meta{color:#555}
"""


def _column_summary(feature) -> str:
    """A column's statistics in a few words: missing, then mean/std/min/max or top values."""
    if feature.HasField("num_stats"):
        s = feature.num_stats
        return (f"missing {s.common_stats.num_missing}; mean {s.mean:.4g}, std {s.std_dev:.4g}, "
                f"min {s.min:.4g}, max {s.max:.4g}")
    s = feature.string_stats
    top = ", ".join(f"{v.value} {v.frequency:g}" for v in list(s.top_values)[:3])
    return f"missing {s.common_stats.num_missing}; {s.unique} unique; top: {top}"


def _dataset(stats, split: str):
    if stats is None:
        return None
    if split == ALL_EXAMPLES:  # statistics written without it: their splits merged
        return span_dataset(stats)
    return next((d for d in stats.datasets if d.name == split), None)


def side_by_side(current, served, split: str = "train",
                 titles: tuple[str, str] = ("this run", "served model's training data")) -> str:
    """An HTML table: per column, its statistics in ``current`` and in ``served`` (the
    ``split`` dataset of each, :data:`~.statistics.ALL_EXAMPLES`: the whole span, what the
    data checks use; ``served`` None: that side is empty)."""
    mine, theirs = _dataset(current, split), _dataset(served, split)
    if mine is None:
        return ""

    def by_name(dataset):
        return {(f.path.step[0] if f.path.step else f.name): f
                for f in (dataset.features if dataset is not None else ())}
    left, right = by_name(mine), by_name(theirs)
    rows = [f"<tr><th>examples</th><td>{mine.num_examples}</td><td>"
            f"{theirs.num_examples if theirs is not None else '-'}</td></tr>"]
    for name in dict.fromkeys([*left, *right]):
        cells = [_esc(_column_summary(side[name])) if name in side else "-"
                 for side in (left, right)]
        rows.append(f"<tr><th>{_esc(name)}</th><td>{cells[0]}</td><td>{cells[1]}</td></tr>")
    what = "the whole span: All Examples" if split == ALL_EXAMPLES else f"{split} split"
    return (f"<h2>Data statistics ({_esc(what)})</h2><table><tr><th>column</th>"
            f"<th>{_esc(titles[0])}</th><th>{_esc(titles[1])}</th></tr>{''.join(rows)}</table>")


def _over(summary: dict) -> str:
    """What the checks were computed over: the span, and its splits' rows."""
    examples = dict(summary.get("examples") or {})
    whole = examples.pop(ALL_EXAMPLES, None)
    splits = ", ".join(f"{name} {rows}" for name, rows in examples.items())
    if whole is None:
        return f"every split together ({splits})"
    return f"the whole span, {ALL_EXAMPLES}: {whole} rows, every split together ({splits})"


def render(name: str, summary: dict, current, served) -> str:
    """The whole self-contained HTML report of one validate step."""
    verdict = ("PASSED: no blocking anomaly" if summary["passed"] else
               f"STOPPED before training: {len(summary['anomalies'])} blocking anomalies")
    outcome = "passed" if summary["passed"] else "stopped"
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Data report: "
            f"{_esc(name)}</title><style>{_STYLE.strip()}</style></head><body>"
            f"<h1>Data report: {_esc(name)}</h1>"
            f"<p class='verdict {outcome}'>{_esc(verdict)}</p>"
            f"<p class='meta'>schema: {_esc(summary['schema'])}<br>drift baseline: "
            f"{_esc(summary['baseline'] or 'none')}<br>checked over: {_esc(_over(summary))}</p>"
            + _anomaly_table(summary["anomalies"], "Blocking anomalies", "blocking")
            + _anomaly_table(summary["warnings"], "Warnings (warn_only)", "warnings")
            + side_by_side(current, served, ALL_EXAMPLES) + "</body></html>")
