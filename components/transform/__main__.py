"""Transform: analyze the train split and transform every split with Beam + tf.Transform.

``python -m estflow.components.transform --spec S --examples IN_DIR --transformed OUT_DIR
[--gzip-level N] [--num-shards N] [--beam-options "OPTS"] [BEAM_OPTION ...]``

Output layout (names from :class:`estflow.dsl.contracts.Files`)::

    OUT_DIR/transform_fn/          a TFTransformOutput dir (transform_fn/, transformed_metadata/)
    OUT_DIR/train/part-*.tfrecord.gz   GZIP TFRecords of transformed tf.train.Example
    OUT_DIR/eval/part-*.tfrecord.gz    (and one directory per other declared split)
    OUT_DIR/transform.json         rows per split, "cardinalities" of every categorical
                                   feature (read by train: a contract), vocabulary sizes,
                                   train statistics; written last, only on success

The raw Examples are read in blocks and decoded to Arrow by tfx-bsl's C++ decoder, and fed to
tf.Transform as RecordBatches (its batched path). Locally the Beam pipeline runs on an explicit
in-memory FnApiRunner: deterministic, offline (no Prism download), and on few cores faster
than multi-process running. Beam options (``--runner=DataflowRunner ...``) scale the same step
out: then the job reads and writes the artifacts' remote URIs (``--examples-uri``,
``--transformed-uri``, or the URIs KFP's local paths stand for) and its workers run estflow's
image (``--sdk-image``, default ``$ESTFLOW_IMAGE``).
"""

from __future__ import annotations

import os
import sys

from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components.transform.report import TransformError
from estflow.components.transform.step import run
from estflow.dsl.contracts import step_named

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m estflow.components.transform --spec S --examples IN
    --transformed OUT [BEAM_OPTION ...]``."""
    parser = entry.step_parser(step_named("transform"), __doc__)
    args, extra = parser.parse_known_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    _progress.configure(os.environ)
    _beam.freeze_imports()
    try:
        # A remote runner reads and writes the artifacts' URIs, with estflow's image on its
        # workers.
        io = _beam.resolve_io(args, _beam.split_options(extra, args.beam_options),
                              ("examples", "transformed"), ("transformed",), os.environ)
        run(pipeline, io.locations["examples"], io.locations["transformed"],
            beam_options=io.options, gzip_level=args.gzip_level, num_shards=args.num_shards)
    except (TransformError, _beam.BeamLocationError) as err:
        print(f"[transform] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    _beam.main_and_exit(main)
