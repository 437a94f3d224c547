"""The ceiling the anchors' input pipeline sets: ``from_tensor_slices((X, y)).repeat()
.batch(256, drop_remainder=True).prefetch(4)`` over the anchors' data, iterated with no model
at all (steady state after 200 batches, 2,000 batches).

Any trainer fed this dataset as built runs at most this fast; estflow's engine reads it
batch-first (``RunConfig(optimize_input=True)``, the default), which this script also times.

Usage: ``python tests/benchmarks/bench_input.py [--batch-first]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ANCHORS = Path(os.environ.get("ESTFLOW_ANCHORS",
                              Path(__file__).resolve().parents[2].parent / "shared" / "anchors"))
sys.path.insert(0, str(ANCHORS))

import tensorflow as tf  # noqa: E402
from common import BATCH  # noqa: E402
from common import STEPS  # noqa: E402
from common import WARM  # noqa: E402
from common import make_data  # noqa: E402

from estflow.estimator._engine.input_fusion import batch_first  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-first", action="store_true")
    args = parser.parse_args(argv)
    x, y = make_data()
    t0 = time.time()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
        BATCH, drop_remainder=True).prefetch(4)
    if args.batch_first:
        dataset, changed = batch_first(dataset)
        assert changed
    it = iter(dataset)
    for _ in range(WARM):
        next(it)
    start = time.time()
    for _ in range(STEPS - WARM):
        next(it)
    end = time.time()
    how = "batch-first" if args.batch_first else "as built"
    print(f"tf {tf.__version__} tf.data alone ({how}): total {end - t0:.1f}s for {STEPS} "
          f"batches; steady-state {(STEPS - WARM) * BATCH / (end - start):.0f} ex/s",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
