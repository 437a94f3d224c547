"""Benchmark ``estflow serve`` against calling the SavedModel in-process, in the same run.

    python tests/benchmarks/bench_serve.py [--seconds 2] [--rounds 3] [--clients 16]
                                           [--http-layers]

Builds the test fixture model (``tests/components/_serving_fixtures.py``) in a temporary
directory and, for ``--rounds`` rounds, each path in turn (interleaved, so that the load of a
shared machine falls on all of them alike) for ``--seconds``:

* anchor: ``loaded.signatures["serving_default"](examples=...)`` plus ``.numpy()``, batches of
  1 and 64 serialized tf.Examples;
* REST: one keep-alive ``http.client`` connection posting ``{"instances": [{"b64": ...}]}``
  and decoding the JSON answer (what a client pays end to end), batches of 1 and 64; the
  server runs in this process (``serve()``, background threads);
* gRPC: TF Serving's ``PredictionServiceStub.Predict`` on one channel, batch 64, same server;
* concurrent: ``--clients`` clients (threads of two client processes), each posting batch-1
  REST requests back to back, against ``python -m estflow.components.serve`` with and without
  ``--enable-batching`` (each its own process, as deployed).

Prints medians over the rounds, and the three ratios with their targets: REST batch 64 over
the anchor (>= 0.6x), gRPC batch 64 over the anchor (>= 0.8x), concurrent batch-1 throughput
with batching over without (>= 3x). ``--http-layers`` instead compares the HTTP layer: the
standard-library loop (``components/serve/http.py``) against aiohttp serving the same
application (the same registry and REST handler in a thread pool), sequential batch 1 and 64
and the concurrent clients, unbatched. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import statistics
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

MODELS = {"taxi": "taxi (the test fixture: logistic regression in a few ops)",
          "estimator": "estimator (an exported wide & deep DNNLinearCombinedClassifier)",
          "dnn": "dnn (the taxi features through 4 dense layers of 1024)"}
"""The models measured: name -> description (``--models``)."""
SIGNATURES = {"estimator": "predict"}
"""The signature measured, where not ``serving_default`` (its input is ``examples``)."""

BATCHING = "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 0 }\n" \
           "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 100 }\n"
"""The batching parameters of the concurrent measurement: TF Serving's advice for a CPU
(no timeout: a batch is whatever arrived while the previous one ran)."""

# A client process: THREADS keep-alive connections posting BODY back to back for SECONDS;
# prints the number of answers. Standard library only (it starts fast and holds no TF).
_CLIENT = r"""
import http.client, sys, threading, time
host, port, threads, seconds, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    float(sys.argv[4]), sys.argv[5]
body = sys.stdin.buffer.read()
counts = [0] * threads
start = threading.Barrier(threads + 1)
def run(i):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    start.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"status {response.status}")
        counts[i] += 1
workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for w in workers: w.start()
start.wait()
for w in workers: w.join()
print(sum(counts))
"""

# An aiohttp server over the same application as estflow serve's HTTP loop (--http-layers).
_AIOHTTP = r"""
import asyncio, sys
from concurrent.futures import ThreadPoolExecutor
from aiohttp import web
from estflow.components.serve import json_fast
from estflow.components.serve.http import Request
from estflow.components.serve.registry import ModelRegistry
from estflow.components.serve.rest import make_app
registry = ModelRegistry(__import__("pathlib").Path(sys.argv[1]))
registry.refresh()
app, pool = make_app(registry), ThreadPoolExecutor(16)
async def handle(request):
    body = await request.read()
    req = Request(request.method, request.path_qs, "HTTP/1.1",
                  {k.lower(): v for k, v in request.headers.items()}, body or None)
    status, payload, headers = await asyncio.get_running_loop().run_in_executor(pool, app, req)
    data = payload if isinstance(payload, bytes) else json_fast.dumps(payload)
    return web.Response(body=data, status=status, headers=headers,
                        content_type="application/json")
server = web.Application(client_max_size=10 * 2**20)
server.router.add_route("*", "/{tail:.*}", handle)
async def main():
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"estflow serve: listening on http://127.0.0.1:{port} (aiohttp)", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


