"""The evaluate step: score the eval split, compare with the served baseline, bless.

``python -m estflow.components.evaluate`` runs :mod:`.__main__` (the command line), which calls
:func:`.step.run` (the step). Its modules: :mod:`.scoring` (the eval split through the
SavedModel's signatures), :mod:`.baseline` (the served model, scored or its stored outputs
reused: :mod:`.outputs`), :mod:`.metrics` and :mod:`.results` (the metrics, per slice, the
plots' data), :mod:`.blessing` (thresholds and the comparison with the baseline),
:mod:`.report` (the HTML report) and :mod:`.files` (the evaluation directory, the KFP UI).

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.evaluate.__main__ import main as entry_main

    return entry_main(argv)
