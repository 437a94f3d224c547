"""The weighted quantile sketch of tf.estimator's boosted trees, in Python.

A line-by-line port of TensorFlow's ``boosted_trees/quantiles`` (``WeightedQuantilesBuffer``,
``WeightedQuantilesSummary``, ``WeightedQuantilesStream``) and of the ops built on it
(``BoostedTreesMakeQuantileSummaries``, ``...QuantileStreamResourceAddSummaries``,
``...Flush``): TF 2.15/2.21 wheels register no kernel for those ops, so the sketch runs here, in
``tf.numpy_function`` during the first ``n_batches_per_layer`` training steps. Ranks and
weights are float32 as in the C++ (``WeightType = float``), so the boundaries equal the ops'
(checked against TF 2.8 in ``tests/components/estimator/reference``).

A summary is a list of ``(value, weight, min_rank, max_rank)`` tuples sorted by value. The
stream's state (its summary levels) travels as a float32 ``[n, 5]`` array (level, value,
weight, min_rank, max_rank) so that it can live in a checkpointed variable.
"""

from __future__ import annotations

import math
import sys

import numpy as np

__all__ = ["make_summary", "Stream", "add_summary", "flush", "boundaries_of",
           "add_summary_bytes", "flush_padded"]

_F = np.float32
MAX_ELEMENTS = 1099511627776  # the stream resource op's max_elements default (2 ** 40)


def _f(x) -> float:
    """``x`` rounded to float32 (a C++ ``float``), as a Python float."""
    return float(_F(x))


def _entry(value, weight, min_rank, max_rank) -> tuple:
    return (_f(value), _f(weight), _f(min_rank), _f(max_rank))


def _prev_max_rank(e) -> float:
    return _f(e[3] - e[1])


def _next_min_rank(e) -> float:
    return _f(e[2] + e[1])


def _entry_list(buffer: list) -> list:
    """``WeightedQuantilesBuffer::GenerateEntryList``: sorted, equal values merged."""
    if not buffer:
        return []
    ordered = sorted(buffer, key=lambda vw: vw[0])
    out = [list(ordered[0])]
    for value, weight in ordered[1:]:
        if value != out[-1][0]:
            out.append([value, weight])
        else:
            out[-1][1] = _f(out[-1][1] + weight)
    return [tuple(e) for e in out]


def _from_buffer(entries: list) -> list:
    """``BuildFromBufferEntries``: ranks from the cumulative weight."""
    out, cumulative = [], 0.0
    for value, weight in entries:
        out.append(_entry(value, weight, cumulative, cumulative + weight))
        cumulative = _f(cumulative + weight)
    return out


def merge(base: list, other: list) -> list:
    """``WeightedQuantilesSummary::Merge``."""
    if not other:
        return list(base)
    if not base:
        return list(other)
    out = []
    i = j = 0
    next1 = next2 = 0.0
    while i < len(base) and j < len(other):
        a, b = base[i], other[j]
        if a[0] < b[0]:
            out.append(_entry(a[0], a[1], a[2] + next2, a[3] + _prev_max_rank(b)))
            next1 = _next_min_rank(a)
            i += 1
        elif b[0] < a[0]:
            out.append(_entry(b[0], b[1], b[2] + next1, b[3] + _prev_max_rank(a)))
            next2 = _next_min_rank(b)
            j += 1
        else:
            out.append(_entry(a[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]))
            next1, next2 = _next_min_rank(a), _next_min_rank(b)
            i += 1
            j += 1
    for a in base[i:]:
        out.append(_entry(a[0], a[1], a[2] + next2, a[3] + other[-1][3]))
    for b in other[j:]:
        out.append(_entry(b[0], b[1], b[2] + next1, b[3] + base[-1][3]))
    return out


