"""The reader of a TFRecordSource: TFRecord files of serialized ``tf.train.Example`` (its row in
:data:`.registry.READERS`).

Each value is checked against its declared column like a CSV cell (:mod:`.cells`). What a CSV
cannot have: a feature with several values, a record that is not an Example, or a feature of
the wrong kind in some records, each rejects that row. A row's split hash is that of the
record's bytes as read (which of its features are declared plays no part).
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx_bsl.coders import example_coder

from estflow.components._io.tfrecords import read_records
from estflow.components._sources.cells import can_hold
from estflow.components._sources.chunks import RowChunk
from estflow.components._sources.chunks import json_row
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.rows import Validated
from estflow.components._sources.rows import merge_stats
from estflow.components._sources.rows import validate
from estflow.components._sources.split import scalar_values
from estflow.components._sources.split import text_hashes
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadTFRecord", "read_file"]


def read_file(pipeline: Pipeline, files: list[str], block_bytes: int,
              row_hashes: bool) -> beam.DoFn:
    """The DoFn reading one TFRecord file (a file is read record by record, not in blocks of
    bytes; its rows always carry their records' hashes, which cost little)."""
    del files, block_bytes, row_hashes
    return ReadTFRecord(pipeline)


class ReadTFRecord(beam.DoFn):
    """A TFRecord file of tf.Examples -> RowChunks (decoded by tfx_bsl's C++ decoder)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._decoder = None

    def setup(self) -> None:
        self._decoder = example_coder.ExamplesToRecordBatchDecoder()

    def process(self, path: str):
        start = 0
        for records in read_records(path, compression=self._pipeline.source.compression):
            yield self._chunk(path, records, start)
            start += len(records)

    def _chunk(self, path: str, records: list[bytes], start: int) -> RowChunk:
        try:
            decoded = [(np.arange(len(records)), self._decoder.DecodeBatch(records))]
            early = []
        except Exception:  # noqa: BLE001 - conflicting kinds or a corrupt record: one by one
            decoded, early = self._decode_each(records)
        parts = [self._validate(batch, rows) for rows, batch in decoded]
        validated = parts[0] if len(parts) == 1 else _concat(self._pipeline, parts)
        validated.rejected += early
        texts = {}
        for rows, batch in decoded:
            texts.update({int(r): json_row(batch.slice(i, 1).to_pylist()[0])
                          for i, r in enumerate(rows)})
        return make_chunk(validated, path, lines=lambda i: start + i + 1,
                          texts=lambda i: texts.get(i, f"<{len(records[i])} bytes, not a "
                                                       "tf.train.Example>"),
                          read=len(records), unseen=self._unseen(decoded),
                          hashes=_record_hashes(records, validated.rows))

    def _decode_each(self, records: list[bytes]):
        decoded, early = [], []
        for i, record in enumerate(records):
            try:
                decoded.append((np.array([i]), self._decoder.DecodeBatch([record])))
            except Exception as err:  # noqa: BLE001 - the record is not an Example
                early.append((i, "not_an_example", f"not a serialized tf.train.Example: "
                              f"{str(err).splitlines()[0][:200]}"))
        return decoded, early

    def _validate(self, batch: pa.RecordBatch, rows: np.ndarray):
        """Per column: one value or none; a kind the dtype cannot hold rejects the row."""
        early, cells = {}, {}
        for column in self._pipeline.raw_columns():
            cells[column.name], problems = _feature_cells(batch, column)
            for row, message in problems:
                early.setdefault(row, (f"bad_feature:{column.name}", message))
        keep = np.array([i not in early for i in range(batch.num_rows)], dtype=bool)
        kept = {name: values.filter(pa.array(keep)) for name, values in cells.items()}
        validated = validate(self._pipeline, kept, int(keep.sum()))
        positions = rows[keep]
        validated.rejected = [(int(positions[i]), kind, message)
                              for i, kind, message in validated.rejected]
        validated.rejected += [(int(rows[i]), kind, message)
                               for i, (kind, message) in early.items()]
        validated.rows = positions[validated.rows]
        return validated

    def _unseen(self, decoded) -> list[str]:
        names = {c.name for c in self._pipeline.raw_columns()}
        return sorted({n for _, batch in decoded for n in batch.schema.names} - names)


def _record_hashes(records: list[bytes], rows: np.ndarray) -> np.ndarray:
    """The hash of each kept record's bytes as read (:func:`.split.text_hashes`): the row's
    split does not depend on which of its features are declared."""
    kept = [records[i] for i in rows.tolist()]
    ends = np.cumsum(np.array([len(r) for r in kept], dtype=np.int64))
    starts = ends - np.array([len(r) for r in kept], dtype=np.int64)
    return text_hashes(np.frombuffer(b"".join(kept), np.uint8), starts, ends)


def _feature_cells(batch: pa.RecordBatch, column) -> tuple[pa.Array, list[tuple[int, str]]]:
    if column.name not in batch.schema.names:
        return pa.nulls(batch.num_rows), []
    lists = batch.column(column.name)
    if pa.types.is_null(lists.type):
        return pa.nulls(batch.num_rows), []
    counts = np.asarray(pc.list_value_length(lists).fill_null(0), dtype=np.int64)
    problems = [(int(i), f"feature {column.name!r} has {int(counts[i])} values; expected one")
                for i in np.flatnonzero(counts > 1)]
    values = scalar_values(lists)
    if not can_hold(column, values.type):
        kind = {"float": "float_list", "int64": "int64_list"}.get(str(values.type), "bytes_list")
        problems += [(int(i), f"feature {column.name!r} is a {kind}; declared dtype is "
                      f"{column.dtype!r}") for i in np.flatnonzero(counts == 1)]
        values = pa.nulls(batch.num_rows)
    return values, problems


def _concat(pipeline: Pipeline, parts: list[Validated]) -> Validated:
    stats = parts[0].stats
    for part in parts[1:]:
        merge_stats(stats, part.stats)
    return Validated(pa.concat_batches([p.batch for p in parts]),
                     np.concatenate([p.rows for p in parts]),
                     [r for p in parts for r in p.rejected], stats)
