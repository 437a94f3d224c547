"""Blessing: declared bounds, regression against the served baseline, clear reasons."""

import json

import pytest

import estflow.dsl as ef
from estflow.components.evaluate import blessing as _blessing
from estflow.components.evaluate.blessing import Baseline
from estflow.components.evaluate.blessing import bless

METRICS = {"auc": 0.82, "loss": 0.41, "accuracy": 0.8, "examples": 500}


def _baseline(**metrics):
    return Baseline(1700000000, "/serving/taxi/1700000000", {**METRICS, **metrics})


def test_bounds_pass_and_fail_with_the_numbers():
    result = bless((ef.Threshold("auc", lower_bound=0.85),
                    ef.Threshold("loss", upper_bound=0.5, higher_is_better=False)),
                   METRICS, None)
    assert not result.blessed
    assert result.reasons == ["FAIL auc = 0.82 < lower_bound 0.85",
                              "PASS loss = 0.41 <= upper_bound 0.5"]
    assert result.failures == ["FAIL auc = 0.82 < lower_bound 0.85"]


def test_first_push_passes_max_regression_and_says_there_is_no_baseline():
    result = bless((ef.Threshold("auc", lower_bound=0.8, max_regression=0.01),), METRICS, None)
    assert result.blessed
    assert "no baseline" in result.reasons[1] and result.reasons[1].startswith("PASS")
    assert result.to_json()["baseline"] is None


@pytest.mark.parametrize("baseline_auc, blessed", [(0.83, True), (0.825, True), (0.84, False),
                                                   (0.70, True)])
def test_max_regression_higher_is_better(baseline_auc, blessed):
    result = bless((ef.Threshold("auc", max_regression=0.01),), METRICS,
                   _baseline(auc=baseline_auc))
    assert result.blessed is blessed
    assert f"{baseline_auc:g}" in result.reasons[0] and "1700000000" in result.reasons[0]


def test_max_regression_lower_is_better():
    threshold = ef.Threshold("loss", max_regression=0.05, higher_is_better=False)
    worse = bless((threshold,), {**METRICS, "loss": 0.50}, _baseline(loss=0.41))
    assert not worse.blessed
    assert worse.reasons == ["FAIL loss = 0.5 vs 0.41 for the baseline version 1700000000 "
                             "(lower is better): worse by 0.09, max_regression 0.05"]
    better = bless((threshold,), {**METRICS, "loss": 0.30}, _baseline(loss=0.41))
    assert better.blessed and "better by 0.11" in better.reasons[0]


def test_an_equal_model_passes_max_regression_zero():
    result = bless((ef.Threshold("auc", max_regression=0.0),), METRICS, _baseline())
    assert result.blessed and "equal" in result.reasons[0]


def test_unknown_metric_is_an_error_listing_the_available_metrics():
    with pytest.raises(ValueError) as info:
        bless((ef.Threshold("auc", lower_bound=0.5), ef.Threshold("f1", lower_bound=0.5)),
              METRICS, None)
    message = str(info.value)
    assert "eval.thresholds[1].metric" in message and "'f1'" in message
    assert "['accuracy', 'auc', 'examples', 'loss']" in message


def test_undefined_candidate_metric_fails():
    result = bless((ef.Threshold("auc", lower_bound=0.5, max_regression=0.1),),
                   {**METRICS, "auc": None}, _baseline())
    assert not result.blessed
    assert all(r.startswith("FAIL auc is undefined") for r in result.reasons)


def test_an_unusable_baseline_fails_max_regression_but_not_bounds():
    broken = Baseline(7, "/serving/taxi/7", None, "ValueError: no 'logistic' output")
    result = bless((ef.Threshold("auc", lower_bound=0.5, max_regression=0.1),), METRICS,
                   broken)
    assert [c.passed for c in result.checks] == [True, False]
    assert "could not be evaluated (ValueError: no 'logistic' output)" in result.reasons[1]
    assert result.to_json()["baseline"]["error"] == "ValueError: no 'logistic' output"


def test_undefined_baseline_metric_passes():
    result = bless((ef.Threshold("auc", max_regression=0.0),), METRICS, _baseline(auc=None))
    assert result.blessed and "undefined" in result.reasons[0]


def test_no_thresholds_blesses_and_says_so():
    result = bless((), METRICS, None)
    assert result.blessed and "no thresholds declared" in result.reasons[0]


def test_blessing_json_document():
    threshold = ef.Threshold("auc", lower_bound=0.9, max_regression=0.01)
    doc = bless((threshold,), METRICS, _baseline(auc=0.86)).to_json()
    assert json.loads(json.dumps(doc)) == doc  # plain JSON
    assert doc["blessed"] is False
    assert doc["baseline"] == {"version": 1700000000, "path": "/serving/taxi/1700000000",
                               "fingerprint": None, "metrics": {**METRICS, "auc": 0.86}}
    assert doc["thresholds"] == [{"metric": "auc", "lower_bound": 0.9, "upper_bound": None,
                                  "max_regression": 0.01, "higher_is_better": True}]
    assert [c["condition"] for c in doc["checks"]] == ["lower_bound", "max_regression"]
    assert doc["reasons"] == [c["reason"] for c in doc["checks"]]


def test_check_metric_names_accepts_known_names():
    _blessing.check_metric_names((ef.Threshold("loss", upper_bound=1.0),), ["loss"])
