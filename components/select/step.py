"""Pick the best blessed candidate (:class:`~estflow.dsl.models.Candidates`).

Each candidate's evaluation (``metrics.json``, ``blessing.json``) is read; of those blessed,
the one with the best ``best_by`` wins (ties: the first by name). Its model and evaluation
are copied to the step's outputs (hard links where the file system allows), so push, batch
scoring and the user's steps read them as they read a single model's. The evaluation's
``blessing.json`` says which candidate it is and why the others lost; ``candidates.json``
holds every candidate's metrics and blessing; ``report.html`` opens with the comparison. No
candidate blessed: the best one by the metric is copied all the same (its report is worth
reading) and ``blessed`` is false, with each candidate's reasons: nothing is pushed.
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from estflow.components._runtime import entry
from estflow.dsl.contracts import CANDIDATES_FILE
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "pick"]


def pick(rows: list[dict], higher_is_better: bool) -> dict | None:
    """The winning row of ``rows`` (name, value, blessed), or None when none is blessed with
    a number: the best value, ties to the first by name."""
    ranked = [r for r in sorted(rows, key=lambda r: r["name"])
              if r["blessed"] and isinstance(r["value"], (int, float))
              and math.isfinite(r["value"])]
    if not ranked:
        return None
    sign = 1 if higher_is_better else -1
    return max(ranked, key=lambda r: (sign * r["value"], -ranked.index(r)))


def run(pipeline: Pipeline, candidates: Mapping[str, tuple[str, str]], model_out: str,
        evaluation_out: str, progress: entry.Progress | None = None, *,
        fingerprints: Mapping[str, str] | None = None) -> dict:
    """Select among ``candidates`` (name -> (model dir, evaluation dir)); returns
    ``candidates.json``'s content. ``fingerprints``: each candidate's trained model's
    fingerprint; the picked one's is recorded as ``fingerprint`` (what push records as the
    pushed model's, so a rerun picking the same trained model pushes nothing)."""
    progress = progress or entry.Progress("select")
    spec = pipeline.model
    metric, higher = spec.best_by, spec.higher_is_better
    rows = []
    for name in sorted(candidates):
        evaluation = Path(candidates[name][1])
        metrics = json.loads((evaluation / Files.METRICS).read_text())["metrics"]
        blessing = json.loads((evaluation / Files.BLESSING).read_text())
        rows.append({"name": name, "value": metrics.get(metric),
                     "blessed": bool(blessing.get("blessed")),
                     "reasons": list(blessing.get("reasons", [])), "metrics": metrics})
        progress(f"{name}: {metric}={_shown(metrics.get(metric))}, "
                 f"{'blessed' if blessing.get('blessed') else 'not blessed'}")
    winner = pick(rows, higher)
    shown = winner or _best_any(rows, higher)
    _copy(Path(candidates[shown["name"]][0]), Path(model_out))
    _copy(Path(candidates[shown["name"]][1]), Path(evaluation_out))
    out = Path(evaluation_out)
    blessing = json.loads((out / Files.BLESSING).read_text())
    others = [r for r in rows if r is not shown]
    if winner is not None:
        why = (f"candidate {winner['name']!r} picked: {metric}={_shown(winner['value'])}, "
               f"{'highest' if higher else 'lowest'} of the blessed candidates"
               + "".join(f"; {r['name']!r}: {metric}={_shown(r['value'])}"
                         f"{'' if r['blessed'] else ' (not blessed)'}" for r in others))
        blessing.update(candidate=winner["name"], reasons=[*blessing.get("reasons", []), why])
        progress(f"picked {winner['name']} by {metric}")
    else:
        # a blessed candidate loses here only for want of a number (a NaN AUC: one class in
        # the eval split): say so, not that it was not blessed
        what = (f"no blessed candidate has a {metric} to compare"
                if any(r["blessed"] for r in rows) else "no candidate blessed")
        reasons = [f"{what}: {r['name']!r}: " + (
            f"blessed, but {metric}={_shown(r['value'])} is not a number to compare"
            if r["blessed"] else "; ".join(r["reasons"] or [f"{metric}={_shown(r['value'])}"]))
            for r in rows]
        blessing.update(blessed=False, candidate=None, reasons=reasons)
        progress(f"{what}; nothing to push ({shown['name']}'s model and "
                 "evaluation kept for the report)")
    summary = {"best_by": metric, "higher_is_better": higher,
               "picked": winner and winner["name"], "candidates": rows,
               "fingerprint": (fingerprints or {}).get(winner["name"]) if winner else None}
    _write(out / Files.BLESSING, blessing)
    _write(out / CANDIDATES_FILE, summary)
    report = out / Files.REPORT
    if report.is_file():
        text = report.read_text()
        at = text.find("<h1")
        if at < 0:  # no heading: first thing in the body, or in the file
            body = text.find("<body>")
            at = body + len("<body>") if body >= 0 else 0
        report.unlink()  # a hard link to the candidate's file: never write through
        report.write_text(text[:at] + _table(summary) + text[at:])
    return summary


def _best_any(rows: list[dict], higher: bool) -> dict:
    numbers = [r for r in rows if isinstance(r["value"], (int, float))
               and math.isfinite(r["value"])]
    if not numbers:
        return rows[0]
    return (max if higher else min)(numbers, key=lambda r: r["value"])


def _copy(source: Path, target: Path) -> None:
    """``source``'s tree into ``target`` (created), files hard-linked where possible: the
    candidates' outputs are never written again."""
    def link(src: str, dst: str) -> None:
        # A file an earlier attempt left (``estflow run --resume`` continues in the outputs a
        # stopped step left) may be a hard link to a candidate's file: copying onto it would
        # fail (the same file) or write through it. Replace it instead.
        if os.path.lexists(dst):
            os.unlink(dst)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True, symlinks=True)


def _write(path: Path, value: dict) -> None:
    path.unlink(missing_ok=True)  # a hard link to the candidate's file: never write through
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def _shown(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else str(value)


def _table(summary: dict) -> str:
    metric = summary["best_by"]
    names = sorted({k for r in summary["candidates"] for k in r["metrics"]})
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    picked = ' class="picked"'
    body = "".join(
        f"<tr{picked if r['name'] == summary['picked'] else ''}>"
        f"<td>{html.escape(r['name'])}{' (picked)' if r['name'] == summary['picked'] else ''}"
        f"</td><td>{'yes' if r['blessed'] else 'no'}</td>"
        + "".join(f"<td>{_shown(r['metrics'].get(n))}</td>" for n in names) + "</tr>"
        for r in summary["candidates"])
    order = "higher" if summary["higher_is_better"] else "lower"
    return (f"<h1>Candidates</h1><p>Picked by <b>{html.escape(metric)}</b> ({order} is "
            f"better) among the blessed candidates: <b>{html.escape(str(summary['picked']))}"
            f"</b>. The report below is the picked candidate's.</p>"
            f"<table id=\"candidates\"><tr><th>candidate</th><th>blessed</th>{head}</tr>"
            f"{body}</table>")
