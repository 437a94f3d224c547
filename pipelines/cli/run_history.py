"""``estflow runs list|show|diff|prune``: the local run history (:mod:`estflow.pipelines.local.runs`),
read from the runs' ``run.json`` files under ``$ESTFLOW_HOME`` (default ``./estflow_runs``), and
the pruning of the step cache they use."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from estflow.dsl.contracts import INGEST
from estflow.dsl.contracts import TRAIN
from estflow.dsl.contracts import TRANSFORM
from estflow.dsl.contracts import TUNE
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import TUNED
from estflow.dsl.contracts import Files
from estflow.pipelines.cli import run_diff
from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import positive_int
from estflow.pipelines.local import runs

__all__ = ["add_commands"]

# The metrics `runs list` shows, the first three a run has.
_KEY_METRICS = ("auc", "accuracy", "loss", "average_loss", "rmse", "mae", "auc_pr")
# A step's exit status when a data check stopped the run (validate's blocking anomaly, ingest's
# rejected rows, the fingerprint step's missing span): no failure, the data's verdict.
_EXIT_DATA = 4
_STOPPED = {"fingerprint": "span missing"}  # else: data anomaly


def _stop(data: dict) -> tuple[str, str] | None:
    """(step, what) when a data check stopped the run: the step that exited 4."""
    if runs.effective_status(data) != "failed":
        return None
    for name, step in (data.get("steps") or {}).items():
        if step.get("status") == "failed" and step.get("exit_code") == _EXIT_DATA:
            return name, _STOPPED.get(name, "data anomaly")
    return None


def _status(data: dict) -> str:
    """The run's status as the list and show say it: ``stopped: data anomaly`` for a run a
    data check stopped (exit status 4), which the record calls failed."""
    stop = _stop(data)
    return f"stopped: {stop[1]}" if stop else runs.effective_status(data)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``runs``."""
    cmd = commands.add_parser(
        "runs", help="list, show and compare local runs (their records in estflow_runs/)",
        description="The history of `estflow run`: each run's record (run.json under "
        "$ESTFLOW_HOME/<pipeline>/<run id>/, default ./estflow_runs) holds its steps (inputs "
        "and their fingerprints, outputs, parameters, timings, exit status, metrics) and what "
        "it pushed.")
    sub = cmd.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="the runs, oldest first, with status and key metrics")
    listing.add_argument("pipeline", nargs="?", metavar="PIPELINE_NAME",
                         help="only the runs of this pipeline (its name, e.g. chicago-taxi)")
    listing.add_argument("--json", action="store_true", help="the records, as JSON")
    listing.set_defaults(handler=_list)
    show = sub.add_parser("show", help="one run's steps, and where the model it pushed came "
                          "from")
    show.add_argument("run", metavar="RUN", help="a run id, a run directory, or a pushed "
                      "model version directory (its lineage names the run)")
    show.add_argument("--json", action="store_true", help="the record, as JSON")
    show.set_defaults(handler=_show)
    diff = sub.add_parser("diff", help="what changed between two runs: spec, functions, "
                          "data, estflow code, which steps ran again and why, metrics")
    diff.add_argument("first", metavar="RUN_A")
    diff.add_argument("second", metavar="RUN_B")
    diff.set_defaults(handler=_diff)
    prune = sub.add_parser(
        "prune", help="remove step cache entries and searches that no recent run used",
        description="Remove the step cache entries ($ESTFLOW_HOME/.cache) that none of the "
        "last --keep runs of each pipeline (nor a run still running) ran or reused, and that "
        "were not used in the last --recent-hours; likewise the tune step's searches "
        "($ESTFLOW_HOME/.tune-studies; one a search is running is kept). Run records are "
        "kept; a pruned step of an older run runs again if that run is run again. For a scheduled local retraining "
        "job, run it after each run.")
    prune.add_argument("--keep", type=positive_int, default=5, metavar="N",
                       help="runs of each pipeline whose steps stay cached (default 5)")
    prune.add_argument("--recent-hours", type=float, default=1.0, metavar="H",
                       help="also keep entries used in the last H hours (default 1)")
    prune.add_argument("--dry-run", action="store_true",
                       help="say what would be removed; remove nothing")
    prune.set_defaults(handler=_prune)


