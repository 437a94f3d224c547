"""Run history: one JSON record per local run, and what ``estflow runs`` reads from them.

Where runs live (ESTFLOW_HOME, default ``estflow_runs`` in the current directory)::

    <home>/<pipeline>/<run id>/run.json        the record (below), rewritten as the run goes
    <home>/<pipeline>/<run id>/pipeline.json   the full spec the run ran
    <home>/<pipeline>/<run id>/<step>/         spec.json (the part of the spec the step got),
                                               log.txt (when it ran), and <artifact>: a link
                                               to the artifact in the step cache
    <home>/.cache/                             the step cache (pipelines/local/step_cache.py)

``run.json`` (plain JSON, readable without estflow)::

    {"run": "20261124-064512", "pipeline": "chicago-taxi", "status": "succeeded",
     "started": "...", "finished": "...", "seconds": 1.2, "attempts": [...],
     "estflow": "0.1.0", "spec_digest": "...", "source": {"digest": ..., "objects": [...]},
     "served_before": {"version", "fingerprint"} | null,
     "steps": {"train": {"status": "reused", "key": "...", "reused_from": "<run id>",
                         "inputs": {"transformed": {"path", "fingerprint"}},
                         "outputs": {"model": {"path", "fingerprint"}},
                         "parameters": {"spec": "train/spec.json", "spec_digest": "...",
                                        "options": {...}},
                         "started": "...", "seconds": 0.0, "exit_code": 0,
                         "metrics": {"global_step": 2500, ...}}, ...},
     "metrics": {"auc": 0.95, ...}, "push": {"pushed": false, "already_served": 17, ...}}

Statuses: a run is ``running``, ``succeeded``, ``failed`` or ``interrupted`` (a ``running``
record whose process is gone reads as interrupted); a step is ``pending``, ``running``, ``ran``,
``reused``, ``failed`` or ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from estflow.dsl.contracts import PUSH
from estflow.dsl.contracts import TUNE_STUDIES
from estflow.dsl.contracts import TUNE_STUDY_LOCK
from estflow.dsl.contracts import TUNE_TRIALS
from estflow.dsl.contracts import TUNED
from estflow.dsl.contracts import Files
from estflow.pipelines.local.files import write_atomically
from estflow.pipelines.local.step_cache import StepCache

__all__ = ["home", "DEFAULT_HOME", "cache_root", "new_run_dir", "RunRecord", "all_runs", "find_run",
           "resumable_run", "effective_status", "spec_changes", "metric_changes",
           "RunNotFound", "FINISHED", "Pruned", "prune_cache"]

FINISHED = ("succeeded", "failed", "interrupted")


class RunNotFound(LookupError):
    """No run matches what was asked for; the message says what there is."""


DEFAULT_HOME = "estflow_runs"
"""The run store's name in the current directory when ``ESTFLOW_HOME`` is not set."""


def home() -> Path:
    """Where runs and the step cache live: ``$ESTFLOW_HOME``, default ``estflow_runs`` in the
    current directory (the workspace a run starts in, as a relative push path; the data
    follows the pipeline file)."""
    return Path(os.environ.get("ESTFLOW_HOME") or DEFAULT_HOME)


def cache_root() -> Path:
    return home() / ".cache"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_run_dir(pipeline: str) -> Path:
    """A fresh run directory ``<home>/<pipeline>/<timestamp>[-N]`` (its name is the run id)."""
    base = home() / pipeline
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run directory under {base} for {stamp}")


class RunRecord:
    """A run's ``run.json``: a dict, saved atomically after every change."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path, self.data = path, data

    @property
    def run_dir(self) -> Path:
        return self.path.parent

    @property
    def run_id(self) -> str:
        return self.data["run"]

    @classmethod
    def start(cls, run_dir: Path, pipeline: str, *, version: str) -> RunRecord:
        record = cls(run_dir / Files.RUN_RECORD, {
            "run": run_dir.name, "pipeline": pipeline, "status": "running",
            "started": now(), "finished": None, "seconds": None, "estflow": version,
            "attempts": [], "steps": {}, "metrics": {}, PUSH.name: None})
        record.begin_attempt(resumed=False)
        return record

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        return cls(path, json.loads(path.read_text()))

    def begin_attempt(self, *, resumed: bool) -> None:
        self.data["status"] = "running"
        self.data["finished"] = None
        self.data.setdefault("attempts", []).append(
            {"started": now(), "pid": os.getpid(), "host": socket.gethostname(),
             "resumed": resumed, "status": "running"})
        self.save()

    def step(self, name: str) -> dict:
        return self.data["steps"].setdefault(name, {"status": "pending"})

    def finish(self, status: str, seconds: float) -> None:
        self.data["status"] = status
        self.data["finished"] = now()
        attempt = self.data["attempts"][-1]
        attempt.update(status=status, finished=self.data["finished"],
                       seconds=round(seconds, 3))
        self.data["seconds"] = round(sum(a.get("seconds") or 0 for a in self.data["attempts"]),
                                     3)
        self.save()

    def save(self) -> None:
        """Write ``run.json`` (whole, or not at all: a failed write keeps the last one).

        Raises:
            OSError: it could not be written (naming it).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Not sorted: the steps stay in the order they ran. A snapshot first: steps running
        # at once change their entries while another one's thread saves.
        write_atomically(self.path, json.dumps(_snapshot(self.data), indent=2, default=str)
                         + "\n")


