"""The anchor program on file input, for tf.estimator 2.15 (run it with the TF 2.15 venv's
python, ``~/venv-tf215/bin/python``): ``anchors/bench_estimator_tf215.py`` with its input_fn
reading the anchors' data from gzipped TFRecords of tf.Examples (``bench_tfrecord_data.py``:
parse per record before ``batch``, or ``parse_example`` after it).

Usage: ``python tests/benchmarks/bench_tfrecord_tf215.py --shape record|batch``
"""
import argparse
import os
import sys
import tempfile
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
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

parser = argparse.ArgumentParser()
parser.add_argument("--shape", choices=SHAPES, default="record")
args = parser.parse_args()
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
fc = tf.feature_column
cols = [fc.numeric_column(f"x{i}") for i in range(N_NUM)] + [
        fc.indicator_column(fc.categorical_column_with_vocabulary_list(k, v)) for k, v in CATS.items()]
input_fn = make_input_fn(args.shape, write_data())


class Timer(tf.estimator.SessionRunHook):
    def begin(self):
        self.gs = tf.compat.v1.train.get_global_step()
        self.t = {}

    def before_run(self, ctx):
        return tf.estimator.SessionRunArgs(self.gs)

    def after_run(self, ctx, vals):
        # the fetched step may be read before or after the train op's increment (no order
        # between them in one Session.run): the first step at or after WARM, and the last
        mark = (vals.results, time.time(), time.process_time())
        if vals.results >= WARM:
            self.t.setdefault("first", mark)
            self.t["last"] = mark


cfg = tf.estimator.RunConfig(model_dir=tempfile.mkdtemp(), save_checkpoints_steps=1000, save_summary_steps=100, log_step_count_steps=1000)
est = tf.estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=cols, config=cfg)
h = Timer()
t0, c0 = time.time(), time.process_time()
est.train(input_fn, steps=STEPS, hooks=[h])
total, cpu = time.time() - t0, time.process_time() - c0
(s0, t0_, c0_), (s1, t1, c1) = h.t["first"], h.t["last"]
examples = (s1 - s0) * BATCH
steady = examples / (t1 - t0_)
per_example = (c1 - c0_) / examples * 1e6
print(f"tf {tf.__version__} tf.estimator.DNNClassifier on TFRecords ({args.shape} parse): total {total:.1f}s for {STEPS} steps => {STEPS*BATCH/total:.0f} ex/s incl. startup; steady-state {steady:.0f} ex/s (steps {s0}-{s1}); cpu {cpu:.1f}s in train(), {per_example:.2f} us/example steady")
