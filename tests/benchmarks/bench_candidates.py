"""Two candidate models of the taxi example trained at once by ``estflow run`` against the same
steps one after another (``--jobs 1``), in one run of this script: interleaved rounds, medians,
the ratio.

The pipeline: the taxi example's first 20k rows, its features, and ``ef.Candidates`` of its
wide & deep model and a linear model over its linear columns, 1,000 steps each. The ingest
and transform steps are reused from the step cache after the first run; each round forces
the candidates' steps (``--no-cache`` on their train, evaluate and the select step) and
measures the whole ``estflow run`` command's wall, as a user sees it. The anchor is the same
command with ``--jobs 1``. Target: at once <= 0.65x one after another on two cores.

Usage: ``python tests/benchmarks/bench_candidates.py [--rounds 3] [--steps 1000]``
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
FORCED = "train_linear,train_wide_deep,evaluate_linear,evaluate_wide_deep,select"

PIPELINE = '''
import estflow.dsl as ef
from estflow.pipelines.examples import taxi

wide_deep = taxi.pipeline.model
pipeline = ef.Pipeline(**{**{f: getattr(taxi.pipeline, f) for f in (
    "name", "features", "label", "columns", "derive", "split")},
    "source": ef.CsvSource("data.csv"),
    "model": ef.Candidates({
        "wide_deep": wide_deep,
        "linear": ef.LinearClassifier(feature_columns=wide_deep.linear_feature_columns),
    }, best_by="auc"),
    "train": ef.TrainSpec(max_steps=STEPS, batch_size=256)})
'''


def _run(folder: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    start = time.monotonic()
    done = subprocess.run([ESTFLOW, "run", "p.py", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"estflow run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="estflow-bench-candidates-") as tmp:
        folder = Path(tmp)
        with open(DATA) as src, open(folder / "data.csv", "w") as dst:
            for i, line in enumerate(src):
                if i > 20000:
                    break
                dst.write(line)
        (folder / "p.py").write_text(PIPELINE.replace("STEPS", str(args.steps)))
        _run(folder)  # ingest and transform, once: reused by every round
        walls: dict[str, list[float]] = {"one after another": [], "at once": []}
        for _ in range(args.rounds):
            walls["one after another"].append(_run(folder, "--no-cache", FORCED, "--jobs", "1"))
            walls["at once"].append(_run(folder, "--no-cache", FORCED))
    print(f"{'mode':<20} {'median wall':>12}  walls")
    for mode, values in walls.items():
        print(f"{mode:<20} {statistics.median(values):>11.2f}s  "
              + ", ".join(f"{v:.2f}" for v in values))
    ratio = statistics.median(walls["at once"]) / statistics.median(walls["one after another"])
    check("two candidate models at once / one after another (estflow run wall)", ratio, TARGET,
          at_most=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
