"""The cost of the data statistics: ingest + transform wall time with and without them, in one
run (interleaved rounds, medians, fresh processes), on bench_preprocess.py's CSV (1M rows by
default: a float, a 500-value string and an int label; 0.1% broken rows).

"with" is the steps as shipped (the ingest job combines statistics.pb in its pass); "without"
is the same steps with the statistics transform replaced by a no-op in the worker process, so
the difference is exactly what the statistics cost. The goal: at most +10%.

Usage (from the repository root)::

    python tests/benchmarks/bench_validate.py [--rows 1000000] [--rounds 3]
        [--modes steps preprocess]
"""

from __future__ import annotations

import argparse
import json
import os
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
    start = time.perf_counter()
    if mode == "preprocess":
        codes = [preprocess.main(["--spec", spec, "--examples", examples,
                                  "--transformed", transformed])]
    else:
        codes = [ingest.main(["--spec", spec, "--examples", examples]),
                 transform.main(["--spec", spec, "--examples", examples,
                                 "--transformed", transformed])]
    seconds = time.perf_counter() - start
    written = (out / "examples" / "statistics.pb").is_file()
    print("RESULT " + json.dumps({"seconds": seconds, "codes": codes,
                                  "statistics_written": written}), flush=True)
    os._exit(0)  # Beam + tf.Transform may crash in interpreter teardown


def measure(mode: str, statistics_on: bool, csv: Path, tmp: Path) -> float:
    out = tmp / f"{mode}-{int(statistics_on)}"
    output, _ = _run([sys.executable, __file__, "--worker", mode, str(int(statistics_on)),
                      str(csv), str(out)], Path(__file__).resolve().parents[2])
    result = json.loads(output.split("RESULT ", 1)[1].splitlines()[0])
    if result["codes"] != [0] * len(result["codes"]) or \
            result["statistics_written"] != statistics_on:
        raise RuntimeError(f"{mode} (statistics {statistics_on}) went wrong: {result}")
    return result["seconds"]


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
            for round_ in range(args.rounds):  # interleaved, alternating which goes first
                for on in ((True, False) if round_ % 2 == 0 else (False, True)):
                    times[on].append(measure(mode, on, csv, tmp))
                print(json.dumps({"mode": mode, "round": round_, "with": times[True][-1],
                                  "without": times[False][-1]}), flush=True)
            with_s, without_s = (statistics.median(times[True]),
                                 statistics.median(times[False]))
            print(f"validate {mode}: {args.rows} rows, ingest+transform median "
                  f"{without_s:.1f}s without statistics, {with_s:.1f}s with: "
                  f"ratio {with_s / without_s:.3f} (goal <= 1.10)", flush=True)


if __name__ == "__main__":
    main()
