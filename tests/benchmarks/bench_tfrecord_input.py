"""The input pipeline of the TFRecord programs alone (``bench_tfrecord_data.py``'s input_fn),
iterated with no model: steady state after 200 batches, 2,000 batches. ``--optimized`` times
the dataset the engine trains on (``RunConfig(optimize_input=True)``'s rewrites).

Usage: ``python tests/benchmarks/bench_tfrecord_input.py --shape record|batch [--optimized]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402
from bench_tfrecord_data import BATCH  # noqa: E402
from bench_tfrecord_data import SHAPES  # noqa: E402
from bench_tfrecord_data import make_input_fn  # noqa: E402
from bench_tfrecord_data import write_data  # noqa: E402
from common import STEPS  # noqa: E402
from common import WARM  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="record")
    parser.add_argument("--optimized", action="store_true")
    args = parser.parse_args(argv)
    input_fn = make_input_fn(args.shape, write_data())
    t0 = time.time()
    dataset = input_fn()
    if args.optimized:
        from estflow.estimator._engine.input_fusion import batch_first
        dataset, changed = batch_first(dataset)
        if not changed:
            print("note: no rewrite applies; timing the dataset as built")
    it = iter(dataset)
    for _ in range(WARM):
        next(it)
    start = time.time()
    for _ in range(STEPS - WARM):
        next(it)
    end = time.time()
    how = "optimized" if args.optimized else "as built"
    print(f"tf {tf.__version__} TFRecord input alone ({args.shape} parse, {how}): total "
          f"{end - t0:.1f}s for {STEPS} batches; steady-state "
          f"{(STEPS - WARM) * BATCH / (end - start):.0f} ex/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
