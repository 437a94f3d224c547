"""The whole ``estflow run`` of the taxi example on N rows (``bench_preprocess.py --taxi-run N
...``): every step as a user runs it, data to pushed model.

For each N, in a scratch folder: the example's CSV repeated to N rows, a copy of
``pipelines/examples/taxi.py`` next to a ``data/chicago_taxi/data.csv`` link to it (the
example's relative data path, unchanged, reads the big file), and ``ESTFLOW_HOME`` in the
folder (the bench never touches the user's runs, step cache or served models; the push target,
relative, lands there too). Then ``estflow run taxi.py`` (this venv's script) to the end.

Per step, from the run's record (``run.json``): its wall; rows/s for the data steps (N / wall
for fingerprint, which hashes the source, ingest and transform; the eval split's rows from
``ingest.json`` / wall for evaluate); and
its peak RSS: every 0.2 s the processes below this one are read from /proc
(``bench_runners.descendants``) and each is put to a step by its command line (``-m
estflow.components.<step>``, also when a prestarted process waits to become that step; a
child goes with its parent), the peak of each step's sum kept. Plus the longest silence on the
run's output and the whole run's wall and peak (every process of the run together).

After the table, with several sizes, issue 26's targets: each data step's peak RSS at the
largest size within +10% of the smallest's, its rows/s at the largest no lower.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_preprocess import REPO
from bench_preprocess import scale_checks
from bench_preprocess import write_taxi_csv
from bench_runners import SAMPLE_S
from bench_runners import descendants

from estflow.dsl import contracts

TAXI = REPO / "pipelines" / "examples" / "taxi.py"
ESTFLOW = Path(sys.executable).parent / "estflow"
RUNNER = "(runner)"  # the estflow run process itself
WHOLE = "(whole run)"  # the table's last row per size: the run's wall and all its processes
MODULES = {step.module: step.name for step in (*contracts.STEPS, contracts.FINGERPRINT)}
DATA_STEPS = ("ingest", "transform")  # the targets' steps: their rows/s is N / wall


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:  # it ended meanwhile
        return []


class StepRss(threading.Thread):
    """While it runs: per step, the largest sum of the RSS of its processes (bytes), and of
    every process below this one (``WHOLE``)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[str, int] = {}
        self._steps: dict[int, str] = {}  # pid -> step, once its command line names one
        self._done = threading.Event()

    def _step_of(self, pid: int, tree: dict[int, tuple[int, int]]) -> str:
        while pid in tree and pid not in self._steps:
            step = next((MODULES[a] for a in _cmdline(pid) if a in MODULES), None)
            if step is not None:  # not cached otherwise: a fork names its step once it execs
                self._steps[pid] = step
                break
            pid = tree[pid][0]
        return self._steps.get(pid, RUNNER)

    def sample(self) -> None:
        tree = descendants(os.getpid())
        sums: dict[str, int] = {WHOLE: sum(rss for _, rss in tree.values())}
        for pid, (_, rss) in tree.items():
            step = self._step_of(pid, tree)
            sums[step] = sums.get(step, 0) + rss
        for step, total in sums.items():
            self.peaks[step] = max(self.peaks.get(step, 0), total)

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self.sample()

    def finish(self) -> dict[str, int]:
        self._done.set()
        self.join()
        return self.peaks


def prepare(rows: int, folder: Path) -> Path:
    """The scratch folder of one run: the CSV, the example's file and its data link."""
    csv = folder / f"taxi-{rows}.csv"
    write_taxi_csv(csv, rows)
    (folder / "data" / "chicago_taxi").mkdir(parents=True)
    (folder / "data" / "chicago_taxi" / "data.csv").symlink_to(csv)
    shutil.copy(TAXI, folder / "taxi.py")
    return folder / "taxi.py"


