"""Benchmark ``estflow serve``: HTTP ``:predict`` against calling the SavedModel in-process.

    python tests/benchmarks/bench_serve.py [--seconds 3] [--subprocess]

Builds the test fixture model (``tests/components/_serving_fixtures.py``) in a temporary
directory, serves it, and for batches of 1 and 64 serialized tf.Examples measures, in the same
run:

* in-process: ``loaded.signatures["serving_default"](examples=...)`` plus ``.numpy()``;
* HTTP: one keep-alive ``http.client`` connection posting ``{"instances": [{"b64": ...}]}``
  and decoding the JSON answer (what a client pays end to end).

Prints p50/p99 latency and throughput per row and the HTTP overhead at p50 for one example
(target: under 2 ms). By default the server runs in this process (``serve()``, a background
thread; requests are sequential, so the client and server threads rarely contend for the GIL);
``--subprocess`` runs it as ``python -m estflow.components.serve`` instead.
Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: import tests.components

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from estflow.components.serve import __main__ as serve  # noqa: E402
from tests.components import _serving_fixtures as fx  # noqa: E402


def measure(call: Callable[[], object], seconds: float, warmup: int = 50) -> np.ndarray:
    """Latencies (seconds) of back-to-back calls for about ``seconds``."""
    for _ in range(warmup):
        call()
    latencies = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - start)
    return np.asarray(latencies)


def examples(batch: int) -> list[bytes]:
    payments = ("Cash", "Credit Card", "Mobile", "")
    return [fx.serialize_example(3.0 + i % 40, 60 * (i % 30), payments[i % 4])
            for i in range(batch)]


def in_process_call(model, batch: int) -> Callable[[], object]:
    fn = model.signatures["serving_default"]
    data = examples(batch)

    def call():
        outputs = fn(examples=tf.constant(data))
        return {name: tensor.numpy() for name, tensor in outputs.items()}
    return call


def http_call(conn: http.client.HTTPConnection, batch: int) -> Callable[[], object]:
    body = json.dumps({"instances": [{"b64": base64.b64encode(e).decode()}
                                     for e in examples(batch)]}).encode()
    headers = {"Content-Type": "application/json"}

    def call():
        conn.request("POST", "/v1/models/taxi:predict", body=body, headers=headers)
        response = conn.getresponse()
        payload = json.loads(response.read())
        if response.status != 200 or len(payload["predictions"]) != batch:
            raise RuntimeError(f"bad answer {response.status}: {payload}")
        return payload
    return call


def start_subprocess(base: Path) -> tuple[subprocess.Popen, str, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.components.serve", str(base), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    line = process.stdout.readline()
    match = re.search(r"http://([\d.]+):(\d+)", line)
    if not match:
        process.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return process, match.group(1), int(match.group(2))


def row(label: str, latencies: np.ndarray, batch: int) -> str:
    p50, p99 = np.percentile(latencies, 50) * 1e3, np.percentile(latencies, 99) * 1e3
    per_second = len(latencies) / latencies.sum()
    return (f"{label:<24} {batch:>5} {p50:>9.3f} {p99:>9.3f} {per_second:>10.0f} "
            f"{per_second * batch:>12.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--subprocess", action="store_true",
                        help="run the server as a separate process")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        fx.save_version(base / "taxi" / "1", 1)
        model = tf.saved_model.load(str(base / "taxi" / "1"))
        if args.subprocess:
            process, host, port = start_subprocess(base)
            server = None
        else:
            server = serve.serve(base, poll_seconds=2.0)
            process, host, port = None, server.host, server.port
        conn = http.client.HTTPConnection(host, port, timeout=30)
        results = {}
        try:
            for batch in (1, 64):
                results[("in-process", batch)] = measure(in_process_call(model, batch),
                                                         args.seconds)
                results[("http", batch)] = measure(http_call(conn, batch), args.seconds)
        finally:
            conn.close()
            if server is not None:
                server.shutdown()
            if process is not None:
                process.terminate()
                process.wait()

    where = "subprocess" if args.subprocess else "in-process thread"
    print(f"\nestflow serve :predict benchmark (server: {where}, keep-alive http.client, "
          f"{args.seconds:g}s per row)")
    print(f"{'path':<24} {'batch':>5} {'p50 ms':>9} {'p99 ms':>9} {'req/s':>10} {'examples/s':>12}")
    for batch in (1, 64):
        print(row("in-process SavedModel", results[("in-process", batch)], batch))
        print(row("HTTP :predict", results[("http", batch)], batch))
    for batch in (1, 64):
        overhead = (np.percentile(results[("http", batch)], 50)
                    - np.percentile(results[("in-process", batch)], 50)) * 1e3
        target = " (target < 2 ms)" if batch == 1 else ""
        print(f"HTTP overhead at p50, batch {batch}: {overhead:.3f} ms{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