def _bytes(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def _prune(args: argparse.Namespace) -> int:
    if args.recent_hours < 0:
        raise UsageError(f"--recent-hours: expected 0 or more hours, received "
                         f"{args.recent_hours}")
    pruned = runs.prune_cache(args.keep, recent_seconds=args.recent_hours * 3600,
                              dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for step, key, size in pruned.removed:
        print(f"  {verb} {step} {key[:12]} ({_bytes(size)})")
    for step, key, size in pruned.busy:
        print(f"  kept {step} {key[:12]} ({_bytes(size)}): a running run uses it or will "
              "reuse it")
    total = sum(size for *_, size in pruned.removed)
    kept = sum(size for *_, size in pruned.kept + pruned.busy)
    print(f"estflow runs prune: {verb} {len(pruned.removed)} cache entries and searches "
          f"({_bytes(total)}); kept {len(pruned.kept) + len(pruned.busy)} ({_bytes(kept)}), "
          f"those of the last {args.keep} run(s) of each pipeline ({pruned.runs_kept} runs "
          f"in all) or used in the last {args.recent_hours:g} hour(s), under "
          f"{runs.cache_root()}")
    return 0


def _find(ref: str) -> runs.RunRecord:
    try:
        return runs.find_run(ref)
    except runs.RunNotFound as err:
        raise UsageError(str(err)) from None


def _pushed(data: dict) -> str:
    push = data.get("push")
    if not push:
        return "-"
    if push.get("already_served"):
        return f"={push.get('version')} (already served)"
    if push.get("pushed", True):
        return str(push.get("version"))
    return "not blessed"


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _tuned(data: dict) -> None:
    """The tune step's best trial (its ``best.json``): the hyperparameters the final train
    used, and the search's counts."""
    step = data.get("steps", {}).get(TUNE.name) or {}
    output = (step.get("outputs") or {}).get(TUNED) or {}
    try:
        best = json.loads((Path(output["path"]) / TUNE_BEST).read_text())
    except (KeyError, OSError, ValueError):
        return
    metrics = step.get("metrics") or {}
    counts = ", ".join(f"{metrics[k]} {k}" for k in ("complete", "pruned", "failed")
                       if isinstance(metrics.get(k), int) and metrics[k])
    print(f"  tuned: trial {best.get('trial')} of the search ({counts or 'no trial counts'}) "
          f"had the best {best.get('objective')}={_short(best.get('value'))}; the final train "
          "used " + ", ".join(f"{k}={json.dumps(v)}" for k, v in best["assignment"].items()))


def _seconds(value) -> str:
    return f"{value:.1f}s" if isinstance(value, (int, float)) else "-"


def _list(args: argparse.Namespace) -> int:
    records = runs.all_runs(args.pipeline)
    if args.json:
        print(json.dumps([dict(r.data, status=runs.effective_status(r.data), path=str(r.path),
                               **({"stopped": stop[1]} if (stop := _stop(r.data)) else {}))
                          for r in records], indent=2, sort_keys=True))
        return 0
    if not records:
        print(f"no runs under {runs.home()}" + (f" of pipeline {args.pipeline!r}"
                                                if args.pipeline else ""))
        return 0
    rows = [("RUN", "PIPELINE", "STATUS", "WALL", "STEPS RAN/REUSED", "METRICS", "PUSHED")]
    for record in records:
        data = record.data
        steps = data.get("steps", {}).values()
        ran = sum(s.get("status") == "ran" for s in steps)
        reused = sum(s.get("status") == "reused" for s in steps)
        metrics = data.get("metrics") or {}
        shown = [f"{k}={_short(metrics[k])}" for k in _KEY_METRICS if k in metrics][:3]
        rows.append((record.run_id, str(data.get("pipeline")), _status(data),
                     _seconds(data.get("seconds")),
                     f"{ran}/{reused}", " ".join(shown) or "-", _pushed(data)))
    _table(rows)
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())


def _show(args: argparse.Namespace) -> int:
    record = _find(args.run)
    data = record.data
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return 0
    print(f"run {record.run_id} of pipeline {data.get('pipeline')!r}: "
          f"{_status(data)}, started {data.get('started')}, "
          f"{_seconds(data.get('seconds'))}; {record.run_dir}")
    attempts = data.get("attempts") or []
    if len(attempts) > 1:
        print(f"  {len(attempts)} attempts: "
              + ", ".join(f"{a.get('status')}" + (" (resumed)" if a.get("resumed") else "")
                          for a in attempts))
    source = data.get("source") or {}
    if source:
        what = (f"volatile: {source['volatile']}" if source.get("volatile") else
                f"{len(source.get('objects') or [])} object(s) of {source.get('pattern')}")
        print(f"  data: {source.get('kind')} {what}, fingerprint "
              f"{str(source.get('digest'))[:12]}")
    rows = [("STEP", "STATUS", "SECONDS", "KEY", "FROM RUN", "METRICS")]
    for name, step in data.get("steps", {}).items():
        metrics = step.get("metrics") or {}
        shown = [f"{k}={_short(v)}" for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)][:4]
        rows.append((name, str(step.get("status")), _seconds(step.get("seconds")),
                     str(step.get("key") or "-")[:12],
                     str(step.get("reused_from") or ("this" if step.get("status") == "ran"
                                                     else "-")),
                     " ".join(shown) or "-"))
    _table(rows)
    _tuned(data)
    for name, step in data.get("steps", {}).items():
        if step.get("status") == "failed" and step.get("exit_code") == _EXIT_DATA:
            print(f"  {name} stopped the run: {_STOPPED.get(name, 'data anomaly')} (exit code "
                  f"{_EXIT_DATA}); log: {step.get('log')}")
        elif step.get("status") == "failed":
            print(f"  {name} failed (exit code {step.get('exit_code')}); log: {step.get('log')}")
    _lineage(record)
    return 0


