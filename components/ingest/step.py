"""The ingest step's run: read the source, validate every row, split, write raw tf.Examples.

:func:`run` drives the Beam job of :mod:`.job` and checks, after it, that the source did not
change under the run; :mod:`.__main__` is the entry point that calls it.
"""

from __future__ import annotations

from estflow.components._io.outside_facts import source_fingerprint
from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._sources.report import IngestError
from estflow.components.ingest.job import Ingest
from estflow.components.ingest.job import finish
from estflow.components.ingest.job import prepare
from estflow.components.ingest.job import reporter_for
from estflow.components.ingest.job import run_job
from estflow.dsl.pipeline import Pipeline

__all__ = ["IngestError", "run"]


def run(pipeline: Pipeline, examples_dir: str, *, source_root: str | None = None,
        beam_options: tuple[str, ...] | list[str] = (),
        gzip_level: int = DEFAULT_GZIP_LEVEL,
        num_shards: int = 0, source_digest: str | None = None,
        progress: entry.Progress | None = None) -> dict:
    """Read the pipeline's source, validate and split it, and write raw tf.Examples.

    Args:
        pipeline: the validated pipeline (its ``source``, ``split`` and raw columns are used).
        examples_dir: the output artifact directory (previous outputs are replaced).
        source_root: directory against which a relative source path resolves (default: the
            current directory).
        beam_options: Beam pipeline options (default: in-memory FnApiRunner).
        gzip_level: compression level of the written shards (1 fastest, 9 smallest).
        num_shards: shards per split (0: the runner decides; one per bundle).
        source_digest: the source's fingerprint digest when the run started (the fingerprint
            step's, which keyed this step's cache entry): checked again after the job.
        progress: where its progress lines go (default: ``[ingest ...]`` lines).

    Returns:
        The summary also written to ``ingest.json``.

    Raises:
        IngestError: no file matches the source (or the path is a directory), a file lacks a
            needed column or cannot be read, there are no data rows, or the source no longer
            has ``source_digest`` (it changed under the run: what was written may mix old and
            new data, and would be cached under the old data's key).
        DataRejected: (an IngestError) more than ``source.max_rejected_fraction`` of the
            data lines are rejected, every row is, or the source's schema check fails.
    """
    progress = progress or entry.Progress("ingest")
    out = str(examples_dir)
    files = prepare(pipeline, out, source_root, progress)
    beam_pipeline = _beam.new_pipeline(beam_options)
    reporter = reporter_for(pipeline, files, progress, _beam.is_local(beam_options))
    _ = beam_pipeline | "Ingest" >> Ingest(pipeline, files, out, gzip_level=gzip_level,
                                           num_shards=num_shards, tally=reporter.tally)
    progress("running the Beam job: read, validate, split, write")
    run_job(beam_pipeline, out, pipeline.split.names(), reporter)
    if source_digest:
        _check_unchanged(pipeline, source_root, source_digest)
    return finish(pipeline, out, files, progress)


def _check_unchanged(pipeline: Pipeline, source_root: str | None, digest: str) -> None:
    """Raise :class:`IngestError` when the source's fingerprint is no longer ``digest``."""
    now = source_fingerprint(pipeline.source, str(source_root or "."))
    if now.get("digest") in (None, digest):
        return
    objects = now.get("objects") or []
    shown = ", ".join(f"{o.get('path')} ({o.get('size')} bytes)" for o in objects[:5])
    more = f" and {len(objects) - 5} more" if len(objects) > 5 else ""
    raise IngestError(
        f"the source changed while this run read it: its fingerprint was {digest[:12]} when "
        f"the run started and is {now['digest'][:12]} now ({len(objects)} object(s): "
        f"{shown}{more}). What was written may mix old and new data, so nothing is kept; "
        "run again once the data stops changing (a new run reads it as it is then)")
