"""The batch prediction step: score a source with a model, write the predictions.

``python -m estflow.components.predict`` runs :mod:`.__main__` (the command line), which calls
:func:`.step.run` (the step: the driver's checks, the job, publishing). Its modules:
:mod:`.model` (the model it scores with), :mod:`.schema` (the columns read: features and
keys), :mod:`.scoring` (its scoring DoFn), :mod:`.formats` and :mod:`.text` (the output
formats), :mod:`.sinks` (the output directory), :mod:`.job` (the Beam job) and
:mod:`.summary` (``predict.json``).

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.predict.__main__ import main as entry_main

    return entry_main(argv)
