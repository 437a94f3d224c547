"""The anchor ``bench_estimator_tf215.py``, ported to estflow: the same program with the
imports changed, on TF 2.21.

Same data (``anchors/common.py``), same feature columns (20 numeric + 3 indicator columns over
string vocabularies, looked up inside the model as tf.feature_column does), the same
``input_fn`` (``from_tensor_slices((X, y)).repeat().batch(256, drop_remainder=True)
.prefetch(4)``), the same canned ``DNNClassifier(hidden_units=[64, 32])`` with its default
Adagrad (learning rate 0.001 in tf.estimator 2.15's TF 2 classes, and here), the same
RunConfig, 2,000 steps, steady state timed after step 200.

What differs is only what estflow's engine does with it: several steps per ``tf.function``
call (``steps_per_loop``, default 50; the timing hook therefore sees loop boundaries, not every
step) and, unless ``--no-optimize-input``, the in-memory input read batch-first (the same
batches in the same order; ``RunConfig(optimize_input=...)``).

Usage: ``python tests/benchmarks/bench_estimator_port.py [--no-optimize-input]
[--steps-per-loop 50]`` (run from anywhere; it finds ``anchors/common.py`` like run.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ANCHORS = Path(os.environ.get("ESTFLOW_ANCHORS",
                              Path(__file__).resolve().parents[2].parent / "shared" / "anchors"))
sys.path.insert(0, str(ANCHORS))

import tensorflow as tf  # noqa: E402
from common import BATCH  # noqa: E402  (the anchors' shared task)
from common import CATS  # noqa: E402
from common import N_NUM  # noqa: E402
from common import STEPS  # noqa: E402
from common import WARM  # noqa: E402
from common import make_data  # noqa: E402

import estflow.estimator as estimator  # noqa: E402  (was: tf.estimator)

fc = estimator.feature_column  # was: tf.feature_column


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-optimize-input", action="store_true",
                        help="train on the input_fn's dataset exactly as built")
    parser.add_argument("--steps-per-loop", type=int, default=50)
    args = parser.parse_args(argv)

    cols = [fc.numeric_column(f"x{i}") for i in range(N_NUM)] + [
        fc.indicator_column(fc.categorical_column_with_vocabulary_list(k, v))
        for k, v in CATS.items()]
    x, y = make_data()

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
            BATCH, drop_remainder=True).prefetch(4)

    class Timer(estimator.SessionRunHook):
        def begin(self):
            self.t = []

        def before_run(self, ctx):
            return estimator.SessionRunArgs("global_step")  # was: the global step tensor

        def after_run(self, ctx, vals):
            self.t.append((vals.results, time.time()))

    cfg = estimator.RunConfig(model_dir=tempfile.mkdtemp(), save_checkpoints_steps=1000,
                              save_summary_steps=100, log_step_count_steps=1000,
                              steps_per_loop=args.steps_per_loop,
                              optimize_input=not args.no_optimize_input)
    est = estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=cols, config=cfg)
    h = Timer()
    t0 = time.time()
    est.train(input_fn, steps=STEPS, hooks=[h])
    total = time.time() - t0
    first = next((s, t) for s, t in h.t if s >= WARM)
    last = h.t[-1]
    steady = (last[0] - first[0]) * BATCH / (last[1] - first[1])
    inputs = "as built" if args.no_optimize_input else "read batch-first"
    print(f"tf {tf.__version__} estflow DNNClassifier port (steps_per_loop="
          f"{args.steps_per_loop}, input {inputs}): total {total:.1f}s for {STEPS} steps => "
          f"{STEPS * BATCH / total:.0f} ex/s incl. startup; steady-state {steady:.0f} ex/s "
          f"(steps {first[0]}-{last[0]})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
