"""The tf.estimator-signature premade Estimators (components/estimator/canned.py): each one
learns on small synthetic data, restores from its checkpoint, exports; defaults (optimizers,
learning rates) are tf.estimator 2.15's; bad arguments fail at construction, naming them."""

import os
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import estflow.estimator as estimator
from estflow.estimator import ModeKeys
from estflow.estimator import canned

fc = estimator.feature_column
COLORS = ["red", "green", "blue"]
NUMERIC = [fc.numeric_column(k) for k in ("x0", "x1", "x2")]
COLOR = fc.categorical_column_with_vocabulary_list("color", COLORS)
DNN_COLUMNS = NUMERIC + [fc.indicator_column(COLOR)]
LINEAR_COLUMNS = NUMERIC + [COLOR]


def _data(n=384, seed=0):
    r = np.random.RandomState(seed)
    x = {f"x{i}": r.randn(n).astype("float32") for i in range(3)}
    x["color"] = np.array(COLORS, dtype=object)[r.randint(0, 3, n)].astype(bytes)
    x["w"] = np.ones(n, "float32")  # a weight column (the models must not read it as input)
    red = (x["color"] == b"red").astype("float32")
    score = x["x0"] + x["x1"] - x["x2"] + 1.5 * red
    target = (score + 0.1 * r.randn(n)).astype("float32")
    labels = {"binary": (score > 0.5).astype("int64"),
              "multi": np.digitize(score, [-0.5, 1.0]).astype("int64"),
              "regression": target,
              "skewed": (score > 2.0).astype("int64"),  # a prior far from 1/2
              "shifted": target + 2.0}  # a mean far from 0
    return x, labels


FEATURES, LABELS = _data()


def _train_fn(labels, batch=32):
    return lambda: tf.data.Dataset.from_tensor_slices((FEATURES, labels)).repeat().batch(batch)


def _eval_fn(labels):
    return lambda: tf.data.Dataset.from_tensor_slices((FEATURES, labels)).batch(128)


def _predict_fn(n=16):
    return lambda: tf.data.Dataset.from_tensor_slices(
        {k: v[:n] for k, v in FEATURES.items()}).batch(8)


def _config(path):
    return estimator.RunConfig(model_dir=str(path), save_checkpoints_steps=1000,
                               save_summary_steps=1000, log_step_count_steps=1000,
                               tf_random_seed=1)


def _quiet(message):
    del message


def _adam():
    return keras.optimizers.Adam(0.05)


# name -> (label kind, build(model_dir, config) -> Estimator)
CASES = {
    "dnn_classifier": ("binary", lambda d, c: estimator.DNNClassifier(
        [16, 8], DNN_COLUMNS, d, optimizer=keras.optimizers.Adagrad(0.3), config=c,
        progress=_quiet)),
    "dnn_regressor": ("regression", lambda d, c: estimator.DNNRegressor(
        [16], DNN_COLUMNS, d, optimizer=_adam, dropout=0.1, config=c, progress=_quiet)),
    "linear_classifier": ("multi", lambda d, c: estimator.LinearClassifier(
        LINEAR_COLUMNS, d, n_classes=3, label_vocabulary=["lo", "mid", "hi"], config=c,
        progress=_quiet)),
    "linear_regressor": ("regression", lambda d, c: estimator.LinearRegressor(
        LINEAR_COLUMNS, d, weight_column="w", optimizer="SGD", config=c, progress=_quiet)),
    "wide_deep_classifier": ("binary", lambda d, c: estimator.DNNLinearCombinedClassifier(
        d, linear_feature_columns=[COLOR], linear_optimizer=keras.optimizers.Ftrl(0.2),
        dnn_feature_columns=NUMERIC, dnn_optimizer=_adam, dnn_hidden_units=[8],
        batch_norm=True, config=c, progress=_quiet)),
    "wide_deep_regressor": ("regression", lambda d, c: estimator.DNNLinearCombinedRegressor(
        d, linear_feature_columns=LINEAR_COLUMNS, linear_optimizer="SGD",
        dnn_feature_columns=DNN_COLUMNS, dnn_optimizer=_adam, dnn_hidden_units=[8],
        config=c, progress=_quiet)),
    "baseline_classifier": ("skewed", lambda d, c: estimator.BaselineClassifier(
        d, weight_column=fc.numeric_column("w"), config=c, progress=_quiet)),
    "baseline_regressor": ("shifted", lambda d, c: estimator.BaselineRegressor(
        d, optimizer="Adagrad", config=c, progress=_quiet)),
}


