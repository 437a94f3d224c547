"""The ingest stages of a Beam job: read and validate the source, split, write raw Examples.

:class:`Ingest` is used alone by the ingest step and, in front of the transform stages, by the
fused ``estflow.components.preprocess`` job. Per split it writes GZIP TFRecords of raw
tf.Examples; it writes every rejected row to ``rejected.jsonl`` and the merged statistics to a
JSON file the driver reads after the run (a file rather than Beam metrics: it works the same
on every runner and carries floats). In the same pass it combines the data's statistics per
split (``estflow.components._statistics.statistics``) into ``statistics.pb``, with the whole span
(``All Examples``) after the splits and, on its features, the cells rejected for their type.
"""

from __future__ import annotations

import glob
import json
import os
import re

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from estflow.components._io.example_codec import encode_batch
from estflow.components._io.jsonfile import take_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._io.tfrecords import TEMP_PREFIX
from estflow.components._io.tfrecords import Destination
from estflow.components._io.tfrecords import WriteBlocks
from estflow.components._io.tfrecords import expand_pattern
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components._sources import read as sources
from estflow.components._sources.chunks import RowChunk
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.chunks import empty_chunk_stats
from estflow.components._sources.chunks import merge_chunk_stats
from estflow.components._sources.report import IngestError
from estflow.components._sources.report import check_rows_kept
from estflow.components._sources.report import check_summary
from estflow.components._sources.report import summarize
from estflow.components._sources.report import summary_lines
from estflow.components._sources.split import assign_splits
from estflow.components._statistics.statistics import STATISTICS_FILE
from estflow.components._statistics.statistics import STATISTICS_TEXT
from estflow.components._statistics.statistics import WriteStatistics
from estflow.components._statistics.statistics import column_specs
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["STATS_FILE", "Ingest", "prepare", "reporter_for", "run_job", "remove_leftovers", "finish",
           "first_rejected"]

"""Shards are ``<split>/part-SSSSS-of-NNNNN.tfrecord.gz`` (readers glob the directory)."""
STATS_FILE = ".ingest-stats.json"
"""The job's merged statistics, inside the output directory until the driver has read them."""

# Output tags besides the split names (not identifiers, so no split can be named so).
_BLOCKS, _STATS = "file blocks", "chunk stats"


class _SplitAndEncode(beam.DoFn):
    """Encode a chunk's rows as raw Examples, assign each row its split, route everything:
    each split's rows as Arrow (for tf.Transform) and every file block, as
    ``(Destination, bytes)``, to one output (one writer, fused with this stage)."""

    def __init__(self, pipeline: Pipeline, out: str, gzip_level: int) -> None:
        self._split = pipeline.split
        self._names = pipeline.split.names()
        key = pipeline.split.key
        self._key = next((c for c in pipeline.raw_columns() if c.name == key), None)
        self._shards = {name: Destination(FileSystems.join(out, name, Files.SHARD_PREFIX),
                                          gzip_level=gzip_level) for name in self._names}
        self._rejected = Destination(FileSystems.join(out, Files.REJECTED), suffix="",
                                     gzip_level=None, single=True)

    def process(self, chunk: RowChunk):
        stats = {**chunk.stats, "splits": {}}  # elements are not to be mutated
        batch = chunk.batch
        if batch.num_rows:
            framed = encode_batch(batch)
            row_hashes = framed.crcs if chunk.hashes is None else chunk.hashes
            which = assign_splits(self._split, batch, self._key, row_hashes)
            for index, name in enumerate(self._names):
                rows = np.flatnonzero(which == index)
                stats["splits"][name] = len(rows)
                if len(rows):
                    yield beam.pvalue.TaggedOutput(name, batch.take(pa.array(rows)))
                    yield beam.pvalue.TaggedOutput(_BLOCKS, (self._shards[name],
                                                             framed.take(rows)))
        if chunk.rejected:  # one block of JSON lines per chunk
            yield beam.pvalue.TaggedOutput(_BLOCKS, (self._rejected, "".join(
                line + "\n" for line in chunk.rejected).encode("utf-8")))
        yield beam.pvalue.TaggedOutput(_STATS, stats)


