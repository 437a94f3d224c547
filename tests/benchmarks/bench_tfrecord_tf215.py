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
        s = vals.results
        if s in (WARM, STEPS - 1):
            self.t[s] = (time.time(), time.process_time())


cfg = tf.estimator.RunConfig(model_dir=tempfile.mkdtemp(), save_checkpoints_steps=1000, save_summary_steps=100, log_step_count_steps=1000)
est = tf.estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=cols, config=cfg)
h = Timer()
t0, c0 = time.time(), time.process_time()
est.train(input_fn, steps=STEPS, hooks=[h])
total, cpu = time.time() - t0, time.process_time() - c0
examples = (STEPS - 1 - WARM) * BATCH
steady = examples / (h.t[STEPS - 1][0] - h.t[WARM][0])
per_example = (h.t[STEPS - 1][1] - h.t[WARM][1]) / examples * 1e6
print(f"tf {tf.__version__} tf.estimator.DNNClassifier on TFRecords ({args.shape} parse): total {total:.1f}s for {STEPS} steps => {STEPS*BATCH/total:.0f} ex/s incl. startup; steady-state {steady:.0f} ex/s (steps {WARM}-{STEPS-1}); cpu {cpu:.1f}s in train(), {per_example:.2f} us/example steady")
