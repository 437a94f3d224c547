"""The batch prediction step: score a source with a model, write the predictions.

``python -m estflow.components.predict`` runs :mod:`.__main__`. Its modules: the model it
scores with, its scoring DoFn, the output formats and sinks, the job and its summary.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.predict.__main__ import main as entry_main

    return entry_main(argv)
