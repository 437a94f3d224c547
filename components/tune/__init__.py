"""The tune step: a hyperparameter search over ``Pipeline.tune``'s space on this machine,
before the final train; the best assignment is its output (``hyperparameters``).

``python -m estflow.components.tune`` runs :mod:`.__main__` (the command line), which calls
:func:`.step.run` (the search). Its modules: :mod:`.space` (the declared space as Optuna's
parameters), :mod:`.study` (the study on disk: resumable, keyed), :mod:`.trial` (a trial: the
train and evaluate steps' own entry points, in processes of their own), :mod:`.events`
(the train step's evaluations, read while it trains) and :mod:`.report` (``trials.json``,
``report.html``). On Kubeflow with Katib, :mod:`.on_katib` runs the search as a Katib
Experiment instead and :mod:`.katib_trial` is each trial's entry point; with ``--tune-on
parallel-for``, each trial is a task of a KFP ``ParallelFor`` (:mod:`.katib_trial` with
``--result``) and :mod:`.on_parallel_for` collects them.

The package imports nothing heavy (no Optuna, no TensorFlow): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.tune.__main__ import main as entry_main

    return entry_main(argv)