class DnnTaxiModel(fx.TaxiModel):
    """The fixture's signatures over a DNN: the three features through ``depth`` dense ReLU
    layers of ``width`` units (16 MB of weights), a model whose call costs milliseconds, as a
    served DNN's does; the fixture's logistic regression costs a fraction of one."""

    def __init__(self, width: int = 1024, depth: int = 4) -> None:
        super().__init__(*fx.WEIGHTS[1])
        rng = np.random.default_rng(0)
        sizes = [3, *[width] * depth]
        self.layers = [tf.Variable(rng.normal(0, (2 / n) ** 0.5, (n, m)).astype(np.float32))
                       for n, m in zip(sizes, sizes[1:], strict=False)]
        self.out = tf.Variable(rng.normal(0, width ** -0.5, (width, 1)).astype(np.float32))

    def _head(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(examples, fx.FEATURE_SPEC)
        cash = tf.cast(tf.equal(features["payment_type"], "Cash"), tf.float32)
        x = tf.concat([features["fare"] / 50.0,
                       tf.cast(features["trip_seconds"], tf.float32) / 3600.0, cash], axis=1)
        for weights in self.layers:
            x = tf.nn.relu(x @ weights)
        logits = x @ self.out + self.bias
        logistic = tf.sigmoid(logits)
        return {"logits": logits, "logistic": logistic,
                "probabilities": tf.concat([1.0 - logistic, logistic], axis=1),
                "class_ids": tf.cast(logistic > 0.5, tf.int64)}


def save_estimator(export_dir: Path) -> None:
    """What estflow exports for a wide & deep taxi model: ``DNNLinearCombinedClassifier``
    (bucketized and crossed columns, an embedding, hidden units 128-64-32) trained a few steps,
    ``export_saved_model`` with a parsing receiver; its ``predict`` signature takes the
    serialized tf.Examples as ``examples``. Its call costs about the same for 1 row as for 64
    (the feature columns' ops, not the rows, cost the time)."""
    import shutil

    import estflow.estimator as estimator

    fc = estimator.feature_column
    fare, seconds = fc.numeric_column("fare"), fc.numeric_column("trip_seconds", dtype=tf.int64)
    payment = fc.categorical_column_with_vocabulary_list("payment_type",
                                                         ["Cash", "Credit Card", "Mobile", ""])
    fare_buckets = fc.bucketized_column(fare, [2.0, 5.0, 10.0, 20.0, 40.0])
    cross = fc.crossed_column([fare_buckets, payment], 100)
    wide = [fare_buckets, fc.bucketized_column(seconds, [60, 300, 600, 1200]), payment, cross]
    deep = [fare, seconds, fc.indicator_column(payment), fc.embedding_column(cross, 8)]
    rng = np.random.default_rng(0)
    features = {"fare": rng.uniform(2, 60, (256, 1)).astype(np.float32),
                "trip_seconds": rng.integers(0, 3000, (256, 1)),
                "payment_type": rng.choice([b"Cash", b"Mobile"], (256, 1))}
    labels = (features["fare"] > 20).astype(np.int64)
    work = export_dir.parent / "estimator"
    model = estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[128, 64, 32],
        model_dir=str(work / "model"), progress=lambda message: None)
    model.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat()
                .batch(32), steps=5)
    exported = os.fsdecode(model.export_saved_model(  # bytes, as tf.estimator 2.15's
        str(work / "export"), estimator.parsing_serving_input_receiver_fn(
            fc.make_parse_example_spec(wide + deep))))
    shutil.copytree(exported, export_dir)


def save_model(kind: str, export_dir: Path) -> None:
    """The model ``kind`` (see :data:`MODELS`) as a SavedModel at ``export_dir``."""
    if kind == "taxi":
        fx.save_version(export_dir, 1)
        return
    if kind == "estimator":
        save_estimator(export_dir)
        return
    model = DnnTaxiModel()
    tf.saved_model.save(model, str(export_dir), signatures={
        "serving_default": model.serving_default, "classify": model.classify,
        "regress": model.regress})


