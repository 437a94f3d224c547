import numpy as np
import pytest

from estflow.components import metrics


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
    assert m["loss"] == pytest.approx(-np.mean(np.log([0.9, 0.8, 0.4, 0.4])))


def test_regression_and_multiclass():
    r = metrics.regression_metrics(np.array([1.0, 3.0]), np.array([2.0, 3.0]))
    assert r["loss"] == 0.5 and r["mae"] == 0.5
    mc = metrics.multi_class_metrics(np.array([0, 2]), np.array([[0.8, 0.1, 0.1],
                                                                [0.5, 0.1, 0.4]]))
    assert mc["accuracy"] == 0.5
