"""Training throughput of the estflow engine on the anchors' synthetic task.

The same work as ``tests/benchmarks/anchors/bench_keras_tf221.py`` (Keras 3 ``fit``) and
``bench_estimator_tf215.py`` (the original tf.estimator.DNNClassifier): 20 numeric + 3
categorical features (4, 10, 50 values), binary label, batch 256, hidden units [64, 32],
Adagrad 0.05 (the DSL default; the anchor's DNNClassifier uses 0.001), 2,000 steps, steady
state timed after step 200.

estflow trains on tf.Transform's output, where categorical strings already are int ids; so by
default the strings become ids once, up front (numpy), and the input pipeline is exactly the
anchors' (``from_tensor_slices((X, y)).repeat().batch(256, drop_remainder=True).prefetch(4)``).
``--string-lookup`` instead maps strings to ids per batch inside ``tf.data`` (a static hash
table), which adds input work the anchors do inside their models. Either way the model one-hots
the ids (``Indicator``), like the anchors' indicator / one-hot columns.

On 2 CPU cores this task is input-bound: with a cached batch the engine's steps alone run at
several times these rates.

Usage: ``python benchmarks/bench_train.py [--steps 2000] [--steps-per-loop 50]
[--string-lookup]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import estflow.dsl as ef  # noqa: E402
from estflow.estimator import Estimator  # noqa: E402
from estflow.estimator import TrainHook  # noqa: E402
from estflow.estimator import model_fn_for  # noqa: E402

N_NUM = 20
CATS = {"c0": ["a", "b", "c", "d"], "c1": [f"v{i}" for i in range(10)],
        "c2": [f"w{i}" for i in range(50)]}
BATCH, WARM = 256, 200


def make_data(n: int = 65536, seed: int = 0):
    """The anchors' data (anchors/common.py), same generator and seed."""
    r = np.random.RandomState(seed)
    x = {f"x{i}": r.randn(n, 1).astype("float32") for i in range(N_NUM)}
    for k, voc in CATS.items():
        x[k] = r.choice(voc, size=(n, 1)).astype(object).astype(bytes)
    y = ((x["x0"] + x["x1"] - x["x2"] + (x["c0"] == b"a")) > 0.5).astype("int64")
    return x, y


def _ids(x):
    """The categorical strings as int64 ids (what tf.Transform's vocabularies produce)."""
    out = dict(x)
    for k, vocab in CATS.items():
        index = {v.encode(): i for i, v in enumerate(vocab)}
        out[k] = np.vectorize(index.__getitem__, otypes=[np.int64])(x[k])
    return out


def input_fn_for(x, y, string_lookup: bool = False):
    """The anchors' input pipeline over ids, or over strings with a per-batch lookup."""
    if not string_lookup:
        ids = _ids(x)
        return lambda: tf.data.Dataset.from_tensor_slices((ids, y)).repeat().batch(
            BATCH, drop_remainder=True).prefetch(4)

    def input_fn():
        tables = {k: tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(v),
                                                tf.range(len(v), dtype=tf.int64)),
            default_value=0) for k, v in CATS.items()}

        def to_ids(features, labels):
            return {k: tables[k].lookup(v) if k in tables else v
                    for k, v in features.items()}, labels

        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
        return ds.batch(BATCH, drop_remainder=True).map(to_ids).prefetch(4)

    return input_fn


class _Timer(TrainHook):
    def __init__(self) -> None:
        self.marks: list[tuple[int, float]] = []

    def after_loop(self, global_step: int, loss: float) -> None:
        self.marks.append((global_step, time.perf_counter()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--steps-per-loop", type=int, default=50)
    parser.add_argument("--string-lookup", action="store_true",
                        help="map strings to ids per batch in tf.data instead of up front")
    args = parser.parse_args(argv)
    x, y = make_data()
    model = ef.DNNClassifier(
        hidden_units=(64, 32),
        feature_columns=tuple(f"x{i}" for i in range(N_NUM)) + tuple(
            ef.Indicator(k) for k in CATS))
    config = ef.RunConfig(save_checkpoints_steps=1000, save_summary_steps=100,
                          log_step_count_steps=1000, steps_per_loop=args.steps_per_loop)
    est = Estimator(model_fn_for(model, {k: len(v) for k, v in CATS.items()}),
                    tempfile.mkdtemp(prefix="bench_train_"), config, progress=lambda m: None)
    timer = _Timer()
    start = time.perf_counter()
    est.train(input_fn_for(x, y, args.string_lookup), max_steps=args.steps, hooks=[timer])
    total = time.perf_counter() - start
    warm = next((s, t) for s, t in timer.marks if s >= WARM)
    last = timer.marks[-1]
    steady = (last[0] - warm[0]) * BATCH / (last[1] - warm[1])
    inputs = "string lookup in tf.data" if args.string_lookup else "ids"
    print(f"tf {tf.__version__} estflow DNNClassifier (steps_per_loop={args.steps_per_loop}, "
          f"{inputs}): "
          f"total {total:.1f}s for {args.steps} steps => {args.steps * BATCH / total:.0f} ex/s "
          f"incl. startup; steady-state {steady:.0f} ex/s (steps {warm[0]}-{last[0]})",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
