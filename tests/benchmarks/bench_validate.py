"""The cost of the data statistics: ingest + transform wall time with and without them, in one
run (interleaved rounds, medians, fresh processes), on bench_preprocess.py's CSV (1M rows by
default: a float, a 500-value string and an int label; 0.1% broken rows).

"with" is the steps as shipped (the ingest job combines statistics.pb in its pass) followed by
the checks (the validate step's run: schema inferred and written, anomalies, the report);
"without" is the same steps with the statistics transform replaced by a no-op in the worker
process and no checks, so the difference is exactly what statistics + checks cost. The goal:
at most +10% (ratio with/without <= 1.10). A ratio below 1 means the cost is smaller than the
run-to-run noise (the spread of the rounds is printed beside it).

Usage (from the repository root)::

    python tests/benchmarks/bench_validate.py [--rows 1000000] [--rounds 3]
        [--modes steps preprocess]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_preprocess import _pipeline  # noqa: E402
from bench_preprocess import _run  # noqa: E402
from bench_preprocess import write_csv  # noqa: E402


def worker(mode: str, statistics_on: bool, csv: Path, out: Path) -> None:
    """In its own process: one run through the steps' entry points, a JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import apache_beam as beam

    from estflow.components.ingest import __main__ as ingest
    from estflow.components.ingest import job
    from estflow.components.preprocess import __main__ as preprocess
    from estflow.components.transform import __main__ as transform

    if not statistics_on:
        class _NoStatistics(beam.PTransform):
            def __init__(self, *args) -> None:
                super().__init__()

            def expand(self, splits):
                return splits

        job.WriteStatistics = _NoStatistics
    spec = _pipeline(csv).to_json()
    examples, transformed = str(out / "examples"), str(out / "transformed")
    cpu_start = _cpu_seconds()
    start = time.perf_counter()
    if mode == "preprocess":
        codes = [preprocess.main(["--spec", spec, "--examples", examples,
                                  "--transformed", transformed])]
    else:
        codes = [ingest.main(["--spec", spec, "--examples", examples]),
                 transform.main(["--spec", spec, "--examples", examples,
                                 "--transformed", transformed])]
    if statistics_on:  # the checks the validate step runs on those statistics
        import dataclasses

        import estflow.dsl as ef
        from estflow.components.validate import step

        checked = dataclasses.replace(_pipeline(csv), checks=ef.DataChecks(
            max_missing_fraction=0.5))
        step.run(checked, examples, str(out / "validation"), source_root=out,
                 progress=lambda _: None)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu_start
    written = (out / "examples" / "statistics.pb").is_file()
    print("RESULT " + json.dumps({"seconds": seconds, "cpu": cpu, "codes": codes,
                                  "statistics_written": written}), flush=True)
    os._exit(0)  # Beam + tf.Transform may crash in interpreter teardown


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children: what the work
    costs, much less sensitive than wall time to other programs sharing the machine."""
    own, children = (resource.getrusage(resource.RUSAGE_SELF),
                     resource.getrusage(resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(mode: str, statistics_on: bool, csv: Path, tmp: Path) -> tuple[float, float]:
    out = tmp / f"{mode}-{int(statistics_on)}"
    output, _ = _run([sys.executable, __file__, "--worker", mode, str(int(statistics_on)),
                      str(csv), str(out)], Path(__file__).resolve().parents[2])
    result = json.loads(output.split("RESULT ", 1)[1].splitlines()[0])
    if result["codes"] != [0] * len(result["codes"]) or \
            result["statistics_written"] != statistics_on:
        raise RuntimeError(f"{mode} (statistics {statistics_on}) went wrong: {result}")
    return result["seconds"], result["cpu"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["steps"],
                        choices=["steps", "preprocess"])
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        mode, on, csv, out = args.worker
        return worker(mode, on == "1", Path(csv), Path(out))
    with tempfile.TemporaryDirectory(prefix="estflow-bench-validate-") as tmp_dir:
        tmp = Path(tmp_dir)
        csv = tmp / "data.csv"
        write_csv(csv, args.rows)
        for mode in args.modes:
            times = {True: [], False: []}
            cpus = {True: [], False: []}
            for round_ in range(args.rounds):  # interleaved, alternating which goes first
                for on in ((True, False) if round_ % 2 == 0 else (False, True)):
                    wall, cpu = measure(mode, on, csv, tmp)
                    times[on].append(wall)
                    cpus[on].append(cpu)
                print(json.dumps({"mode": mode, "round": round_, "with": times[True][-1],
                                  "without": times[False][-1], "with_cpu": cpus[True][-1],
                                  "without_cpu": cpus[False][-1]}), flush=True)
            for what, values in (("wall", times), ("cpu", cpus)):
                with_s, without_s = (statistics.median(values[True]),
                                     statistics.median(values[False]))
                ratio = with_s / without_s
                spread = (max(values[False]) - min(values[False])) / without_s
                print(f"validate {mode} ({what}): {args.rows} rows, ingest+transform median "
                      f"{without_s:.1f}s without statistics and checks, {with_s:.1f}s with: "
                      f"ratio {ratio:.3f}, added {100 * (ratio - 1):+.1f}% (goal: at most "
                      f"+10%, {'met' if ratio <= 1.10 else 'NOT met'}); rounds without spread "
                      f"{100 * spread:.0f}% of the median", flush=True)

if __name__ == "__main__":
    main()
