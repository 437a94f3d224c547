"""The reader of :class:`tests.components.jsonl_source.JsonLinesSource`: what a new source
kind's reader module holds (its driver-side check and its Beam reader), and nothing else.

A value is read as its text (a JSON number's digits, a string itself; null or an absent key:
missing) and validated like a CSV cell; a line that is not a JSON object rejects that row.
"""

from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import make_chunk
from estflow.components._sources.rows import validate
from estflow.dsl.pipeline import Pipeline


def check(pipeline: Pipeline, files: list[str]) -> None:
    """Each file starts with a JSON object (the driver-side check, before the job)."""
    for path in files:
        with FileSystems.open(path) as handle:
            first = handle.readline().decode("utf-8", "replace")
        try:
            row = json.loads(first)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise SourceError(f"{path}: expected a JSON object on line 1; received "
                              f"{first[:80]!r}")


def read_file(pipeline: Pipeline, files: list[str], block_bytes: int,
              row_hashes: bool) -> beam.DoFn:
    """The DoFn reading one file (it is read whole: these files are small)."""
    del files, block_bytes, row_hashes
    return ReadJsonLines(pipeline)


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


class ReadJsonLines(beam.DoFn):
    """A JSON-lines file -> one RowChunk."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def process(self, path: str):
        with FileSystems.open(path) as handle:
            lines = handle.read().decode("utf-8").splitlines()
        names = [c.name for c in self._pipeline.raw_columns()]
        rows, positions, early = [], [], []
        for i, line in enumerate(lines):
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if isinstance(row, dict):
                rows.append(row)
                positions.append(i)
            else:
                early.append((i, "not_an_object", f"line {i + 1} is not a JSON object"))
        cells = {n: pa.array([_text(r.get(n)) for r in rows], pa.string()) for n in names}
        validated = validate(self._pipeline, cells, len(rows))
        where = np.array(positions, dtype=np.int64)
        validated.rejected = [(int(where[i]), kind, message)
                              for i, kind, message in validated.rejected]
        validated.rows = where[validated.rows]
        yield make_chunk(validated, path, lines=lambda i: i + 1, texts=lambda i: lines[i],
                         early=early, read=len(lines),
                         unseen=sorted({k for r in rows for k in r} - set(names)))