class _MergeStats(beam.CombineFn):
    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def create_accumulator(self) -> dict:
        return empty_chunk_stats(self._pipeline)

    def add_input(self, accumulator: dict, stats: dict) -> dict:
        return merge_chunk_stats(accumulator, stats)

    def merge_accumulators(self, accumulators) -> dict:
        merged = self.create_accumulator()
        for accumulator in accumulators:
            merge_chunk_stats(merged, accumulator)
        return merged

    def extract_output(self, accumulator: dict) -> dict:
        return accumulator


class Ingest(beam.PTransform):
    """Source -> validated, split, written raw Examples; returns ``{split: RecordBatches}``.

    Args:
        pipeline: the validated pipeline.
        files: the source files (``sources.source_files``).
        out: the examples artifact directory (any Beam filesystem path).
        gzip_level: compression level of the written shards.
        num_shards: shards per split (0: the runner decides).
        tally: where the rows read are counted for the progress reports (None: not counted).
    """

    def __init__(self, pipeline: Pipeline, files: list[str], out: str, *,
                 gzip_level: int = DEFAULT_GZIP_LEVEL, num_shards: int = 0,
                 tally: _progress.Tally | None = None) -> None:
        super().__init__()
        self._pipeline, self._files, self._out = pipeline, files, out
        self._tally = tally
        self._stats_path = FileSystems.join(out, STATS_FILE)
        self._gzip, self._shards = gzip_level, num_shards

    def expand(self, pbegin):
        names = self._pipeline.split.names()
        chunks = pbegin | "Read" >> sources.ReadSource(self._pipeline, self._files)
        if self._tally is not None:
            chunks = chunks | "Progress" >> _progress.CountRows(self._tally, "read")
        parts = (chunks
                 | "SplitAndEncode" >> beam.ParDo(
                     _SplitAndEncode(self._pipeline, self._out, self._gzip))
                 .with_outputs(*names, _BLOCKS, _STATS))
        _ = parts[_BLOCKS] | "Write" >> WriteBlocks(num_shards=self._shards)
        merged = parts[_STATS] | "MergeStats" >> beam.CombineGlobally(_MergeStats(self._pipeline))
        _ = merged | "WriteStats" >> beam.Map(_write_stats, self._stats_path)
        splits = {name: parts[name] for name in names}
        # The data's statistics (statistics.pb), combined in this same pass over the rows; the
        # span's features record the cells rejected for their type (the data checks compare
        # them with the served model's training data).
        _ = splits | "DataStatistics" >> WriteStatistics(column_specs(self._pipeline), self._out,
                                                         merged)
        return splits


def run_job(beam_pipeline: beam.Pipeline, out: str, splits: tuple[str, ...],
            reporter: _progress.Reporter | None = None) -> None:
    """Run the job (its progress shown by ``reporter`` when given). When it fails, remove what it left in ``out`` (its unfinished writes and
    statistics; the split directories are already empty) before the error goes on; a source
    that cannot be read (a truncated file) becomes an IngestError naming the file and line.

    Raises:
        IngestError: a source file cannot be read.
    """
    try:
        if reporter is None:
            beam_pipeline.run().wait_until_finish()
        else:
            _progress.run_with_progress(beam_pipeline, reporter)
    except BaseException as err:
        remove_leftovers(out, splits)
        if isinstance(err, SourceError):  # Beam re-raises a DoFn's error with its context
            raise IngestError(re.sub(r" \[while running '[^]]*'\]", "", str(err))) from None
        raise


def remove_leftovers(out: str, splits: tuple[str, ...]) -> None:
    """Remove a failed job's temporary directories (next to the rejected rows and in each
    split's directory) and its statistics from ``out``."""
    leftovers = [path for folder in (out, *(FileSystems.join(out, name) for name in splits))
                 for path in _temp_paths(folder)]
    for path in leftovers + [FileSystems.join(out, name) for name in
                             (STATS_FILE, STATISTICS_FILE, STATISTICS_TEXT)]:
        if FileSystems.exists(path):
            FileSystems.delete([path])


