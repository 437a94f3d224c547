"""Preprocessing throughput: estflow from a CSV file on disk to written TFRecords, side by side
with the tf.Transform anchors (``tests/benchmarks/anchors/tft_anchor.py``), in one run.

The same features as the anchors: ``x`` (float, z-score) and ``s`` (500 string values,
vocabulary with top_k=1000 and one OOV bucket), plus an int label (a Pipeline needs one). The
anchors feed generated rows from memory and write nothing; estflow reads a CSV file, parses and
validates every row (0.1% of the rows are deliberately broken and rejected with their reason),
splits train/eval, writes raw Examples, analyzes, transforms and writes transformed Examples,
the transform_fn and the statistics.

Every measurement runs in a fresh process, through the steps' entry points (``main``); like
the anchors, the clock starts after the imports. Peak memory is the process's maximum resident
set size.

Usage (from the repository root)::

    python tests/benchmarks/bench_preprocess.py [--rows 100000 1000000 3000000]
        [--skip-anchors] [--modes preprocess steps]

``preprocess`` is the fused job ``estflow preprocess`` runs; ``steps`` is the ingest step then
the transform step (what ``estflow run`` runs), each timed in-process, summed.

``--taxi-rows N ...`` instead runs the taxi example's preprocessing at scale: its CSV repeated
to N rows, then ``python -m estflow.components.ingest`` and ``... transform`` each in its own
process, exactly as ``estflow run`` starts them. Per step: the process wall, rows/s (data rows
/ wall), peak RSS, and the longest stretch without a line of output (the progress reports).

``--taxi-run N ...`` instead runs the whole ``estflow run`` of the taxi example on its CSV
repeated to N rows (``bench_taxi_run.py``): per step the wall from the run's record, rows/s
for ingest, transform and evaluate, the peak RSS of the step's processes; the run's wall and
longest silence.

``--runners N`` instead runs the taxi example's transform step on N rows on three Beam runners,
interleaved over ``--rounds`` (``bench_runners.py``): the in-memory FnApiRunner, the
multi-process DirectRunner and the PortableRunner with a worker pool.

After each table, every target of issue 26 with its ratio and a verdict (the constants below).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from targets import check  # tests/benchmarks/targets.py: a ratio, its target, a verdict

REPO = Path(__file__).resolve().parents[2]
ANCHOR = Path(os.environ.get("ESTFLOW_ANCHORS", Path(__file__).resolve().parent / "anchors")) \
    / "tft_anchor.py"  # the repo's copy unless $ESTFLOW_ANCHORS names another folder
BAD_EVERY = 1000  # one broken row per thousand: the rejected-row path is exercised

# Issue 26's targets, printed after the tables (each a ratio measured in the same run):
STEPS_VS_RB = 1.5  # ingest+transform rows/s / the tft RecordBatch anchor's, at >= 1M rows
STEPS_VS_RB_FROM = 1_000_000  # the smallest size that target is set for (1M and 3M rows)
TAXI_PEAK_GROWTH = 1.10  # taxi: a step's peak RSS at the largest size / at the smallest
TAXI_RATE_GROWTH = 1.0  # taxi: rows/s at the largest size / at the smallest (per step, both)


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """Anchor-like data as CSV, written in chunks (3M rows in a few seconds)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as out:
        out.write("x,s,label\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            x = rng.normal(size=n).astype(np.float32)
            s = rng.integers(0, 500, n)
            y = rng.integers(0, 2, n)
            lines = [f"{a:.7g},c{b},{c}\n" for a, b, c in zip(x.tolist(), s.tolist(), y.tolist(), strict=True)]
            for i in range(BAD_EVERY - 1 - start % BAD_EVERY, n, BAD_EVERY):
                lines[i] = "not-a-number,c1,0\n" if (start + i) % 2 else "1.0,c1\n"
            out.writelines(lines)


TAXI_DATA = REPO / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv"


def write_taxi_csv(path: Path, rows: int) -> None:
    """The taxi example's data rows, repeated (in order) to ``rows`` data rows."""
    header, *lines = TAXI_DATA.read_text().splitlines(keepends=True)
    with open(path, "w") as out:
        out.write(header)
        block = "".join(lines)
        for _ in range(rows // len(lines)):
            out.write(block)
        out.writelines(lines[:rows % len(lines)])


def _step(cmd: list[str], rows: int, env: dict[str, str] | None = None) -> dict:
    """Run one step's process: its wall, rows/s, peak RSS (GB) and longest silence (s)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    last, silence, tail = start, 0.0, []
    for output in proc.stdout:
        now = time.perf_counter()
        silence, last = max(silence, now - last), now
        tail = (tail + [output])[-40:]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{''.join(tail)}")
    return {"seconds": wall, "rows_per_s": rows / wall, "peak_gb": usage.ru_maxrss / 1e6,
            "silent_s": max(silence, wall - (last - start))}


def taxi_spec(rows: int, tmp: Path) -> tuple[Path, Path]:
    """The taxi example's data repeated to ``rows`` rows in ``tmp``, and its pipeline reading
    them: (the spec file, the CSV)."""
    import dataclasses

    import estflow.dsl as ef
    from estflow.pipelines.examples import taxi

    csv = tmp / f"taxi-{rows}.csv"
    write_taxi_csv(csv, rows)
    spec = tmp / "taxi.json"
    spec.write_text(dataclasses.replace(taxi.pipeline, source=ef.CsvSource(str(csv))).to_json())
    return spec, csv


def measure_taxi(rows: int, tmp: Path) -> dict:
    """The taxi example's ingest and transform steps on ``rows`` rows, each in its process."""
    spec, csv = taxi_spec(rows, tmp)
    examples, transformed = tmp / "taxi-examples", tmp / "taxi-transformed"
    python = [sys.executable, "-m"]
    result = {"ingest": _step([*python, "estflow.components.ingest", "--spec", str(spec),
                               "--examples", str(examples)], rows)}
    result["transform"] = _step([*python, "estflow.components.transform", "--spec", str(spec),
                                 "--examples", str(examples), "--transformed",
                                 str(transformed)], rows)
    csv.unlink()
    return result


def _pipeline(csv: Path):
    import estflow.dsl as ef

    return ef.Pipeline(
        name="bench",
        source=ef.CsvSource(str(csv)),
        features=(ef.Numeric("x", normalize="z_score"),
                  ef.CategoricalVocab("s", top_k=1000, num_oov_buckets=1)),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x",)),
        train=ef.TrainSpec(max_steps=1),
    )


def worker(mode: str, csv: Path, out: Path) -> None:
    """Runs in its own process: time one preprocessing run through the steps' entry points
    (what ``estflow preprocess`` / ``estflow run`` execute), print a JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from estflow.components.ingest import __main__ as ingest
    from estflow.components.preprocess import __main__ as preprocess
    from estflow.components.transform import __main__ as transform

    spec = _pipeline(csv).to_json()
    examples, transformed = str(out / "examples"), str(out / "transformed")
    start = time.perf_counter()
    if mode == "preprocess":
        codes = [preprocess.main(["--spec", spec, "--examples", examples,
                                  "--transformed", transformed])]
    else:
        codes = [ingest.main(["--spec", spec, "--examples", examples]),
                 transform.main(["--spec", spec, "--examples", examples,
                                 "--transformed", transformed])]
    seconds = time.perf_counter() - start
    summary = json.loads((out / "examples" / "ingest.json").read_text())
    print("RESULT " + json.dumps({"seconds": seconds, "rejected": summary["rejected"],
                                  "codes": codes}), flush=True)
    os._exit(0)  # Beam + tf.Transform may crash in interpreter teardown


def _run(cmd: list[str], cwd: Path) -> tuple[str, float]:
    """Run ``cmd``, return its output and peak RSS in GB (this child's own, via wait4)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    return output, usage.ru_maxrss / 1e6  # Linux: KiB -> GB


def measure_estflow(mode: str, csv: Path, rows: int, tmp: Path) -> dict:
    output, peak = _run([sys.executable, __file__, "--worker", mode, str(csv),
                         str(tmp / mode)], REPO)
    result = json.loads(output.split("RESULT ", 1)[1].splitlines()[0])
    return {"seconds": result["seconds"], "rows_per_s": rows / result["seconds"],
            "peak_gb": peak, "rejected": result["rejected"]}


def measure_anchor(mode: str, rows: int) -> dict:
    output, peak = _run([sys.executable, str(ANCHOR), str(rows), mode], REPO)
    match = re.search(r"secs ([\d.]+) rows/s (\d+)", output)
    return {"seconds": float(match.group(1)), "rows_per_s": float(match.group(2)),
            "peak_gb": peak}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 3_000_000])
    parser.add_argument("--modes", nargs="+", default=["preprocess", "steps"],
                        choices=["preprocess", "steps"])
    parser.add_argument("--skip-anchors", action="store_true")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds per size; the table shows medians")
    parser.add_argument("--taxi-rows", type=int, nargs="+",
                        help="run the taxi example's ingest and transform steps at these sizes "
                             "instead (per step: wall, rows/s, peak RSS, longest silence)")
    parser.add_argument("--taxi-run", type=int, nargs="+", metavar="ROWS",
                        help="instead: the whole estflow run of the taxi example at these "
                             "sizes (per step: wall, rows/s, peak RSS; the run's silence)")
    parser.add_argument("--runners", type=int, metavar="ROWS",
                        help="instead: the taxi transform step on ROWS rows on three Beam "
                             "runners (in-memory, multi-process direct, portable with a "
                             "worker pool), interleaved over --rounds")
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "CSV", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))
    if args.taxi_rows:
        return _taxi(args.taxi_rows)
    if args.taxi_run:
        from bench_taxi_run import taxi_run  # tests/benchmarks/bench_taxi_run.py

        return taxi_run(args.taxi_run)
    if args.runners:
        from bench_runners import compare_runners  # tests/benchmarks/bench_runners.py

        return compare_runners(args.runners, args.rounds)
    results = []
    with tempfile.TemporaryDirectory(prefix="estflow-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        for rows in args.rows:
            csv = tmp / f"data-{rows}.csv"
            write_csv(csv, rows)
            rounds = []
            for _ in range(args.rounds):  # interleaved: load drifts hit every contender alike
                row = {mode: measure_estflow(mode, csv, rows, tmp) for mode in args.modes}
                if not args.skip_anchors:
                    row["anchor_dict"] = measure_anchor("dict", rows)
                    row["anchor_rb"] = measure_anchor("rb", rows)
                print(json.dumps({"rows": rows, **row}), flush=True)
                rounds.append(row)
            results.append({"rows": rows, **_medians(rounds)})
    _print_table(results)


def _taxi(sizes: list[int]) -> None:
    results = []
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="estflow-bench-taxi-") as tmp_dir:
            result = measure_taxi(rows, Path(tmp_dir))
        print(json.dumps({"rows": rows, **result}), flush=True)
        results.append((rows, result))
    print("\ntaxi example, its preprocessing steps as estflow run starts them (process walls; "
          "rows/s = data rows / wall; silence = longest time without an output line)")
    print("rows        step        seconds    rows/s   peak RSS   silence")
    for rows, result in results:
        for step, r in result.items():
            print(f"{rows:<11d} {step:<10s} {r['seconds']:8.1f} {r['rows_per_s']:9.0f} "
                  f"{r['peak_gb']:7.2f} GB {r['silent_s']:7.1f} s")
    scale_checks("taxi", results)


