"""The batch prediction Beam job: read and validate, score, write; then publish on the driver.

::

    Read (validated RowChunks) -> Score (ScoreChunks) -> WriteFiles (one file per bundle)
                                       |  rejected rows ----^     |-> Manifest (files written)
                                       '-> Stats -> merged -> stats file
         '-> ServingStatistics (when the model has training statistics: the skew check)

The stages from reading to writing fuse into one: chunks stream through, a few at a time, so
memory does not grow with the number of rows. The reader is given (the ingest step's readers,
wired by the entry point): this package never imports another step's. The manifest and the
statistics are small files the driver reads after the job, as ingest's statistics are (a file
works the same on every runner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils import shared

from estflow.components._io.jsonfile import take_json
from estflow.components._io.jsonfile import write_json
from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._runtime.progress import run_with_progress
from estflow.components.predict.formats import Formatter
from estflow.components.predict.model import ModelInfo
from estflow.components.predict.scoring import ScoreChunks
from estflow.components.predict.sinks import PREDICTIONS
from estflow.components.predict.sinks import REJECTED
from estflow.components.predict.sinks import OutputDir
from estflow.components.predict.sinks import WriteBundleFiles
from estflow.components.predict.skew import ServingStatistics

__all__ = ["Merge", "ScoreAndWrite", "JobFiles", "run_job", "MANIFEST_FILE", "STATS_FILE"]

MANIFEST_FILE, STATS_FILE = ".manifest.json", ".stats.json"
DATA_STATISTICS_FILE = ".serving_statistics.pb"
_STATS = "stats"


class Merge(beam.CombineFn):
    """Merge chunk statistics with the reader's functions, adding up ``scored``."""

    def __init__(self, empty: Callable[[], dict], merge: Callable[[dict, dict], dict]) -> None:
        self._empty, self._merge = empty, merge

    def create_accumulator(self) -> dict:
        return {**self._empty(), "scored": 0}

    def add_input(self, accumulator: dict, stats: dict) -> dict:
        self._merge(accumulator, stats)
        accumulator["scored"] += stats["scored"]
        return accumulator

    def merge_accumulators(self, accumulators) -> dict:
        merged = self.create_accumulator()
        for accumulator in accumulators:
            self.add_input(merged, accumulator)
        return merged

    def extract_output(self, accumulator: dict) -> dict:
        return accumulator


@dataclasses.dataclass(frozen=True)
class JobFiles:
    """What the job leaves for the driver in the staging directory."""

    manifest: str
    stats: str
    statistics: str

    @classmethod
    def of(cls, output: OutputDir) -> JobFiles:
        return cls(FileSystems.join(output.staging, MANIFEST_FILE),
                   FileSystems.join(output.staging, STATS_FILE),
                   FileSystems.join(output.staging, DATA_STATISTICS_FILE))


class ScoreAndWrite(beam.PTransform):
    """The whole job, from the begin of a pipeline.

    Args:
        read: PTransform from the pipeline's begin to validated RowChunks (``.batch``,
            ``.rejected``, ``.stats``).
        merge: combines the chunks' statistics.
        model: the model, described on the driver.
        keys: the key columns passed through.
        formatter: the output format.
        batch_size: examples per call of the model.
        output: where the files go (its staging directory).
        handle: the ``shared.Shared`` the model is loaded into, once per worker process
            (default: a new one; pass the driver's to reuse a model it loaded, in-process).
        statistics: the columns to summarize for the skew check (``skew.Baseline.specs``;
            empty: none), written to the staging directory (``JobFiles.statistics``).
    """

    def __init__(self, read: beam.PTransform, merge: Merge, model: ModelInfo,
                 keys: tuple[str, ...], formatter: Formatter, batch_size: int,
                 output: OutputDir, handle: shared.Shared | None = None,
                 statistics: tuple = ()) -> None:
        super().__init__()
        self._statistics = tuple(statistics)
        self._read, self._merge, self._model = read, merge, model
        self._handle = handle or shared.Shared()
        self._keys, self._formatter, self._batch_size = keys, formatter, batch_size
        self._output, self._files = output, JobFiles.of(output)

    def expand(self, pbegin):
        model, formatter = self._model, self._formatter
        score = ScoreChunks(self._handle, model.path, model.signature, model.input_name,
                            tuple(c.name for c in model.columns), self._keys, formatter,
                            self._batch_size, (PREDICTIONS, REJECTED), _STATS)
        chunks = pbegin | "Read" >> self._read
        parts = chunks | "Score" >> beam.ParDo(score).with_outputs(_STATS, main=PREDICTIONS)
        if self._statistics:  # the same pass: the rows' statistics, for the skew check
            _ = chunks | "ServingStatistics" >> ServingStatistics(self._statistics,
                                                                  self._files.statistics)
        writer = WriteBundleFiles(
            self._output.temp, header=formatter.header(),
            gzip_level=DEFAULT_GZIP_LEVEL if formatter.format == "tfrecord" else None,
            parquet_schema=formatter.schema() if formatter.format == "parquet" else None)
        files = parts[PREDICTIONS] | "WriteFiles" >> beam.ParDo(writer)
        _ = (files
             | "ListFiles" >> beam.combiners.ToList()
             | "WriteManifest" >> beam.Map(_write, self._files.manifest))
        _ = (parts[_STATS]
             | "MergeStats" >> beam.CombineGlobally(self._merge)
             | "WriteStats" >> beam.Map(_write, self._files.stats))
        return files


def _write(value, path: str) -> None:
    """Write a small JSON file from inside the job (any filesystem the workers reach)."""
    write_json(path, value)


def run_job(beam_pipeline: beam.Pipeline, output: OutputDir,
            reporter=None) -> tuple[list, dict]:
    """Run the job (its progress shown by ``reporter``, a ``progress.Reporter``, when given);
    return the manifest (``[(kind, path, rows)]``) and merged statistics. A failed job's
    staging directory is removed before the error goes on."""
    files = JobFiles.of(output)
    try:
        if reporter is None:
            beam_pipeline.run().wait_until_finish()
        else:
            run_with_progress(beam_pipeline, reporter)
        return [tuple(entry) for entry in take_json(files.manifest)], take_json(files.stats)
    except BaseException:
        output.discard()
        raise
