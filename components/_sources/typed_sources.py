"""Sources whose values carry types: Parquet files, TFRecord files of tf.Example, BigQuery.

Each value is checked against its declared column like a CSV cell (:mod:`.cells`): a missing
value takes the default or rejects the row, a value the declared dtype cannot hold exactly
rejects the row. What a CSV cannot have: a TFRecord feature with several values, a record that
is not an Example, or a feature of the wrong kind in some records, each rejects that row.

A TFRecord row's split hash is that of the record's bytes as read; Parquet and BigQuery rows
hold no such text, so their split hashes the encoded Example of the declared columns (declare
``Split(key=...)`` to keep their split fixed while the declarations change).
"""

from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tfx_bsl.coders import example_coder

from estflow.components._io.tfrecords import read_records
from estflow.components._sources.cells import CellTypeError
from estflow.components._sources.cells import can_hold
from estflow.components._sources.chunks import RowChunk
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import check_columns
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.rows import Validated
from estflow.components._sources.rows import merge_stats
from estflow.components._sources.rows import validate
from estflow.components._sources.split import scalar_values
from estflow.components._sources.split import text_hashes
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.sources import BigQuerySource

try:  # only needed to read BigQuery (installed with apache-beam[gcp])
    import google.auth as google_auth
except ImportError:  # pragma: no cover - depends on the installation
    google_auth = None

__all__ = ["ReadParquet", "ReadTFRecord", "ReadBigQuery", "check_parquet_schemas",
           "parquet_column_dtypes", "check_bigquery_access"]

_BATCH_ROWS = 65536


def _json_row(row: dict) -> str:
    def plain(value):
        return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    return json.dumps(row, ensure_ascii=False, default=plain, sort_keys=True)


# --- Parquet ------------------------------------------------------------------------------------

def check_parquet_schemas(pipeline: Pipeline, files: list[str]) -> None:
    """Every file has every raw column, of a type its declared dtype can hold."""
    for path in files:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            schema = pq.read_schema(handle)
        check_columns(pipeline, schema.names, path, "schema")
        for column in pipeline.raw_columns():
            if not can_hold(column, schema.field(column.name).type):
                raise SourceError(f"column {column.name!r} of {path} has Parquet type "
                                  f"{schema.field(column.name).type}, which cannot be read as "
                                  f"its declared dtype {column.dtype!r}")


def parquet_column_dtypes(files: list[str], names: tuple[str, ...]) -> dict[str, str]:
    """The dtype (``"float"``, ``"int"``, else ``"string"``) of each of ``names`` that the first
    file's Parquet schema holds; {} without files."""
    if not files:
        return {}
    with FileSystems.open(files[0], compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        schema = pq.read_schema(handle)
    return {name: _dtype_of(schema.field(name).type) for name in names if name in schema.names}


def _dtype_of(kind: pa.DataType) -> str:
    if pa.types.is_floating(kind):
        return "float"
    return "int" if pa.types.is_integer(kind) else "string"


class ReadParquet(beam.DoFn):
    """A Parquet file -> RowChunks of up to 65,536 rows (only the raw columns are read)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def process(self, path: str):
        names = [c.name for c in self._pipeline.raw_columns()]
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            parquet = pq.ParquetFile(handle)
            unseen = [n for n in parquet.schema_arrow.names if n not in names]
            start = 0
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=names):
                validated = validate(self._pipeline, {n: batch.column(n) for n in names},
                                     batch.num_rows)
                yield make_chunk(validated, path, lines=lambda i, s=start: s + i + 1,
                                 texts=lambda i, b=batch: _json_row(b.slice(i, 1).to_pylist()[0]),
                                 read=batch.num_rows, unseen=unseen)
                start += batch.num_rows


# --- TFRecord of tf.Example ----------------------------------------------------------------------

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
            texts.update({int(r): _json_row(batch.slice(i, 1).to_pylist()[0])
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


# --- BigQuery ------------------------------------------------------------------------------------

def check_bigquery_access(source: BigQuerySource) -> None:
    """Fail early and clearly where BigQuery cannot be read (no credentials, offline)."""
    what = f"query {source.query!r}" if source.query else f"table {source.table!r}"
    if google_auth is None:
        raise SourceError(f"the BigQuery source ({what}) needs the Google Cloud client "
                          "libraries: pip install 'apache-beam[gcp]'")
    try:
        google_auth.default()
    except Exception as err:  # noqa: BLE001 - DefaultCredentialsError and transport errors
        raise SourceError(
            f"the BigQuery source ({what}) cannot be read here: reading BigQuery needs Google "
            "Cloud credentials and network access, and none were found "
            f"({type(err).__name__}). Run the step where they exist (e.g. with "
            "--runner=DataflowRunner from a machine with application-default credentials), "
            "or export the data to Parquet and declare a ParquetSource.") from None


class ReadBigQuery(beam.PTransform):
    """Rows of a BigQuery table or query, validated in batches."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__()
        self._pipeline = pipeline

    def expand(self, pbegin):
        source = self._pipeline.source
        read = (beam.io.ReadFromBigQuery(query=source.query, use_standard_sql=True,
                                         project=source.project)
                if source.query else
                beam.io.ReadFromBigQuery(table=source.table, project=source.project))
        return (pbegin
                | "Rows" >> read
                | "Batch" >> beam.BatchElements(min_batch_size=1024, max_batch_size=_BATCH_ROWS)
                | "Validate" >> beam.Map(_bigquery_chunk, self._pipeline))


def _bigquery_chunk(rows: list[dict], pipeline: Pipeline) -> RowChunk:
    """Validate a batch of BigQuery rows (dicts); rows have no stable number, so ``line`` is
    None and the row itself identifies a rejected one."""
    source = pipeline.source
    names = [c.name for c in pipeline.raw_columns()]
    table = pa.Table.from_pylist([{n: row.get(n) for n in names} for row in rows])
    unseen = sorted({key for row in rows for key in row} - set(names))
    try:
        validated = validate(pipeline, {n: table.column(n) for n in names}, len(rows))
    except CellTypeError as err:
        raise SourceError(f"BigQuery {source.table or 'query'}: {err}") from None
    return make_chunk(validated, f"bigquery:{source.table or source.query}",
                      lines=lambda i: None, texts=lambda i: _json_row(rows[i]),
                      read=len(rows), unseen=unseen)
