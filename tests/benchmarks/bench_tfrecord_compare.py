"""estflow against tf.estimator 2.15 on file input (issue 12), interleaved in one run.

The anchor program (DNNClassifier [64, 32], batch 256, 2,000 steps, steady state after step
200) with its input_fn reading gzipped TFRecords of tf.Examples (``bench_tfrecord_data.py``),
in the two tutorial shapes: ``record`` (``parse_single_example`` per record before ``batch``)
and ``batch`` (``parse_example`` after ``batch``). Contenders per shape: tf.estimator 2.15
(``bench_tfrecord_tf215.py`` in ``~/venv-tf215`` or ``$ESTFLOW_TF215_PYTHON``; skipped with a
note when missing), the estflow port (``bench_tfrecord_port.py``) with the engine's input
rewrites and with the input as built, and the input pipeline alone (``bench_tfrecord_input.py``,
as built and rewritten). Every figure is a median over rounds that run every contender in
turn; the ratios are ratios of medians. After the table, the batch shape's targets (issue 26)
with their verdicts.

Usage: ``python tests/benchmarks/bench_tfrecord_compare.py [--rounds 3] [--shapes record,batch]``
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from targets import check  # tests/benchmarks/targets.py: a ratio, its target, a verdict

HERE = Path(__file__).resolve().parent
# Issue 26's targets for the batch-then-parse shape (estflow port / tf.estimator 2.15, same run):
STEADY_VS_TF215 = 1.5  # steady-state examples/s, at least
WALL_VS_TF215 = 0.8  # train() wall, at most
TARGET_SHAPE = "batch"
TF215 = Path(os.environ.get("ESTFLOW_TF215_PYTHON", Path.home() / "venv-tf215/bin/python"))
_TOTAL = re.compile(r"total ([\d.]+)s")
_STEADY = re.compile(r"steady-state (\d+) ex/s")
_CPU = re.compile(r"cpu ([\d.]+)s in train\(\), ([\d.]+) us/example")


def contenders(shapes: list[str]) -> dict[str, list[str]]:
    py = sys.executable
    out: dict[str, list[str]] = {}
    for shape in shapes:
        if TF215.exists():
            out[f"tf_estimator_2.15_tfrecord_{shape}"] = [
                str(TF215), str(HERE / "bench_tfrecord_tf215.py"), "--shape", shape]
        out[f"estflow_port_tfrecord_{shape}"] = [
            py, str(HERE / "bench_tfrecord_port.py"), "--shape", shape]
        out[f"estflow_port_tfrecord_{shape}_as_built"] = [
            py, str(HERE / "bench_tfrecord_port.py"), "--shape", shape, "--no-optimize-input"]
        out[f"tf_data_tfrecord_{shape}_as_built"] = [
            py, str(HERE / "bench_tfrecord_input.py"), "--shape", shape]
        if shape == "record":  # the batch shape has nothing to rewrite
            out[f"tf_data_tfrecord_{shape}_optimized"] = [
                py, str(HERE / "bench_tfrecord_input.py"), "--shape", shape, "--optimized"]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="record,batch")
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if not TF215.exists():
        print(f"note: {TF215} not found; the tf.estimator 2.15 contenders are skipped")
    # the files first, once (not timed)
    subprocess.run([sys.executable, str(HERE / "bench_tfrecord_data.py")], check=True)
    runs = contenders(shapes)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    cpus: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, cmd in runs.items():  # interleaved, so load drifts hit all alike
            done = subprocess.run(cmd, cwd=HERE.parents[1], env=env, capture_output=True,
                                  text=True, timeout=1200)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
            line = done.stdout.strip().splitlines()[-1]
            total, steady = float(_TOTAL.search(line)[1]), float(_STEADY.search(line)[1])
            results[name].append((total, steady))
            cpu = _CPU.search(line)
            if cpu:
                cpus[name].append((float(cpu[1]), float(cpu[2])))
            print(f"  round {r + 1} {name:<40} steady {steady:>9.0f} ex/s  total {total:5.1f}s"
                  + (f"  cpu {cpu[1]}s, {cpu[2]} us/ex" if cpu else ""), flush=True)
    med = {n: (statistics.median(t for t, _ in v), statistics.median(s for _, s in v))
           for n, v in results.items()}
    cpu_med = {n: (statistics.median(t for t, _ in v), statistics.median(e for _, e in v))
               for n, v in cpus.items() if v}
    print(f"\nTFRecord input (gzip, 4 shards), DNN [64,32], batch 256, 2,000 steps; medians of "
          f"{args.rounds} interleaved rounds; tf_data_* iterate the input alone, no model; cpu: "
          "process CPU time (all threads) in train(), and per example in steady state (what "
          "a busy machine's load does not change)")
    print(f"{'':<42}{'steady ex/s':>12}{'total s':>9}{'cpu s':>7}{'cpu us/ex':>10}")
    for name, (total, steady) in med.items():
        cpu_s, per_ex = cpu_med.get(name, (float("nan"), float("nan")))
        print(f"{name:<42}{steady:>12.0f}{total:>9.1f}{cpu_s:>7.1f}{per_ex:>10.2f}")
    for shape in shapes:
        anchor = f"tf_estimator_2.15_tfrecord_{shape}"
        if anchor not in med:
            continue
        for ours in (f"estflow_port_tfrecord_{shape}", f"estflow_port_tfrecord_{shape}_as_built"):
            line = (f"{ours} / {anchor}: steady-state {med[ours][1] / med[anchor][1]:.2f}x, "
                    f"train() wall {med[ours][0] / med[anchor][0]:.2f}x of the anchor's")
            if ours in cpu_med and anchor in cpu_med:
                line += (f"; cpu in train() {cpu_med[ours][0] / cpu_med[anchor][0]:.2f}x, "
                         f"per example {cpu_med[ours][1] / cpu_med[anchor][1]:.2f}x")
            print(line)
    ours, anchor = (f"{who}_tfrecord_{TARGET_SHAPE}" for who in ("estflow_port",
                                                                   "tf_estimator_2.15"))
    if ours in med and anchor in med:
        label = f"{ours} / {anchor}"
        check(f"{label} steady-state", med[ours][1] / med[anchor][1], STEADY_VS_TF215)
        check(f"{label} train() wall", med[ours][0] / med[anchor][0], WALL_VS_TF215,
              at_most=True)
    else:
        print(f"note: no target checked (the {TARGET_SHAPE} shape: steady-state >= "
              f"{STEADY_VS_TF215:g}x, train() wall <= {WALL_VS_TF215:g}x of tf.estimator "
              f"2.15's): it needs --shapes {TARGET_SHAPE} and the TF 2.15 venv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