def run_once(rows: int, folder: Path) -> dict:
    """``estflow run`` on ``rows`` rows in ``folder``: per step (and the runner, the whole run)
    its seconds, rows/s (None when not a data step), peak GB; the longest silence."""
    target = prepare(rows, folder)
    env = {**os.environ, "ESTFLOW_HOME": str(folder / "estflow_runs"),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ESTFLOW_WARM", None)  # warm processes outlive the run: not its own memory
    sampler = StepRss()
    sampler.start()
    start = time.perf_counter()
    try:
        proc = subprocess.Popen([str(ESTFLOW), "run", target.name], cwd=folder, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last, silence, tail = start, 0.0, []
        for line in proc.stdout:
            now = time.perf_counter()
            silence, last = max(silence, now - last), now
            tail = (tail + [line])[-40:]
        code = proc.wait()
        wall = time.perf_counter() - start
    finally:
        peaks = sampler.finish()
    if code != 0:
        raise RuntimeError(f"estflow run taxi.py on {rows} rows failed ({code}):\n"
                           f"{''.join(tail)}")
    record = _record(folder / "estflow_runs")
    steps = record["steps"]
    rates = {name: rows for name in ("fingerprint", *DATA_STEPS)} | {
        "evaluate": _eval_rows(steps)}
    steps = {"fingerprint": {"seconds": record.get("fingerprint_seconds"), "status": "ran"},
             **steps}  # it hashes the source: its wall grows with it
    steps.update({name: {"seconds": None} for name in peaks if name not in steps
                  and name not in (RUNNER, WHOLE)})  # a process the record does not time
    result = {}
    for name, step in steps.items():
        seconds = step.get("seconds")
        count = rates.get(name) if step.get("status") == "ran" else None
        result[name] = {"seconds": seconds, "status": step.get("status"),
                        "rows_per_s": count / seconds if count and seconds else None,
                        "peak_gb": peaks.get(name, 0) / 1e9}
    result[RUNNER] = {"seconds": None, "rows_per_s": None, "peak_gb": peaks.get(RUNNER, 0) / 1e9}
    result[WHOLE] = {"seconds": wall, "rows_per_s": rows / wall,
                     "peak_gb": peaks.get(WHOLE, 0) / 1e9}
    return {"steps": result, "silent_s": max(silence, wall - (last - start)),
            "status": record.get("status")}


def _record(home: Path) -> dict:
    records = sorted(home.glob("*/*/run.json"), key=lambda p: p.stat().st_mtime)
    if not records:
        raise RuntimeError(f"estflow run left no run.json under {home}")
    return json.loads(records[-1].read_text())


def _eval_rows(steps: dict) -> int | None:
    """The eval split's rows, from the ingest step's ``ingest.json``."""
    output = (steps.get("ingest", {}).get("outputs") or {}).get("examples") or {}
    summary = Path(output.get("path", "")) / contracts.Files.INGEST_STATS
    if not output or not summary.is_file():
        return None
    splits = json.loads(summary.read_text())["splits"]
    return splits.get("eval", sum(n for name, n in splits.items() if name != "train"))


def taxi_run(sizes: list[int]) -> None:
    results = []
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="estflow-bench-taxi-run-") as tmp_dir:
            result = run_once(rows, Path(tmp_dir))
        print(json.dumps({"rows": rows, **result}), flush=True)
        results.append((rows, result))
    print(f"\ntaxi example, estflow run to the end (step walls from run.json; rows/s = data "
          f"rows / wall, eval rows for evaluate; peak RSS: the step's processes summed, "
          f"sampled every {SAMPLE_S:g} s; silence = longest time without an output line)")
    print("rows        step          seconds    rows/s   peak RSS   silence")
    for rows, result in results:
        for step, r in result["steps"].items():
            seconds = "-" if r["seconds"] is None else f"{r['seconds']:.1f}"
            rate = "-" if r["rows_per_s"] is None else f"{r['rows_per_s']:.0f}"
            silence = f"{result['silent_s']:7.1f} s" if step == WHOLE else ""
            print(f"{rows:<11d} {step:<12s} {seconds:>8s} {rate:>9s} {r['peak_gb']:7.2f} GB "
                  f"{silence}")
    at = scale_checks("taxi run", [(rows, {step: r["steps"][step] for step in DATA_STEPS})
                                   for rows, r in results])
    if at is None:
        return
    ordered = sorted(results, key=lambda result: result[0])
    first, last = ordered[0][1], ordered[-1][1]
    a, b = first["steps"].get("evaluate"), last["steps"].get("evaluate")
    if a and b and a["rows_per_s"] and b["rows_per_s"]:
        print(f"ratio taxi run evaluate {at}: peak RSS {b['peak_gb'] / a['peak_gb']:.2f}x, "
              f"rows/s {b['rows_per_s'] / a['rows_per_s']:.2f}x (no target)")
