"""The evaluation report: one self-contained HTML file with inline SVG plots (no scripts, no
external assets, no plotting library), readable from the run directory or a KFP artifact.

Sections: the blessing verdict with one line per check; the head's metrics next to the
baseline's; ROC and precision-recall curves, calibration (reliability) and the confusion matrix
where the head has them; and, per slice column, a bar per value for the main metric with the
slice's example count (small slices are shaded: their metrics are noisy).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

__all__ = ["render", "line_chart", "bar_chart", "SMALL_SLICE"]

SMALL_SLICE = 30
"""Slices with fewer examples are drawn shaded."""

_W, _H = 340, 300                 # chart size
_L, _R, _T, _B = 52, 14, 30, 44   # margins: left, right, top, bottom
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1120px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
.verdict{padding:10px 14px;border-radius:6px;font-weight:600}
.ok{background:#e3f4e3;color:#17612a}.no{background:#fbe3e3;color:#8a1c1c}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}
ul.reasons{font-family:ui-monospace,monospace;font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:12px}svg{background:#fff;border:1px solid #ddd}
"""


_AVERAGE_LOSS = ("average_loss: the mean over these examples of each one's loss, as the "
                 "train step's evaluation line and TensorBoard's eval average_loss show it. "
                 "TensorBoard's eval loss is tf.estimator's mean of the eval batches' losses "
                 "(a short last batch weighs as much as a full one): another number.")
_AUCS = ("auc and auc_precision_recall are tf.estimator's (the train step's evaluation line "
         "and TensorBoard show the same numbers): areas from the counts at 200 evenly spaced "
         "probability thresholds, so approximations. auc_exact (the area under the ROC curve "
         "drawn below) and auc_pr (average precision, the area under the precision-recall "
         "step curve) are exact.")


def _weighting(weight: dict | None) -> str:
    """The report's sentence on the weight column, or "" for an unweighted model."""
    if weight is None:
        return ""
    return (f"<p>Every metric, per slice too, and the curves are weighted by the model's "
            f"weight_column {_esc(weight['column'])} as tf.estimator weighs its eval "
            f"metrics: a mean divides by the examples' total weight, "
            f"{_num(weight['sum'])} ({_esc(weight['zero'])} examples weigh 0). examples, the "
            f"slices' n and the confusion matrix count rows.</p>")


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{digits}f}"


def _scale(low: float, high: float, start: float, end: float):
    span = (high - low) or 1.0
    return lambda v: start + (v - low) / span * (end - start)


def _axes(title: str, x_label: str, y_label: str, bounds: Sequence[float]) -> list[str]:
    """Frame, ticks (5 per axis) and labels of a chart."""
    x0, x1, y0, y1 = bounds
    sx, sy = _scale(x0, x1, _L, _W - _R), _scale(y0, y1, _H - _B, _T)
    parts = [f'<text x="{_W / 2}" y="18" text-anchor="middle" font-size="13" '
             f'font-weight="600">{_esc(title)}</text>',
             f'<rect x="{_L}" y="{_T}" width="{_W - _L - _R}" height="{_H - _T - _B}" '
             'fill="none" stroke="#999"/>']
    for i in range(6):
        xv, yv = x0 + (x1 - x0) * i / 5, y0 + (y1 - y0) * i / 5
        parts.append(f'<text x="{sx(xv):.1f}" y="{_H - _B + 14}" font-size="10" '
                     f'text-anchor="middle">{xv:.3g}</text>')
        parts.append(f'<text x="{_L - 4}" y="{sy(yv) + 3:.1f}" font-size="10" '
                     f'text-anchor="end">{yv:.3g}</text>')
    parts.append(f'<text x="{(_L + _W - _R) / 2}" y="{_H - 8}" font-size="11" '
                 f'text-anchor="middle">{_esc(x_label)}</text>')
    parts.append(f'<text x="12" y="{(_T + _H - _B) / 2}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 12 {(_T + _H - _B) / 2})">{_esc(y_label)}</text>')
    return parts


