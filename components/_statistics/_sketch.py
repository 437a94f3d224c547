"""Mergeable, bounded summaries of one column: a quantile sketch and a frequency counter.

Both are plain Python objects (numpy arrays and dicts) so Beam can pickle them between a
combiner's lifted stage and its merge; both fold a whole Arrow batch at once (vectorised).

:class:`QuantileSketch` is a compactor sketch in the KLL family: level ``h`` holds values of
weight ``2**h``; when a level holds more than ``capacity`` values it is sorted and every other
value (alternating offsets) moves up one level with twice the weight. The total weight stays
the exact count. Up to ``capacity`` values per column and split nothing is ever compacted, so
quantiles and histograms are exact; beyond it each compaction at level ``h`` moves any rank by
at most ``2**h``, which bounds the rank error by ``n * log2(n / capacity) / capacity`` (1M
values, capacity 2048: under 0.5% of the rank in the worst case, far less in practice), with
at most ``capacity`` values per level kept.

:class:`FrequencyCounter` counts every distinct value exactly while there are at most
``capacity`` of them; past that it is a Misra-Gries summary (each kept count is low by at most
``n / (capacity + 1)``; every value more frequent than that is kept) and the number of distinct
values comes from a K-minimum-values sketch of 64-bit hashes (exact below ``KMV_SIZE``
distinct values, about 1.6% relative error above).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["QuantileSketch", "FrequencyCounter", "KMV_SIZE"]

KMV_SIZE = 4096
_HASH_RANGE = float(2 ** 64)


class QuantileSketch:
    """Weighted sample of a numeric column whose total weight is its exact count."""

    def __init__(self, capacity: int = 2048) -> None:
        self.capacity = capacity
        self.levels: list[np.ndarray] = [np.empty(0)]
        self._flips = 0

    def add(self, values: np.ndarray) -> None:
        """Fold a batch of values (any numeric dtype; kept as float64)."""
        if len(values):
            self.levels[0] = np.concatenate([self.levels[0], values.astype(np.float64)])
            self._compress()

    def merge(self, other: QuantileSketch) -> None:
        """Fold another sketch into this one."""
        for height, values in enumerate(other.levels):
            if height == len(self.levels):
                self.levels.append(np.empty(0))
            self.levels[height] = np.concatenate([self.levels[height], values])
        self._compress()

    def _compress(self) -> None:
        height = 0
        while height < len(self.levels):
            values = self.levels[height]
            if len(values) > self.capacity:
                values = np.sort(values)
                odd = len(values) % 2  # the largest of an odd count stays, at its weight
                kept, pairs = values[len(values) - odd:], values[:len(values) - odd]
                # Alternating offsets keep the compactions unbiased on average.
                promoted = pairs[self._flips % 2::2]
                self._flips += 1
                self.levels[height] = kept
                if height + 1 == len(self.levels):
                    self.levels.append(np.empty(0))
                self.levels[height + 1] = np.concatenate([self.levels[height + 1], promoted])
            height += 1

    def weighted(self) -> tuple[np.ndarray, np.ndarray]:
        """``(values sorted, their weights)``."""
        values = np.concatenate(self.levels)
        weights = np.concatenate([np.full(len(v), 2.0 ** h) for h, v in enumerate(self.levels)])
        order = np.argsort(values, kind="stable")
        return values[order], weights[order]

    def quantiles(self, fractions: np.ndarray) -> np.ndarray:
        """The smallest value whose cumulative weight reaches ``fraction * count``, for each
        fraction (numpy's ``inverted_cdf`` quantile when nothing was compacted)."""
        values, weights = self.weighted()
        if not len(values):
            return np.full(len(fractions), np.nan)
        cumulative = np.cumsum(weights)
        targets = np.asarray(fractions) * cumulative[-1]
        index = np.searchsorted(cumulative, targets, side="left")
        return values[np.clip(index, 0, len(values) - 1)]

    def counts_between(self, edges: np.ndarray) -> np.ndarray:
        """Weight in each ``[edges[i], edges[i+1])``, the last bucket closed (as numpy's
        histogram)."""
        values, weights = self.weighted()
        counts, _ = np.histogram(values, bins=edges, weights=weights)
        return counts


def _hash64(labels) -> np.ndarray:
    """Deterministic 64-bit hashes (the same on every worker, unlike ``hash``)."""
    return np.array([int.from_bytes(hashlib.blake2b(_as_bytes(v), digest_size=8).digest(),
                                    "little") for v in labels], dtype=np.uint64)


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class FrequencyCounter:
    """Counts of distinct values (bytes or ints), bounded by ``capacity`` counters."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self.counts: dict = {}
        self.truncated = False
        self.kmv: np.ndarray | None = None  # only once truncated: the distinct-values sketch
        self.max_error = 0  # an upper bound on how low any kept count is

    def add_counts(self, values: list, counts: list) -> None:
        """Fold one batch's ``value_counts``."""
        table = self.counts
        for value, count in zip(values, counts, strict=True):
            table[value] = table.get(value, 0) + count
        if self.truncated:
            self.kmv = _kmv_merge(self.kmv, _hash64(values))
        self._bound()

    def merge(self, other: FrequencyCounter) -> None:
        """Fold another counter into this one."""
        if self.truncated or other.truncated:
            self.kmv = _kmv_merge(self._sketch(), other._sketch())
            self.truncated = True
        for value, count in other.counts.items():
            self.counts[value] = self.counts.get(value, 0) + count
        self.max_error += other.max_error
        self._bound()

    def _sketch(self) -> np.ndarray:
        return self.kmv if self.truncated else _kmv_merge(None, _hash64(list(self.counts)))

    def _bound(self) -> None:
        if len(self.counts) <= self.capacity:
            return
        if not self.truncated:  # every distinct value is still here: sketch them all
            self.kmv, self.truncated = _kmv_merge(None, _hash64(list(self.counts))), True
        # Misra-Gries: take the (capacity+1)-th largest count off every counter.
        floor = sorted(self.counts.values(), reverse=True)[self.capacity]
        self.counts = {v: c - floor for v, c in self.counts.items() if c > floor}
        self.max_error += floor

    def unique(self) -> int:
        """The number of distinct values (exact below ``KMV_SIZE``, else estimated)."""
        if not self.truncated:
            return len(self.counts)
        if len(self.kmv) < KMV_SIZE:
            return len(self.kmv)
        return int(round((KMV_SIZE - 1) / (float(self.kmv[-1]) / _HASH_RANGE)))

    def most_common(self, k: int) -> list[tuple[object, int]]:
        """The ``k`` largest counts, ties by value (deterministic)."""
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], _as_bytes(item[0])))
        return ranked[:k]


def _kmv_merge(a: np.ndarray | None, b: np.ndarray) -> np.ndarray:
    merged = b if a is None else np.concatenate([a, b])
    return np.unique(merged)[:KMV_SIZE]  # sorted, distinct: the KMV_SIZE smallest hashes
