"""The transform step's run: analyze the train split and transform every split.

:func:`run` reads ingest's Examples and drives the Beam + tf.Transform job of :mod:`.job`;
:mod:`.__main__` is the entry point that calls it.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems

from estflow.components._io.tfrecords import DEFAULT_GZIP_LEVEL
from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components.transform.job import ReadRawExamples
from estflow.components.transform.job import TransformSplits
from estflow.components.transform.job import adapter_config
from estflow.components.transform.job import clear_outputs
from estflow.components.transform.job import finish
from estflow.components.transform.job import tft_context
from estflow.components.transform.report import TransformError
from estflow.dsl.pipeline import Pipeline

__all__ = ["TransformError", "REREAD_BYTES", "run"]

REREAD_BYTES = 32 << 20
"""Past this size of the train split's shards, the analysis reads its own copy of the train rows.
Read once, the rows feed the analysis and, once it is done, the transformation: the in-memory
runner holds all of them in between (about 20 bytes of memory per byte of GZIP shards: +1.6 GB
from 1M to 3M rows of the taxi example). Read twice, they stream through both, and memory stays
flat as the rows grow, for a second decode (10-30% of the step at 1M taxi rows, measured on a
busy machine). The same outputs either way."""


def run(pipeline: Pipeline, examples_dir: str, transformed_dir: str, *,
        beam_options: list[str] | tuple[str, ...] = (),
        gzip_level: int = DEFAULT_GZIP_LEVEL,
        num_shards: int = 0, reread: bool | None = None,
        progress: entry.Progress | None = None) -> dict:
    """Analyze the train split, transform every split, and write the transform_fn.

    Args:
        pipeline: the validated pipeline (raw columns, derive hook, features, label, model).
        examples_dir: the ingest output (one directory of raw tf.Example shards per split).
        transformed_dir: the output artifact directory (previous outputs are replaced).
        beam_options: Beam pipeline options; without ``--runner`` the pipeline runs on an
            in-memory FnApiRunner.
        gzip_level, num_shards: compression level and shards per split of the outputs.
        reread: read the train rows twice, once for the analysis and once to transform them
            (None: when its shards hold over ``REREAD_BYTES``).
        progress: where its progress lines go (default: ``[transform ...]`` lines).

    Returns:
        The summary also written to ``transform.json``.

    Raises:
        TransformError: a split directory of ``examples_dir`` has no shards.
        ValueError: the derive fn or the declarations cannot build the transform graph.
    """
    progress = progress or entry.Progress("transform")
    examples, out = str(examples_dir), str(transformed_dir)
    names = pipeline.split.names()
    directories = {name: _input_dir(examples, name) for name in names}
    clear_outputs(out, names)
    progress("building the Beam pipeline (analyze train, transform " + ", ".join(names) + ")")
    beam_pipeline = _beam.new_pipeline(beam_options)
    rows = _progress.split_rows(examples) or {}
    if reread is None:
        reread = _shard_bytes(directories["train"]) > REREAD_BYTES
    total = sum(rows.get(name, 0) for name in names) + (rows.get("train", 0) if reread else 0)
    reporter = _progress.Reporter(progress, total or None, local=_beam.is_local(beam_options))
    analyze = None
    if reread:  # the analysis reads its own copy of the train rows (see REREAD_BYTES)
        analyze = beam_pipeline | "ReadTrainForAnalysis" >> ReadRawExamples(
            pipeline, directories["train"], (reporter.tally, "analyze"))
    counter = "transform" if reread else "read"
    sources = {name: ReadRawExamples(pipeline, directory, (reporter.tally, counter))
               for name, directory in directories.items()}
    raw = {name: beam_pipeline | f"Read{name.title()}" >> source
           for name, source in sources.items()}
    config = adapter_config(pipeline, sources["train"].arrow_schema())
    with tft_context(out):
        _ = raw | "Transform" >> TransformSplits(pipeline, config, out, gzip_level=gzip_level,
                                                 num_shards=num_shards, analyze=analyze)
        progress("running: analyze + transform")
        _progress.run_with_progress(beam_pipeline, reporter)
    return finish(pipeline, out, progress)


def _shard_bytes(directory: str) -> int:
    """The bytes of a split's shards."""
    pattern = FileSystems.join(directory, "*")
    return sum(m.size_in_bytes for m in FileSystems.match([pattern])[0].metadata_list)


def _input_dir(examples: str, split: str) -> str:
    directory = FileSystems.join(examples, split)
    if not ReadRawExamples.files_in(directory):
        raise TransformError(f"no example shards in {directory}: expected the output of the "
                             "ingest step there")
    return directory
