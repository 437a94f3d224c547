"""``bench_tfrecord_tf215.py`` ported to estflow: the same program, the same input_fn over
gzipped TFRecords (``bench_tfrecord_data.py``), with the imports changed, on TF 2.21.

Unless ``--no-optimize-input``, the engine's input rewrites apply (``RunConfig(optimize_input=
True)``, the default: a per-record ``parse_single_example`` map moved after ``batch`` as one
vectorised parse per batch; the same batches in the same order).

Usage: ``python tests/benchmarks/bench_tfrecord_port.py --shape record|batch
[--no-optimize-input] [--steps-per-loop 50]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402
from bench_tfrecord_data import BATCH  # noqa: E402
from bench_tfrecord_data import CATS  # noqa: E402
from bench_tfrecord_data import N_NUM  # noqa: E402
from bench_tfrecord_data import SHAPES  # noqa: E402
from bench_tfrecord_data import make_input_fn  # noqa: E402
from bench_tfrecord_data import write_data  # noqa: E402
from common import STEPS  # noqa: E402
from common import WARM  # noqa: E402

import estflow.estimator as estimator  # noqa: E402  (was: tf.estimator)

fc = estimator.feature_column  # was: tf.feature_column


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="record")
    parser.add_argument("--no-optimize-input", action="store_true",
                        help="train on the input_fn's dataset exactly as built")
    parser.add_argument("--steps-per-loop", type=int, default=50)
    args = parser.parse_args(argv)

    cols = [fc.numeric_column(f"x{i}") for i in range(N_NUM)] + [
        fc.indicator_column(fc.categorical_column_with_vocabulary_list(k, v))
        for k, v in CATS.items()]
    input_fn = make_input_fn(args.shape, write_data())

    class Timer(estimator.SessionRunHook):
        def begin(self):
            self.t = []

        def before_run(self, ctx):
            return estimator.SessionRunArgs("global_step")  # was: the global step tensor

        def after_run(self, ctx, vals):
            self.t.append((vals.results, time.time(), time.process_time()))

    cfg = estimator.RunConfig(model_dir=tempfile.mkdtemp(), save_checkpoints_steps=1000,
                              save_summary_steps=100, log_step_count_steps=1000,
                              steps_per_loop=args.steps_per_loop,
                              optimize_input=not args.no_optimize_input)
    est = estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=cols, config=cfg)
    h = Timer()
    t0, c0 = time.time(), time.process_time()
    est.train(input_fn, steps=STEPS, hooks=[h])
    total, cpu = time.time() - t0, time.process_time() - c0
    first = next(m for m in h.t if m[0] >= WARM)
    last = h.t[-1]
    examples = (last[0] - first[0]) * BATCH
    steady = examples / (last[1] - first[1])
    per_example = (last[2] - first[2]) / examples * 1e6
    inputs = "as built" if args.no_optimize_input else "optimized"
    print(f"tf {tf.__version__} estflow DNNClassifier port on TFRecords ({args.shape} parse, "
          f"steps_per_loop={args.steps_per_loop}, input {inputs}): total {total:.1f}s for "
          f"{STEPS} steps => {STEPS * BATCH / total:.0f} ex/s incl. startup; steady-state "
          f"{steady:.0f} ex/s (steps {first[0]}-{last[0]}); cpu {cpu:.1f}s in train(), "
          f"{per_example:.2f} us/example steady", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
