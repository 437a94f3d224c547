"""The reader of a BigQuerySource: a table or a query's result, read with Beam's
``ReadFromBigQuery`` (its row in :data:`.registry.READERS`), and its fingerprint.

Each value is checked against its declared column like a CSV cell (:mod:`.cells`). Its rows
have no stable number and no text as read: a rejected row is identified by the row itself, and
the split hashes the encoded Example of the declared columns (declare ``Split(key=...)`` to
keep the split fixed while the declarations change).
"""

from __future__ import annotations

import uuid

import apache_beam as beam
import pyarrow as pa

from estflow.components._sources.cells import CellTypeError
from estflow.components._sources.chunks import RowChunk
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import json_row
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.rows import validate
from estflow.dsl.fingerprints import digest
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.sources import BigQuerySource

try:  # only needed to read BigQuery (installed with apache-beam[gcp])
    import google.auth as google_auth
except ImportError:  # pragma: no cover - depends on the installation
    google_auth = None

__all__ = ["ReadBigQuery", "check", "read_whole", "rows_chunk", "fingerprint"]

_BATCH_ROWS = 65536


def check(pipeline: Pipeline, files: list[str]) -> None:
    """Fail early and clearly where BigQuery cannot be read (no credentials, offline)."""
    del files  # not files
    source = pipeline.source
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


def read_whole(pipeline: Pipeline) -> beam.PTransform:
    """The transform reading the whole source (a query or table is not files)."""
    return ReadBigQuery(pipeline)


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
                | "Validate" >> beam.Map(rows_chunk, self._pipeline))


def rows_chunk(rows: list[dict], pipeline: Pipeline) -> RowChunk:
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
                      lines=lambda i: None, texts=lambda i: json_row(rows[i]),
                      read=len(rows), unseen=unseen)


def fingerprint(source: BigQuerySource, root: str, clients: dict) -> dict:
    """A table's etag, modification time and row count (google-cloud-bigquery's metadata).

    A query has no fingerprint short of running it: it is *volatile* (a fresh digest each
    time, so ingest always runs); so is a table where google-cloud-bigquery is not installed.
    """
    del root, clients  # not files; the client is made here
    if source.query is not None:
        return _volatile("a query's result cannot be fingerprinted without running it: "
                         "ingest runs every time")
    try:
        from google.cloud import bigquery  # noqa: PLC0415 (only for a table's fingerprint)
    except ImportError:
        return _volatile("google-cloud-bigquery is not installed")
    table = bigquery.Client(project=source.project).get_table(source.table.replace(":", "."))
    facts = {"table": source.table, "etag": table.etag, "modified": str(table.modified),
             "rows": table.num_rows}
    return {"kind": "BigQuerySource", **facts, "digest": digest(facts)}


def _volatile(why: str) -> dict:
    return {"kind": "BigQuerySource", "volatile": why, "digest": uuid.uuid4().hex}
