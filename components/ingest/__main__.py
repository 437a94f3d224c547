"""Ingest: read the source, validate every row, split deterministically, write raw tf.Examples.

``python -m estflow.components.ingest --spec S --examples OUT_DIR [--source-root ROOT]
[--source-digest DIGEST] [--gzip-level N] [--num-shards N] [--beam-options "OPTS"]
[BEAM_OPTION ...]``

Output layout (names from :class:`estflow.dsl.contracts.Files`)::

    OUT_DIR/train/part-SSSSS-of-NNNNN.tfrecord.gz   GZIP TFRecords of raw tf.train.Example
    OUT_DIR/eval/part-SSSSS-of-NNNNN.tfrecord.gz    (and one directory per other split)
    OUT_DIR/rejected.jsonl     {"file", "line", "row", "reason"} per bad row ("row": at most
                               its first 1 KiB)
    OUT_DIR/ingest.json        counts, line accounting per file, per-column statistics,
                               schema report; written last, only on success

Sources: CSV, TFRecord of tf.Example, Parquet (local paths, globs, ``gs://`` and ``s3://``
through Beam's filesystems) and BigQuery (needs Google Cloud credentials and network). The
work runs as a Beam pipeline (in-memory FnApiRunner unless Beam options name a runner), with
CSV blocks parsed and validated vectorised (Arrow), then encoded to Examples with numpy.

A cell left empty in a column with a declared default is written *absent* from the Example: the
transform graph fills the default, so training and serving (which receives raw Examples that may
omit the feature) see exactly the same value. No row is ever dropped silently: every row is
either written to a split or listed in ``rejected.jsonl`` with its reason, and for a CSV
source ``ingest.json`` proves it per file: lines read = header + lines of kept rows + lines of
rejected rows + blank lines (``max_rejected_fraction`` counts rejected lines). A failed run
leaves no temporary directory behind.

Exit status: 0 written; 4 the data broke a check the source declares (more rejected lines
than ``max_rejected_fraction``, or its schema check), as the validate step's data anomalies:
the message names each column with cells of another type (``UNEXPECTED_DATA_TYPE``: count,
fraction, an example) and shows the first rejected rows (``file:line: reason``), and running
again on the same data cannot help. Every row rejected is always exit 4, whatever
``max_rejected_fraction`` allows (nothing to train on; the message says the declaration most
likely does not fit the data). 1 any other failure.
``statistics.pb`` records, on the span's features, the cells rejected for their type: the
validate step reports a column rejecting more of them than the served model's training data
did as ``UNEXPECTED_DATA_TYPE``.
"""

from __future__ import annotations

import os
import sys

from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components._sources.report import DataRejected
from estflow.components._sources.report import IngestError
from estflow.components._sources.spans import EXIT_BLOCKED
from estflow.components.ingest.step import run
from estflow.dsl.contracts import step_named

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.ingest --spec S --examples DIR``."""
    parser = entry.step_parser(step_named("ingest"), __doc__)
    args, extra = parser.parse_known_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    _progress.configure(os.environ)
    _beam.freeze_imports()
    root = entry.resolve_source_root(args.source_root)
    try:
        # A remote runner writes to the artifact's URI, with estflow's image on its workers.
        io = _beam.resolve_io(args, _beam.split_options(extra, args.beam_options),
                              ("examples",), ("examples",), os.environ)
        run(pipeline, io.locations["examples"], source_root=str(root),
            beam_options=io.options, gzip_level=args.gzip_level, num_shards=args.num_shards,
            source_digest=args.source_digest or None)
    except DataRejected as err:  # the data broke a check: exit as the data checks do
        print(f"[ingest] data anomaly: {err}", file=sys.stderr, flush=True)
        return EXIT_BLOCKED
    except (IngestError, _beam.BeamLocationError) as err:
        print(f"[ingest] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
