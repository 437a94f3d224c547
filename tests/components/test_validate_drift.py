"""Drift distances against scipy and direct computation: the Jensen-Shannon divergence (base 2,
as TFDV) of generated histograms and count maps is scipy's ``jensenshannon`` squared; the
L-infinity distance is the largest gap between the normalised frequencies; TFDV's re-bucketing
of histograms with different boundaries spreads each bucket evenly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from estflow.components._statistics.distance import jensen_shannon
from estflow.components._statistics.distance import jensen_shannon_counts
from estflow.components._statistics.distance import l_infinity
from estflow.components._statistics.statistics import statistics_pb2


def _histogram(edges, counts, kind=statistics_pb2.Histogram.STANDARD):
    hist = statistics_pb2.Histogram(type=kind)
    for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True):
        hist.buckets.add(low_value=low, high_value=high, sample_count=count)
    return hist


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=n, max_size=n),
    st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=n, max_size=n))))
def test_js_of_histograms_on_the_same_buckets_is_scipys_squared(pair):
    p, q = pair
    if sum(p) == 0 or sum(q) == 0:
        with pytest.raises(ValueError, match="empty histogram"):
            jensen_shannon(_histogram(range(len(p) + 1), p), _histogram(range(len(q) + 1), q))
        return
    edges = np.cumsum([0.0, *np.linspace(1, 3, len(p))])
    ours = jensen_shannon(_histogram(edges, p), _histogram(edges, q))
    assert ours == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefghij"), st.integers(1, 10 ** 6), min_size=1),
       st.dictionaries(st.sampled_from("abcdefghij"), st.integers(1, 10 ** 6), min_size=1))
def test_js_and_linf_of_count_maps(a, b):
    keys = sorted(set(a) | set(b))
    p = np.array([a.get(k, 0) for k in keys], dtype=float)
    q = np.array([b.get(k, 0) for k in keys], dtype=float)
    assert jensen_shannon_counts(a, b) == pytest.approx(jensenshannon(p, q, base=2) ** 2,
                                                        abs=1e-9)
    gaps = np.abs(p / p.sum() - q / q.sum())
    value, distance = l_infinity(a, b)
    assert distance == pytest.approx(gaps.max())
    assert gaps[keys.index(value)] == distance


def test_rebucketing_spreads_each_bucket_evenly():
    # [0, 2) holding 4 against [0, 1) 1 and [1, 2) 3: on the union the first becomes 2 and 2.
    coarse = _histogram([0.0, 2.0], [4.0])
    fine = _histogram([0.0, 1.0, 2.0], [1.0, 3.0])
    expected = jensenshannon([2, 2], [1, 3], base=2) ** 2
    assert jensen_shannon(coarse, fine) == pytest.approx(expected)
    assert jensen_shannon(fine, coarse) == pytest.approx(expected)


def test_point_buckets_and_disjoint_ranges():
    point = _histogram([5.0, 5.0], [10.0])
    spread = _histogram([0.0, 10.0], [10.0])
    assert jensen_shannon(point, point) == 0.0
    assert jensen_shannon(point, spread) == pytest.approx(1.0)  # no common bucket: maximal
    far = _histogram([20.0, 30.0], [7.0])
    assert jensen_shannon(spread, far) == pytest.approx(1.0)
    assert math.isclose(jensen_shannon(spread, _histogram([0.0, 10.0], [3.0])), 0.0,
                        abs_tol=1e-12)


def test_histograms_of_different_types_are_refused():
    with pytest.raises(ValueError, match="same type"):
        jensen_shannon(_histogram([0, 1], [1]),
                       _histogram([0, 1], [1], statistics_pb2.Histogram.QUANTILES))
