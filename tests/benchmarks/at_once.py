"""Steps run at once by ``estflow run`` against the same steps one after another (``--jobs 1``):
the measurement ``bench_parallel_steps.py`` and ``bench_candidates.py`` share. A pipeline file
over the taxi example's first 20k rows runs once (what is reused: the built-in steps before
the forced ones), then rounds alternate the two modes, each forcing the same steps with
``--no-cache``; each wall is the whole ``estflow run`` command's, as a user sees it."""

from __future__ import annotations

import os
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


def _run(folder: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    start = time.monotonic()
    done = subprocess.run([ESTFLOW, "run", "p.py", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"estflow run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
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
        for _ in range(rounds):
            walls["one after another"].append(_run(folder, "--no-cache", forced, "--jobs", "1"))
            walls["at once"].append(_run(folder, "--no-cache", forced))
    print(f"{'mode':<20} {'median wall':>12}  walls")
    for mode, values in walls.items():
        print(f"{mode:<20} {statistics.median(values):>11.2f}s  "
              + ", ".join(f"{v:.2f}" for v in values))
    ratio = statistics.median(walls["at once"]) / statistics.median(walls["one after another"])
    check(f"{what} at once / one after another (estflow run wall)", ratio, target,
          at_most=True)
    return ratio
