"""Record tf.estimator's BoostedTreesClassifier/Regressor figures for ``test_boosted_trees.py``.

tf.estimator 2.15 has no boosted trees (they were removed from tensorflow-estimator in 2.9,
Jan 2022), and TF 2.15/2.21 wheels register no kernels for the ``BoostedTrees*`` ops (their
op definitions remain, every kernel is gone). The last release that runs them is
tensorflow-estimator 2.8.0 on TensorFlow 2.8, which needs Python <= 3.10::

    python3.10 -m venv /root/venv-tf28
    /root/venv-tf28/bin/pip install 'tensorflow-cpu==2.8.4' 'tensorflow-estimator==2.8.0' \
        'protobuf<3.20' 'numpy<1.24'
    /root/venv-tf28/bin/python tests/components/estimator/reference/record_boosted_trees_tf28.py

It writes ``boosted_trees_tf28.json`` beside it: per case (``boosted_trees_cases.py``) the
``evaluate()`` results on the eval split, the trained ensemble's size, and the quantile
boundaries the sketch gave each numeric column (one whole-data batch, the ops called directly).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from boosted_trees_cases import cases  # noqa: E402

OUT = os.path.join(HERE, "boosted_trees_tf28.json")


def columns(case):
    fc = tf.feature_column
    out = []
    for col in case["columns"]:
        if col[0] == "numeric":
            out.append(fc.numeric_column(col[1]))
        elif col[0] == "bucketized":
            out.append(fc.bucketized_column(fc.numeric_column(col[1]), col[2]))
        else:
            out.append(fc.indicator_column(
                fc.categorical_column_with_vocabulary_list(col[1], col[2])))
    return out


def boundaries(case):
    """The sketch's boundaries of each numeric column over the whole training split."""
    r = tf.raw_ops
    keys = [col[1] for col in case["columns"] if col[0] == "numeric"]
    if not keys:
        return {}
    values = [tf.constant(case["train"][0][k]) for k in keys]
    weights = tf.ones([len(case["train"][1])])
    summaries = r.BoostedTreesMakeQuantileSummaries(float_values=values, example_weights=weights,
                                                    epsilon=0.01)
    handle = r.BoostedTreesQuantileStreamResourceHandleOp(
        container="", shared_name="q_" + "_".join(keys))
    r.BoostedTreesCreateQuantileStreamResource(quantile_stream_resource_handle=handle,
                                               epsilon=0.01, num_streams=len(keys))
    r.BoostedTreesQuantileStreamResourceAddSummaries(quantile_stream_resource_handle=handle,
                                                     summaries=summaries)
    r.BoostedTreesQuantileStreamResourceFlush(quantile_stream_resource_handle=handle,
                                              num_buckets=100)
    out = r.BoostedTreesQuantileStreamResourceGetBucketBoundaries(
        quantile_stream_resource_handle=handle, num_features=len(keys))
    return {k: [float(v) for v in b.numpy()] for k, b in zip(keys, out, strict=True)}


def run(case) -> dict:
    features, labels = case["train"]
    eval_features, eval_labels = case["eval"]

    def train_input_fn():
        return tf.data.Dataset.from_tensor_slices((dict(features), labels)).repeat().batch(
            case["batch_size"])

    def eval_input_fn():
        return tf.data.Dataset.from_tensor_slices((dict(eval_features), eval_labels)).batch(
            len(eval_labels))

    cls = (tf.estimator.BoostedTreesClassifier if case["kind"] == "classifier"
           else tf.estimator.BoostedTreesRegressor)
    with tempfile.TemporaryDirectory() as model_dir:
        config = tf.estimator.RunConfig(tf_random_seed=0, log_step_count_steps=1000)
        est = cls(columns(case), model_dir=model_dir, config=config, **case["params"])
        est.train(train_input_fn, max_steps=case["max_steps"])
        metrics = est.evaluate(eval_input_fn, steps=1)
        reader = tf.train.load_checkpoint(model_dir)
        names = [n for n, _ in tf.train.list_variables(model_dir) if n.endswith("_serialized")]
        from tensorflow.core.kernels.boosted_trees import boosted_trees_pb2
        proto = boosted_trees_pb2.TreeEnsemble()
        proto.ParseFromString(reader.get_tensor(names[0]))
        preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
            dict(eval_features)).batch(64)))
    key = "probabilities" if case["kind"] == "classifier" else "predictions"
    return {
        "metrics": {k: float(v) for k, v in metrics.items()},
        "trees": len(proto.trees),
        "finalized_trees": sum(m.is_finalized for m in proto.tree_metadata),
        "nodes": [len(t.nodes) for t in proto.trees],
        "layers_attempted": proto.growing_metadata.num_layers_attempted,
        f"first_{key}": [[float(x) for x in np.ravel(p[key])] for p in preds[:5]],
        "quantile_boundaries": boundaries(case),
    }


def main() -> int:
    from importlib import metadata

    out = {"recorded": datetime.date.today().isoformat(),
           "versions": {"python": platform.python_version(),
                        **{n: metadata.version(n) for n in (
                            "tensorflow-cpu", "tensorflow-estimator", "numpy")}},
           "note": "tf.estimator 2.8.0's canned/boosted_trees.py (the last release with boosted "
                   "trees) on TF 2.8.4; max_steps counts tree-growing steps (tf.estimator "
                   "does not count the quantile batches)",
           "cases": {}}
    for name, case in cases().items():
        print("recording", name, flush=True)
        out["cases"][name] = run(case)
        print(json.dumps(out["cases"][name]["metrics"]), flush=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
