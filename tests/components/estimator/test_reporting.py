"""The engine's TensorBoard scalars (``_engine.reporting``): written without TensorBoard's
summary modules, they are the very events ``tf.summary.scalar`` writes."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.core.util import event_pb2

from estflow.estimator._engine.reporting import read_scalars
from estflow.estimator._engine.reporting import scalar
from estflow.estimator._engine.reporting import write_scalars


def _summaries(log_dir) -> list:
    """(step, Summary.Value) of every summary event in ``log_dir``, wall times aside."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = event_pb2.Event.FromString(record.numpy())
            out.extend((event.step, value) for value in event.summary.value)
    return out


def _write(log_dir, write) -> list:
    writer = tf.summary.create_file_writer(str(log_dir))
    with writer.as_default(step=7):
        for tag, value in (("loss", 0.25), ("global_step/sec", 12.5), ("examples/sec", 3200),
                           ("auc", tf.constant(0.75, tf.float64))):
            write(tag, value)
    writer.close()
    return _summaries(log_dir)


def test_scalar_writes_what_tf_summary_scalar_writes(tmp_path):
    ours = _write(tmp_path / "ours", scalar)
    theirs = _write(tmp_path / "theirs", tf.summary.scalar)
    assert len(ours) == 4
    assert ours == theirs  # tag, step, float32 tensor and the scalars plugin's metadata


def test_write_scalars_reads_back(tmp_path):
    write_scalars(str(tmp_path), 3, {"accuracy": 0.5, "loss": 2})
    assert read_scalars(str(tmp_path / f) for f in os.listdir(tmp_path)) == {
        3: {"accuracy": 0.5, "loss": 2.0}}


@pytest.mark.slow
def test_training_summaries_do_not_import_tensorboard(tmp_path):
    """A train() whose model_fn writes no summaries never imports TensorBoard's summary API
    (its first import costs about a second in the middle of the first loops)."""
    program = f"""
import sys
import numpy as np
import estflow.estimator as estimator
def input_fn():
    import tensorflow as tf
    x = np.arange(64, dtype="float32").reshape(-1, 1)
    return tf.data.Dataset.from_tensor_slices(({{"x": x}}, x * 2)).repeat().batch(8)
est = estimator.LinearRegressor([estimator.feature_column.numeric_column("x")],
    config=estimator.RunConfig(model_dir={str(tmp_path)!r}, save_summary_steps=5,
                               steps_per_loop=5))
est.train(input_fn, steps=20)
print(sorted(m for m in sys.modules if m.startswith("tensorboard.summary")))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    steps = read_scalars(str(tmp_path / f) for f in os.listdir(tmp_path)
                         if f.startswith("events."))
    assert sorted(steps) == [5, 10, 15, 20]
    assert set(steps[20]) >= {"loss", "global_step/sec", "examples/sec"}
