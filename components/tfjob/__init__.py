"""The multi-worker train task: submit a training job to the cluster and follow it.

``python -m estflow.components.tfjob`` runs :mod:`.__main__` (the command line: Kubernetes
credentials, this pod), which calls :func:`.step.run` (stage, submit, follow, copy the model
back). Its modules: :mod:`.staging` (shared storage), training-job manifests (TFJob, TrainJob
and its runtime), TF_CONFIG of TrainJob pods (:mod:`.node`, the pods' entry point), the
submitter's identity, follow/cleanup.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.tfjob.__main__ import main as entry_main

    return entry_main(argv)
