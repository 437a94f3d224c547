"""The search's record: a row per trial (``trials.json``) and ``report.html``, a
self-contained page: every trial in a table and inline SVG plots drawn here (the objective
over the trials with the best so far, against each hyperparameter, and, with early stopping,
each trial's objective while it trained)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from estflow.components.tune import space as _space
from estflow.components.tune import study as _study
from estflow.dsl.tune import Choice
from estflow.dsl.tune import Tune

__all__ = ["rows", "write", "html_page"]


def _when(value) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def rows(trials: Sequence[optuna.trial.FrozenTrial], tune: Tune) -> list[dict[str, Any]]:
    """One JSON row per trial that started (queued trials left out), by number."""
    out = []
    for t in sorted(trials, key=lambda t: t.number):
        if t.state == TrialState.WAITING:
            continue
        duration = (t.datetime_complete - t.datetime_start).total_seconds() \
            if t.datetime_complete and t.datetime_start else None
        interrupted = _study.INTERRUPTED in t.system_attrs
        row = {"number": t.number, "state": t.state.name,
               "assignment": {k: _space.as_json(v)
                              for k, v in _space.decoded(tune, t.params).items()},
               "value": _number(t.value) if t.state in (TrialState.COMPLETE,
                                                        TrialState.PRUNED) else None,
               "intermediate": [{"step": int(s), "value": _number(v)}
                                for s, v in sorted(t.intermediate_values.items())],
               "started": _when(t.datetime_start), "finished": _when(t.datetime_complete),
               "duration_s": None if duration is None else round(duration, 3),
               "error": t.user_attrs.get("error"), "interrupted": interrupted,
               "retried_as": t.system_attrs.get(_study.INTERRUPTED) if interrupted else None,
               "retry_of": t.user_attrs.get(_study.RETRY_OF),
               "metrics": t.user_attrs.get("metrics"), "seconds": t.user_attrs.get("seconds"),
               "model_dir": t.user_attrs.get("model_dir")}
        if interrupted:
            row["error"] = (f"interrupted: the search stopped while it ran; trial "
                            f"{row['retried_as']} trains its values again")
        out.append(row)
    return out


def write(path: Path, record: dict, tune: Tune) -> None:
    """``report.html`` for ``record`` (what ``trials.json`` holds), written at once."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(html_page(record, tune))
    temporary.replace(path)


