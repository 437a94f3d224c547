"""The taxi example's transform step on three Beam runners, side by side (``bench_preprocess.py
--runners N``): where the in-memory runner is the limit, what the others give on this machine.

* in-memory: Beam's default FnApiRunner (no Beam options), what ``estflow run`` uses locally;
* multi-process: ``--direct_running_mode=multi_processing --direct_num_workers=2`` (the
  DirectRunner's SDK workers in subprocesses);
* portable: the PortableRunner against Beam's Python job service with an external worker pool,
  both started for each run before its clock starts and stopped after it (the setup of
  ``tests/components/test_beam_portable.py``, reused from there).

The taxi CSV is repeated to N rows and ingested once (in-memory); then every round runs the
transform step on each runner in turn, in its own process as ``estflow run`` starts it. Per
runner: the process wall (median), rows/s (data rows / wall), the peak RSS of every process
the run uses together (the step, its SDK workers, the job service and the worker pool; sampled
every 0.2 s, at least the step's own peak), both as ratios to the in-memory runner's, and
whether the run is correct: its ``transform.json`` rows per split and vocabulary sizes equal
the in-memory run's of the same round.

Usage: ``python tests/benchmarks/bench_preprocess.py --runners 200000 [--rounds 3]``
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from bench_preprocess import REPO
from bench_preprocess import _step
from bench_preprocess import taxi_spec

MULTI_PROCESS = ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
                 "--direct_num_workers=2"]
SAMPLE_S = 0.2  # how often the processes' resident memory is summed


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Every process below ``root`` (from /proc: Linux only): pid -> (parent pid, resident
    bytes)."""
    parents, rss = {}, {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                text = f.read()
        except OSError:  # it ended meanwhile
            continue
        fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid ... rss
        pid = int(text.split(" ", 1)[0])
        parents[pid], rss[pid] = int(fields[1]), int(fields[21])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo, page = {}, list(children.get(root, [])), os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        found[pid] = (parents[pid], rss[pid] * page)
        todo.extend(children.get(pid, []))
    return found


def _rss_of_descendants(root: int) -> int:
    """Bytes resident in every process below ``root``."""
    return sum(rss for _, rss in descendants(root).values())


class _PeakRss(threading.Thread):
    """The largest sum of this process's descendants' RSS while it runs (bytes)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self._done = 0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self.peak = max(self.peak, _rss_of_descendants(os.getpid()))

    def finish(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def _portable():
    """The test's job service + worker pool context (yields the Beam options), or None."""
    sys.path.insert(0, str(REPO))
    try:
        from tests.components.test_beam_portable import _env
        from tests.components.test_beam_portable import _portable_services
    except ImportError as err:
        print(f"note: the portable runner is skipped: its setup "
              f"(tests/components/test_beam_portable.py) does not import: {err}")
        return None, None
    return _portable_services, _env


def _transform(spec: Path, examples: Path, out: Path, options: list[str], rows: int,
               env: dict[str, str] | None) -> dict:
    sampler = _PeakRss()
    sampler.start()
    try:
        result = _step([sys.executable, "-m", "estflow.components.transform", "--spec",
                        str(spec), "--examples", str(examples), "--transformed", str(out),
                        *options], rows, env)
    finally:
        peak = sampler.finish()
    summary = json.loads((out / "transform.json").read_text())
    shutil.rmtree(out)
    return {**result, "peak_gb": max(result["peak_gb"], peak / 1e9), "rows": summary["rows"],
            "vocabulary_sizes": summary["vocabulary_sizes"]}


def compare_runners(rows: int, rounds: int) -> None:
    services, env = _portable()
    runners = ["in-memory", "multi-process"] + (["portable"] if services else [])
    results: dict[str, list[dict]] = {name: [] for name in runners}
    wrong: dict[str, list[str]] = {name: [] for name in runners}
    with tempfile.TemporaryDirectory(prefix="estflow-bench-runners-") as tmp_dir:
        tmp = Path(tmp_dir)
        spec, csv = taxi_spec(rows, tmp)
        examples = tmp / "examples"
        _step([sys.executable, "-m", "estflow.components.ingest", "--spec", str(spec),
               "--examples", str(examples)], rows)
        csv.unlink()
        for r in range(rounds):
            for name in list(runners):  # interleaved: load drifts hit every runner alike
                out = tmp / f"{name}-{r}"
                try:
                    if name == "portable":
                        with services(tmp) as options:  # started before the clock
                            res = _transform(spec, examples, out, options, rows, env())
                    else:
                        res = _transform(spec, examples, out,
                                         MULTI_PROCESS if name == "multi-process" else [],
                                         rows, None)
                except (RuntimeError, TimeoutError, OSError) as err:
                    if name == "in-memory":
                        raise
                    print(f"note: the {name} runner failed; it is left out:\n{err}"[:3000])
                    runners.remove(name)
                    continue
                results[name].append(res)
                reference = results["in-memory"][-1]
                for key in ("rows", "vocabulary_sizes"):
                    if res[key] != reference[key]:
                        wrong[name].append(f"round {r + 1} {key} {res[key]} (in-memory: "
                                           f"{reference[key]})")
                print(f"  round {r + 1} {name:<14} {res['seconds']:6.1f}s "
                      f"{res['rows_per_s']:8.0f} rows/s  peak {res['peak_gb']:5.2f} GB  rows "
                      f"{json.dumps(res['rows'])}", flush=True)
    _print_table(rows, rounds, results, wrong)


def _print_table(rows: int, rounds: int, results: dict[str, list[dict]],
                 wrong: dict[str, list[str]]) -> None:
    med = {name: {key: statistics.median(r[key] for r in res)
                  for key in ("seconds", "rows_per_s", "peak_gb")}
           for name, res in results.items() if res}
    base = med["in-memory"]
    print(f"\ntaxi transform step on {rows} rows, by Beam runner (medians of {rounds} "
          f"interleaved rounds; rows/s = data rows / process wall; peak RSS: every process of "
          f"the run together, sampled every {SAMPLE_S:g} s)")
    print("runner          seconds    rows/s   peak RSS   rows/s vs in-memory   peak vs "
          "in-memory   correct")
    for name, m in med.items():
        correct = "yes" if not wrong[name] else "NO"
        print(f"{name:<14} {m['seconds']:8.1f} {m['rows_per_s']:9.0f} {m['peak_gb']:7.2f} GB "
              f"{m['rows_per_s'] / base['rows_per_s']:20.2f}x "
              f"{m['peak_gb'] / base['peak_gb']:18.2f}x   {correct}")
    print("rows per split (in-memory): " + ", ".join(
        f"{split} {n}" for split, n in results["in-memory"][-1]["rows"].items()))
    for name, problems in wrong.items():
        for problem in problems:
            print(f"WRONG: {name} {problem}")
    for name in ("multi-process", "portable"):
        if name not in med:
            print(f"note: no figures for the {name} runner (see the notes above)")

