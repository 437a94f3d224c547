"""Data statistics: the CombineFn's figures against pandas/numpy on generated frames (nulls,
empty splits, one row, huge and negative values, unicode categories), in any bundling; the
sketch's error bound past its exact size; and statistics.pb written by the real ingest step
(and the fused preprocess job) for a small CSV: each split, then the whole span (``All
Examples``), whose figures are those of every kept row."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.components._statistics._sketch import QuantileSketch
from estflow.components._statistics.statistics import ALL_EXAMPLES
from estflow.components._statistics.statistics import read_statistics
from estflow.components._statistics.statistics import span_dataset
from estflow.components._statistics.statistics import split_datasets
from estflow.components._statistics.statistics import statistics_pb2
from estflow.components._statistics.statistics import type_errors
from tests.components._validate_data import statistics

FLOATS = st.one_of(st.none(), st.floats(width=32, allow_nan=False, allow_infinity=False,
                                        allow_subnormal=False),
                   st.sampled_from([0.0, -1.5, 2.25]))
INTS = st.one_of(st.none(), st.integers(-(2 ** 62), 2 ** 62), st.integers(-3, 3))
TEXT = st.one_of(st.none(), st.sampled_from(["a", "b", "Ünï", "日本", "a b", ""]),
                 st.text(min_size=1, max_size=4).filter(lambda s: "\x00" not in s))


@st.composite
def frames(draw):
    rows = draw(st.integers(0, 40))
    data = {"x": draw(st.lists(FLOATS, min_size=rows, max_size=rows)),
            "n": draw(st.lists(INTS, min_size=rows, max_size=rows)),
            "color": draw(st.lists(TEXT, min_size=rows, max_size=rows)),
            "code": draw(st.lists(st.one_of(st.none(), st.integers(-5, 5)),
                                  min_size=rows, max_size=rows))}
    cuts = draw(st.lists(st.integers(0, max(rows, 1)), max_size=3))
    return data, cuts


def _feature(stats, name: str) -> statistics_pb2.FeatureNameStatistics:
    return next(f for f in stats.features if f.path.step == [name])


def _check_numeric(feature, series: pd.Series) -> None:
    values = series.dropna().astype(np.float64)
    stats = feature.num_stats
    assert stats.common_stats.num_non_missing == len(values)
    assert stats.common_stats.num_missing == series.isna().sum()
    if not len(values):
        assert not stats.histograms
        return
    assert (stats.min, stats.max) == (values.min(), values.max())
    scale = max(1.0, float(values.abs().max()))
    assert math.isclose(stats.mean, values.mean(), rel_tol=1e-9, abs_tol=1e-12 * scale)
    assert math.isclose(stats.std_dev, values.std(ddof=0), rel_tol=1e-6, abs_tol=1e-9 * scale)
    assert stats.num_zeros == (values == 0).sum()
    assert stats.median == np.quantile(values, 0.5, method="inverted_cdf")
    quantiles = next(h for h in stats.histograms if h.type == h.QUANTILES)
    expected = np.quantile(values, np.linspace(0, 1, 11), method="inverted_cdf")
    assert [b.low_value for b in quantiles.buckets] + [quantiles.buckets[-1].high_value] \
        == pytest.approx(expected.tolist(), rel=0, abs=0)
    standard = next(h for h in stats.histograms if h.type == h.STANDARD)
    if values.min() == values.max():
        assert [b.sample_count for b in standard.buckets] == [len(values)]
    else:
        counts, _ = np.histogram(values, bins=np.linspace(values.min(), values.max(), 11))
        assert [b.sample_count for b in standard.buckets] == counts.tolist()


def _check_categorical(feature, series: pd.Series, as_text) -> None:
    present = series.dropna()
    stats = feature.string_stats
    assert stats.common_stats.num_non_missing == len(present)
    assert stats.common_stats.num_missing == series.isna().sum()
    if not len(present):
        return
    labels = present.map(as_text)
    counts = labels.value_counts()
    assert stats.unique == len(counts)
    assert {b.label: b.sample_count for b in stats.rank_histogram.buckets} == counts.to_dict()
    assert [t.frequency for t in stats.top_values] == sorted(counts, reverse=True)[:20]
    lengths = labels.map(lambda s: len(s.encode()))
    assert stats.avg_length == pytest.approx(lengths.mean())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_statistics_match_pandas_in_any_bundling(frame):
    data, cuts = frame
    stats = statistics(data, cuts=cuts)
    df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in data.items()})
    assert stats.num_examples == len(df)
    if not len(df):  # an empty split: its row count and no columns, as TFDV writes it
        assert not stats.features
        return
    _check_numeric(_feature(stats, "x"), df["x"])
    _check_numeric(_feature(stats, "n"), df["n"])
    _check_categorical(_feature(stats, "color"), df["color"], str)
    _check_categorical(_feature(stats, "code"), df["code"], lambda v: str(int(v)))
    assert _feature(stats, "code").type == statistics_pb2.FeatureNameStatistics.INT


def test_sketch_is_exact_up_to_capacity_and_within_its_bound_past_it():
    rng = np.random.default_rng(3)
    values = rng.lognormal(0, 2, 200_000)
    sketch, exact = QuantileSketch(capacity=2048), QuantileSketch(capacity=2048)
    exact.add(values[:2048])
    assert exact.quantiles(np.array([0.1, 0.5, 0.9])).tolist() == np.quantile(
        values[:2048], [0.1, 0.5, 0.9], method="inverted_cdf").tolist()
    halves = QuantileSketch(capacity=2048)
    for part in np.array_split(values, 37):
        sketch.add(part)
    halves.add(values[1::2])
    other = QuantileSketch(capacity=2048)
    other.add(values[0::2])
    halves.merge(other)
    bound = len(values) * math.log2(len(values) / 2048) / 2048  # the documented worst case
    ordered = np.sort(values)
    for summary in (sketch, halves):
        assert sum(len(level) for level in summary.levels) <= 2048 * len(summary.levels)
        for fraction, value in zip(np.linspace(0.05, 0.95, 19), summary.quantiles(
                np.linspace(0.05, 0.95, 19)), strict=True):
            rank = np.searchsorted(ordered, value, side="right")
            assert abs(rank - fraction * len(values)) <= bound


def test_frequencies_past_the_counter_cap_stay_within_their_bound():
    from estflow.components._statistics._sketch import FrequencyCounter

    rng = np.random.default_rng(5)
    values = np.concatenate([rng.integers(0, 50_000, 100_000), np.full(20_000, 7),
                             np.full(10_000, 11)])
    rng.shuffle(values)
    counter = FrequencyCounter(capacity=1000)
    for part in np.array_split(values, 13):
        labels, counts = np.unique(part, return_counts=True)
        counter.add_counts(labels.tolist(), counts.tolist())
    truth = pd.Series(values).value_counts()
    top = dict(counter.most_common(2))
    assert set(top) == {7, 11}
    for label, count in top.items():
        assert truth[label] - len(values) / 1001 <= count <= truth[label]
    assert abs(counter.unique() - len(truth)) / len(truth) < 0.05


def _pipeline(csv: str) -> ef.Pipeline:
    return ef.Pipeline(
        name="stats-test", source=ef.CsvSource(csv, max_rejected_fraction=0.5),
        features=(ef.Numeric("x", default=0.0), ef.Numeric("n", dtype="int"),
                  ef.CategoricalVocab("color", default=""), ef.CategoricalIdentity(
                      "code", num_buckets=10)),
        label=ef.Label("label"),
        model=ef.DNNClassifier(hidden_units=(4,), feature_columns=("x", "n")),
        train=ef.TrainSpec(max_steps=1))


CSV = ("x,n,color,code,label\n1.5,3,red,1,1\n,4,,2,0\n2.0,5,blue,1,1\n-1e30,3,blue,3,0\n"
       "3.0,8,grün,1,1\n4,9,red,2,0\nbad,1,red,1,1\n0,-7,日本,9,1\n")


def _check_against_csv(stats, examples: Path) -> None:
    assert [d.name for d in stats.datasets] == ["train", "eval", ALL_EXAMPLES]
    df = pd.read_csv(Path("data.csv"), keep_default_na=False, dtype=str)
    df = df[df["x"] != "bad"]  # the rejected row
    assert sum(d.num_examples for d in split_datasets(stats)) == len(df)
    both = [d for d in split_datasets(stats) if d.num_examples]
    assert sum(_feature(d, "x").num_stats.common_stats.num_missing for d in both) == 1
    colors = {}
    for d in both:
        for b in _feature(d, "color").string_stats.rank_histogram.buckets:
            colors[b.label] = colors.get(b.label, 0) + b.sample_count
    assert colors == df.loc[df["color"] != "", "color"].value_counts().to_dict()
    assert min(_feature(d, "x").num_stats.min for d in both) == np.float32(-1e30)  # as stored
    assert all(_feature(d, "code").HasField("string_stats") for d in both)
    # the span: every kept row, figured as for one split (what TFDV computes on them all)
    whole = stats.datasets[-1]
    assert span_dataset(stats) is whole and whole.num_examples == len(df)
    x = df["x"].replace("", np.nan).astype(np.float32).astype(np.float64)
    _check_numeric(_feature(whole, "x"), x)
    _check_numeric(_feature(whole, "n"), df["n"].astype(np.int64))
    counted = {b.label: b.sample_count
               for b in _feature(whole, "color").string_stats.rank_histogram.buckets}
    assert counted == colors and _feature(whole, "color").string_stats.unique == len(colors)
    # the row ingest rejected for its x ("bad") is in no dataset: the span's x records it
    assert type_errors(_feature(whole, "x")) == (1, 1 / 8, "bad")
    assert [_name for _name in ("n", "color", "code", "label")
            if _feature(whole, _name).custom_stats] == []
    assert not any(f.custom_stats for d in both for f in d.features)
    assert (examples / "statistics.pbtxt").is_file()


def test_ingest_writes_statistics_of_its_splits(tmp_path, monkeypatch):
    from estflow.components.ingest import __main__ as ingest

    monkeypatch.chdir(tmp_path)
    Path("data.csv").write_text(CSV, encoding="utf-8")
    assert ingest.main(["--spec", _pipeline("data.csv").to_json(), "--examples", "ex"]) == 0
    _check_against_csv(read_statistics("ex"), tmp_path / "ex")
    assert read_statistics("ex/statistics.pbtxt") == read_statistics("ex/statistics.pb")


@pytest.mark.slow
def test_preprocess_writes_the_same_statistics(tmp_path, monkeypatch):
    from estflow.components.preprocess import __main__ as preprocess

    monkeypatch.chdir(tmp_path)
    Path("data.csv").write_text(CSV, encoding="utf-8")
    assert preprocess.main(["--spec", _pipeline("data.csv").to_json(), "--examples", "ex",
                            "--transformed", "tr"]) == 0
    _check_against_csv(read_statistics("ex"), tmp_path / "ex")
