"""Shared by the data-validation tests: RecordBatches in the ingest layout and statistics of
them through the real CombineFn (split into bundles, merged as a runner merges), and a span's
statistics file as ingest writes it (each split, then ``All Examples``: their accumulators
merged)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from estflow.components._sources.cells import ARROW_TYPES
from estflow.components._statistics.statistics import SplitStatistics
from estflow.components._statistics.statistics import statistics_pb2

SPECS = (("x", "float", False), ("n", "int", False), ("color", "string", True),
         ("code", "int", True))


def batch(columns: dict[str, list], specs=SPECS) -> pa.RecordBatch:
    """One row per index; ``None`` is an absent cell (an empty list, as ingest writes it)."""
    arrays = []
    for name, dtype, _ in specs:
        cells = [[] if v is None else [v.encode() if dtype == "string" else v]
                 for v in columns[name]]
        arrays.append(pa.array(cells, type=pa.large_list(ARROW_TYPES[dtype])))
    return pa.RecordBatch.from_arrays(arrays, names=[s[0] for s in specs])


def statistics(columns: dict[str, list], split: str = "train", specs=SPECS, cuts=(),
               ) -> statistics_pb2.DatasetFeatureStatistics:
    """The CombineFn's output for ``columns`` cut into bundles at ``cuts``; the bundles are
    accumulated separately and merged (odd ones first, to vary the order)."""
    combine = SplitStatistics(split, specs)
    return statistics_pb2.DatasetFeatureStatistics.FromString(
        combine.extract_output(accumulate(columns, split, specs, cuts)))


def span(splits: dict[str, dict[str, list]], specs=SPECS, rejects: dict | None = None
         ) -> statistics_pb2.DatasetFeatureStatisticsList:
    """The statistics file ingest writes for ``{split: columns}``: each split, then the span
    (``All Examples``); ``rejects``: ingest's per-column figures (``type_errors``, ...)."""
    from estflow.components._statistics.statistics import gather  # noqa: PLC0415

    return gather({name: accumulate(columns, name, specs) for name, columns in splits.items()},
                  specs, rejects)


def accumulate(columns: dict[str, list], split: str = "train", specs=SPECS, cuts=()):
    """The CombineFn's accumulator for ``columns`` (see :func:`statistics`)."""
    combine = SplitStatistics(split, specs)
    rows = len(next(iter(columns.values())))
    bounds = [0, *sorted(c for c in cuts if 0 < c < rows), rows]
    accumulators = []
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        acc = combine.create_accumulator()
        part = {k: v[start:stop] for k, v in columns.items()}
        accumulators.append(combine.add_input(acc, batch(part, specs)))
    accumulators = accumulators[1::2] + accumulators[0::2] or [combine.create_accumulator()]
    return combine.merge_accumulators(accumulators)


def night(seed: int, rows: int = 4000, *, shift: float = 0.0, flood: float = 0.0,
          drop: str | None = None) -> dict[str, list]:
    """One night of the generator: x ~ N(10 + shift, 2), n ~ Poisson(4), color from 4 colors
    (a ``flood`` fraction replaced by a new one), code from 3 ids; ``drop``: a column whose
    cells are all empty."""
    rng = np.random.default_rng(seed)
    colors = rng.choice(np.array(["red", "green", "blue", "grün"], dtype=object), rows,
                        p=[0.4, 0.3, 0.2, 0.1])
    colors[rng.random(rows) < flood] = "magenta"
    data = {"x": (rng.normal(10 + shift, 2, rows)).astype(np.float32).tolist(),
            "n": rng.poisson(4, rows).tolist(), "color": colors.tolist(),
            "code": rng.choice([7, 8, 9], rows).tolist()}
    if drop:
        data[drop] = [None] * rows
    return data


def stats_list(*datasets) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics_pb2.DatasetFeatureStatisticsList(datasets=list(datasets))