def _temp_paths(folder: str) -> list[str]:
    """The unfinished writes in ``folder``: temporary directories (local) or their files."""
    pattern = FileSystems.join(folder, TEMP_PREFIX + "*")
    if "://" not in folder:  # Beam's local match skips these hidden directories
        return sorted(glob.glob(glob.escape(folder) + os.sep + TEMP_PREFIX + "*"))
    return expand_pattern(pattern) + expand_pattern(FileSystems.join(pattern, "*"))


def reporter_for(pipeline: Pipeline, files: list[str], progress: entry.Progress,
                 local: bool) -> _progress.Reporter:
    """The progress reporter of a job reading ``files`` (the total rows estimated from the
    source's size; shown with ``~``)."""
    kind = type(pipeline.source).__name__.removesuffix("Source")
    return _progress.Reporter(progress, _progress.estimate_rows(kind, files), estimated=True,
                              local=local)


def prepare(pipeline: Pipeline, out: str, source_root: str | None,
            progress: entry.Progress) -> list[str]:
    """Find the source files, check them (headers, schemas) and clear previous outputs."""
    try:
        files = sources.source_files(pipeline.source, str(source_root or "."))
        sources.check_source(pipeline, files)
    except SourceError as err:
        raise IngestError(str(err)) from None
    what = f"{len(files)} file(s): {', '.join(files)}" if files else "BigQuery"
    progress(f"reading {type(pipeline.source).__name__} {what}")
    _clear_outputs(out, pipeline.split.names())
    return files


def _clear_outputs(out: str, splits: tuple[str, ...]) -> None:
    # Replace only what this step writes, so a rerun never mixes old shards with new ones.
    leftovers = [path for folder in (out, *(FileSystems.join(out, name) for name in splits))
                 for path in _temp_paths(folder)]
    for path in [FileSystems.join(out, name) for name in
                 (*splits, Files.REJECTED, Files.INGEST_STATS, STATS_FILE, STATISTICS_FILE,
                  STATISTICS_TEXT)] + leftovers:
        if FileSystems.exists(path):
            FileSystems.delete([path])
    if "://" not in out:  # local: every split directory exists, even when empty
        for name in splits:
            os.makedirs(os.path.join(out, name), exist_ok=True)


def finish(pipeline: Pipeline, out: str, files: list[str], progress: entry.Progress) -> dict:
    """After the job: summarise, show the statistics, enforce the limits, write ingest.json."""
    stats = take_json(FileSystems.join(out, STATS_FILE))
    rejected = FileSystems.join(out, Files.REJECTED)
    if not FileSystems.exists(rejected):  # no rejected row: the file exists all the same
        FileSystems.create(rejected).close()
    summary = summarize(pipeline, files, stats, progress.elapsed)
    for line in summary_lines(summary):
        progress(line)
    examples = first_rejected(rejected) if summary["rejected"] else []
    check_summary(pipeline, summary, rejected, examples)
    check_rows_kept(summary, rejected, examples)
    write_json(FileSystems.join(out, Files.INGEST_STATS), summary)
    return summary


_REJECTED_READ = 1 << 20
"""The most bytes of ``rejected.jsonl`` read back to show its first rows in a failure."""


def first_rejected(path: str, limit: int = _REJECTED_READ) -> list[dict]:
    """The rejected rows in the first ``limit`` bytes of ``rejected.jsonl`` (any filesystem;
    a line cut at the limit, or unreadable, is left out; none when the file cannot be read):
    what a failure shows the first of."""
    try:
        with FileSystems.open(path) as f:
            head = f.read(limit)
    except Exception:  # noqa: BLE001 - showing rows is a courtesy; the failure stands
        return []
    rows = []
    for line in head.decode("utf-8", "replace").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def _write_stats(stats: dict, path: str) -> None:
    """Write the job's statistics from inside the job (one small file on any filesystem the
    workers reach; lighter than a text sink, whose fixed cost is ~0.1 s of stages per use)."""
    write_json(path, stats)