def examples(batch: int) -> list[bytes]:
    payments = ("Cash", "Credit Card", "Mobile", "")
    return [fx.serialize_example(3.0 + i % 40, 60 * (i % 30), payments[i % 4])
            for i in range(batch)]


def rest_body(batch: int, signature: str = "serving_default") -> bytes:
    return json.dumps({"signature_name": signature,
                       "instances": [{"b64": base64.b64encode(e).decode()}
                                     for e in examples(batch)]}).encode()


def throughput(call: Callable[[], object], seconds: float, warmup: int = 20) -> float:
    """Calls per second of back-to-back calls for about ``seconds``."""
    for _ in range(warmup):
        call()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        count += 1
    return count / (time.perf_counter() - start)


def in_process_call(model, batch: int, signature: str) -> Callable[[], object]:
    fn, data = model.signatures[signature], tf.constant(examples(batch))

    def call():
        return {name: tensor.numpy() for name, tensor in fn(examples=data).items()}
    return call


def rest_call(conn: http.client.HTTPConnection, batch: int,
              signature: str = "serving_default") -> Callable[[], object]:
    body, headers = rest_body(batch, signature), {"Content-Type": "application/json"}

    def call():
        conn.request("POST", "/v1/models/taxi:predict", body=body, headers=headers)
        response = conn.getresponse()
        payload = json.loads(response.read())
        if response.status != 200 or len(payload["predictions"]) != batch:
            raise RuntimeError(f"bad answer {response.status}: {payload}")
        return payload
    return call


def grpc_call(stub, batch: int, signature: str) -> Callable[[], object]:
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "taxi"
    request.model_spec.signature_name = signature
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(examples(batch), dtype=tf.string))

    def call():
        outputs = stub.Predict(request, 60).outputs
        return {name: tf.make_ndarray(tensor) for name, tensor in outputs.items()}
    return call


def start_process(argv: list[str]) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, cwd=ROOT)
    line = process.stdout.readline()
    match = re.search(r"http://[\d.]+:(\d+)", line)
    if not match:
        process.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return process, int(match.group(1))


