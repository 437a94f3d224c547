"""The transform step: analyze the train split and transform every split (tf.Transform).

``python -m estflow.components.transform`` runs :mod:`.__main__` (the entry point), which
calls :mod:`.step` (the step's run). Its other modules: the tf.Transform ``preprocessing_fn``
built from the declarations, the Beam job, column statistics and the report.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.transform.__main__ import main as entry_main

    return entry_main(argv)
