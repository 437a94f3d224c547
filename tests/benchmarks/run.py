"""``make bench``: estflow against the reference anchors, side by side in one run.

The machine is shared and noisy, so every comparison is a ratio of medians over interleaved
rounds measured in this same run, never an absolute figure.

* train: estflow's DNNClassifier (the anchor program ported by changing imports, with the
  input read batch-first and as built; and a pipeline's DSL declaration) vs the original
  tf.estimator.DNNClassifier (TF 2.15, in its own venv: ``~/venv-tf215`` or
  ``$ESTFLOW_TF215_PYTHON``; skipped with a note when missing) and Keras 3 ``model.fit``
  (TF 2.21), the anchors in ``tests/benchmarks/anchors``; plus the anchors' input pipeline
  alone.
* tfrecord: ``tests/benchmarks/bench_tfrecord_compare.py`` (the anchor program with an input_fn
  reading gzipped TFRecords of tf.Examples, parsed per record before ``batch`` and batch-wise
  after it, vs tf.estimator 2.15 on the same files).
* workers: ``tests/benchmarks/bench_workers.py`` (the taxi train step in one process vs 2 local
  workers under MultiWorkerMirroredStrategy, examples/s), as declared and with
  ``--hidden 1024,512`` (a compute-bound variant).
* preprocess: ``tests/benchmarks/bench_preprocess.py`` (estflow CSV -> TFRecords vs the tft
  anchors), when present.
* preprocess_taxi: ``bench_preprocess.py --taxi-run 1000000 10000000`` (the whole ``estflow
  run`` of the taxi example on its data repeated to 1M and 10M rows: per step its wall from
  the run's record, rows/s for the data steps, the peak RSS of its processes; the run's wall
  and longest silence). ``--taxi-rows`` runs only its ingest and transform steps.
* preprocess_runners: ``bench_preprocess.py --runners 200000`` (the taxi transform step on
  Beam's in-memory, multi-process direct and portable runners, interleaved: walls, rows/s,
  peak RSS, ratios to the in-memory runner, and whether each run's rows match).
* validate: ``tests/benchmarks/bench_validate.py`` (ingest + transform on 1M rows with and
  without the data statistics, interleaved; the ratio).
* serve: ``tests/benchmarks/bench_serve.py`` (REST and gRPC vs in-process SavedModel;
  concurrent clients with and without server-side batching).
* predict: ``tests/benchmarks/bench_predict.py`` (``estflow predict`` vs the server's batch 64).
* compile: ``tests/benchmarks/bench_compile.py`` (``estflow compile`` vs ``kfp dsl compile`` of
  an equivalent hand-written pipeline).
* parallel_steps: ``tests/benchmarks/bench_parallel_steps.py`` (two user steps that do not wait
  for each other, run at once vs one after another with ``--jobs 1``: the ``estflow run`` walls).
* candidates: ``tests/benchmarks/bench_candidates.py`` (two candidate models of the taxi
  example, wide & deep and linear, trained at once vs one after another with ``--jobs 1``).
* tune: ``tests/benchmarks/bench_tune.py`` (a search of 20 trials, 2 at once, on the taxi
  example without early stopping, with the median rule and with successive halving, against
  the hand-set example: final eval AUCs, the tune step's walls).
* pipeline: ``tests/benchmarks/bench_pipeline.py`` (``estflow run`` on the taxi example: cold,
  an identical rerun from the step cache, a run where only the model changed; walls and ratios;
  interleaved with TFX 1.16's taxi pipeline when a TFX venv is found: ``$ESTFLOW_TFX_PYTHON``
  or ``~/tfxvenv/bin/python``).

Each script prints its targets (issue 26) after its table: the ratio, the target and a verdict
(``ok``, ``BELOW TARGET``, ``ABOVE TARGET``).

The anchor programs live in the repository (``tests/benchmarks/anchors``, copied from the
project's shared anchors; ``$ESTFLOW_ANCHORS`` points elsewhere), so ``make bench`` runs from a
fresh clone; what needs another venv (TF 2.15, TFX 1.16) is skipped with a note when it is
missing. The benchmark scripts get ``$ESTFLOW_ANCHORS`` set to the folder used.

A part is one entry of :data:`PARTS` (name -> function of the number of rounds); a new bench
script is one more ``"name": script("bench_x.py", ...)`` line.

Usage: ``python tests/benchmarks/run.py [--only train,preprocess,...] [--rounds 3]``
(``--only`` takes the names of :data:`PARTS`; default: all of them)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ANCHORS = Path(os.environ.get("ESTFLOW_ANCHORS", HERE / "anchors"))
TF215 = Path(os.environ.get("ESTFLOW_TF215_PYTHON", Path.home() / "venv-tf215/bin/python"))
_TOTAL = re.compile(r"total ([\d.]+)s")
_STEADY = re.compile(r"steady-state (\d+) ex/s")


def _run(cmd: list[str], cwd: Path, timeout: float = 1200) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "ESTFLOW_ANCHORS": str(ANCHORS)}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


ESTFLOW = ("estflow_port", "estflow_port_as_built", "estflow_dsl")
ANCHOR_NAMES = ("tf_estimator_2.15", "keras_fit")


def _have_anchors(*files: str) -> bool:
    return all((ANCHORS / f).is_file() for f in files)


def _train_contenders() -> dict[str, list[str]]:
    """What runs, by name. estflow_port is the anchor program with its imports changed
    (bench_estimator_port.py); _as_built trains on the input_fn's dataset exactly as built
    (RunConfig(optimize_input=False)); estflow_dsl is a pipeline's DNNClassifier declaration
    over ids (bench_train.py); tf_data_* time the input pipeline alone (bench_input.py)."""
    py = sys.executable
    contenders = {
        "estflow_port": [py, str(HERE / "bench_estimator_port.py")],
        "estflow_port_as_built": [py, str(HERE / "bench_estimator_port.py"),
                                  "--no-optimize-input"],
        "estflow_dsl": [py, str(HERE / "bench_train.py")],
        "keras_fit": [py, str(ANCHORS / "bench_keras_tf221.py")],
        "tf_data_as_built": [py, str(HERE / "bench_input.py")],
        "tf_data_batch_first": [py, str(HERE / "bench_input.py"), "--batch-first"],
    }
    if not _have_anchors("common.py", "bench_keras_tf221.py"):
        print(f"note: the anchors ({ANCHORS}) are missing: only estflow_dsl trains (the anchor "
              "programs, the ported one and the input pipeline read the anchors' files)")
        return {"estflow_dsl": contenders["estflow_dsl"]}
    if TF215.exists():
        contenders["tf_estimator_2.15"] = [str(TF215), str(ANCHORS / "bench_estimator_tf215.py")]
    else:
        print(f"note: {TF215} not found; the tf.estimator 2.15 anchor is skipped (see "
              f"{ANCHORS / 'README.md'} to create its venv)")
    return contenders


def bench_train(rounds: int) -> None:
    contenders = _train_contenders()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for r in range(rounds):
        for name, cmd in contenders.items():  # interleaved, so load drifts hit all alike
            line = _run(cmd, ANCHORS if ANCHORS.is_dir() else REPO).strip().splitlines()[-1]
            total, steady = float(_TOTAL.search(line)[1]), float(_STEADY.search(line)[1])
            results[name].append((total, steady))
            print(f"  round {r + 1} {name:<22} steady {steady:>9.0f} ex/s  total {total:5.1f}s",
                  flush=True)
    med = {n: (statistics.median(t for t, _ in v), statistics.median(s for _, s in v))
           for n, v in results.items()}
    print("\ntrain (DNN [64,32], batch 256, 2,000 steps; medians of "
          f"{rounds} interleaved rounds; tf_data_* iterate the input alone, no model)")
    print(f"{'':<24}{'steady ex/s':>12}{'total s':>9}")
    for name, (total, steady) in med.items():
        print(f"{name:<24}{steady:>12.0f}{total:>9.1f}")
    for ours in (n for n in ESTFLOW if n in med):
        for anchor in (n for n in ANCHOR_NAMES if n in med):
            total, steady = med[anchor]
            print(f"{ours} / {anchor}: steady-state {med[ours][1] / steady:.2f}x, "
                  f"train() wall {med[ours][0] / total:.2f}x of the anchor's")


def bench_script(name: str, args: list[str], timeout: float = 1200) -> None:
    script = HERE / name
    if not script.exists():
        print(f"note: {script.name} not present; skipped")
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "ESTFLOW_ANCHORS": str(ANCHORS)}
    # The script's lines are shown as they come (a part may run for many minutes); its
    # standard error only when it fails.
    with tempfile.TemporaryFile("w+") as stderr:  # a file: a full pipe would block the script
        proc = subprocess.Popen([sys.executable, str(script), *args], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for line in proc.stdout:
                print(line, end="", flush=True)
            code = proc.wait()
        finally:
            timer.cancel()
        stderr.seek(0)
        errors = stderr.read()
    if code != 0:  # one part failing stops no other
        why = f"killed after {timeout:g} s" if code < 0 else f"exit code {code}"
        print(f"note: {script.name} failed ({why}); skipped:\n{errors[-2000:]}", flush=True)


def script(name: str, *args: str, rounds: bool = False,
           timeout: float = 1200) -> Callable[[int], None]:
    """A part that runs ``tests/benchmarks/<name> ARGS`` (plus ``--rounds N`` if ``rounds``),
    stopped after ``timeout`` seconds."""
    return lambda n: bench_script(name, [*args, *(["--rounds", str(n)] if rounds else [])],
                                  timeout)


def bench_workers(rounds: int) -> None:
    """The taxi train step as declared (target >= 0.5x), then compute-bound (>= 0.8x)."""
    for hidden in ([], ["--hidden", "1024,512"]):
        bench_script("bench_workers.py", [*hidden, "--rounds", str(rounds)])


def bench_preprocess(rounds: int) -> None:
    skip = [] if _have_anchors("tft_anchor.py") else ["--skip-anchors"]
    if skip:
        print(f"note: {ANCHORS / 'tft_anchor.py'} is missing: preprocess runs without the "
              "tf.Transform anchors")
    bench_script("bench_preprocess.py", skip)


PARTS: dict[str, Callable[[int], None]] = {
    "train": bench_train,
    # The anchor program reading gzipped TFRecords of tf.Examples (per-record parse before
    # batch, and batch-wise parse) vs tf.estimator 2.15: a minute or two per round.
    "tfrecord": script("bench_tfrecord_compare.py", rounds=True),
    # The taxi train step, 1 process vs 2 local workers (MultiWorkerMirrored), as declared and
    # with DNN (1024, 512): a few minutes a round.
    "workers": bench_workers,
    "preprocess": bench_preprocess,
    # The taxi example's whole estflow run at 1M and 10M rows (goals: ingest's and transform's
    # peak RSS at 10M within +10% of 1M's, their rows/s at 10M no lower than at 1M): an hour
    # or more on two cores.
    "preprocess_taxi": script("bench_preprocess.py", "--taxi-run", "1000000", "10000000",
                              timeout=4 * 3600),
    # The taxi transform step on 200k rows on three Beam runners (in-memory, multi-process
    # direct, portable + worker pool), interleaved: a few minutes a round.
    "preprocess_runners": script("bench_preprocess.py", "--runners", "200000", rounds=True),
    # Ingest + transform on 1M rows with and without the data statistics (goal: <= +10%).
    "validate": script("bench_validate.py", rounds=True),
    # REST/gRPC batch 64 vs in-process, 16 concurrent clients with and without batching.
    "serve": script("bench_serve.py", rounds=True),
    "predict": script("bench_predict.py"),
    "compile": script("bench_compile.py"),
    # Cold, identical rerun, model-only (and TFX 1.16's taxi): a few minutes per round.
    "pipeline": script("bench_pipeline.py", rounds=True),
    # Two independent user steps at once vs --jobs 1 (target <= 0.65x): a minute a round.
    "parallel_steps": script("bench_parallel_steps.py", rounds=True),
    # Two taxi candidates (wide & deep, linear) at once vs --jobs 1 (target <= 0.65x).
    "candidates": script("bench_candidates.py", rounds=True),
    # A 20-trial search on the taxi example with and without early stopping (target <= 0.6x)
    # and the hand-set example's AUC to reach: half an hour on two cores.
    "tune": script("bench_tune.py", timeout=3 * 3600),
}
"""The parts, in the order they run: name -> function of the number of rounds."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated parts of: {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; expected some of "
                     f"{', '.join(PARTS)}")
    for name, part in PARTS.items():
        if name in parts:
            part(args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
