import numpy as np
import pytest

from estflow.components.evaluate import metrics


def _auc_by_pairs(y, s):
    pos, neg = s[y == 1], s[y == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def test_auc_matches_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.random(500) + 0.3 * y, 1)  # rounding makes many ties
    assert metrics.roc_auc(y, s) == pytest.approx(_auc_by_pairs(y, s))


def test_binary_metrics_on_known_values():
    m = metrics.binary_metrics(np.array([1, 0, 1, 0]), np.array([0.9, 0.2, 0.4, 0.6]))
    assert m["accuracy"] == 0.5
    assert m["precision"] == 0.5 and m["recall"] == 0.5
    assert m["auc"] == 0.75
    assert m["average_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.8, 0.4, 0.4])))


def test_regression_and_multiclass():
    r = metrics.regression_metrics(np.array([1.0, 3.0]), np.array([2.0, 3.0]))
    assert r["average_loss"] == 0.5 and r["mae"] == 0.5
    mc = metrics.multi_class_metrics(np.array([0, 2]), np.array([[0.8, 0.1, 0.1],
                                                                [0.5, 0.1, 0.4]]))
    assert mc["accuracy"] == 0.5
    assert mc["average_loss"] == pytest.approx(-np.mean(np.log([0.8, 0.4])))


def _softmax32(logits):
    z = np.asarray(logits, dtype=np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_average_loss_is_tf_estimators_for_confident_mistakes():
    """The loss of an example is -log P(its class) from the model's float32 outputs, which is
    tf.estimator's loss from the logits (cross-entropy, sigmoid cross-entropy) to float32
    rounding, also for a confident mistake (no cap at -log(1e-7) ~ 16.1 that would hide the
    row that dominates the mean)."""
    logits = np.array([[0.0, 30.0, 0.0], [2.0, 0.0, 1.0], [0.0, 0.0, 45.0]])
    labels = np.array([0, 0, 1])
    expected = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) \
        + logits.max(1) - logits[np.arange(3), labels]
    got = metrics.multi_class_metrics(labels, _softmax32(logits))
    assert expected[0] > 30 and expected[2] > 44
    assert got["average_loss"] == pytest.approx(expected.mean(), rel=1e-6)

    logit = np.array([-30.0, 3.0, -2.0, 9.0])
    y = np.array([1, 1, 0, 0])
    softplus = np.log1p(np.exp(-np.abs(logit))) + np.maximum(logit, 0)  # log(1 + e^logit)
    expected = np.where(y == 1, softplus - logit, softplus)  # sigmoid cross-entropy
    p = (1 / (1 + np.exp(-logit.astype(np.float32)))).astype(np.float32)
    got = metrics.binary_metrics(y, p)
    assert got["average_loss"] == pytest.approx(expected.mean(), rel=1e-5)


def test_a_binary_class_0_probability_that_rounds_to_1_counts_a_bounded_loss():
    p = np.array([np.float32(1.0), np.float32(0.5)])
    got = metrics.binary_metrics(np.array([0, 0]), p)
    assert got["average_loss"] == pytest.approx((25 * np.log(2) + np.log(2)) / 2)


def _brute_roc(y, s):
    """(fpr, tpr) predicting positive for score >= t, for t over the distinct scores."""
    points = [(0.0, 0.0)]
    for t in sorted(set(s), reverse=True):
        pred = s >= t
        points.append(((pred & (y == 0)).sum() / (y == 0).sum(),
                       (pred & (y == 1)).sum() / (y == 1).sum()))
    return np.array(points).T


def test_roc_curve_matches_brute_force_and_its_area_is_the_auc():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.random(300) + 0.4 * y, 2)  # ties
    fpr, tpr, thresholds = metrics.roc_curve(y, s)
    expected_fpr, expected_tpr = _brute_roc(y, s)
    np.testing.assert_allclose(fpr, expected_fpr)
    np.testing.assert_allclose(tpr, expected_tpr)
    assert thresholds[0] > s.max() and np.all(np.diff(thresholds) < 0)
    assert np.trapezoid(tpr, fpr) == pytest.approx(metrics.roc_auc(y, s))


