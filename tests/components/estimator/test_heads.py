"""Heads on hand-computed values: losses, reductions, weights, thresholds, label vocabularies,
predictions, metrics, EstimatorSpecs; and every docstring example runs."""

import doctest

import keras
import numpy as np
import pytest
import tensorflow as tf

from estflow.dsl.model_fn import ModeKeys
from estflow.estimator import feature_column as fc
from estflow.estimator import heads

LOGITS = np.array([[-1.0], [2.0], [0.5], [-3.0]], np.float32)
LABELS = np.array([0, 1, 0, 1], np.int64)
WEIGHTS = np.array([1.0, 2.0, 1.0, 0.5], np.float32)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _binary_ce(labels, logits):
    p = _sigmoid(logits.reshape(-1))
    return -(labels * np.log(p) + (1 - labels) * np.log(1 - p))


def _results(head, logits, labels, features=None):
    metrics = head.update_metrics(head.metrics(), features or {}, logits, labels)
    return {k: float(np.asarray(m.result())) for k, m in metrics.items()}


@pytest.mark.parametrize("module", ["heads", "_heads.classification",
                                    "_heads.regression", "_heads.multi", "_heads.base"])
def test_docstring_examples_run(module):
    mod = __import__(f"estflow.estimator.{module}", fromlist=["_"])
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_binary_loss_weighted_with_both_reductions():
    per_example = _binary_ce(LABELS, LOGITS)
    features = {"w": WEIGHTS}
    head = heads.BinaryClassHead(weight_column="w")
    assert float(head.loss(LABELS, LOGITS, features)) == pytest.approx(
        (per_example * WEIGHTS).sum() / 4, rel=1e-5)
    summed = heads.BinaryClassHead(weight_column="w", loss_reduction="sum")
    assert float(summed.loss(LABELS, LOGITS, features)) == pytest.approx(
        (per_example * WEIGHTS).sum(), rel=1e-5)
    regularized = head.loss(LABELS, LOGITS, features, regularization_losses=[tf.constant(2.0)])
    assert float(regularized) == pytest.approx((per_example * WEIGHTS).sum() / 4 + 2.0, rel=1e-5)


def test_binary_metrics_with_weights_and_thresholds():
    head = heads.BinaryClassHead(weight_column="w", thresholds=[0.2, 0.7])
    got = _results(head, LOGITS, LABELS, {"w": WEIGHTS})
    p = _sigmoid(LOGITS.reshape(-1))
    expected = {
        "accuracy": 3 / 4.5,  # class ids [0, 1, 1, 0]: examples 1 and 2 right
        "precision": 2 / 3, "recall": 2 / 2.5,
        "label/mean": 2.5 / 4.5, "accuracy_baseline": 2.5 / 4.5,
        "prediction/mean": (p * WEIGHTS).sum() / 4.5,
        "average_loss": (_binary_ce(LABELS, LOGITS) * WEIGHTS).sum() / 4.5,
        "accuracy/positive_threshold_0.2": 2 / 4.5,
        "precision/positive_threshold_0.2": 2 / 4, "recall/positive_threshold_0.2": 2 / 2.5,
        "accuracy/positive_threshold_0.7": 4 / 4.5,
        "precision/positive_threshold_0.7": 1.0, "recall/positive_threshold_0.7": 2 / 2.5,
    }
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-5), key
    assert got["auc"] == pytest.approx(0.8, abs=0.02)  # weighted pairs: (2+2)/(2.5*2)
    assert set(got) == set(expected) | {"auc", "auc_precision_recall"}


