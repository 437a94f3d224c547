"""Skew: batch prediction's rows against the training statistics stored with the model.

The real prediction step on the in-memory runner scores CSV files with a real SavedModel whose
``assets.extra/estflow_statistics.pb`` holds training statistics made by the real CombineFn.
Rows like the training data are never flagged; a category flood and a shifted numeric column
are, with the column, TFDV's kind and the distance (checked against pandas and scipy); the
predictions are written either way (skew warns, it never stops scoring).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import distance as scipy_distance

import estflow.dsl as ef
from estflow.components._statistics.statistics import read_statistics
from estflow.components.predict import step as predict
from estflow.components.predict.skew import SERVING_STATISTICS
from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from tests.components import _serving_fixtures as fx
from tests.components import _validate_data as vd

SPECS = (("fare", "float", False), ("trip_seconds", "int", False),
         ("payment_type", "string", True), ("tipped", "int", False))
KINDS = ("Cash", "Credit Card", "Mobile")


def _rows(seed: int, n: int = 3000, *, flood: float = 0.0, shift: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    kinds = rng.choice(np.array(KINDS, dtype=object), n, p=[0.5, 0.4, 0.1])
    kinds[rng.random(n) < flood] = "Voucher"
    return {"fare": np.round(rng.normal(15 + shift, 4, n), 2).astype(np.float32).tolist(),
            "trip_seconds": rng.integers(60, 3600, n).tolist(), "payment_type": kinds.tolist(),
            "tipped": rng.integers(0, 2, n).tolist()}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A model version carrying the statistics of its training data (seed 0)."""
    version = fx.save_version(tmp_path_factory.mktemp("models") / "taxi" / "1", 1)
    train = vd.statistics(_rows(0), "train", SPECS, cuts=(700, 1900))
    (version / "assets.extra").mkdir(exist_ok=True)
    (version / Files.SERVED_STATISTICS).write_bytes(
        vd.stats_list(train).SerializeToString())
    return version


CHECKS = ef.DataChecks(drift_linf=0.1, drift_js=0.1)


def _predict(model, rows: dict, tmp_path, checks=CHECKS):
    frame = pd.DataFrame({k: v for k, v in rows.items() if k != "tipped"})
    frame.to_csv(tmp_path / "in.csv", index=False)
    # a nightly pipeline's batch prediction: the checks' drift thresholds are skew's too
    pipeline = dataclasses.replace(taxi.pipeline, checks=checks, predict=ef.BatchPredict(
        source=ef.CsvSource(str(tmp_path / "in.csv"))))
    pushed = tmp_path / "pushed"
    pushed.mkdir()
    (pushed / Files.PUSH_RESULT).write_text(json.dumps({"pushed": True, "path": str(model)}))
    summary = predict.run(pipeline, str(tmp_path / "out"), pushed_dir=str(pushed))
    written = json.loads((tmp_path / "out" / Files.PREDICT_RESULT).read_text())
    assert written.get("skew") == summary.get("skew")
    return summary, frame


def _kinds(summary) -> dict:
    return {a["column"]: a["kind"] for a in summary["skew"]["anomalies"]}


def test_rows_like_the_training_data_are_not_skewed(model, tmp_path):
    summary, frame = _predict(model, _rows(1), tmp_path)
    assert summary["scored"] == len(frame)
    assert summary["skew"]["anomalies"] == []
    assert set(summary["skew"]["distances"]) == {"fare", "trip_seconds", "payment_type"}
    serving = read_statistics(str(tmp_path / "out" / SERVING_STATISTICS))
    (dataset,) = serving.datasets
    assert dataset.name == "serving" and dataset.num_examples == len(frame)
    fare = next(f for f in dataset.features if f.path.step[0] == "fare").num_stats
    assert fare.mean == pytest.approx(frame["fare"].astype(np.float32).mean(), rel=1e-5)


def test_a_category_flood_is_skew_with_the_distance_pandas_gives(model, tmp_path):
    rows = _rows(2, flood=0.4)
    summary, frame = _predict(model, rows, tmp_path)
    assert _kinds(summary) == {"payment_type": "COMPARATOR_L_INFTY_HIGH"}
    train = pd.Series(_rows(0)["payment_type"]).value_counts(normalize=True)
    served = frame["payment_type"].value_counts(normalize=True)
    expected = (served.reindex(served.index.union(train.index), fill_value=0)
                - train.reindex(served.index.union(train.index), fill_value=0)).abs().max()
    (anomaly,) = summary["skew"]["anomalies"]
    assert anomaly["observed"] == pytest.approx(expected, abs=1e-9)
    assert anomaly["allowed"] == 0.1
    assert summary["scored"] == len(frame)  # scored anyway: skew warns


def test_a_shifted_numeric_column_is_skew_and_the_divergence_is_scipys(model, tmp_path):
    summary, _ = _predict(model, _rows(3, shift=8.0), tmp_path)
    assert _kinds(summary) == {"fare": "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH"}
    # on the training histogram's buckets, scipy's JS distance squared bounds it from below
    divergence = summary["skew"]["distances"]["fare"]["jensen_shannon"]
    train, shifted = np.asarray(_rows(0)["fare"]), np.asarray(_rows(3, shift=8.0)["fare"])
    edges = np.linspace(min(train.min(), shifted.min()), max(train.max(), shifted.max()), 11)
    p, q = np.histogram(train, edges)[0], np.histogram(shifted, edges)[0]
    assert divergence > 0.1
    assert divergence == pytest.approx(scipy_distance.jensenshannon(p, q, base=2) ** 2,
                                       abs=0.15)


def test_without_declared_thresholds_the_distances_are_recorded_and_nothing_flagged(
        model, tmp_path):
    summary, _ = _predict(model, _rows(2, flood=0.4), tmp_path, checks=None)
    assert summary["skew"]["anomalies"] == []
    assert summary["skew"]["distances"]["payment_type"]["l_infinity"] > 0.3


def test_a_model_without_training_statistics_is_scored_without_the_check(tmp_path):
    version = fx.save_version(tmp_path / "m" / "1", 1)
    summary, _ = _predict(version, _rows(1, n=200), tmp_path)
    assert "skew" not in summary
    assert not (tmp_path / "out" / SERVING_STATISTICS).exists()