def _snapshot(value: Any) -> Any:
    """A copy of ``value``'s dicts and lists as they are now, though other threads change them:
    each container is copied in one step (``list(d.items())``, ``list(l)`` do not let another
    thread run), then its copy is walked."""
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in list(value.items())}
    if isinstance(value, (list, tuple)):
        return [_snapshot(v) for v in list(value)]
    return value


def effective_status(data: dict) -> str:
    """The run's status; a ``running`` record whose process (on this host) is gone is
    ``interrupted`` (killed)."""
    status = data.get("status", "unknown")
    if status != "running":
        return status
    attempt = (data.get("attempts") or [{}])[-1]
    if attempt.get("host") == socket.gethostname() and attempt.get("pid"):
        try:
            os.kill(attempt["pid"], 0)
        except ProcessLookupError:
            return "interrupted"
        except PermissionError:
            return "running"
    return status


def all_runs(pipeline: str | None = None, root: Path | None = None) -> list[RunRecord]:
    """Every run under the home (of one pipeline), oldest first."""
    root = root or home()
    pattern = f"{pipeline}/*/{Files.RUN_RECORD}" if pipeline else f"*/*/{Files.RUN_RECORD}"
    records = []
    for path in root.glob(pattern):
        try:
            records.append(RunRecord.load(path))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: (r.data.get("started") or "", r.run_id))


def _by_lineage(path: Path) -> Path | None:
    """A pushed model version directory -> the run directory its lineage names."""
    lineage = path / Files.LINEAGE
    if not lineage.is_file():
        return None
    run = json.loads(lineage.read_text()).get("run")
    return Path(run) if run and Path(run).is_dir() else None


def find_run(ref: str, root: Path | None = None) -> RunRecord:
    """A run by id (``20261124-064512``, or ``<pipeline>/<id>``), by its directory, or by a
    model version it pushed (``serving_models/chicago_taxi/1795502820``: its lineage).

    Raises:
        RunNotFound: nothing matches.
    """
    path = Path(ref)
    if path.is_dir():
        run_dir = path if (path / Files.RUN_RECORD).is_file() else _by_lineage(path)
        if run_dir is not None and (run_dir / Files.RUN_RECORD).is_file():
            return RunRecord.load(run_dir / Files.RUN_RECORD)
    matches = [r for r in all_runs(root=root)
               if ref in (r.run_id, f"{r.data.get('pipeline')}/{r.run_id}")]
    if len(matches) == 1:
        return matches[0]
    where = root or home()
    if matches:
        raise RunNotFound(f"several runs are called {ref!r} under {where}: "
                          + ", ".join(f"{r.data.get('pipeline')}/{r.run_id}" for r in matches)
                          + "; name one as PIPELINE/RUN")
    raise RunNotFound(f"no run {ref!r} under {where} (a run id, a run directory or a pushed "
                      "model version directory; `estflow runs list` shows the runs)")


def resumable_run(pipeline: str, ref: str | None) -> RunRecord:
    """The run ``estflow run --resume [RUN]`` continues: the named one, else the latest run
    of ``pipeline``; it must have failed or been interrupted.

    Raises:
        RunNotFound: there is none, or it did not stop early.
    """
    if ref:
        record = find_run(ref)
    else:
        records = all_runs(pipeline)
        if not records:
            raise RunNotFound(f"no run of pipeline {pipeline!r} under {home()} to resume")
        record = records[-1]
    status = effective_status(record.data)
    if status not in ("failed", "interrupted"):
        raise RunNotFound(f"run {record.run_id} of pipeline {record.data.get('pipeline')!r} "
                          f"is {status}: only a failed or interrupted run can be resumed "
                          "(start a new one without --resume)")
    return record


# -- comparing runs ----------------------------------------------------------------------------

def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) pairs of a spec's JSON, with ``kind`` keys folded into the path."""
    if isinstance(value, dict):
        if value.get("kind") == "dict":
            value = value.get("items", {})
        for key in sorted(value):
            if key == "kind":
                continue
            yield from _flatten(value[key], f"{prefix}.{key}" if prefix else key)
        if not value:
            yield prefix, {}
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{i}]")
        if not value:
            yield prefix, []
    else:
        yield prefix, value