def test_binary_predictions_and_label_vocabulary():
    head = heads.BinaryClassHead(label_vocabulary=["no", "yes"])
    preds = head.predictions(LOGITS)
    assert preds["class_ids"].numpy().ravel().tolist() == [0, 1, 1, 0]
    assert preds["classes"].numpy().ravel().tolist() == [b"no", b"yes", b"yes", b"no"]
    np.testing.assert_allclose(preds["probabilities"][:, 1], _sigmoid(LOGITS.ravel()),
                               rtol=1e-5)
    assert preds["all_classes"].numpy()[0].tolist() == [b"no", b"yes"]
    assert preds["all_class_ids"].numpy()[0].tolist() == [0, 1]
    # tf.estimator 2.15's dtypes and signatures (tests/compat/test_surface.py checks them)
    assert (preds["class_ids"].dtype, preds["all_class_ids"].dtype) == (tf.int64, tf.int32)
    outputs = head.export_outputs(LOGITS, preds)
    assert set(outputs) == {"serving_default", "classification", "regression", "predict"}
    np.testing.assert_allclose(outputs["regression"].outputs()["outputs"], preds["logistic"])
    strings = np.array(["no", "yes", "no", "yes"])
    assert float(head.loss(strings, LOGITS, {})) == pytest.approx(
        _binary_ce(LABELS, LOGITS).mean(), rel=1e-5)
    assert float(head.loss(LABELS, LOGITS, {})) == pytest.approx(  # ids pass through
        _binary_ce(LABELS, LOGITS).mean(), rel=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="label_vocabulary"):
        head.loss(np.array(["no", "maybe", "no", "yes"]), LOGITS, {})
    assert set(head.predictions(LOGITS, keys=["logistic"])) == {"logistic"}


def test_binary_label_checks_also_inside_tf_function():
    head = heads.BinaryClassHead()
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 1\]"):
        head.loss(np.array([0, 2, 0, 1]), LOGITS, {})

    @tf.function
    def loss(labels):
        return head.loss(labels, LOGITS, {})

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 1\]"):
        loss(tf.constant([0, 3, 0, 1]))
    with pytest.raises(ValueError, match="labels are strings"):
        head.loss(np.array(["a", "b", "a", "b"]), LOGITS, {})
    with pytest.raises(ValueError, match=r"shape \[batch, 1\]"):
        head.loss(np.zeros([4, 2]), LOGITS, {})


def test_multi_class_loss_metrics_and_vocabulary():
    logits = np.array([[1.0, 2.0, 3.0], [3.0, 1.0, 0.0]], np.float32)
    labels = np.array([[2], [1]], np.int64)
    weights = np.array([1.0, 3.0], np.float32)
    lse = np.log(np.exp(logits).sum(axis=1))
    per_example = lse - logits[[0, 1], labels.ravel()]
    head = heads.MultiClassHead(3, weight_column="w", label_vocabulary=["a", "b", "c"])
    features = {"w": weights}
    assert float(head.loss(labels, logits, features)) == pytest.approx(
        (per_example * weights).sum() / 2, rel=1e-5)
    assert float(head.loss(np.array(["c", "b"]), logits, features)) == pytest.approx(
        (per_example * weights).sum() / 2, rel=1e-5)
    got = _results(head, logits, labels, features)
    assert got == pytest.approx({"average_loss": (per_example * weights).sum() / 4,
                                 "accuracy": 1 / 4})
    preds = head.predictions(logits)
    assert preds["classes"].numpy().ravel().tolist() == [b"c", b"a"]
    np.testing.assert_allclose(preds["probabilities"].numpy().sum(axis=1), [1, 1], rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"ids in \[0, 3\)"):
        head.loss(np.array([0, 3]), logits, features)
    with pytest.raises(ValueError, match="n_classes"):
        heads.MultiClassHead(2)
    with pytest.raises(ValueError, match="label_vocabulary"):
        heads.MultiClassHead(3, label_vocabulary=["a", "b"])