def _lineage(record: runs.RunRecord) -> None:
    """Where the run's model (pushed, or already served) came from."""
    data = record.data
    push = data.get("push") or {}
    if not push or not (push.get("pushed", True) or push.get("already_served")):
        if push:
            print(f"  not pushed: {'; '.join(push.get('reasons') or [])}")
        return
    steps = data.get("steps", {})
    # the step that trained the pushed model: the one writing an artifact with its fingerprint
    # (a candidate's train_<name> with Candidates), else train
    name = next((n for n, s in steps.items() for a in (s.get("outputs") or {}).values()
                 if push.get("fingerprint") and a.get("fingerprint") == push["fingerprint"]),
                TRAIN.name)
    train = steps.get(name, {})
    by = "" if name == TRAIN.name else f" by {name}"
    made = (f"trained in this run{by}" if train.get("status") == "ran" else
            f"trained in run {train.get('reused_from')}{by} (reused here)")
    verb = "already served as" if push.get("already_served") else "pushed as"
    print(f"  model: {verb} {push.get('model_name')} version {push.get('version')} at "
          f"{push.get('path')}")
    fingerprint = (train.get("outputs") or {}).get("model", {}).get("fingerprint")
    print(f"    fingerprint {str(fingerprint or push.get('fingerprint'))[:12]}, {made}")
    transform = data.get("steps", {}).get(TRANSFORM.name, {})
    source = data.get("source") or {}
    print(f"    from data {str(source.get('digest'))[:12]} (ingest "
          f"{data.get('steps', {}).get(INGEST.name, {}).get('key', '-')[:12]}, transform "
          f"{str(transform.get('key'))[:12]}) and spec {record.run_dir / Files.SPEC}")


def _diff(args: argparse.Namespace) -> int:
    a, b = _find(args.first), _find(args.second)
    fa, fb = run_diff.fingerprints_of(a), run_diff.fingerprints_of(b)
    print(f"runs {a.run_id} -> {b.run_id}")
    spec_a, spec_b = (_spec(r) for r in (a, b))
    changes = runs.spec_changes(spec_a, spec_b)
    print(f"spec: {len(changes)} change(s)")
    where = {**(fa.get("code") or {}), **(fb.get("code") or {})}
    for path, before, after in changes:
        note = ("  (where it is: in no step's key)"
                if run_diff.is_placement(path, where, fb.get("source") or {}) else "")
        print(f"  {path}: {json.dumps(before)} -> {json.dumps(after)}{note}")
    functions = run_diff.function_changes(a, b, fa, fb)
    print("functions: " + ("same" if not functions else f"{len(functions)} changed"))
    for path, change in functions.items():
        print(f"  {path} {change}")
    source_a, source_b = ((r.data.get("source") or {}).get("digest") for r in (a, b))
    print("data: " + ("same" if source_a == source_b else
                      f"changed ({str(source_a)[:12]} -> {str(source_b)[:12]})"))
    print(run_diff.estflow_code_line(a, b))
    print("steps:")
    for line in run_diff.step_lines(a, b, fa, fb, changes):
        print(line)
    print("metrics:")
    for name, before, after, delta in runs.metric_changes(a.data.get("metrics") or {},
                                                          b.data.get("metrics") or {}):
        change = f" ({delta:+.4f})" if delta is not None and delta else ""
        print(f"  {name}: {_short(before)} -> {_short(after)}{change}")
    print(f"pushed: {_pushed(a.data)} -> {_pushed(b.data)}")
    return 0


def _spec(record: runs.RunRecord) -> dict:
    path = Path(record.run_dir) / Files.SPEC
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