def _labels_for(kind):
    labels = LABELS[kind]
    return np.array(["lo", "mid", "hi"])[labels] if kind == "multi" else labels


def _assert_same_predictions(first, second):
    assert len(first) == len(second) > 0
    for a, b in zip(first, second, strict=True):
        assert set(a) == set(b)
        for key in a:
            if a[key].dtype.kind in "fc":
                np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)
            else:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("name", sorted(CASES))
def test_learns_and_restores_into_a_fresh_instance(tmp_path, name):
    kind, build = CASES[name]
    labels = _labels_for(kind)
    est = build(None, _config(tmp_path))
    assert isinstance(est, estimator.Estimator)
    est.train(_train_fn(labels), steps=1)
    before = est.evaluate(_eval_fn(labels))["loss"]
    est.train(_train_fn(labels), steps=79)
    metrics = est.evaluate(_eval_fn(labels))
    assert metrics["global_step"] == 80
    assert metrics["loss"] < before, (before, metrics)
    y = LABELS[kind]
    if kind == "skewed":  # a baseline learns the prior, never beats it
        probability = next(est.predict(_predict_fn()))["probabilities"][1]
        assert probability == pytest.approx(y.mean(), abs=0.05)
    elif kind == "shifted":  # ... or the mean
        assert metrics["prediction/mean"] == pytest.approx(y.mean(), abs=0.2)
        assert metrics["average_loss"] < y.var() * 1.1
    elif kind == "regression":
        assert metrics["average_loss"] < 0.5 * y.var(), (metrics, y.var())
    else:
        majority = np.bincount(y).max() / len(y)
        assert metrics["accuracy"] > majority + 0.1, (metrics, majority)

    predictions = list(est.predict(_predict_fn()))
    restored = build(est.model_dir, None)
    assert restored.global_step == 80
    _assert_same_predictions(predictions, list(restored.predict(_predict_fn())))
    if kind in ("regression", "shifted"):
        assert set(predictions[0]) == {"predictions"}
    else:
        expected = {"logits", "probabilities", "class_ids", "classes", "all_class_ids",
                    "all_classes"} | ({"logistic"} if kind != "multi" else set())
        assert set(predictions[0]) == expected


def _serialized(n):
    examples = []
    for i in range(n):
        feature = {f"x{j}": tf.train.Feature(float_list=tf.train.FloatList(
            value=[FEATURES[f"x{j}"][i]])) for j in range(3)}
        feature["color"] = tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[FEATURES["color"][i]]))
        examples.append(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString())
    return tf.constant(examples)


