"""Benchmark batch prediction against the REST server, in one run.

    python tests/benchmarks/bench_predict.py [--rows 100000 1000000 3000000] [--rounds 3]

The model is ``bench_serve.py``'s (the serving tests' fixture: a taxi-like logistic model over
raw ``tf.Example`` records), the rows are the Chicago taxi sample (18 columns, real gaps) repeated to
the size asked, with a ``trip_id`` key column, as CSV. Measured, interleaved round by round:

* the server: ``bench_serve.py``'s HTTP ``:predict`` throughput with batches of 64 examples
  (its own process; the figure the target is set against);
* ``estflow predict``'s work end to end, from reading the CSV to the published JSONL output
  (read, validate, encode, score, format, write, publish), each size in a fresh process, the
  clock started after the imports, as ``bench_preprocess.py`` does; also the whole process
  (imports included), and its peak memory (maximum resident set size).

Prints rows/s per size, the ratio to the server's batch-64 throughput (target: at least 3x
at 1M rows) and peak memory per size (it must stay flat as rows grow). Not collected by
pytest (no ``test_`` prefix).
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

REPO = Path(__file__).resolve().parents[2]
TAXI = REPO / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv"
_SERVER_64 = re.compile(r"^HTTP :predict\s+64\s+\S+\s+\S+\s+\S+\s+(\d+)", re.M)


def write_rows(path: Path, rows: int) -> None:
    """The taxi sample repeated to ``rows`` rows, a ``trip_id`` key first (CSV)."""
    lines = TAXI.read_bytes().splitlines()
    header, body = lines[0], lines[1:]
    with open(path, "wb") as out:
        out.write(b"trip_id," + header + b"\n")
        for start in range(0, rows, len(body)):
            count = min(len(body), rows - start)
            out.write(b"".join(b"t%d,%s\n" % (start + i, body[i]) for i in range(count)))


def one(model: str, csv: str, out: str) -> None:
    """In a fresh process: score ``csv`` and print the timings as JSON."""
    import resource

    import estflow.dsl as ef
    from estflow.components.predict import __main__ as predict
    from estflow.dsl.contracts import Files

    pipeline = ef.Pipeline(name="bench", predict=ef.BatchPredict(
        model=model, source=ef.CsvSource(csv), keys=("trip_id",)))
    start = time.perf_counter()
    if predict.main(["--spec", pipeline.to_json(), "--predictions", out]):
        raise RuntimeError("estflow predict failed")
    seconds = time.perf_counter() - start
    summary = json.loads((Path(out) / Files.PREDICT_RESULT).read_text())
    print(json.dumps({"seconds": seconds, "scored": summary["scored"],
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}


def run_predict(model: Path, csv: Path, out: Path) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--one", str(model), str(csv), str(out)],
                          capture_output=True, text=True, env=_env(), cwd=REPO, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"estflow predict failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def run_server(seconds: float) -> float:
    """bench_serve.py's HTTP :predict examples/s at batch 64."""
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("bench_serve.py")),
                           "--seconds", str(seconds)], capture_output=True, text=True,
                          env=_env(), cwd=REPO, timeout=600)
    match = _SERVER_64.search(done.stdout)
    if done.returncode or not match:
        raise RuntimeError(f"bench_serve.py failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return float(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 3_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server-seconds", type=float, default=3.0)
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "CSV", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        one(*args.one)
        return 0
    sys.path.insert(0, str(REPO))
    from tests.components import _serving_fixtures as fx

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fx.save_version(root / "models" / "taxi" / "1", 1)
        files = {}
        for rows in args.rows:
            files[rows] = root / f"taxi_{rows}.csv"
            write_rows(files[rows], rows)
        server: list[float] = []
        runs: dict[int, list[dict]] = {rows: [] for rows in args.rows}
        for r in range(args.rounds):  # interleaved, so load drifts hit all alike
            server.append(run_server(args.server_seconds))
            print(f"  round {r + 1} server :predict batch 64 {server[-1]:>10.0f} ex/s",
                  flush=True)
            for rows in args.rows:
                result = run_predict(root / "models" / "taxi", files[rows], root / "out")
                runs[rows].append(result)
                print(f"  round {r + 1} estflow predict {rows:>9} rows "
                      f"{result['scored'] / result['seconds']:>10.0f} rows/s "
                      f"({result['seconds']:.1f}s; process {result['process_seconds']:.1f}s, "
                      f"peak {result['maxrss_mb']:.0f} MB)", flush=True)
    base = statistics.median(server)
    print(f"\nbatch prediction (CSV -> validated -> scored -> JSONL, in-memory runner; medians "
          f"of {args.rounds} interleaved rounds)")
    print(f"server :predict, batches of 64: {base:,.0f} examples/s")
    print(f"{'rows':>10} {'rows/s':>10} {'x server':>9} {'process rows/s':>15} {'peak MB':>8}")
    for rows, results in runs.items():
        rate = statistics.median(r["scored"] / r["seconds"] for r in results)
        process = statistics.median(r["scored"] / r["process_seconds"] for r in results)
        peak = max(r["maxrss_mb"] for r in results)
        print(f"{rows:>10} {rate:>10,.0f} {rate / base:>8.2f}x {process:>15,.0f} {peak:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
