"""BoostedTreesClassifier / BoostedTreesRegressor against tf.estimator 2.8 (the last release
with boosted trees; its figures: reference/boosted_trees_tf28.json, recorded by
reference/record_boosted_trees_tf28.py on TF 2.8.4), checkpoints, export, argument checks and
the DSL declaration's model_fn."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import kernels

import estflow.dsl as ef
import estflow.estimator as estimator
from estflow.estimator import model_fn_for
from estflow.estimator._boosted import quantiles
from tests.components.estimator.reference.boosted_trees_cases import cases
from tests.components.estimator.reference.boosted_trees_cases import has_numeric

fc = estimator.feature_column
HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "reference", "boosted_trees_tf28.json")) as _f:
    REFERENCE = json.load(_f)
CASES = cases()


def _quiet(_message: str) -> None:
    pass


def _columns(case):
    out = []
    for col in case["columns"]:
        if col[0] == "numeric":
            out.append(fc.numeric_column(col[1]))
        elif col[0] == "bucketized":
            out.append(fc.bucketized_column(fc.numeric_column(col[1]), col[2]))
        else:
            out.append(fc.indicator_column(fc.categorical_column_with_vocabulary_list(col[1],
                                                                                      col[2])))
    return out


def _train_input(features, labels, batch_size):
    return lambda: tf.data.Dataset.from_tensor_slices((dict(features), labels)).repeat().batch(
        batch_size)


def _eval_input(features, labels):
    return lambda: tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(
        len(labels))


# -- the quantile sketch ---------------------------------------------------------------------
def test_quantile_sketch_matches_tf28_boundaries():
    """The Python port of the sketch gives TF's boundaries: exactly for columns with at most
    ~num_quantiles distinct values; the dense columns differ from TF 2.8's kernels in at most a
    couple of boundaries (an unexplained difference in the final compression, see
    quantiles.py)."""
    exact = 0
    for name, ref in REFERENCE["cases"].items():
        for key, want in ref["quantile_boundaries"].items():
            got = quantiles.boundaries_of(CASES[name]["train"][0][key])
            want32 = np.float32(want).tolist()
            got32 = np.float32(got).tolist()
            exact += got32 == want32
            assert abs(len(got32) - len(want32)) <= 1, (name, key)
            assert len(set(got32) ^ set(want32)) <= 0.1 * len(want32), (name, key)
            assert got32[0] == want32[0] and got32[-1] == want32[-1]
    assert exact >= 7  # of 9: iris (4), titanic age, synthetic x0, x2


# -- accuracy against tf.estimator 2.8 ---------------------------------------------------------
TOLERANCE = {  # case: {metric: absolute tolerance}
    # quantile boundaries of `fare` differ (see above): a few eval examples flip
    "titanic_numeric": {"accuracy": 0.02, "auc": 0.01, "average_loss": 0.01},
    # no sketch: the same trees, float rounding only
    "titanic_bucketized": {"accuracy": 1e-6, "auc": 1e-3, "average_loss": 1e-3},
    "iris_multiclass": {"accuracy": 1e-6, "average_loss": 2e-3},
    "synthetic_regression": {"average_loss": 0.003},
}


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_metrics_match_tf28(name, tmp_path):
    case, ref = CASES[name], REFERENCE["cases"][name]
    cls = (estimator.BoostedTreesClassifier if case["kind"] == "classifier"
           else estimator.BoostedTreesRegressor)
    est = cls(_columns(case), model_dir=str(tmp_path), progress=_quiet, **case["params"])
    # tf.estimator's max_steps counted tree-growing steps; estflow also counts the sketch's
    sketch = case["params"]["n_batches_per_layer"] if has_numeric(case) else 0
    est.train(_train_input(*case["train"], case["batch_size"]),
              max_steps=case["max_steps"] + sketch)
    metrics = est.evaluate(_eval_input(*case["eval"]))
    for key, tolerance in TOLERANCE[name].items():
        assert abs(metrics[key] - ref["metrics"][key]) <= tolerance, (
            key, metrics[key], ref["metrics"][key])
    state = est.variables()
    names = {k.split("_", 1)[1]: v for k, v in state.items() if k.startswith("store/model/")}
    assert int(names["num_trees"].numpy()) == ref["trees"]
    assert int(names["num_layers_attempted"].numpy()) == ref["layers_attempted"]
    assert int(np.sum(names["tree_is_finalized"].numpy())) == ref["finalized_trees"]


# -- checkpoints --------------------------------------------------------------------------------
def _small_problem():
    r = np.random.RandomState(3)
    x = r.randn(512).astype(np.float32)
    z = r.uniform(0, 10, 512).astype(np.float32)
    c = r.choice(["a", "b", "c"], 512)
    y = ((x + (c == "b") - 0.1 * z + 0.3 * r.randn(512)) > 0).astype(np.int64)
    cols = [fc.numeric_column("x"), fc.bucketized_column(fc.numeric_column("z"), [2.0, 5.0, 8.0]),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"]))]
    return {"x": x, "z": z, "c": c}, y, cols


def _small_estimator(model_dir, cols):
    return estimator.BoostedTreesClassifier(
        cols, n_batches_per_layer=2, model_dir=str(model_dir), n_trees=3, max_depth=3,
        center_bias=True, progress=_quiet)


def test_checkpoint_restore_continues_training(tmp_path):
    """Training stopped mid-sketch, mid-centering and mid-layer and resumed by new Estimators
    on the model_dir ends with exactly the model of one uninterrupted run."""
    features, labels, cols = _small_problem()
    whole = _train_input(features, labels, 512)  # every batch is the whole dataset
    straight = _small_estimator(tmp_path / "straight", cols)
    straight.train(whole, max_steps=25)
    previous = 0
    for target in (1, 4, 9, 25):  # 1: mid-sketch, 4: centering, 9: mid-layer
        resumed = _small_estimator(tmp_path / "resumed", cols)
        assert resumed.global_step == previous
        resumed.train(whole, max_steps=target)
        previous = target
    want, got = straight.variables(), resumed.variables()
    assert sorted(want) == sorted(got)
    for key in want:
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=key)
    ensemble = {k.split("_", 1)[1]: v for k, v in got.items() if k.startswith("store/model/")}
    assert int(ensemble["num_layers_attempted"].numpy()) > 0
    eval_input = _eval_input(features, labels)
    assert resumed.evaluate(eval_input)["loss"] == straight.evaluate(eval_input)["loss"]


# -- export ------------------------------------------------------------------------------------
_NOT_CORE = ("BoostedTrees", "PyFunc", "EagerPyFunc", "PyFuncStateless")


def _ops(export_dir: str) -> set[str]:
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops = set()
    for graph in proto.meta_graphs:
        ops |= {n.op for n in graph.graph_def.node}
        for fn in graph.graph_def.library.function:
            ops |= {n.op for n in fn.node_def}
    return ops


def test_export_loads_and_uses_only_core_ops(tmp_path):
    features, labels, cols = _small_problem()
    est = _small_estimator(tmp_path / "model", cols)
    est.train(_train_input(features, labels, 512), max_steps=30)
    export_dir = os.fsdecode(est.export_saved_model(
        str(tmp_path / "export"),
        estimator.parsing_serving_input_receiver_fn(fc.make_parse_example_spec(cols))))
    ops = _ops(export_dir)
    assert not [op for op in ops if op.startswith(_NOT_CORE)]
    missing = [op for op in sorted(ops)
               if not kernels.get_registered_kernels_for_op(op).kernel]
    assert not missing, f"ops without kernels in this TensorFlow: {missing}"

    examples = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(features["x"][i])])),
        "z": tf.train.Feature(float_list=tf.train.FloatList(value=[float(features["z"][i])])),
        "c": tf.train.Feature(bytes_list=tf.train.BytesList(value=[features["c"][i].encode()])),
    })).SerializeToString() for i in range(8)]
    want = np.array([p["probabilities"] for p in est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({k: v[:8] for k, v in features.items()}
                                                   ).batch(8))])
    loaded = tf.saved_model.load(export_dir)
    got = loaded.signatures["predict"](examples=tf.constant(examples))["probabilities"]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    classify = loaded.signatures["serving_default"](inputs=tf.constant(examples))
    np.testing.assert_allclose(classify["scores"].numpy(), want, rtol=1e-6)
    # TF 1 loading, as TensorFlow Serving's C++ loader does: restore, then run the signature
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
        sig = meta.signature_def["predict"]
        out = session.run(sig.outputs["probabilities"].name,
                          {sig.inputs["examples"].name: examples})
    np.testing.assert_allclose(out, want, rtol=1e-6)


# -- arguments ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, field", [
    ({"n_batches_per_layer": 0}, "n_batches_per_layer"),
    ({"n_trees": 0}, "n_trees"),
    ({"max_depth": -1}, "max_depth"),
    ({"learning_rate": 0.0}, "learning_rate"),
    ({"l1_regularization": -1.0}, "l1_regularization"),
    ({"l2_regularization": "x"}, "l2_regularization"),
    ({"min_node_weight": -0.5}, "min_node_weight"),
    ({"pruning_mode": "later"}, "pruning_mode"),
    ({"tree_complexity": 0.1}, "tree_complexity"),
    ({"pruning_mode": "post"}, "tree_complexity"),
    ({"quantile_sketch_epsilon": 0.0}, "quantile_sketch_epsilon"),
    ({"n_classes": 1}, "n_classes"),
    ({"n_classes": 3, "center_bias": True}, "center_bias"),
    ({"train_in_memory": True, "n_batches_per_layer": 2}, "n_batches_per_layer"),
    ({"weight_column": 3}, "weight_column"),
    ({"feature_columns": [fc.categorical_column_with_identity("c", 3)]}, "feature_columns"),
    ({"feature_columns": [tf.feature_column.numeric_column("x")]}, "feature_columns"),
    ({"feature_columns": []}, "feature_columns"),
])
def test_invalid_arguments_name_the_argument(kwargs, field):
    args = {"feature_columns": [fc.numeric_column("x")], "n_batches_per_layer": 1, **kwargs}
    with pytest.raises((ValueError, TypeError), match=f"`{field}"):
        estimator.BoostedTreesClassifier(**args)


def test_regressor_arguments_name_the_argument():
    with pytest.raises(ValueError, match="`label_dimension`"):
        estimator.BoostedTreesRegressor([fc.numeric_column("x")], 1, label_dimension=0)
    with pytest.raises(ValueError, match="`center_bias`"):
        estimator.BoostedTreesRegressor([fc.numeric_column("x")], 1, label_dimension=2,
                                        center_bias=True)


# -- the DSL declaration ------------------------------------------------------------------------
def test_dsl_declaration_model_fn(tmp_path):
    r = np.random.RandomState(0)
    x = r.randn(256).astype(np.float32)
    c = r.randint(0, 4, 256)
    y = ((x > 0.3) | (c == 2)).astype(np.int64)
    model = ef.BoostedTreesClassifier(("x", ef.Indicator("c")), n_batches_per_layer=1,
                                      n_trees=5, max_depth=3)
    est = estimator.Estimator(model_fn_for(model, {"c": 4}), str(tmp_path), progress=_quiet)
    data = _train_input({"x": x, "c": c}, y, 256)
    est.train(data, max_steps=20)
    assert est.evaluate(data, steps=1)["accuracy"] > 0.97
    prediction = next(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"x": x[:4], "c": c[:4]}).batch(4)))
    assert sorted(prediction) == ["class_ids", "logistic", "logits", "probabilities"]
    with pytest.raises(ValueError, match="cardinality"):
        model_fn_for(model, {})
