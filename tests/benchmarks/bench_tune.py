"""A hyperparameter search on the taxi example (``Pipeline.tune``), with and without early
stopping, against the hand-set example, in one run of this script.

Three ``estflow run`` commands in one folder (ingest and transform run once, then are reused):

1. the taxi example as declared (``dnn_hidden_units=(32, 16)``, ``dnn_learning_rate=0.05``,
   2,500 steps): its eval AUC is the anchor the search must reach;
2. the same pipeline with a search of ``--trials`` trials (default 20), 2 at once, over the
   DNN's widths and learning rate, the linear part's learning rate, the company embedding's
   dimension and the batch size, each trial trained the example's 2,500 steps (TPE, seed 0);
3. the same search with each early-stopping rule (``--early-stopping``, given once per rule;
   default: the median rule ``MedianStop(every_steps=500, warmup_steps=500,
   warmup_trials=4)``, a trial behind the median of the finished trials at the same step is
   stopped, and successive halving ``HalvingStop(min_steps=500, factor=3)``, only the best
   third of the trials that reached 500 and 1,500 steps goes on).

For each search: the tune step's wall (from the run's record), its trials' states, the best
trial's AUC, and the eval AUC of the final model (trained with the best trial's values; the
evaluate step's AUC, the anchor's measure). Targets: each search's final AUC >= the hand-set
example's; each early-stopping search's tune wall <= 0.6x the search without it.

Usage: ``python tests/benchmarks/bench_tune.py [--trials 20] [--parallel 2]
[--early-stopping "ef.MedianStop(...)" --early-stopping "ef.HalvingStop(...)"]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from targets import check  # tests/benchmarks/targets.py: a ratio, its target, a verdict

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv"
ESTFLOW = str(Path(sys.executable).parent / "estflow")
TARGET_EARLY_STOPPING = 0.6
EARLY_STOPPING = ("ef.MedianStop(every_steps=500, warmup_steps=500, warmup_trials=4)",
                  "ef.HalvingStop(min_steps=500, factor=3)")

PIPELINE = '''
import dataclasses

import estflow.dsl as ef
from estflow.pipelines.examples import taxi

SEARCH = ef.Tune(
    {"model.dnn_hidden_units": ef.Choice(((32, 16), (64, 32), (128, 64), (64,))),
     "model.dnn_learning_rate": ef.FloatRange(0.005, 0.5, log=True),
     "model.linear_learning_rate": ef.FloatRange(0.005, 0.5, log=True),
     "model.dnn_feature_columns[company].dimension": ef.IntRange(2, 16),
     "train.batch_size": ef.Choice((128, 256, 512))},
    objective="auc", trials=TRIALS, parallel=PARALLEL, algorithm="tpe", seed=0,
    early_stopping=EARLY)

pipeline = dataclasses.replace(
    taxi.pipeline, source=ef.CsvSource("data.csv"), push=None,
    tune=SEARCH if TUNED else None)
'''


def _run(folder: Path, name: str, **values: object) -> dict:
    text = PIPELINE
    for key, value in values.items():
        text = text.replace(key, repr(value) if not isinstance(value, str) else value)
    (folder / f"{name}.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESTFLOW_")}
    start = time.monotonic()
    done = subprocess.run([ESTFLOW, "run", f"{name}.py"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=4 * 3600)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"estflow run {name}.py failed:\n{done.stdout[-4000:]}\n"
                         f"{done.stderr[-2000:]}")
    record = max((folder / "estflow_runs").glob("*/*/run.json"), key=os.path.getmtime)
    run = json.loads(record.read_text())
    steps = run["steps"]

    def output(step: str, artifact: str) -> Path:
        return Path(steps[step]["outputs"][artifact]["path"])

    out = {"wall": wall, "auc": json.loads(
        (output("evaluate", "evaluation") / "metrics.json").read_text())["metrics"]["auc"]}
    if "tune" in steps:
        out["tune_seconds"] = steps["tune"]["seconds"]
        trials = json.loads((output("tune", "hyperparameters") / "trials.json").read_text())
        states = [t["state"] for t in trials["trials"]]
        out["states"] = {s: states.count(s) for s in sorted(set(states))}
        best = json.loads((output("tune", "hyperparameters") / "best.json").read_text())
        out["best_trial_auc"], out["best"] = best["value"], best["assignment"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--early-stopping", action="append",
                        help="an early-stopping search's declaration, once per search "
                             f"(default: {' and '.join(EARLY_STOPPING)})")
    args = parser.parse_args()
    rules = args.early_stopping or list(EARLY_STOPPING)
    common = {"TRIALS": args.trials, "PARALLEL": args.parallel}
    with tempfile.TemporaryDirectory(prefix="estflow-bench-tune-") as tmp:
        folder = Path(tmp)
        shutil.copy(DATA, folder / "data.csv")
        hand = _run(folder, "hand_set", TUNED=False, EARLY="None", **common)
        plain = _run(folder, "search", TUNED=True, EARLY="None", **common)
        early = [_run(folder, f"search_early_{i}", TUNED=True, **common, EARLY=rule)
                 for i, rule in enumerate(rules)]
    searches = [("search", plain)] + [(f"early stopping: {rule}", row)
                                      for rule, row in zip(rules, early, strict=True)]
    print(f"{'run':<72} {'wall':>8} {'tune step':>10} {'final eval auc':>15} "
          f"{'best trial auc':>15}  trials")
    for label, row in [("hand-set example", hand), *searches]:
        print(f"{label:<72} {row['wall']:>7.1f}s "
              + (f"{row['tune_seconds']:>9.1f}s" if "tune_seconds" in row else f"{'-':>10}")
              + f" {row['auc']:>15.4f} "
              + (f"{row['best_trial_auc']:>15.4f}  {row['states']}" if "states" in row
                 else f"{'-':>15}"))
    for label, row in searches:
        print(f"best of {label}: {json.dumps(row['best'])}")
    for label, row in searches:
        check(f"final eval AUC of {label} / the hand-set example's", row["auc"] / hand["auc"],
              1.0)
    for rule, row in zip(rules, early, strict=True):
        check(f"tune step wall with {rule} / without early stopping",
              row["tune_seconds"] / plain["tune_seconds"], TARGET_EARLY_STOPPING, at_most=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