def test_average_precision_matches_its_definition():
    y = np.array([1, 0, 1, 1, 0, 0, 1])
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    # precision at each positive, ranked by score: 1/1, 2/3, 3/4, 4/7
    assert metrics.average_precision(y, s) == pytest.approx((1 + 2 / 3 + 3 / 4 + 4 / 7) / 4)
    precision, recall, _ = metrics.pr_curve(y, s)
    assert precision[0] == 1.0 and recall[0] == 0.0 and recall[-1] == 1.0


def test_single_class_gives_nan_auc_and_rates():
    y, s = np.ones(5), np.linspace(0.1, 0.9, 5)
    assert np.isnan(metrics.roc_auc(y, s))
    fpr, tpr, _ = metrics.roc_curve(y, s)
    assert np.isnan(fpr[1:]).all() and np.isfinite(tpr).all()
    assert np.isnan(metrics.average_precision(np.zeros(5), s))


def test_downsample_keeps_ends_and_at_most_max_points():
    xs = np.linspace(0, 1, 1001)
    small, big = metrics.downsample(xs, xs * 2, max_points=200)
    assert len(small) == len(big) <= 200
    assert small[0] == 0.0 and small[-1] == 1.0 and big[-1] == 2.0
    assert metrics.downsample(np.arange(3.0))[0] == [0.0, 1.0, 2.0]


def test_confusion_matrix_rows_are_labels_columns_predictions():
    matrix = metrics.confusion_matrix(np.array([0, 0, 1, 1, 1, 2]),
                                      np.array([0, 1, 1, 1, 0, 2]), 3)
    assert matrix == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]


def test_calibration_bins():
    labels = np.array([0, 0, 1, 1, 1])
    probs = np.array([0.05, 0.15, 0.12, 0.95, 1.0])
    bins = metrics.calibration_bins(labels, probs, bins=10, value_range=(0.0, 1.0))
    assert [(b["lower"], b["count"]) for b in bins] == [(0.0, 1), (pytest.approx(0.1), 2),
                                                        (pytest.approx(0.9), 2)]
    assert bins[1]["mean_label"] == 0.5
    assert bins[1]["mean_prediction"] == pytest.approx(0.135)
    assert bins[2]["mean_label"] == 1.0  # 1.0 falls in the last bin


@pytest.mark.parametrize("head", metrics.HEADS)
def test_metric_names_are_what_head_metrics_returns(head):
    names = metrics.metric_names(head)
    assert "average_loss" in names and "examples" in names and "loss" not in names
    assert metrics.MAIN_METRIC[head] in names


def test_unknown_head_is_a_clear_error():
    with pytest.raises(ValueError, match="expected one of .*binary.*Received: head='ranking'"):
        metrics.metric_names("ranking")


# --- weights: every metric as tf.estimator's heads weight theirs ------------------------------

def _head_case(head, n, seed):
    rng = np.random.default_rng(seed)
    if head == "binary":
        labels = rng.integers(0, 2, n)
        outputs = (1 / (1 + np.exp(-(rng.normal(0, 2, n) + 1.5 * labels)))).astype(np.float32)
    elif head == "multi_class":
        labels = rng.integers(0, 3, n)
        outputs = _softmax32(rng.normal(0, 1.5, (n, 3)) + 2 * np.eye(3)[labels])
    else:
        labels = rng.normal(0, 2, n)
        outputs = labels + rng.normal(0, 1, n)
    return labels, outputs


@pytest.mark.parametrize("head", metrics.HEADS)
def test_an_integer_weight_counts_as_that_many_copies_of_the_example(head):
    """sum(weight x term) / sum(weight) for the means, weight counted instead of examples by
    precision, recall, accuracy and the AUCs: an example of weight k is k copies of it, one of
    weight 0 is not there (``examples`` still counts rows)."""
    labels, outputs = _head_case(head, 400, seed=5)
    weights = np.random.default_rng(6).integers(0, 4, 400)
    weights[-1] = 60  # one large weight
    weighted = metrics.head_metrics(head, labels, outputs, weights)
    copies = metrics.head_metrics(head, np.repeat(labels, weights, axis=0),
                                  np.repeat(outputs, weights, axis=0))
    assert weighted.pop("examples") == 400 and copies.pop("examples") == weights.sum()
    assert weighted == pytest.approx(copies, rel=1e-9)
    assert weighted != pytest.approx(metrics.head_metrics(head, labels, outputs))  # it matters


