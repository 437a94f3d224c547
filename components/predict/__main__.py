"""Batch prediction: score every row of a source with a model's serving signature, on Beam.

``python -m estflow.components.predict --spec S --predictions DIR [--pushed DIR]
[--source-root ROOT] [--beam-options "OPTS"] [BEAM_OPTION ...]``

The spec's ``Pipeline.predict`` (a :class:`~estflow.dsl.BatchPredict`) says what to score and
where the predictions go. The model is the one the push step published (``--pushed``: its
``push.json``; or the version already serving the same model, which push did not push
again; when the model was not blessed the step is skipped, writing ``predict.json`` =
``{"skipped": true, ...}``), or, in a pipeline that only predicts (and ``estflow predict``), the
one ``predict.model`` names: a pushed model's latest version, one version, a SavedModel or a
run's export.

Rows are read and validated by the ingest step's readers, against the model's raw features
(``estflow_raw_features.json`` in the export) plus the key columns: a row that does not fit is
written to ``rejected.jsonl`` with its file, line and reason, and each CSV file's lines are
accounted for as ingest accounts for them (read = header + kept + rejected + blank). Kept
rows are encoded into the same raw ``tf.Example`` bytes ingest writes and scored by the
signature in batches (:mod:`estflow.components.predict.scoring`), so a row scored here gets
the outputs the REST server answers for it. Output (names from :class:`~estflow.dsl.contracts.
Files`), replacing the output directory as a whole (:mod:`estflow.components.predict.sinks`)::

    OUT/predictions-SSSSS-of-NNNNN.<jsonl|csv|parquet|tfrecord.gz>   one shard per bundle
    OUT/rejected.jsonl     {"file", "line", "row", "reason"} per rejected row
    OUT/predict.json       the summary (rows scored and rejected, throughput, line accounting,
                           the model, the files), written last: no predict.json, no output

``OUT`` is ``predict.output``, else ``--predictions``; with an ``output`` of its own, the
summary is also written to ``--predictions``. More than ``source.max_rejected_fraction`` of
the data lines rejected fails the step: then only ``rejected.jsonl`` is published.
"""

from __future__ import annotations

import argparse
import os
import sys

from estflow.components._runtime import beam as _beam
from estflow.components._runtime import entry
from estflow.components._runtime import progress as _progress
from estflow.components._sources.spans import EXIT_BLOCKED
from estflow.components.predict.step import PredictError
from estflow.components.predict.step import SkewError
from estflow.components.predict.step import run
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import PREDICT_ONLY

__all__ = ["PredictError", "run", "main"]

DATA_ANOMALY_EXIT = EXIT_BLOCKED
"""The exit status of a prediction whose rows are skewed past a threshold with
``fail_on_skew`` (the data checks' status for a data anomaly)."""


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the contract row this run is: after push (``--pushed``) or alone."""
    after_push = any(a == "--pushed" or a.startswith("--pushed=") for a in argv)
    return entry.step_parser(BATCH_PREDICT if after_push else PREDICT_ONLY, __doc__)


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = _parser(argv).parse_known_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    _progress.configure(os.environ)
    _beam.freeze_imports()
    root = entry.resolve_source_root(args.source_root)
    try:
        io = _beam.resolve_io(args, _beam.split_options(extra, args.beam_options),
                              ("predictions",), ("predictions",), os.environ)
        run(pipeline, io.locations["predictions"], pushed_dir=getattr(args, "pushed", None),
            source_root=str(root), beam_options=io.options)
    except SkewError as err:
        print(f"[batch_predict] data anomaly: {err}", file=sys.stderr, flush=True)
        return DATA_ANOMALY_EXIT
    except (PredictError, _beam.BeamLocationError) as err:
        print(f"[batch_predict] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    _beam.main_and_exit(main)