def concurrent(port: int, clients: int, seconds: float,
               signature: str = "serving_default") -> float:
    """Requests per second of ``clients`` concurrent batch-1 clients (two processes)."""
    body, split = rest_body(1, signature), [clients - clients // 2, clients // 2]
    procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, "127.0.0.1", str(port), str(n),
                               str(seconds), "/v1/models/taxi:predict"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False)
             for n in split if n]
    counts = [int(p.communicate(body, timeout=seconds + 120)[0]) for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("a client failed")
    return sum(counts) / seconds


def median(values: list[float]) -> float:
    return statistics.median(values)


def main_speed(args: argparse.Namespace, base: Path, kind: str) -> None:
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    model = tf.saved_model.load(str(base / "taxi" / "1"))
    sig = SIGNATURES.get(kind, "serving_default")
    params = base.parent / "batching.txt"
    params.write_text(BATCHING)
    serve_argv = [sys.executable, "-m", "estflow.components.serve", str(base), "--port", "0",
                  "--poll-seconds", "0"]
    plain, plain_port = start_process(serve_argv)
    batched, batched_port = start_process(
        [*serve_argv, "--enable-batching", "--batching-parameters-file", str(params)])
    server = serve.serve(base, poll_seconds=0, grpc_port=0)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    channel = grpc.insecure_channel(server.grpc.address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    paths: dict[str, Callable[[], float]] = {
        "anchor 1": lambda: throughput(in_process_call(model, 1, sig), args.seconds),
        "REST 1": lambda: throughput(rest_call(conn, 1, sig), args.seconds),
        "anchor 64": lambda: 64 * throughput(in_process_call(model, 64, sig), args.seconds),
        "REST 64": lambda: 64 * throughput(rest_call(conn, 64, sig), args.seconds),
        "gRPC 64": lambda: 64 * throughput(grpc_call(stub, 64, sig), args.seconds),
        "concurrent": lambda: concurrent(plain_port, args.clients, args.seconds, sig),
        "concurrent batched": lambda: concurrent(batched_port, args.clients, args.seconds,
                                                 sig),
    }
    results: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for port in (plain_port, batched_port):  # each server's threads warmed up, untimed
            concurrent(port, args.clients, 1.0, sig)
        for _ in range(args.rounds):
            for name, measure in paths.items():
                results[name].append(measure())
    finally:
        conn.close()
        channel.close()
        server.shutdown()
        for process in (plain, batched):
            process.terminate()
            process.wait()
    m = {name: median(values) for name, values in results.items()}
    print(f"\nestflow serve :predict benchmark, model {MODELS[kind]} ({args.rounds} rounds of "
          f"{args.seconds:g}s per path, interleaved; medians; examples/s)")
    for name, label in (("anchor 1", "in-process SavedModel, batch 1"),
                        ("REST 1", "REST :predict, batch 1"),
                        ("anchor 64", "in-process SavedModel, batch 64"),
                        ("REST 64", "REST :predict, batch 64"),
                        ("gRPC 64", "gRPC Predict, batch 64"),
                        ("concurrent", f"{args.clients} clients, batch 1, no batching"),
                        ("concurrent batched", f"{args.clients} clients, batch 1, batching")):
        print(f"  {label:<42} {m[name]:>10.0f}   rounds: "
              + " ".join(f"{v:.0f}" for v in results[name]))
    overhead = (1 / m["REST 1"] - 1 / m["anchor 1"]) * 1e3
    print(f"REST overhead per batch-1 request: {overhead:.3f} ms (target < 2 ms)")
    for label, ratio, target in (
            ("REST batch 64 / in-process", m["REST 64"] / m["anchor 64"], 0.6),
            ("gRPC batch 64 / in-process", m["gRPC 64"] / m["anchor 64"], 0.8),
            (f"{args.clients} concurrent batch-1 clients, batching / none",
             m["concurrent batched"] / m["concurrent"], 3.0)):
        verdict = "ok" if ratio >= target else "BELOW TARGET"
        print(f"ratio {label} ({kind}): {ratio:.2f}x (target >= {target:g}x) {verdict}")


def main_http_layers(args: argparse.Namespace, base: Path, kind: str) -> None:
    sig = SIGNATURES.get(kind, "serving_default")
    serve_argv = [sys.executable, "-m", "estflow.components.serve", str(base), "--port", "0",
                  "--poll-seconds", "0"]
    servers = {"stdlib loop": start_process(serve_argv),
               "aiohttp": start_process([sys.executable, "-c", _AIOHTTP, str(base)])}
    conns = {name: http.client.HTTPConnection("127.0.0.1", port, timeout=60)
             for name, (_, port) in servers.items()}
    results: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, (_, port) in servers.items():
                conn = conns[name]
                for path, measure in (
                        ("batch 1", lambda c=conn: throughput(rest_call(c, 1, sig), args.seconds)),
                        ("batch 64",
                         lambda c=conn: 64 * throughput(rest_call(c, 64, sig), args.seconds)),
                        (f"{args.clients} clients",
                         lambda p=port: concurrent(p, args.clients, args.seconds, sig))):
                    results.setdefault((name, path), []).append(measure())
    finally:
        for conn in conns.values():
            conn.close()
        for process, _ in servers.values():
            process.terminate()
            process.wait()
    print(f"\nestflow serve HTTP layer, model {MODELS[kind]} ({args.rounds} rounds of "
          f"{args.seconds:g}s, interleaved; medians; examples/s; unbatched)")
    for (name, path), values in results.items():
        print(f"  {name:<12} {path:<12} {median(values):>10.0f}   rounds: "
              + " ".join(f"{v:.0f}" for v in values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--models", default="taxi,estimator",
                        help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--http-layers", action="store_true",
                        help="compare the stdlib HTTP loop with aiohttp instead")
    args = parser.parse_args(argv)
    for kind in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp) / "models"
            save_model(kind, base / "taxi" / "1")
            if args.http_layers:
                main_http_layers(args, base, kind)
            else:
                main_speed(args, base, kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
