"""Tune: search the declared hyperparameters, training each trial with the train step and
measuring it with the evaluate step.

``python -m estflow.components.tune --spec S --examples EXAMPLES --transformed TRANSFORMED
--hyperparameters OUT [--study-dir DIR] [--study-key KEY] [--keep-models]``

Inputs: the ingest step's output (``EXAMPLES/eval/``: the raw eval split the evaluate step
scores) and the transform step's (``TRANSFORMED``: what the train step reads). Output
(``OUT``): ``best.json``, ``trials.json``, ``report.html``, ``metrics.json``. The search's
study is kept in ``--study-dir`` (default: ``$ESTFLOW_TUNE_STUDY_DIR``, which ``estflow run``
sets beside its step cache, else ``OUT/study/``), one folder per key: a rerun finds the
finished trials there and reuses them. See :mod:`estflow.components.tune.step`.
"""

from __future__ import annotations

import os
import sys

from estflow.components._runtime import entry
from estflow.components.tune.step import TuneError
from estflow.components.tune.step import run
from estflow.dsl.contracts import TUNE_STUDY_ENV
from estflow.dsl.contracts import step_named

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point (module docstring); returns the exit status."""
    args = entry.step_parser(step_named("tune"), __doc__).parse_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    try:
        run(pipeline, args.examples, args.transformed, args.hyperparameters,
            study_dir=args.study_dir or os.environ.get(TUNE_STUDY_ENV) or None,
            study_key=args.study_key or None, env=dict(os.environ),
            keep_models=bool(args.keep_models))
    except TuneError as err:
        print(f"[tune] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
