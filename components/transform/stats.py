"""A Beam CombineFn for count / missing / min / max / mean of columns of RecordBatches."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ColumnStats"]


class ColumnStats(beam.CombineFn):
    """count / missing / min / max / mean of numeric columns of Arrow RecordBatches.

    Columns may be list arrays (a missing cell is an empty or null list) or flat; the
    accumulator is ``{name: [present_rows, missing_rows, sum, min, max]}``.
    """

    def __init__(self, names: list[str]) -> None:
        self._names = names

    def create_accumulator(self) -> dict:
        return {name: [0, 0, 0.0, float("inf"), float("-inf")] for name in self._names}

    def add_input(self, acc: dict, batch: pa.RecordBatch) -> dict:
        for name in self._names:
            column = batch.column(batch.schema.get_field_index(name))
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                present = pc.fill_null(pc.greater(pc.list_value_length(column), 0), False)
                column = pc.list_flatten(column)
                rows = pc.sum(present).as_py() or 0
            else:
                rows = len(column) - column.null_count
            stats = acc[name]
            stats[0] += rows
            stats[1] += batch.num_rows - rows
            if len(column) - column.null_count:
                low, high = pc.min_max(column).values()
                stats[2] += float(pc.sum(column.cast(pa.float64())).as_py())
                stats[3] = min(stats[3], float(low.as_py()))
                stats[4] = max(stats[4], float(high.as_py()))
        return acc

    def merge_accumulators(self, accumulators) -> dict:
        merged = self.create_accumulator()
        for acc in accumulators:
            for name, (rows, missing, total, low, high) in acc.items():
                m = merged[name]
                merged[name] = [m[0] + rows, m[1] + missing, m[2] + total, min(m[3], low),
                                max(m[4], high)]
        return merged

    def extract_output(self, acc: dict) -> dict:
        return {name: {"count": rows, "missing": missing,
                       "min": low if rows else None, "max": high if rows else None,
                       "mean": total / rows if rows else None}
                for name, (rows, missing, total, low, high) in acc.items()}
