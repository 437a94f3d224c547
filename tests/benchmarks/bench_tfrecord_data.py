"""The anchors' data as files, and the input_fn that reads them (issue 12).

``anchors/common.make_data()`` (65,536 rows: 20 floats, 3 categorical strings, an int64 label)
written as gzipped TFRecord files of ``tf.Example`` (4 shards), and ``make_input_fn(shape)``:
the input_fn both TFRecord programs use, word for word, the way TF tutorials write it:

* ``record``: ``TFRecordDataset(files, "GZIP").map(parse_single_example, AUTOTUNE)
  .shuffle(10000, seed).repeat().batch(256, drop_remainder=True).prefetch(AUTOTUNE)``;
* ``batch``:  ``TFRecordDataset(files, "GZIP").shuffle(10000, seed).repeat()
  .batch(256, drop_remainder=True).map(parse_example, AUTOTUNE).prefetch(AUTOTUNE)``.

This module runs under TF 2.15 (the tf.estimator anchor's venv) and TF 2.21 alike; the files
are written once (``$ESTFLOW_TFRECORD_DIR``, default ``$TMPDIR/estflow_bench_tfrecord``) and
reused. Usage as a script: ``python tests/benchmarks/bench_tfrecord_data.py [--force]``
writes them and prints where.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ANCHORS = Path(os.environ.get("ESTFLOW_ANCHORS",
                              Path(__file__).resolve().parents[2].parent / "shared" / "anchors"))
sys.path.insert(0, str(ANCHORS))

import tensorflow as tf  # noqa: E402
from common import BATCH  # noqa: E402
from common import CATS  # noqa: E402
from common import N_NUM  # noqa: E402
from common import make_data  # noqa: E402

SHARDS = 4
SHUFFLE, SEED = 10000, 42
SHAPES = ("record", "batch")
DATA_DIR = Path(os.environ.get("ESTFLOW_TFRECORD_DIR",
                               Path(tempfile.gettempdir()) / "estflow_bench_tfrecord"))


def write_data(directory: Path = DATA_DIR, *, force: bool = False) -> list[str]:
    """The shards' paths; written (atomically: a temp dir renamed) unless already there."""
    files = sorted(glob.glob(str(directory / "part-*.tfrecord.gz")))
    if len(files) == SHARDS and not force:
        return files
    x, y = make_data()
    rows = len(y)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=directory.parent))
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for shard in range(SHARDS):
        lo, hi = shard * rows // SHARDS, (shard + 1) * rows // SHARDS
        with tf.io.TFRecordWriter(str(staging / f"part-{shard:05d}.tfrecord.gz"), options) as w:
            for i in range(lo, hi):
                feature = {f"x{j}": tf.train.Feature(float_list=tf.train.FloatList(
                    value=[float(x[f"x{j}"][i, 0])])) for j in range(N_NUM)}
                for k in CATS:
                    feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[bytes(x[k][i, 0])]))
                feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[int(y[i, 0])]))
                w.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
    try:
        staging.rename(directory)
    except OSError:  # another process got there first
        shutil.rmtree(staging, ignore_errors=True)
    return sorted(glob.glob(str(directory / "part-*.tfrecord.gz")))


def make_input_fn(shape: str, files: list[str]):
    """The tutorial-style input_fn over ``files`` (see the module docstring)."""
    feature_spec = {f"x{i}": tf.io.FixedLenFeature([1], tf.float32) for i in range(N_NUM)}
    feature_spec.update({k: tf.io.FixedLenFeature([1], tf.string) for k in CATS})
    feature_spec["label"] = tf.io.FixedLenFeature([1], tf.int64)

    def parse_record(record):
        features = tf.io.parse_single_example(record, feature_spec)
        label = features.pop("label")
        return features, label

    def parse_batch(records):
        features = tf.io.parse_example(records, feature_spec)
        label = features.pop("label")
        return features, label

    def input_fn():
        dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
        if shape == "record":
            dataset = dataset.map(parse_record, num_parallel_calls=tf.data.AUTOTUNE)
        dataset = dataset.shuffle(SHUFFLE, seed=SEED).repeat()
        dataset = dataset.batch(BATCH, drop_remainder=True)
        if shape == "batch":
            dataset = dataset.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="write the files again")
    args = parser.parse_args(argv)
    files = write_data(force=args.force)
    print(f"{len(files)} gzipped TFRecord shards in {DATA_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