def test_multi_label_head_dense_sparse_and_string_labels():
    logits = np.array([[-1.0, 1.0, 0.0], [-1.5, 1.5, 2.0]], np.float32)
    hot = np.array([[1, 0, 0], [1, 1, 0]], np.int64)
    p = _sigmoid(logits)
    per_example = -(hot * np.log(p) + (1 - hot) * np.log(1 - p)).mean(axis=1)
    head = heads.MultiLabelHead(3, thresholds=[0.5], label_vocabulary=["x", "y", "z"])
    expected = per_example.mean()
    assert float(head.loss(hot, logits, {})) == pytest.approx(expected, rel=1e-5)
    sparse_ids = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], tf.constant([0, 0, 1], tf.int64),
                                 [2, 2])
    assert float(head.loss(sparse_ids, logits, {})) == pytest.approx(expected, rel=1e-5)
    names = tf.ragged.constant([["x"], ["y", "x"]])
    assert float(head.loss(names, logits, {})) == pytest.approx(expected, rel=1e-5)
    got = _results(head, logits, hot)
    # threshold 0.5 on p: predictions [[0,1,0],[0,1,1]] vs labels [[1,0,0],[1,1,0]]
    assert got["accuracy/positive_threshold_0.5"] == pytest.approx(2 / 6)
    assert got["precision/positive_threshold_0.5"] == pytest.approx(1 / 3)
    assert got["recall/positive_threshold_0.5"] == pytest.approx(1 / 3)
    assert {"auc", "auc_precision_recall", "average_loss"} <= set(got)
    assert head.predictions(logits)["classes"].numpy()[1].tolist() == [b"x", b"y", b"z"]


def test_regression_heads():
    logits = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    labels = np.array([[2.0, 2.0], [1.0, 1.0]], np.float32)
    weights = np.array([[1.0, 0.0], [2.0, 1.0]], np.float32)  # per output
    head = heads.RegressionHead(label_dimension=2, weight_column="w")
    assert float(head.loss(labels, logits, {"w": weights})) == pytest.approx(
        (1 * 1 + 0 * 0 + 2 * 4 + 1 * 16) / 4)
    got = _results(head, logits, labels, {"w": weights})
    assert got["average_loss"] == pytest.approx(25 / 4)
    assert got["label/mean"] == pytest.approx((2 + 2 + 1) / 4)
    assert got["prediction/mean"] == pytest.approx((1 + 6 + 5) / 4)

    poisson = heads.PoissonRegressionHead()
    log_rate = np.array([[0.5], [1.0]], np.float32)
    counts = np.array([[0.0], [3.0]], np.float32)
    stirling = 3 * np.log(3) - 3 + 0.5 * np.log(2 * np.pi * 3)
    full = np.exp(log_rate.ravel()) - counts.ravel() * log_rate.ravel() + [0.0, stirling]
    assert float(poisson.loss(counts, log_rate, {})) == pytest.approx(full.mean(), rel=1e-5)
    np.testing.assert_allclose(poisson.predictions(log_rate)["predictions"],
                               np.exp(log_rate), rtol=1e-6)

    logistic = heads.LogisticRegressionHead()
    soft = np.array([[0.25], [0.9]], np.float32)
    ce = -(soft * np.log(_sigmoid(log_rate)) + (1 - soft) * np.log(1 - _sigmoid(log_rate)))
    assert float(logistic.loss(soft, log_rate, {})) == pytest.approx(ce.mean(), rel=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 1\]"):
        logistic.loss(np.array([[1.5], [0.0]]), log_rate, {})


def test_weight_column_as_numeric_column_and_errors():
    column = fc.numeric_column("w", normalizer_fn=lambda w: w * 2.0)
    head = heads.RegressionHead(weight_column=column)
    logits, labels = np.array([[1.0], [3.0]], np.float32), np.array([0.0, 0.0], np.float32)
    assert float(head.loss(labels, logits, {"w": np.array([1.0, 0.5])})) == pytest.approx(
        (2 * 1 + 1 * 9) / 2)
    with pytest.raises(KeyError, match="weight_column 'w'"):
        heads.RegressionHead(weight_column="w").loss(labels, logits, {"x": labels})
    with pytest.raises(ValueError, match="loss_reduction"):
        heads.RegressionHead(loss_reduction="mean")
    with pytest.raises(ValueError, match="thresholds"):
        heads.BinaryClassHead(thresholds=[1.5])


