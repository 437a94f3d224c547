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
import sys

from at_once import compare  # tests/benchmarks/at_once.py: the two modes' walls, the ratio

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=600)
    args = parser.parse_args()
    compare(PIPELINE.replace("PASSES", str(args.passes)), "candidate_a,candidate_b", args.rounds,
            "two user steps", TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
