"""Reading a pipeline's source in Beam, through the lookup (:mod:`.registry`): every row
validated, bad rows rejected with a reason.

:class:`ReadSource` turns the declared source into a PCollection of :class:`~.chunks.RowChunk`.
Files are the unit of parallelism (a file is read in order, which is what gives every row its
line number); the blocks of a file are validated vectorised. Problems with the source as a
whole (no file matches, a needed column is missing, a column's type cannot hold its declared
dtype, BigQuery without credentials) are found on the driver by :func:`check_source` before
the job starts.
"""

from __future__ import annotations

import os

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError

from estflow.components._io.tfrecords import expand_pattern
from estflow.components._sources import csv_blocks
from estflow.components._sources.cells import CellTypeError
from estflow.components._sources.registry import SourceError
from estflow.components._sources.registry import reader_for
from estflow.dsl.checks import source_patterns
from estflow.dsl.pipeline import Pipeline

__all__ = ["ReadSource", "check_source", "source_files"]


def source_files(source, root: str) -> list[str]:
    """The files a file source reads (relative paths resolve against ``root``); [] for a
    source that is not files (BigQuery).

    Raises:
        SourceError: no file matches, or a match is a directory.
    """
    reader = reader_for(source)
    if reader.glob is None:
        return []
    files = []
    for declared in source_patterns(source):  # one, or one per span of a rolling window
        pattern = declared
        if "://" not in pattern and not os.path.isabs(pattern):
            pattern = os.path.join(root, pattern)
        try:
            matched = expand_pattern(pattern)
        except BeamIOError as err:
            raise SourceError(f"cannot list source.path={declared!r} ({pattern!r}): "
                              f"{err}") from None
        if not matched:
            raise SourceError(f"no {reader.kind} file matches source.path={declared!r} "
                              f"(resolved to {pattern!r} against source root {root!r})")
        files += matched
    for path in files:
        if "://" not in path and os.path.isdir(path):
            hint = f"{source.path.rstrip('/')}/{reader.glob}"
            raise SourceError(f"{path} is a directory, not a {reader.kind} file (source.path="
                              f"{source.path!r}): declare a file or a glob of files, e.g. "
                              f"{hint!r}")
    return files


def check_source(pipeline: Pipeline, files: list[str]) -> None:
    """Driver-side checks of the whole source (headers, schemas, access) before the job.

    Raises:
        SourceError: a file lacks a needed column or holds one of an unusable type, or
            BigQuery cannot be reached.
    """
    try:
        reader_for(pipeline.source).check(pipeline, files)
    except CellTypeError as err:
        raise SourceError(str(err)) from None


class ReadSource(beam.PTransform):
    """The pipeline's source as a PCollection of RowChunks.

    Args:
        pipeline: the validated pipeline (its source and raw columns), or what reads like one
            (batch prediction's scoring schema).
        files: the files to read (from :func:`source_files`); unused for BigQuery.
        block_bytes: CSV bytes per block (bigger blocks: fewer, larger batches).
        row_hashes: give chunks their rows' split hashes; False where nothing is split
            (batch prediction: the CSV reader then skips hashing every row's text, 40% of
            reading it).
    """

    def __init__(self, pipeline: Pipeline, files: list[str], *,
                 block_bytes: int = csv_blocks.DEFAULT_BLOCK_BYTES,
                 row_hashes: bool = True) -> None:
        super().__init__()
        self._pipeline, self._files, self._block_bytes = pipeline, files, block_bytes
        self._row_hashes = row_hashes

    def expand(self, pbegin):
        reader = reader_for(self._pipeline.source)
        if reader.whole is not None:
            return pbegin | f"Read{reader.kind}" >> reader.whole(self._pipeline)
        read = reader.files(self._pipeline, self._files, self._block_bytes, self._row_hashes)
        return (pbegin
                | "Files" >> beam.Create(self._files)
                | "SpreadFiles" >> beam.Reshuffle()
                | "ReadAndValidate" >> beam.ParDo(read))