def test_dnn_classifier_port_exports_a_saved_model_with_equal_outputs(tmp_path):
    """The README's port: tf.estimator code with only the imports changed."""
    cfg = estimator.RunConfig(model_dir=str(tmp_path / "model"), save_checkpoints_steps=1000,
                              save_summary_steps=100, log_step_count_steps=1000)
    est = estimator.DNNClassifier(hidden_units=[16, 8], feature_columns=DNN_COLUMNS,
                                  config=cfg, progress=_quiet)
    est.train(_train_fn(LABELS["binary"]), steps=20)
    path = est.export_saved_model(
        str(tmp_path / "export"),
        estimator.parsing_serving_input_receiver_fn(fc.make_parse_example_spec(DNN_COLUMNS)))
    loaded = tf.saved_model.load(path)
    # tf.estimator's signatures: serving_default = classification (TF Serving's Classify, on
    # serialized examples as "inputs"), classification, regression (Regress, the logistic)
    # and predict (every prediction).
    assert set(loaded.signatures) == {"serving_default", "classification", "regression",
                                      "predict"}
    served = loaded.signatures["predict"](examples=_serialized(16))
    predicted = list(est.predict(_predict_fn(16), yield_single_examples=False))
    expected = {k: np.concatenate([p[k] for p in predicted]) for k in predicted[0]}
    assert set(served) == set(expected)
    for key, value in expected.items():
        if value.dtype.kind == "f":  # serving parses VarLen (sparse) categorical inputs
            np.testing.assert_allclose(served[key].numpy(), value, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(served[key].numpy(), value)
    for name in ("serving_default", "classification"):
        classified = loaded.signatures[name](inputs=_serialized(16))
        np.testing.assert_allclose(classified["scores"].numpy(), expected["probabilities"],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(classified["classes"].numpy(), expected["all_classes"])
    regressed = loaded.signatures["regression"](inputs=_serialized(16))["outputs"]
    np.testing.assert_allclose(regressed.numpy(), expected["logistic"], rtol=1e-5, atol=1e-6)
    methods = _signature_methods(path)
    assert methods == {"serving_default": "tensorflow/serving/classify",
                       "classification": "tensorflow/serving/classify",
                       "regression": "tensorflow/serving/regress",
                       "predict": "tensorflow/serving/predict"}


def _signature_methods(path) -> dict[str, str]:
    """The SignatureDefs' method names, as TF Serving reads them from saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(os.fsdecode(path)) / "saved_model.pb").read_bytes())
    return {k: v.method_name for k, v in proto.meta_graphs[0].signature_def.items()
            if not k.startswith("__")}


def test_regressor_exports_tf_servings_regression_signature(tmp_path):
    est = estimator.DNNRegressor(hidden_units=[8], feature_columns=DNN_COLUMNS,
                                 model_dir=str(tmp_path / "model"), progress=_quiet)
    est.train(_train_fn(LABELS["regression"]), steps=5)
    path = est.export_saved_model(
        str(tmp_path / "export"),
        estimator.parsing_serving_input_receiver_fn(fc.make_parse_example_spec(DNN_COLUMNS)))
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {"serving_default", "regression", "predict"}
    predicted = np.concatenate([p["predictions"] for p in est.predict(
        _predict_fn(16), yield_single_examples=False)])
    regressed = loaded.signatures["regression"](inputs=_serialized(16))["outputs"].numpy()
    np.testing.assert_allclose(regressed, predicted, rtol=1e-5, atol=1e-6)
    assert _signature_methods(path)["serving_default"] == "tensorflow/serving/regress"


def test_a_receiver_without_one_string_input_keeps_predict_as_serving_default(tmp_path):
    """Classify takes serialized examples: with a raw-tensor receiver that signature is left
    out (with a note) and serving_default is the predict signature."""
    est = estimator.LinearClassifier(feature_columns=[fc.numeric_column("x0")],
                                     model_dir=str(tmp_path / "model"), progress=_quiet)
    est.train(_train_fn(LABELS["binary"]), steps=3)
    notes = []
    est._progress = notes.append
    receiver = lambda: estimator.ServingInputReceiver(  # noqa: E731
        features_fn=lambda inputs: {"x0": inputs["x0"]},
        receiver_specs={"x0": tf.TensorSpec([None, 1], tf.float32)})
    path = est.export_saved_model(str(tmp_path / "export"), receiver)
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {"serving_default", "predict"}
    out = loaded.signatures["serving_default"](x0=tf.constant([[0.5], [-2.0]]))
    assert out["probabilities"].shape == (2, 2)
    assert any("left out signature 'classification'" in n for n in notes)

def _train_spec(est):
    """The EstimatorSpec the model_fn returns in TRAIN mode (called eagerly)."""
    features = {k: tf.constant(v[:8]) for k, v in FEATURES.items()}
    features.update({f"x{i}": features["x0"] for i in range(3, 30)})  # for `many`
    return est._model_fn(features, tf.constant(LABELS["binary"][:8]), ModeKeys.TRAIN)


def _optimizer_of(spec):
    return type(spec.optimizer).__name__, float(spec.optimizer.learning_rate)


many = [fc.numeric_column(f"x{i}") for i in range(30)]


@pytest.mark.parametrize("build, expected", [
    # tf.estimator 2.15's DNN: get_optimizer_instance_v2(name) -> the class's own default
    (lambda: estimator.DNNClassifier([4], DNN_COLUMNS), ("Adagrad", 0.001)),
    (lambda: estimator.DNNRegressor([4], DNN_COLUMNS, optimizer="SGD"), ("SGD", 0.01)),
    # linear: a name gets 0.2 however many columns; None: FTRL at min(0.2, 1/sqrt(n))
    (lambda: estimator.LinearClassifier(LINEAR_COLUMNS), ("Ftrl", 0.2)),
    (lambda: estimator.LinearRegressor(many, optimizer="Adam"), ("Adam", 0.2)),
    (lambda: estimator.LinearRegressor(many, optimizer=None), ("Ftrl", 1 / np.sqrt(30))),
    (lambda: estimator.BaselineClassifier(), ("Ftrl", 0.3)),
    (lambda: estimator.BaselineRegressor(optimizer="RMSProp"), ("RMSprop", 0.3)),
    (lambda: estimator.DNNClassifier([4], DNN_COLUMNS, optimizer=_adam), ("Adam", 0.05)),
], ids=["dnn", "dnn_sgd", "linear", "linear_name", "linear_none", "baseline",
        "baseline_rmsprop", "callable"])
def test_default_optimizers_and_learning_rates_are_tf_estimators(build, expected):
    name, rate = _optimizer_of(_train_spec(build()))
    assert name == expected[0]
    assert rate == pytest.approx(expected[1], rel=1e-6)


def test_wide_and_deep_trains_each_part_with_its_own_default_optimizer():
    est = estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=LINEAR_COLUMNS, dnn_hidden_units=[4], batch_norm=True,
        dnn_feature_columns=NUMERIC + [fc.embedding_column(COLOR, 2)])
    spec = _train_spec(est)
    (linear, linear_vars), (dnn, dnn_vars) = spec.optimizer
    assert (type(linear).__name__, type(dnn).__name__) == ("Ftrl", "Adagrad")
    assert float(linear.learning_rate) == pytest.approx(min(0.005, 1 / np.sqrt(4)))
    assert float(dnn.learning_rate) == pytest.approx(canned.COMBINED_DNN_LEARNING_RATE)
    linear_names = {v.name for v in linear_vars}
    dnn_names = {v.name for v in dnn_vars}
    assert not linear_names & dnn_names
    assert any("linear_color_weights" in n for n in linear_names)
    assert any("hiddenlayer_0_kernel" in n for n in dnn_names)
    assert any("color_embedding_weights" in n for n in dnn_names)  # the input layer's table
    assert any("gamma" in n for n in dnn_names)  # batch norm
    # only one part given: that part alone, with the wide & deep learning rate
    deep_only = estimator.DNNLinearCombinedRegressor(dnn_feature_columns=NUMERIC,
                                                     dnn_hidden_units=[4])
    assert _optimizer_of(_train_spec(deep_only)) == ("Adagrad", pytest.approx(0.001))


def test_optimizer_callable_must_return_an_optimizer():
    est = estimator.DNNClassifier([4], DNN_COLUMNS, optimizer=lambda: "Adam")
    with pytest.raises(TypeError, match="`optimizer`.*returned 'Adam'"):
        _train_spec(est)


def test_tf1_train_optimizers_are_taken_as_tf_estimators_tf1_classes_took_them(tmp_path):
    """``DNNClassifier(optimizer=tf.compat.v1.train.AdamOptimizer(...))`` (the TF 1 migration
    guide's checkpoint example) and a wide & deep model with one v1 optimizer per part: they
    train, and the v1 slots are checkpointed with the model."""
    labels = LABELS["binary"]
    dnn = estimator.DNNClassifier([8], DNN_COLUMNS, optimizer=tf.compat.v1.train.AdamOptimizer(
        0.05), config=_config(tmp_path / "dnn"), progress=_quiet)
    wide_deep = estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[COLOR],
        linear_optimizer=lambda: tf.compat.v1.train.FtrlOptimizer(0.2),
        dnn_feature_columns=NUMERIC, dnn_hidden_units=[8],
        dnn_optimizer=tf.compat.v1.train.AdagradOptimizer(0.3),
        config=_config(tmp_path / "wide_deep"), progress=_quiet)
    for est in (dnn, wide_deep):
        est.train(_train_fn(labels), steps=1)
        before = est.evaluate(_eval_fn(labels))["loss"]
        est.train(_train_fn(labels), steps=59)
        metrics = est.evaluate(_eval_fn(labels))
        assert metrics["global_step"] == 60
        assert metrics["loss"] < 0.8 * before, (before, metrics)
        assert any(n.startswith("store/train/") for n in est.get_variable_names())  # slots
    with pytest.raises(TypeError, match="tf.compat.v1.train optimizer"):
        estimator.DNNClassifier([4], DNN_COLUMNS, optimizer=0.1)


@pytest.mark.parametrize("build", [
    lambda head, d, c: estimator.LinearEstimator(head, LINEAR_COLUMNS, d, config=c,
                                                 progress=_quiet),
    lambda head, d, c: estimator.DNNEstimator(head, [8], DNN_COLUMNS, d,
                                              optimizer=keras.optimizers.Adagrad(0.3),
                                              config=c, progress=_quiet),
    lambda head, d, c: estimator.DNNLinearCombinedEstimator(
        head, d, linear_feature_columns=[COLOR], dnn_feature_columns=NUMERIC,
        dnn_hidden_units=[8], dnn_optimizer=lambda: keras.optimizers.Adagrad(0.3), config=c,
        progress=_quiet),
], ids=["linear", "dnn", "wide_deep"])
def test_head_based_estimators_take_tf_estimators_arguments_and_learn(tmp_path, build):
    """tf.estimator's LinearEstimator / DNNEstimator / DNNLinearCombinedEstimator: the head
    is given (here binary; a regression head on the same data too)."""
    for head, kind, metric in ((estimator.BinaryClassHead(), "binary", "accuracy"),
                               (estimator.RegressionHead(), "regression", "average_loss")):
        est = build(head, None, _config(tmp_path / kind))
        labels = LABELS[kind]
        est.train(_train_fn(labels), steps=1)
        before = est.evaluate(_eval_fn(labels))
        est.train(_train_fn(labels), steps=79)
        metrics = est.evaluate(_eval_fn(labels))
        assert metric in metrics and metrics["loss"] < before["loss"]
        first = next(est.predict(_predict_fn()))
        assert ("logistic" in first) == (kind == "binary")
    with pytest.raises(TypeError, match="`head`"):
        build("binary", None, None)


def test_indicator_of_dense_and_sparse_inputs_agree():
    """The DNN input's dense fast path (one-hot of looked-up ids) equals the sparse path
    (what parsed tf.Examples take); "" is missing, unknown values get no id."""
    column = fc.indicator_column(fc.categorical_column_with_vocabulary_list(
        "c", ["a", "b", "c"]))
    layer = fc.DenseFeatures([column])
    dense = tf.constant([["b", "a"], ["", "z"], ["c", "c"]])
    sparse = tf.sparse.from_dense(dense)
    expected = [[1, 1, 0], [0, 0, 0], [0, 0, 2]]
    np.testing.assert_array_equal(layer({"c": dense}), expected)
    np.testing.assert_array_equal(layer({"c": sparse}), expected)
    np.testing.assert_array_equal(layer({"c": tf.constant(["a", ""])}), [[1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("build, error, field", [
    (lambda: estimator.DNNClassifier([], DNN_COLUMNS), ValueError, "hidden_units"),
    (lambda: estimator.DNNClassifier([4, 0], DNN_COLUMNS), ValueError, "hidden_units"),
    (lambda: estimator.DNNClassifier([4], DNN_COLUMNS, n_classes=1), ValueError, "n_classes"),
    (lambda: estimator.DNNClassifier([4], [tf.feature_column.numeric_column("x")]),
     ValueError, r"feature_columns\[0\]"),
    (lambda: estimator.DNNClassifier([4], [COLOR]), ValueError, r"feature_columns\[0\]"),
    (lambda: estimator.DNNClassifier([4], []), ValueError, "feature_columns"),
    (lambda: estimator.DNNClassifier([4], DNN_COLUMNS, optimizer="Lion"), ValueError,
     "optimizer"),
    (lambda: estimator.DNNRegressor([4], DNN_COLUMNS, optimizer=0.1), TypeError, "optimizer"),
    (lambda: estimator.DNNRegressor([4], DNN_COLUMNS, activation_fn="nope"), ValueError,
     "activation_fn"),
    (lambda: estimator.DNNRegressor([4], DNN_COLUMNS, dropout=1.0), ValueError, "dropout"),
    (lambda: estimator.DNNRegressor([4], DNN_COLUMNS, label_dimension=0), ValueError,
     "label_dimension"),
    (lambda: estimator.LinearClassifier(LINEAR_COLUMNS, sparse_combiner="max"), ValueError,
     "sparse_combiner"),
    (lambda: estimator.LinearClassifier(LINEAR_COLUMNS, label_vocabulary=["a"]), ValueError,
     "label_vocabulary"),
    (lambda: estimator.LinearRegressor(LINEAR_COLUMNS, weight_column=3), TypeError,
     "weight_column"),
    (lambda: estimator.LinearRegressor(LINEAR_COLUMNS, loss_reduction="mean"), ValueError,
     "loss_reduction"),
    (lambda: estimator.DNNLinearCombinedClassifier(), ValueError,
     "linear_feature_columns`.*`dnn_feature_columns"),
    (lambda: estimator.DNNLinearCombinedClassifier(dnn_feature_columns=NUMERIC), ValueError,
     "dnn_hidden_units"),
    (lambda: estimator.DNNLinearCombinedRegressor(linear_feature_columns=["x0"]), ValueError,
     r"linear_feature_columns\[0\]"),
    (lambda: estimator.DNNLinearCombinedRegressor(linear_feature_columns=NUMERIC,
                                                  linear_optimizer=None), TypeError,
     "linear_optimizer"),
    (lambda: estimator.DNNLinearCombinedRegressor(
        linear_feature_columns=NUMERIC, linear_sparse_combiner="max"), ValueError,
     "linear_sparse_combiner"),
    (lambda: estimator.BaselineClassifier(n_classes=2.5), ValueError, "n_classes"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_arguments_fail_at_construction_naming_them(build, error, field):
    with pytest.raises(error, match=f"`{field}") as info:
        build()
    assert "Received" in str(info.value)


def test_foreign_feature_columns_get_a_hint():
    with pytest.raises(ValueError, match="estflow.estimator.feature_column"):
        estimator.LinearClassifier([tf.feature_column.numeric_column("x")])