def scale_checks(label: str, results: list[tuple[int, dict]]) -> str | None:
    """Issue 26's taxi targets over ``results`` ((rows, {step: {"seconds", "rows_per_s",
    "peak_gb"}}) per size): each step's peak RSS and rows/s at the largest size against the
    smallest, and the steps' rows/s together. Returns the sizes compared ("at L / at S rows"),
    None (with a note) when there is one size only."""
    ordered = sorted(results, key=lambda result: result[0])
    (small, first), (large, last) = ordered[0], ordered[-1]
    if large == small:
        print("note: the taxi targets compare the largest size with the smallest: give two "
              "sizes or more")
        return None
    at = f"at {large} / at {small} rows"
    for step in first:
        check(f"{label} {step} peak RSS {at}", last[step]["peak_gb"] / first[step]["peak_gb"],
              TAXI_PEAK_GROWTH, at_most=True)
        check(f"{label} {step} rows/s {at}", last[step]["rows_per_s"] / first[step]["rows_per_s"],
              TAXI_RATE_GROWTH)
    both = [rows / sum(r["seconds"] for r in steps.values()) for rows, steps in
            (ordered[0], ordered[-1])]
    check(f"{label} ingest+transform rows/s {at}", both[1] / both[0], TAXI_RATE_GROWTH)
    return at


