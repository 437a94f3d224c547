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
import sys

from at_once import compare  # tests/benchmarks/at_once.py: the two modes' walls, the ratio

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    compare(PIPELINE.replace("STEPS", str(args.steps)), FORCED, args.rounds,
            "two candidate models", TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