def compress(entries: list, size_hint: int, min_eps: float = 0.0) -> list:
    """``WeightedQuantilesSummary::Compress`` (keeps the first and last entries)."""
    size_hint = max(int(size_hint), 2)
    if len(entries) <= size_hint:
        return list(entries)
    eps_delta = entries[-1][3] * max(1.0 / size_hint, min_eps)
    out = [entries[0]]
    add_accumulator, add_step = 0, len(entries)
    read, last = 0, None
    n = len(entries)
    while read + 1 != n:
        nxt = read + 1
        while (nxt != n and add_accumulator < add_step
               and _f(_prev_max_rank(entries[nxt]) - _next_min_rank(entries[read]))
               <= eps_delta):
            add_accumulator += size_hint
            nxt += 1
        read = read + 1 if read == nxt - 1 else nxt - 1
        out.append(entries[read])
        last = read
        add_accumulator -= add_step
    if last is None or last + 1 != n:
        out.append(entries[-1])
    return out


def approximation_error(entries: list) -> float:
    if not entries:
        return 0.0
    max_gap = 0.0
    for prev, cur in zip(entries, entries[1:], strict=False):
        max_gap = max(max_gap, _f(cur[3] - cur[2] - cur[1]),
                      _f(_prev_max_rank(cur) - _next_min_rank(prev)))
    return max_gap / entries[-1][3]


def generate_boundaries(entries: list, num_boundaries: int) -> list[float]:
    """``GenerateBoundaries`` (then uniquified, as the flush op does)."""
    if not entries:
        return []
    eps = _f(approximation_error(entries) + 1.0 / num_boundaries)
    values = [e[0] for e in compress(list(entries), num_boundaries, eps)]
    if len(values) > num_boundaries:
        # What TF's kernels return (measured against TF 2.8, the reference's figures): at
        # most num_boundaries values, the largest kept; the compression above can leave one
        # more.
        values = values[:num_boundaries - 1] + values[-1:]
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def quantile_specs(eps: float, max_elements: int) -> tuple[int, int]:
    """``WeightedQuantilesStream::GetQuantileSpecs``: (max levels, block size)."""
    if eps <= sys.float_info.epsilon:
        return 1, max(max_elements, 2)
    max_level, block_size = 1, 2
    while (1 << max_level) * block_size < max_elements:
        block_size = int(math.ceil(max_level / eps)) + 1
        max_level += 1
    return max_level, max(block_size, 2)


class Stream:
    """``WeightedQuantilesStream``: a multi-level summary with bounded error."""

    def __init__(self, eps: float, max_elements: int = MAX_ELEMENTS, levels=None) -> None:
        self.eps = eps
        self.max_levels, self.block_size = quantile_specs(eps, max_elements)
        self.buffer_size = min(self.block_size << 1, max_elements)
        self.buffer: list = []
        self.levels: list[list] = [list(level) for level in (levels or [])]
        self.local: list = []

    def push_entry(self, value: float, weight: float) -> None:
        if weight > 0:
            self.buffer.append((_f(value), _f(weight)))
        if len(self.buffer) >= self.buffer_size:
            self.push_buffer()

    def push_buffer(self) -> None:
        entries, self.buffer = _entry_list(self.buffer), []
        self.local = compress(_from_buffer(entries), self.block_size, self.eps)
        self._propagate()

    def push_summary(self, summary: list) -> None:
        self.local = compress(list(summary), self.block_size, self.eps)
        self._propagate()

    def finalize(self) -> list:
        self.push_buffer()
        final: list = []
        for level in self.levels:
            final = merge(final, level)
        self.levels = []
        return final

    def _propagate(self) -> None:
        if not self.local:
            return
        level = 0
        while True:
            if len(self.levels) <= level:
                self.levels.append([])
            current = self.levels[level]
            self.local = merge(self.local, current)
            if not current or len(self.local) <= self.block_size + 1:
                self.levels[level], self.local = self.local, []
                return
            self.local = compress(self.local, self.block_size, self.eps)
            self.levels[level] = []
            level += 1


