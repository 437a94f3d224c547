"""Tune: search the declared hyperparameters, training each trial with the train step and
measuring it with the evaluate step.

``python -m estflow.components.tune --spec S --examples EXAMPLES --transformed TRANSFORMED
--hyperparameters OUT [--study-dir DIR] [--study-key KEY] [--keep-models]
[--katib-experiment JSON]``

Inputs: the ingest step's output (``EXAMPLES/eval/``: the raw eval split the evaluate step
scores) and the transform step's (``TRANSFORMED``: what the train step reads). Output
(``OUT``): ``best.json``, ``trials.json``, ``report.html``, ``metrics.json``. The search's
study is kept in ``--study-dir`` (default: ``$ESTFLOW_TUNE_STUDY_DIR``, which ``estflow run``
sets beside its step cache, else ``OUT/study/``), one folder per key: a rerun finds the
finished trials there and reuses them. See :mod:`estflow.components.tune.step`.

With ``--katib-experiment`` (what ``estflow compile --tune-on katib`` gives the tune task on
Kubeflow) the trials run on Katib instead, a pod each
(:mod:`estflow.components.tune.katib_trial`): the task fills the compiled Experiment in for
this run (the spec it got and its inputs' bucket URIs in the trial command, KFP's local paths
``/gcs/B/x`` as ``gs://B/x``, ``/s3/`` and ``/minio/`` as ``s3://``; a name unique to its
output path, which holds the KFP run's id; its pod's namespace and service account unless
compiled in), creates it, follows it to its end (deleting it when the task is stopped) and
writes ``best.json`` (``{"assignment", "objective", "value", "trial", "higher_is_better",
"metrics", "experiment"}``, the trial its Katib name) and ``metrics.json`` into ``OUT``: the
final train applies the best assignment as after a search in the task. No ``trials.json`` or
``report.html`` then: Katib's UI shows the trials.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path

from estflow.components._runtime import entry
from estflow.components._runtime import katib
from estflow.components.tune.on_katib import KATIB_POLL_SECONDS
from estflow.components.tune.on_katib import run_on_katib
from estflow.components.tune.step import TuneError
from estflow.components.tune.step import run
from estflow.dsl.contracts import TUNE_STUDY_ENV
from estflow.dsl.contracts import step_named

__all__ = ["main", "KATIB_POLL_SECONDS"]

_PREFIX = "[tune]"


def main(argv: list[str] | None = None, *,
         mounts: Sequence[tuple[str, str]] = katib.KFP_MOUNTS,
         katib_host: str | None = None, pod_folder: str | os.PathLike = katib.POD_FOLDER,
         poll_seconds: float = KATIB_POLL_SECONDS,
         echo: Callable[[str], None] | None = None) -> int:
    """Entry point (module docstring); returns the exit status.

    The keyword arguments are for tests of the Katib search: ``mounts`` (local prefix ->
    bucket scheme; default KFP's, :data:`~estflow.components._runtime.katib.KFP_MOUNTS`),
    ``katib_host`` (a Kubernetes API URL without credentials; default: in-cluster, else the
    kubeconfig), ``pod_folder`` (where the pod's namespace and token are),
    ``poll_seconds``, ``echo`` (where progress lines go; default: stdout).
    """
    args = entry.step_parser(step_named("tune"), __doc__).parse_args(argv)
    pipeline = entry.load_pipeline(args.spec)
    if args.katib_experiment:
        return run_on_katib(args, pipeline, mounts=mounts, host=katib_host,
                            pod_folder=Path(pod_folder), poll_seconds=poll_seconds,
                            echo=echo or (lambda line: print(line, flush=True)))
    try:
        run(pipeline, args.examples, args.transformed, args.hyperparameters,
            study_dir=args.study_dir or os.environ.get(TUNE_STUDY_ENV) or None,
            study_key=args.study_key or None, env=dict(os.environ),
            keep_models=bool(args.keep_models))
    except TuneError as err:
        print(f"{_PREFIX} error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