def _medians(rounds: list[dict]) -> dict:
    out = {}
    for name in rounds[0]:
        seconds = statistics.median(r[name]["seconds"] for r in rounds)
        out[name] = {"seconds": seconds, "rows_per_s": statistics.median(
            r[name]["rows_per_s"] for r in rounds), "peak_gb": max(
            r[name]["peak_gb"] for r in rounds)}
    return out


def _print_table(results: list[dict]) -> None:
    print("\nmedians; rows/s = rows / seconds of work after imports (estflow: CSV on disk to "
          "written TFRecords)")
    print("rows       run                    seconds    rows/s   peak RSS   vs dict   vs rb")
    for row in results:
        dict_rate = row.get("anchor_dict", {}).get("rows_per_s")
        rb_rate = row.get("anchor_rb", {}).get("rows_per_s")
        for name in ("preprocess", "steps", "anchor_dict", "anchor_rb"):
            if name not in row:
                continue
            r = row[name]
            vs_dict = f"{r['rows_per_s'] / dict_rate:5.2f}x" if dict_rate else "     -"
            vs_rb = f"{r['rows_per_s'] / rb_rate:5.2f}x" if rb_rate else "     -"
            label = {"preprocess": "estflow preprocess", "steps": "estflow ingest+transform",
                     "anchor_dict": "anchor tft dict", "anchor_rb": "anchor tft rb"}[name]
            print(f"{row['rows']:<10d} {label:<24s} {r['seconds']:7.1f} {r['rows_per_s']:9.0f} "
                  f"{r['peak_gb']:7.2f} GB   {vs_dict}  {vs_rb}")
    for row in results:
        if "steps" not in row or "anchor_rb" not in row:
            continue
        ratio = row["steps"]["rows_per_s"] / row["anchor_rb"]["rows_per_s"]
        if row["rows"] >= STEPS_VS_RB_FROM:
            check(f"steps / tft rb at {row['rows']} rows", ratio, STEPS_VS_RB)
        else:
            print(f"ratio steps / tft rb at {row['rows']} rows: {ratio:.2f}x (no target below "
                  f"{STEPS_VS_RB_FROM} rows; >= {STEPS_VS_RB:g}x from there)")
    if not any("steps" in row and "anchor_rb" in row for row in results):
        print(f"note: no steps / tft rb ratio (target >= {STEPS_VS_RB:g}x at 1M and 3M rows): "
              "it needs the steps mode and the anchors")


if __name__ == "__main__":
    main()
