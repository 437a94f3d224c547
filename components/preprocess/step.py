"""The preprocess step's run: ingest and transform fused in one Beam job.

:func:`run` wires ingest's stages (:mod:`estflow.components.ingest.job`) into transform's
(:mod:`estflow.components.transform.job`), or runs the two steps one after the other for a
large source on the local runner; :mod:`.__main__` is the entry point that calls it.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems

from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._sources.chunks import SourceError
from estflow.components._sources.read import source_files
from estflow.components._sources.report import IngestError
from estflow.components._sources.rows import arrow_schema
from estflow.components.ingest import step as ingest_step
from estflow.components.ingest.job import Ingest
from estflow.components.ingest.job import finish as finish_ingest
from estflow.components.ingest.job import prepare
from estflow.components.ingest.job import run_job
from estflow.components.transform import step as transform_step
from estflow.components.transform.job import TransformSplits
from estflow.components.transform.job import adapter_config
from estflow.components.transform.job import clear_outputs
from estflow.components.transform.job import finish as finish_transform
from estflow.components.transform.job import tft_context
from estflow.components.transform.report import TransformError
from estflow.dsl.pipeline import Pipeline

__all__ = ["IngestError", "TransformError", "FUSED_MAX_SOURCE_BYTES", "run"]

FUSED_MAX_SOURCE_BYTES = 256 << 20
"""Past this size of the source's files, the local runner runs ingest's job then transform's.
The fused job holds its train rows in memory: about 6 bytes per byte of CSV on the taxi
example (+0.75 GB per million rows), so 256 MiB of CSV costs at most ~1.5 GB more than the two
jobs; at 50M rows it would need ~37 GB. Below it, the fused job saves a write, a read and a
decode of the raw rows, and a second start of Beam and tf.Transform."""


def run(pipeline: Pipeline, examples_dir: str, transformed_dir: str, *,
        source_root: str | None = None, beam_options: list[str] | tuple[str, ...] = (),
        gzip_level: int = DEFAULT_GZIP_LEVEL, num_shards: int = 0) -> tuple[dict, dict]:
    """Ingest and transform in one Beam job.

    Args: as for ``ingest.run`` and ``transform.run``.

    Returns:
        ``(ingest summary, transform summary)``, also written to ``ingest.json`` and
        ``transform.json``.

    Raises:
        IngestError: as the ingest step (then no transform output is left behind).
    """
    examples, out = str(examples_dir), str(transformed_dir)
    progress = entry.Progress("preprocess")
    size = _source_bytes(pipeline, source_root) if _beam.is_local(beam_options) else 0
    if size > FUSED_MAX_SOURCE_BYTES:
        progress(f"{size / 2**20:,.0f} MiB of source: ingest, then transform, one job after "
                 "the other (in flat memory; one fused job would hold every train row)")
        options = {"beam_options": beam_options, "gzip_level": gzip_level,
                   "num_shards": num_shards}
        clear_outputs(out, pipeline.split.names())  # a failed ingest leaves no old transform
        ingested = ingest_step.run(pipeline, examples, source_root=source_root,
                                   progress=entry.Progress("preprocess", "ingest"), **options)
        return ingested, transform_step.run(pipeline, examples, out,
                                            progress=entry.Progress("preprocess", "transform"),
                                            **options)
    files = prepare(pipeline, examples, source_root, progress)
    clear_outputs(out, pipeline.split.names())
    beam_pipeline = _beam.new_pipeline(beam_options)
    options = {"gzip_level": gzip_level, "num_shards": num_shards}
    raw = beam_pipeline | "Ingest" >> Ingest(pipeline, files, examples, **options)
    config = adapter_config(pipeline, arrow_schema(pipeline.raw_columns()))
    with tft_context(out):
        _ = raw | "Transform" >> TransformSplits(pipeline, config, out, **options)
        progress("running one Beam job: read, validate, split, write, analyze, transform")
        try:
            run_job(beam_pipeline, examples, pipeline.split.names())
        except BaseException:
            clear_outputs(out, pipeline.split.names())
            raise
    try:
        ingested = finish_ingest(pipeline, examples, files, progress)
    except IngestError:
        clear_outputs(out, pipeline.split.names())
        raise
    return ingested, finish_transform(pipeline, out, progress)


def _source_bytes(pipeline: Pipeline, source_root: str | None) -> int:
    """The bytes of the source's files (0: none found, or a table source such as BigQuery;
    the fused job then reports what is wrong, as ingest would)."""
    try:
        files = source_files(pipeline.source, str(source_root or "."))
    except SourceError:
        return 0
    if not files:
        return 0
    return sum(m.size_in_bytes for result in FileSystems.match(files)
               for m in result.metadata_list)