def line_chart(title: str, series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *,
               x_label: str, y_label: str, bounds: Sequence[float] = (0, 1, 0, 1),
               diagonal: bool = False, markers: bool = False, legend: str = "top-left") -> str:
    """An SVG chart of ``(name, xs, ys)`` series within ``bounds`` = (x0, x1, y0, y1), the
    legend in a corner where the curves are not (``top-left``, ``bottom-left``,
    ``bottom-right``)."""
    x0, x1, y0, y1 = bounds
    sx, sy = _scale(x0, x1, _L, _W - _R), _scale(y0, y1, _H - _B, _T)
    parts = _axes(title, x_label, y_label, bounds)
    if diagonal:
        parts.append(f'<line x1="{sx(x0):.1f}" y1="{sy(y0):.1f}" x2="{sx(x1):.1f}" '
                     f'y2="{sy(y1):.1f}" stroke="#aaa" stroke-dasharray="4 3"/>')
    for i, (name, xs, ys) in enumerate(series):
        color = _COLORS[i % len(_COLORS)]
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys, strict=True))
        parts.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2" '
                     f'points="{points}"><title>{_esc(name)}</title></polyline>')
        if markers:
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>'
                      for x, y in zip(xs, ys, strict=True)]
        parts.append(_legend_entry(name, color, i, len(series), legend))
    return _svg(parts, _W, _H)


def _legend_entry(name: str, color: str, index: int, count: int, corner: str) -> str:
    top = corner.startswith("top")
    y = _T + 14 + 13 * index if top else _H - _B - 8 - 13 * (count - 1 - index)
    x, anchor = (_W - _R - 8, "end") if corner.endswith("right") else (_L + 8, "start")
    return (f'<text x="{x}" y="{y}" font-size="11" text-anchor="{anchor}" '
            f'fill="{color}">{_esc(name)}</text>')


def bar_chart(title: str, rows: Sequence[tuple[str, float | None, int]], *,
              metric: str) -> str:
    """Horizontal bars: one ``(label, value, examples)`` per row; None is drawn as n/a."""
    row_h, left, width = 22, 150, 560
    height = _T + row_h * len(rows) + 16
    values = [v for _, v, _ in rows if v is not None]
    top = max(values + [1.0]) if all(0 <= v <= 1 for v in values) else max(values + [1e-12])
    scale = _scale(0.0, top, left, width - 120)
    parts = [f'<text x="8" y="18" font-size="13" font-weight="600">{_esc(title)}</text>']
    for i, (label, value, count) in enumerate(rows):
        y = _T + i * row_h
        small = count < SMALL_SLICE
        shown = f"{_num(value)}  (n={count}{', small' if small else ''})"
        parts.append(f'<text x="{left - 6}" y="{y + 14}" font-size="11" '
                     f'text-anchor="end">{_esc(label[:24])}</text>')
        if value is not None:
            parts.append(f'<rect class="bar" x="{left}" y="{y + 3}" height="{row_h - 6}" '
                         f'width="{max(scale(value) - left, 1):.1f}" fill="{_COLORS[0]}" '
                         f'opacity="{0.35 if small else 0.9}"><title>{_esc(label)}: '
                         f'{_esc(metric)} {_esc(shown)}</title></rect>')
        x = scale(value) + 6 if value is not None else left + 6
        parts.append(f'<text x="{x:.1f}" y="{y + 14}" font-size="11">{_esc(shown)}</text>')
    return _svg(parts, width, height)


