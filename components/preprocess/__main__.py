"""Preprocess: ingest and transform in one Beam job (what ``estflow preprocess`` runs).

``python -m estflow.components.preprocess --spec S --examples EX_DIR --transformed TR_DIR
[--source-root ROOT] [--gzip-level N] [--num-shards N] [--beam-options "OPTS"]
[BEAM_OPTION ...]``

The outputs are exactly those of the ingest step (``EX_DIR``: raw Examples per split,
``rejected.jsonl``, ``ingest.json``) followed by the transform step (``TR_DIR``:
``transform_fn/``, transformed Examples per split, ``transform.json``), so train and evaluate
read them as they read the separate steps'. One job instead of two: the validated rows go from
the ingest stages straight into tf.Transform as Arrow batches, instead of being written,
read back and decoded, and Beam and tf.Transform start once.

Ingest's limits (``max_rejected_fraction``, the schema check) are enforced after the job, on
its statistics; when one fails, the transform outputs are removed (they were computed from
data that did not pass) and the step fails, pointing to the rejected rows.

A large source on the local runner (over :data:`FUSED_MAX_SOURCE_BYTES`) runs as the two
steps run instead, one job after the other in this process: the in-memory runner would hold
every train row of the fused job between the analysis and the transformation, so its memory
would grow with the data; the two jobs stream the rows (transform reads the train split twice)
and use flat memory. The outputs are the same either way.
"""

from __future__ import annotations

import sys

from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._sources.report import IngestError
from estflow.components.preprocess.step import run
from estflow.components.transform.report import TransformError
from estflow.dsl.contracts import PREPROCESS

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = entry.step_parser(PREPROCESS, __doc__)
    args, extra = parser.parse_known_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    _beam.freeze_imports()
    root = entry.resolve_source_root(args.source_root)
    try:
        run(pipeline, args.examples, args.transformed, source_root=str(root),
            beam_options=_beam.split_options(extra, args.beam_options),
            gzip_level=args.gzip_level, num_shards=args.num_shards)
    except (IngestError, TransformError) as err:
        print(f"[preprocess] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    _beam.main_and_exit(main)