# --- the page --------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3}tr.best td{background:#e8f5e9;font-weight:600}
tr.PRUNED td{color:#777}tr.FAIL td{color:#b00020}
.plots{display:flex;flex-wrap:wrap;gap:16px}figure{margin:0}
figcaption{font-size:13px;text-align:center}
"""
_W, _H, _PAD = 360, 220, 44
_COLOURS = {"COMPLETE": "#1565c0", "PRUNED": "#9e9e9e", "FAIL": "#b00020"}


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def html_page(record: dict, tune: Tune) -> str:
    objective, higher = record["objective"], record["higher_is_better"]
    trials = record["trials"]
    complete = [r for r in trials if r["state"] == "COMPLETE" and r["value"] is not None]
    sign = 1 if higher else -1
    best = max(complete, key=lambda r: (sign * r["value"], -r["number"]), default=None)
    paths = [p for p, _ in tune.dimensions()]
    counts = {s: sum(r["state"] == s for r in trials) for s in ("COMPLETE", "PRUNED", "FAIL")}
    head = "".join(f"<th>{html.escape(p)}</th>" for p in paths)
    body = []
    for r in trials:
        css = "best" if best is not None and r["number"] == best["number"] else r["state"]
        note = r["error"] or ""
        if r["state"] == "PRUNED" and r["intermediate"]:
            note = f"stopped at step {r['intermediate'][-1]['step']}"
        body.append(
            f"<tr class=\"{css}\"><td>{r['number']}</td><td>{r['state']}</td>"
            f"<td>{_fmt(r['value'])}</td>"
            + "".join(f"<td>{html.escape(_fmt(r['assignment'].get(p)))}</td>" for p in paths)
            + f"<td>{_fmt(r['duration_s'])}</td><td>{html.escape(note)}</td></tr>")
    summary = (f"<p>{len(trials)} trial(s): {counts['COMPLETE']} complete, {counts['PRUNED']} "
               f"pruned, {counts['FAIL']} failed. Objective <b>{html.escape(objective)}</b> "
               f"({'higher' if higher else 'lower'} is better) on the eval split; algorithm "
               f"{html.escape(tune.algorithm)}, seed {tune.seed}.</p>")
    if best is not None:
        summary += (f"<p>Best: trial {best['number']}, {html.escape(objective)}="
                    f"{_fmt(best['value'])}: <code>{html.escape(json.dumps(best['assignment']))}"
                    "</code></p>")
    plots = [_over_trials(trials, objective, higher)]
    plots += [_against(trials, path, dim, objective) for path, dim in tune.dimensions()]
    if any(r["intermediate"] for r in trials):
        plots.append(_curves(trials, objective))
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Hyperparameter search"
            f"</title><style>{_STYLE}</style></head><body><h1>Hyperparameter search</h1>"
            f"{summary}<div class=\"plots\">{''.join(plots)}</div><h2>Trials</h2>"
            f"<table id=\"trials\"><tr><th>trial</th><th>state</th><th>{html.escape(objective)}"
            f"</th>{head}<th>seconds</th><th>note</th></tr>{''.join(body)}</table>"
            "</body></html>\n")


class _Axis:
    """A linear (or log) map of data values onto pixels."""

    def __init__(self, values: Sequence[float], low: float, high: float,
                 log: bool = False) -> None:
        self.log = log and all(v > 0 for v in values)
        data = [math.log10(v) for v in values] if self.log else list(values)
        lo, hi = (min(data), max(data)) if data else (0.0, 1.0)
        if hi == lo:
            lo, hi = lo - 0.5, hi + 0.5
        self.lo, self.hi, self.low, self.high = lo, hi, low, high

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.low + (v - self.lo) / (self.hi - self.lo) * (self.high - self.low)

    def ticks(self) -> list[tuple[float, str]]:
        out = []
        for i in range(5):
            v = self.lo + (self.hi - self.lo) * i / 4
            shown = 10 ** v if self.log else v
            out.append((self.low + (self.high - self.low) * i / 4, f"{shown:.3g}"))
        return out


def _frame(title: str, x_label: str, y_label: str, x_ticks, y_ticks, marks: str) -> str:
    left, bottom, right, top = _PAD, _H - 30, _W - 10, 10
    grid = "".join(f"<line x1=\"{left}\" x2=\"{right}\" y1=\"{y:.1f}\" y2=\"{y:.1f}\" "
                   f"stroke=\"#eee\"/><text x=\"{left - 4}\" y=\"{y + 4:.1f}\" font-size=\"10\" "
                   f"text-anchor=\"end\">{html.escape(t)}</text>" for y, t in y_ticks)
    grid += "".join(f"<text x=\"{x:.1f}\" y=\"{bottom + 13}\" font-size=\"10\" "
                    f"text-anchor=\"middle\">{html.escape(t)}</text>" for x, t in x_ticks)
    return (f"<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{_W}\" "
            f"height=\"{_H}\" role=\"img\"><title>{html.escape(title)}</title>{grid}"
            f"<line x1=\"{left}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" "
            f"stroke=\"#888\"/><line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{bottom}\" "
            f"stroke=\"#888\"/>{marks}<text x=\"{(left + right) / 2}\" y=\"{_H - 2}\" "
            f"font-size=\"11\" text-anchor=\"middle\">{html.escape(x_label)}</text></svg>"
            f"<figcaption>{html.escape(title)}</figcaption></figure>")


def _y_axis(values: list[float]) -> _Axis:
    return _Axis(values, _H - 38, 18)  # inside the frame: no mark on an axis


def _point(x: float, y: float, state: str, tip: str) -> str:
    colour = _COLOURS.get(state, "#444")
    fill = colour if state == "COMPLETE" else "none"
    return (f"<circle cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"4\" fill=\"{fill}\" "
            f"stroke=\"{colour}\"><title>{html.escape(tip)}</title></circle>")


def _over_trials(trials: list[dict], objective: str, higher: bool) -> str:
    shown = [r for r in trials if r["value"] is not None]
    if not shown:
        return _frame(f"{objective} by trial (no value yet)", "trial", objective, [], [], "")
    xs = _Axis([r["number"] for r in trials], _PAD + 8, _W - 18)
    ys = _y_axis([r["value"] for r in shown])
    marks = "".join(_point(xs(r["number"]), ys(r["value"]), r["state"],
                           f"trial {r['number']}: {r['value']:.4g} ({r['state']})")
                    for r in shown)
    marks += "".join(  # failed trials: a cross on the trial axis
        f"<text x=\"{xs(r['number']):.1f}\" y=\"{_H - 33}\" font-size=\"11\" "
        f"fill=\"{_COLOURS['FAIL']}\" text-anchor=\"middle\">\u00d7<title>trial {r['number']}: "
        f"{html.escape(r['error'] or 'failed')}</title></text>"
        for r in trials if r["state"] == "FAIL")
    best, line = None, []
    for r in sorted(shown, key=lambda r: r["number"]):
        if r["state"] != "COMPLETE":
            continue
        if best is None or (r["value"] > best if higher else r["value"] < best):
            best = r["value"]
        line.append(f"{xs(r['number']):.1f},{ys(best):.1f}")
    if line:
        marks += (f"<polyline points=\"{' '.join(line)}\" fill=\"none\" stroke=\"#43a047\" "
                  "stroke-width=\"1.5\"/>")
    return _frame(f"{objective} by trial (filled: complete, hollow: pruned, \u00d7: failed; "
                  "line: best so far)",
                  "trial", objective, xs.ticks(), ys.ticks(), marks)


def _against(trials: list[dict], path: str, dim, objective: str) -> str:
    shown = [r for r in trials if r["value"] is not None and path in r["assignment"]]
    title = f"{objective} against {path}"
    if not shown:
        return _frame(title, path, objective, [], [], "")
    ys = _y_axis([r["value"] for r in shown])
    if isinstance(dim, Choice):
        labels = [json.dumps(_space.as_json(v)) for v in dim.values]
        step = (_W - 10 - _PAD) / (len(labels) + 1)
        position = {label: _PAD + step * (i + 1) for i, label in enumerate(labels)}
        x_ticks = [(x, label[:14]) for label, x in position.items()]

        def x_of(value):
            return position.get(json.dumps(value), _PAD)
    else:
        xs = _Axis([float(r["assignment"][path]) for r in shown], _PAD + 6, _W - 16,
                   log=bool(getattr(dim, "log", False)))
        x_ticks = xs.ticks()

        def x_of(value):
            return xs(float(value))
    marks = "".join(_point(x_of(r["assignment"][path]), ys(r["value"]), r["state"],
                           f"trial {r['number']}: {path}={_fmt(r['assignment'][path])}, "
                           f"{objective}={r['value']:.4g}") for r in shown)
    return _frame(title, path, objective, x_ticks, ys.ticks(), marks)


def _curves(trials: list[dict], objective: str) -> str:
    curves = [r for r in trials if any(p["value"] is not None for p in r["intermediate"])]
    points = [(p["step"], p["value"]) for r in curves for p in r["intermediate"]
              if p["value"] is not None]
    xs = _Axis([s for s, _ in points], _PAD + 8, _W - 18)
    ys = _y_axis([v for _, v in points])
    marks = ""
    for r in curves:
        colour = _COLOURS.get(r["state"], "#444")
        line = " ".join(f"{xs(p['step']):.1f},{ys(p['value']):.1f}" for p in r["intermediate"]
                        if p["value"] is not None)
        marks += (f"<polyline points=\"{line}\" fill=\"none\" stroke=\"{colour}\" "
                  f"stroke-width=\"1.2\"><title>trial {r['number']} ({r['state']})</title>"
                  "</polyline>")
    return _frame(f"{objective} while training (grey: pruned)", "step", objective,
                  xs.ticks(), ys.ticks(), marks)