def make_summary(values, weights, eps: float) -> list:
    """``BoostedTreesMakeQuantileSummaries`` for one feature."""
    values = np.asarray(values, np.float32).reshape(-1)
    weights = np.asarray(weights, np.float32).reshape(-1)
    if weights.size == 1:
        weights = np.full(values.shape, weights[0], np.float32)
    stream = Stream(eps, values.size + 1)
    for value, weight in zip(values.tolist(), weights.tolist(), strict=True):
        stream.push_entry(value, weight)
    return stream.finalize()


def _levels_of(state: np.ndarray) -> list[list]:
    levels: list[list] = []
    for row in np.asarray(state, np.float32).reshape(-1, 5).tolist():
        level = int(row[0])
        while len(levels) <= level:
            levels.append([])
        levels[level].append(tuple(float(v) for v in row[1:]))
    return levels


def _state_of(levels: list[list]) -> np.ndarray:
    rows = [(i, *entry) for i, level in enumerate(levels) for entry in level]
    return np.asarray(rows, np.float32).reshape(-1, 5)


def add_summary(state, values, weights, eps) -> np.ndarray:
    """One batch into the stream whose levels ``state`` holds (``[n, 5]``): the batch's
    summary (``MakeQuantileSummaries``) pushed into the stream (``...AddSummaries``)."""
    eps = _f(eps)
    stream = Stream(eps, levels=_levels_of(state))
    stream.push_summary(make_summary(values, weights, eps))
    return _state_of(stream.levels)


def flush(state, num_buckets, eps) -> np.ndarray:
    """The bucket boundaries of the stream (``...Flush`` + ``...GetBucketBoundaries``)."""
    stream = Stream(_f(eps), levels=_levels_of(state))
    return np.asarray(generate_boundaries(stream.finalize(), int(num_buckets)), np.float32)


def add_summary_bytes(state: bytes, values, weights, eps) -> bytes:
    """:func:`add_summary` with the state as bytes (float32 ``[n, 5]``, row-major): what a
    scalar string variable holds."""
    levels = np.frombuffer(bytes(state), np.float32).reshape(-1, 5)
    return add_summary(levels, values, weights, eps).astype(np.float32).tobytes()


def flush_padded(state: bytes, num_buckets, eps) -> tuple[np.ndarray, np.int32]:
    """(the boundaries padded with +inf to ``num_buckets``, how many there are)."""
    levels = np.frombuffer(bytes(state), np.float32).reshape(-1, 5)
    bounds = flush(levels, num_buckets, eps)[:int(num_buckets)]
    out = np.full([int(num_buckets)], np.inf, np.float32)
    out[:bounds.size] = bounds
    return out, np.int32(bounds.size)


def boundaries_of(values, weights=None, eps: float = 0.01, num_buckets: int = 100) -> list:
    """The boundaries one batch of ``values`` gives (a convenience for tests)."""
    values = np.asarray(values, np.float32)
    weights = np.ones_like(values) if weights is None else weights
    state = add_summary(np.zeros([0, 5], np.float32), values, weights, eps)
    return flush(state, num_buckets, eps).tolist()


def generate_quantiles(entries: list, num_quantiles: int) -> list[float]:
    """``GenerateQuantiles``: ``num_quantiles + 1`` rank queries (min and max included)."""
    if not entries:
        return []
    num_quantiles = max(int(num_quantiles), 2)
    out = []
    cur = 0
    total = entries[-1][3]
    for rank in range(num_quantiles + 1):
        d_2 = _f(2 * _f(_f(rank * total) / num_quantiles))
        nxt = cur + 1
        while nxt < len(entries) and d_2 >= _f(entries[nxt][2] + entries[nxt][3]):
            nxt += 1
        cur = nxt - 1
        if nxt == len(entries) or d_2 < _f(_next_min_rank(entries[cur])
                                            + _prev_max_rank(entries[nxt])):
            out.append(entries[cur][0])
        else:
            out.append(entries[nxt][0])
    return out
