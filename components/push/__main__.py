"""The push step: publish a *blessed* model's export as ``<base>/<model_name>/<version>/``.

The layout is TF Serving's (and KServe's tensorflow runtime): a server watching the model base
path loads the highest integer version. The step first reads the evaluate step's
``blessing.json``: a model that is not blessed is not pushed, and the step still succeeds,
writing ``push.json`` = ``{"pushed": false, "reasons": [...]}`` (a rejection is a result). A
blessed model is published through a
:class:`~estflow.components._io.model_repo.PushDestination`
(local directory: atomic rename; ``gs://``/``s3://``: staged copy, verified, then renamed with
``saved_model.pb`` last), never overwriting a version; then the oldest versions beyond
``keep_versions`` are deleted, and staging directories left by killed pushes (unchanged for an
hour) are removed. With ``PushTarget.kserve_manifest`` it also copies the version's SavedModel
alone to ``<model_base>/kserve/<version>-only/<version>/`` (the manifest's ``storageUri``) and
writes a KServe ``InferenceService`` manifest next to ``push.json``; with ``kserve_rollout`` it
applies it through the Kubernetes API and waits for the new revision
(:mod:`estflow.components.push.rollout`): a failed rollout fails the step (exit status 1,
KServe's reason in ``push.json`` and on stderr) while KServe keeps serving the previous one.

Push only what is new: given the model's fingerprint (``--model-fingerprint``, the train
step's cache key), a model whose fingerprint the served version already carries is not pushed
again (``push.json``: ``{"pushed": false, "already_served": true, "version": N, ...}``). Every
pushed version carries its lineage, ``assets.extra/estflow_lineage.json``: the fingerprint and
the run that made it (``--run``; :mod:`estflow.components._io.lineage`), and its outputs on the
eval rows (``assets.extra/estflow_eval_outputs.npz``, from the evaluation), which a later
evaluation on the same rows reads instead of scoring this version as its baseline again.

Runs pushing at the same time (a schedule's next run beside a retry) decide "is it served?"
and publish under one guard (:mod:`estflow.components.push.guard`: a lock file beside the
versions locally, create-only claim objects on ``gs://`` and ``s3://``): one model is
published once, and different models get different versions.

``python -m estflow.components.push --spec S --model DIR --evaluation DIR --pushed DIR
[--model-fingerprint FP] [--run RUN]``
"""

from __future__ import annotations

import sys

from estflow.components._runtime import entry
from estflow.components.push.rollout import RolloutError
from estflow.components.push.step import run
from estflow.dsl.contracts import step_named

__all__ = ["main"]

PRESTART_LATER = ("estflow.components.push.warmup",)
"""Imported by a prestarted push process while it waits (TensorFlow, for the warm-up requests;
see :data:`estflow.components._runtime.prestart.LATER`)."""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments; returns the exit status."""
    args = entry.step_parser(step_named("push"), __doc__).parse_args(argv)
    try:
        run(entry.load_pipeline(args.spec), args.model, args.evaluation, args.pushed,
            fingerprint=args.model_fingerprint, run_ref=args.run)
    except RolloutError as err:
        print(f"[push] error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    entry.exit_after(main)