def _svg(parts: list[str], width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">' + "".join(parts) + "</svg>")


def _verdict(blessing: dict) -> str:
    ok = blessing["blessed"]
    head = ("BLESSED: the push step will publish this model" if ok else
            "NOT BLESSED: the push step will not publish this model")
    items = "".join(f"<li>{_esc(reason)}</li>" for reason in blessing["reasons"])
    return (f'<p class="verdict {"ok" if ok else "no"}">{head}</p>'
            f'<ul class="reasons">{items}</ul>')


def _metrics_table(metrics: dict, baseline: dict | None) -> str:
    base = (baseline or {}).get("metrics") or {}
    title = f"baseline v{baseline['version']}" if baseline else None
    header = "<tr><th>metric</th><th>this model</th>" + (
        f"<th>{_esc(title)}</th><th>change</th>" if title else "") + "</tr>"
    rows = []
    for name, value in metrics.items():
        cells = f"<td>{_esc(name)}</td><td>{_num(value)}</td>"
        if title:
            other = base.get(name)
            change = (value - other if isinstance(value, (int, float))
                      and isinstance(other, (int, float)) else None)
            shown = ("" if change is None else f"{change:+d}" if isinstance(change, int)
                     else f"{change:+.4f}")
            cells += f"<td>{_num(other)}</td><td>{shown}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return f"<table>{header}{''.join(rows)}</table>"


def _confusion_table(confusion: dict) -> str:
    categories, matrix = confusion["categories"], confusion["matrix"]
    header = "<tr><th>label \\ predicted</th>" + "".join(
        f"<th>{_esc(c)}</th>" for c in categories) + "</tr>"
    rows = "".join(f"<tr><td>{_esc(c)}</td>" + "".join(f"<td>{n}</td>" for n in row) + "</tr>"
                   for c, row in zip(categories, matrix, strict=True))
    return f"<table>{header}{rows}</table>"


def _series(plots: dict, key: str, x: str, y: str) -> list[tuple[str, list, list]]:
    """The candidate's curve ``key`` and, when the baseline was scored, the baseline's."""
    out = [("this model", plots[key][x], plots[key][y])]
    base = plots.get("baseline", {}).get(key)
    if base:
        out.append(("baseline", base[x], base[y]))
    return out


def _calibration(plots: dict, head: str) -> str:
    bins = plots["calibration"]
    xs = [b["mean_prediction"] for b in bins]
    ys = [b["mean_label"] for b in bins]
    if head == "binary":
        bounds: Sequence[float] = (0, 1, 0, 1)
    else:
        low, high = min(xs + ys), max(xs + ys)
        bounds = (low, high, low, high)
    return line_chart("Calibration (reliability)", [("this model", xs, ys)],
                      x_label="mean prediction per bin", y_label="mean label",
                      bounds=bounds, diagonal=True, markers=True)


def _curve_plots(plots: dict, head: str) -> list[str]:
    charts = []
    if "roc" in plots:
        charts.append(line_chart("ROC curve", _series(plots, "roc", "fpr", "tpr"),
                                 x_label="false positive rate", y_label="true positive rate",
                                 diagonal=True, legend="bottom-right"))
    if "pr" in plots:
        charts.append(line_chart("Precision-recall curve",
                                 _series(plots, "pr", "recall", "precision"),
                                 x_label="recall", y_label="precision",
                                 legend="bottom-left"))
    if plots.get("calibration"):
        charts.append(_calibration(plots, head))
    return charts


def _slice_section(slices: dict, metric: str) -> str:
    parts = []
    for column, values in slices.items():
        rows = sorted(((value, m.get(metric), m.get("examples", 0)) for value, m in
                       values.items()), key=lambda r: (-r[2], r[0]))
        parts.append(bar_chart(f"{metric} by {column}", rows, metric=metric))
    return "".join(f"<div>{p}</div>" for p in parts) or "<p>No slices declared "\
        "(EvalSpec.slices).</p>"


def render(*, title: str, evaluation: dict, blessing: dict, plots: dict,
           main_metric: str) -> str:
    """The report's HTML.

    Args:
        evaluation: the ``metrics.json`` document (head, metrics, slices, and ``weight`` for
            a weighted model).
        blessing: the ``blessing.json`` document.
        plots: ``roc``, ``pr``, ``calibration``, ``confusion_matrix`` (each optional).
        main_metric: the metric charted per slice.
    """
    head = evaluation["head"]
    sections = [f"<h1>Evaluation: {_esc(title)}</h1>",
                f"<p>{_esc(head)} head, {evaluation['metrics'].get('examples')} eval examples, "
                f"scored through {_esc(evaluation.get('model', ''))}</p>",
                "<h2>Blessing</h2>", _verdict(blessing),
                "<h2>Metrics</h2>", _metrics_table(evaluation["metrics"], blessing["baseline"])]
    weighting = _weighting(evaluation.get("weight"))
    if weighting:
        sections.append(weighting)
    if "average_loss" in evaluation["metrics"]:
        sections.append(f"<p>{_AVERAGE_LOSS}</p>")
    if "auc_precision_recall" in evaluation["metrics"]:
        sections.append(f"<p>{_AUCS}</p>")
    charts = _curve_plots(plots, head)
    if charts:
        sections += ["<h2>Curves</h2>", '<div class="plots">' + "".join(charts) + "</div>"]
    if "confusion_matrix" in plots:
        sections += ["<h2>Confusion matrix</h2>", _confusion_table(plots["confusion_matrix"])]
    sections += [f"<h2>Slices ({_esc(main_metric)})</h2>",
                 _slice_section(evaluation.get("slices", {}), main_metric)]
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)} evaluation</title><style>{_CSS}</style></head><body>"
            + "\n".join(sections) + "</body></html>\n")