def test_custom_loss_fn():
    def loss_fn(labels, logits, features):
        return tf.abs(logits - labels) * features["scale"]

    head = heads.RegressionHead(loss_fn=loss_fn)
    got = head.loss(np.array([1.0, 1.0]), np.array([[2.0], [4.0]], np.float32),
                    {"scale": np.array([[1.0], [2.0]], np.float32)})
    assert float(got) == pytest.approx((1 + 6) / 2)
    with pytest.raises(ValueError, match="loss_fn"):
        heads.RegressionHead(loss_fn=lambda y, z: y)


def test_multi_head_loss_metrics_predictions_and_split_logits():
    head = heads.MultiHead([heads.RegressionHead(name="price"),
                            heads.BinaryClassHead(name="sold")], head_weights=[1.0, 2.0])
    logits = np.array([[3.0, 2.0], [1.0, -1.0]], np.float32)
    labels = {"price": np.array([1.0, 1.0]), "sold": np.array([1, 0])}
    sold_loss = _binary_ce(np.array([1, 0]), np.array([2.0, -1.0])).mean()
    assert float(head.loss(labels, logits, {})) == pytest.approx((4 + 0) / 2 + 2 * sold_loss,
                                                                 rel=1e-5)
    preds = head.predictions(logits)
    assert {"price/predictions", "sold/logistic", "sold/class_ids"} <= set(preds)
    got = _results(head, logits, labels)
    assert got["loss/price"] == pytest.approx(2.0)
    assert got["average_loss/price"] == pytest.approx(2.0)
    assert got["accuracy/sold"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="distinct names"):
        heads.MultiHead([heads.RegressionHead(), heads.BinaryClassHead()])
    with pytest.raises(ValueError, match="cannot be split"):
        head.predictions(np.zeros([2, 3], np.float32))


def test_create_estimator_spec_per_mode():
    head = heads.BinaryClassHead()
    logits = tf.constant(LOGITS)
    spec = head.create_estimator_spec({}, ModeKeys.PREDICT, logits)
    assert "classes" in spec.predictions and spec.loss is None
    spec = head.create_estimator_spec({}, ModeKeys.EVAL, logits, LABELS)
    assert float(spec.loss) == pytest.approx(_binary_ce(LABELS, LOGITS).mean(), rel=1e-5)
    assert float(spec.eval_metric_ops["accuracy"].result()) == pytest.approx(0.5)
    optimizer = keras.optimizers.SGD(0.1)
    spec = head.create_estimator_spec({}, ModeKeys.TRAIN, logits, LABELS, optimizer=optimizer)
    assert spec.optimizer is optimizer
    var = tf.Variable(1.0)
    spec = head.create_estimator_spec({}, ModeKeys.TRAIN, logits, LABELS, optimizer=optimizer,
                                      trainable_variables=[var])
    assert spec.optimizer == [(optimizer, [var])]
    spec = head.create_estimator_spec({}, ModeKeys.TRAIN, logits, LABELS,
                                      train_op_fn=lambda loss: tf.identity(loss))
    assert spec.train_op is not None
    with pytest.raises(ValueError, match="exactly one of `optimizer` and `train_op_fn`"):
        head.create_estimator_spec({}, ModeKeys.TRAIN, logits, LABELS)
    with pytest.raises(ValueError, match="labels are required"):
        head.create_estimator_spec({}, ModeKeys.EVAL, logits)


def test_head_for_premade_kinds():
    assert isinstance(heads.head_for("classifier"), heads.BinaryClassHead)
    assert heads.head_for("classifier", n_classes=4).logits_dimension == 4
    assert heads.head_for("regressor", label_dimension=3).logits_dimension == 3
    with pytest.raises(ValueError, match="thresholds"):
        heads.head_for("classifier", n_classes=3, thresholds=[0.5])
    with pytest.raises(ValueError, match="kind"):
        heads.head_for("ranking")
