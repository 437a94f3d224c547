"""Steps run at once by ``estflow run`` against the same steps one after another (``--jobs 1``),
in one run of this script: interleaved rounds, medians, the ratio.

The pipeline: the taxi example's first 20k rows, with two user steps that do not wait for each
other, each a CPU-bound stand-in for a candidate's training (pure-Python passes over its rows'
floats, the same work in both). The built-in steps are reused from the step cache after the
first run; each round forces the two user steps (``--no-cache a,b``) and measures the whole
``estflow run`` command's wall, as a user sees it. Target: at once <= 0.65x one after another
on two cores.

Usage: ``python tests/benchmarks/bench_parallel_steps.py [--rounds 3] [--passes 600]``
"""

from __future__ import annotations

import argparse
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
TARGET = 0.65

PIPELINE = '''
import csv
from pathlib import Path

import estflow.dsl as ef
from estflow.pipelines.examples import taxi


def _work(passes: int) -> float:
    rows = list(csv.DictReader(open(Path(__file__).parent / "data.csv")))
    fares = [float(r["fare"] or 0) for r in rows]
    total = 0.0
    for i in range(passes):
        for fare in fares:
            total += (fare * (i + 1)) % 7.0
    return total


@ef.step
def candidate_a(examples: ef.Input[ef.Examples], passes: int = 40) -> dict:
    return {"score": _work(passes)}


@ef.step
def candidate_b(examples: ef.Input[ef.Examples], passes: int = 40) -> dict:
    return {"score": _work(passes)}


pipeline = ef.Pipeline(**{**{f: getattr(taxi.pipeline, f) for f in (
    "name", "features", "label", "model", "columns", "derive")},
    "source": ef.CsvSource("data.csv"), "train": ef.TrainSpec(max_steps=20),
    "steps": (candidate_a(passes=PASSES), candidate_b(passes=PASSES))})
'''


def _run(folder: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    start = time.monotonic()
    done = subprocess.run([ESTFLOW, "run", "p.py", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"estflow run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="estflow-bench-parallel-") as tmp:
        folder = Path(tmp)
        with open(DATA) as src, open(folder / "data.csv", "w") as dst:
            for i, line in enumerate(src):
                if i > 20000:
                    break
                dst.write(line)
        (folder / "p.py").write_text(PIPELINE.replace("PASSES", str(args.passes)))
        _run(folder)  # the built-in steps, once: reused by every round
        walls: dict[str, list[float]] = {"one after another": [], "at once": []}
        for _ in range(args.rounds):
            walls["one after another"].append(
                _run(folder, "--no-cache", "candidate_a,candidate_b", "--jobs", "1"))
            walls["at once"].append(_run(folder, "--no-cache", "candidate_a,candidate_b"))
    print(f"{'mode':<20} {'median wall':>12}  walls")
    for mode, values in walls.items():
        print(f"{mode:<20} {statistics.median(values):>11.2f}s  "
              + ", ".join(f"{v:.2f}" for v in values))
    ratio = statistics.median(walls["at once"]) / statistics.median(walls["one after another"])
    check("two user steps at once / one after another (estflow run wall)", ratio, TARGET,
          at_most=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