def spec_changes(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    """(path, value in a, value in b) for every spec field that differs (``<absent>`` where
    one side lacks it), paths as in error messages: ``model.dnn_hidden_units[0]``."""
    left, right = dict(_flatten(a)), dict(_flatten(b))
    kinds_a = {p: v for p, v in _kinds(a)}
    kinds_b = {p: v for p, v in _kinds(b)}
    changes = [(p, kinds_a.get(p), kinds_b.get(p)) for p in sorted(set(kinds_a) | set(kinds_b))
               if kinds_a.get(p) != kinds_b.get(p)]
    replaced = [p for p, _, _ in changes]
    for path in sorted(set(left) | set(right)):
        if any(path.startswith(r + ".") or path.startswith(r + "[") for r in replaced):
            continue
        va, vb = left.get(path, "<absent>"), right.get(path, "<absent>")
        if va != vb:
            changes.append((path, va, vb))
    return sorted(changes, key=lambda c: c[0])


def _kinds(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path, declaration class) of every declaration in a spec's JSON."""
    if isinstance(value, dict):
        kind = value.get("kind")
        if kind and kind != "dict" and prefix:
            yield prefix + ".kind", kind
        items = value.get("items", {}) if kind == "dict" else value
        for key, item in items.items():
            if key != "kind":
                yield from _kinds(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _kinds(item, f"{prefix}[{i}]")


def metric_changes(a: dict, b: dict) -> list[tuple[str, Any, Any, float | None]]:
    """(metric, a, b, b - a) for every metric of either run (delta None unless both are
    numbers)."""
    out = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (va, vb))
        out.append((name, va, vb, (vb - va) if numbers else None))
    return out


@dataclasses.dataclass
class Pruned:
    """What :func:`prune_cache` removed (or would remove: ``dry_run``) and kept: lists of
    ``(step, key, bytes)``; ``busy``: entries a running step holds."""

    removed: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    kept: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    busy: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    runs_kept: int = 0


STUDY = "tune (study)"
"""The step name :func:`prune_cache` reports a tune step's search under."""


def _studies_of(records: list[RunRecord]) -> set[str]:
    """The keys of the searches the tune steps of ``records`` ran (their ``trials.json``)."""
    keys = set()
    for record in records:
        for step in (record.data.get("steps") or {}).values():
            output = (step.get("outputs") or {}).get(TUNED) or {}
            try:
                keys.add(json.loads((Path(output["path"]) / TUNE_TRIALS).read_text())["study"])
            except (KeyError, TypeError, OSError, ValueError):
                continue
    return keys


def _prune_studies(root: Path, used: set[str], before: float, dry_run: bool,
                   result: Pruned) -> None:
    """Remove the searches under ``root`` that no kept run's tune step ran and that nothing
    wrote since ``before``; a search still running (holding its lock) is kept."""
    if not root.is_dir():
        return
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        entry = (STUDY, folder.name, _size(folder))
        newest = max((p.stat().st_mtime for p in folder.rglob("*")),
                     default=folder.stat().st_mtime)
        if folder.name in used or newest >= before:
            result.kept.append(entry)
        elif dry_run:
            result.removed.append(entry)
        elif _remove_unless_locked(folder):
            result.removed.append(entry)
        else:
            result.busy.append(entry)


def _remove_unless_locked(folder: Path) -> bool:
    """Remove a study's folder while holding its lock; False when a search holds it."""
    fd = os.open(folder / TUNE_STUDY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    total = 0
    for parent, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


def prune_cache(keep: int, *, recent_seconds: float = 3600.0, dry_run: bool = False,
                root: Path | None = None) -> Pruned:
    """Remove the step cache's entries that no kept run used.

    Kept runs: the last ``keep`` runs of each pipeline, and every run still running. An entry
    is kept when a kept run ran or reused that step with that key (its completed entry, or the
    partial one a failed run left for ``--resume``), or when it was used or written in the last
    ``recent_seconds`` (a run starting now may be about to reuse it); an entry a running step
    holds is never removed. Run records stay (small JSON): ``runs list|show|diff`` still read
    them, and an older run's steps run again if it is run again.
    """
    if keep < 1:
        raise ValueError(f"keep: expected at least 1 run per pipeline, received {keep}")
    home_dir = root or home()
    cache = StepCache(home_dir / ".cache")
    by_pipeline: dict[str, list[RunRecord]] = {}
    for record in all_runs(root=home_dir):
        by_pipeline.setdefault(record.data.get("pipeline") or "", []).append(record)
    used: set[tuple[str, str]] = set()
    kept_records: list[RunRecord] = []
    result = Pruned()
    for records in by_pipeline.values():
        for index, record in enumerate(records):
            latest = index >= len(records) - keep
            if not latest and effective_status(record.data) != "running":
                continue
            result.runs_kept += 1
            kept_records.append(record)
            for name, step in (record.data.get("steps") or {}).items():
                if step.get("key"):
                    used.add((name, step["key"]))
    now_ = time.time()
    _prune_studies(home_dir / TUNE_STUDIES, _studies_of(kept_records), now_ - recent_seconds,
                   dry_run, result)
    for step, key, path in cache.entries():
        size = _size(path)
        if (step, key) in used or now_ - cache.last_used(path) < recent_seconds:
            result.kept.append((step, key, size))
        elif dry_run:
            result.removed.append((step, key, size))
        elif cache.remove(step, key, path):
            result.removed.append((step, key, size))
        else:
            result.busy.append((step, key, size))
    return result

