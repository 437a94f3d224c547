"""Steps run at once by ``estflow run`` against the same steps one after another (``--jobs 1``):
the measurement ``bench_parallel_steps.py`` and ``bench_candidates.py`` share. A pipeline file
over the taxi example's first 20k rows runs once (what is reused: the built-in steps before
the forced ones), then rounds alternate the two modes, each forcing the same steps with
``--no-cache``; each wall is the whole ``estflow run`` command's, as a user sees it."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from targets import check  # tests/benchmarks/targets.py: a ratio, its target, a verdict

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv"
ESTFLOW = str(Path(sys.executable).parent / "estflow")


def _cpu() -> float:
    """User + system CPU seconds of this process's ended (and waited-for) descendants."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(folder: Path, *args: str, cpu: list[float] | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    start, before = time.monotonic(), _cpu()
    done = subprocess.run([ESTFLOW, "run", "p.py", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"estflow run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    if cpu is not None:
        cpu.append(_cpu() - before)
    return wall


def compare(pipeline: str, forced: str, rounds: int, what: str, target: float) -> float:
    """Run ``pipeline`` (a pipeline file's text reading ``data.csv``) once, then ``rounds``
    rounds of ``--no-cache FORCED --jobs 1`` and ``--no-cache FORCED``; print the medians and
    check at once / one after another <= ``target``. Returns the ratio."""
    with tempfile.TemporaryDirectory(prefix="estflow-bench-at-once-") as tmp:
        folder = Path(tmp)
        with open(DATA) as src, open(folder / "data.csv", "w") as dst:
            for i, line in enumerate(src):
                if i > 20000:
                    break
                dst.write(line)
        (folder / "p.py").write_text(pipeline)
        _run(folder)  # what every round reuses
        walls: dict[str, list[float]] = {"one after another": [], "at once": []}
        cpus: dict[str, list[float]] = {mode: [] for mode in walls}
        for _ in range(rounds):
            for mode, jobs in (("one after another", ("--jobs", "1")), ("at once", ())):
                walls[mode].append(_run(folder, "--no-cache", forced, *jobs, cpu=cpus[mode]))
    print(f"{'mode':<20} {'median wall':>12} {'median CPU':>11} {'cores busy':>11}  walls")
    for mode, values in walls.items():
        wall, cpu = statistics.median(values), statistics.median(cpus[mode])
        print(f"{mode:<20} {wall:>11.2f}s {cpu:>10.2f}s {cpu / wall:>11.2f}  "
              + ", ".join(f"{v:.2f}" for v in values))
    # At once cannot be faster than its CPU time spread over every core: the best ratio this
    # machine allows for the work both modes do.
    cores = os.cpu_count() or 1
    bound = (statistics.median(cpus["at once"]) / cores) / statistics.median(
        walls["one after another"])
    print(f"lowest ratio {cores} cores allow for this CPU time (at once's CPU / {cores} / one "
          f"after another's wall): {bound:.2f}x")
    ratio = statistics.median(walls["at once"]) / statistics.median(walls["one after another"])
    check(f"{what} at once / one after another (estflow run wall)", ratio, target,
          at_most=True)
    return ratio
