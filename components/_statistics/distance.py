"""TFDV's drift and skew distances (``tensorflow_data_validation/anomalies/metrics.cc``).

* :func:`l_infinity`: the largest absolute difference between the two value distributions of a
  categorical column, each normalised by its own total (TFDV's ``LInftyDistance``), with the
  value where it occurs.
* :func:`jensen_shannon`: the approximate Jensen-Shannon divergence (base 2, capped at 1) of two
  numeric histograms: point buckets (low == high) and infinite buckets are taken out, the
  remaining buckets of both are re-bucketed on the union of their boundaries assuming values
  spread evenly within a bucket, point masses, infinite and NaN mass come back as buckets of
  their own, then ``(KL(P||M) + KL(Q||M)) / 2`` with ``M = (P + Q) / 2``.
* :func:`jensen_shannon_counts`: the same divergence between two value -> count maps.
"""

from __future__ import annotations

import math

from tensorflow_metadata.proto.v0 import statistics_pb2

__all__ = ["l_infinity", "jensen_shannon", "jensen_shannon_counts", "value_counts"]

Histogram = statistics_pb2.Histogram


def value_counts(feature: statistics_pb2.FeatureNameStatistics) -> dict[str, float]:
    """A categorical column's value -> count (its rank histogram, as TFDV reads it)."""
    return {b.label: b.sample_count for b in feature.string_stats.rank_histogram.buckets}


def l_infinity(a: dict[str, float], b: dict[str, float]) -> tuple[str, float]:
    """``(value, distance)``: TFDV's L-infinity distance of two count maps (each normalised by
    its own total); ``("", 0.0)`` when both are empty."""
    total_a, total_b = sum(a.values()), sum(b.values())
    best = ("", 0.0)
    for key in sorted(set(a) | set(b)):  # TFDV walks the keys in order, the last max wins
        p = a.get(key, 0.0) / total_a if total_a else 0.0
        q = b.get(key, 0.0) / total_b if total_b else 0.0
        if abs(p - q) >= best[1]:
            best = (key, abs(p - q))
    return best


def jensen_shannon_counts(a: dict[str, float], b: dict[str, float]) -> float:
    """Jensen-Shannon divergence (base 2) of two value -> positive count maps.

    Raises:
        ValueError: a map is empty.
    """
    if not a or not b:
        raise ValueError("Jensen-Shannon divergence needs two non-empty distributions")
    total_a, total_b = sum(a.values()), sum(b.values())
    pairs = [(a.get(k, 0.0) / total_a, b.get(k, 0.0) / total_b) for k in set(a) | set(b)]
    return min(_js(pairs), 1.0)


def _js(pairs: list[tuple[float, float]]) -> float:
    total = 0.0
    for p, q in pairs:
        m = (p + q) / 2
        if p > 0:
            total += p * math.log2(p / m)
        if q > 0:
            total += q * math.log2(q / m)
    return total / 2


def jensen_shannon(h1: Histogram, h2: Histogram) -> float:
    """Approximate Jensen-Shannon divergence (base 2, at most 1) of two histograms.

    Raises:
        ValueError: the histograms are of different types, or one holds no samples.
    """
    if h1.type != h2.type:
        raise ValueError("Jensen-Shannon divergence needs two histograms of the same type")
    c1, c2 = _align(h1, h2)
    t1, t2 = sum(c1), sum(c2)
    if not t1 or not t2:
        raise ValueError("Jensen-Shannon divergence of an empty histogram")
    return min(_js([(x / t1, y / t2) for x, y in zip(c1, c2, strict=True)]), 1.0)


def _strip(histogram: Histogram) -> tuple[list[tuple[float, float, float]], dict, float]:
    ranged, points, infinite = [], {}, 0.0
    for bucket in histogram.buckets:
        low, high, count = bucket.low_value, bucket.high_value, bucket.sample_count
        if not (math.isfinite(low) and math.isfinite(high)):
            infinite += count
        elif low == high:
            points[low] = points.get(low, 0.0) + count
        else:
            ranged.append((low, high, count))
    return ranged, points, infinite


def _rebucket(buckets: list[tuple[float, float, float]], bounds: list[float]) -> list[float]:
    """The counts of ``buckets`` over ``bounds``' buckets, each bucket's count spread evenly
    over its range (TFDV's RebucketHistogram)."""
    counts = [0.0] * (len(bounds) - 1)
    for low, high, count in buckets:
        for i in range(len(bounds) - 1):
            overlap = min(high, bounds[i + 1]) - max(low, bounds[i])
            if overlap > 0:
                counts[i] += count * overlap / (high - low)
    return counts


def _align(h1: Histogram, h2: Histogram) -> tuple[list[float], list[float]]:
    r1, p1, inf1 = _strip(h1)
    r2, p2, inf2 = _strip(h2)
    bounds = sorted({v for low, high, _ in r1 + r2 for v in (low, high)})
    c1, c2 = (_rebucket(r1, bounds), _rebucket(r2, bounds)) if bounds else ([], [])
    for point in sorted(set(p1) | set(p2)):
        c1.append(p1.get(point, 0.0))
        c2.append(p2.get(point, 0.0))
    if inf1:
        c1, c2 = c1 + [inf1], c2 + [0.0]
    if inf2:
        c1, c2 = c1 + [0.0], c2 + [inf2]
    if h1.num_nan or h2.num_nan:
        c1, c2 = c1 + [0.0, h1.num_nan], c2 + [h2.num_nan, 0.0]
    return c1, c2