@pytest.mark.parametrize("head", metrics.HEADS)
def test_the_means_divide_by_the_sum_of_the_weights(head):
    labels, outputs = _head_case(head, 200, seed=7)
    weights = np.random.default_rng(8).exponential(1.0, 200)
    assert metrics.head_metrics(head, labels, outputs, weights * 1e3) == pytest.approx(
        metrics.head_metrics(head, labels, outputs, weights), rel=1e-9)
    got = metrics.head_metrics(head, labels, outputs, weights)
    if head == "regression":
        expected = np.sum(weights * (labels - outputs) ** 2) / weights.sum()
    else:
        true_class = outputs if head == "multi_class" else np.stack([1 - outputs, outputs], 1)
        expected = -np.sum(weights * np.log(true_class[np.arange(200), labels])) / weights.sum()
    assert got["average_loss"] == pytest.approx(expected, rel=1e-6)


def test_a_total_weight_of_0_leaves_the_means_undefined():
    got = metrics.binary_metrics(np.array([1, 0]), np.array([0.8, 0.3]), weights=np.zeros(2))
    assert np.isnan(got["average_loss"]) and np.isnan(got["label/mean"])
    assert np.isnan(got["auc"]) and np.isnan(got["auc_exact"]) and np.isnan(got["auc_pr"])
    assert got["precision"] == 0.0 and got["recall"] == 0.0 and got["examples"] == 2


def test_weighted_curves_drop_points_of_no_weight():
    y, s, w = np.array([0, 1, 0, 1]), np.array([0.9, 0.8, 0.4, 0.3]), np.array([0, 2, 1, 1])
    precision, recall, _ = metrics.pr_curve(y, s, w)
    assert np.isfinite(precision).all()
    assert list(recall) == [0.0, 2 / 3, 2 / 3, 1.0]
    fpr, tpr, _ = metrics.roc_curve(y, s, w)
    assert list(fpr) == [0.0, 0.0, 0.0, 1.0, 1.0] and tpr[-1] == 1.0
    assert metrics.roc_auc(y, s, w) == pytest.approx(2 / 3)


# --- tf.estimator's AUCs (Keras's AUC, 200 thresholds) and the exact ones ---------------------

def test_auc_counts_probabilities_between_two_thresholds_as_equal():
    """A negative at 0.502 and a positive at 0.501 lie between the same two of the 200
    thresholds (99/199 and 100/199): tf.estimator's ``auc`` takes them as a tie, 0.5; the exact
    ROC area is 0."""
    y, p = np.array([1, 0]), np.array([0.501, 0.502], dtype=np.float32)
    got = metrics.binary_metrics(y, p)
    assert got["auc"] == 0.5 and got["auc_exact"] == 0.0
    y, p = np.array([1, 0]), np.array([0.9, 0.1], dtype=np.float32)
    got = metrics.binary_metrics(y, p)
    assert got["auc"] == got["auc_exact"] == 1.0
    assert got["auc_precision_recall"] == pytest.approx(1.0) and got["auc_pr"] == 1.0


def test_auc_precision_recall_interpolates_where_auc_pr_steps():
    """Keras's PR AUC (Davis & Goadrich interpolation between thresholds) and the average
    precision are two numbers: why ``auc_precision_recall`` is no alias of ``auc_pr``."""
    y = np.array([1, 0, 1, 1, 0, 0, 1])
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], dtype=np.float32)
    got = metrics.binary_metrics(y, s)
    assert got["auc_pr"] == pytest.approx((1 + 2 / 3 + 3 / 4 + 4 / 7) / 4)
    assert abs(got["auc_precision_recall"] - got["auc_pr"]) > 1e-3
    assert got["auc"] == pytest.approx(got["auc_exact"])  # no two in one bucket: the same area
