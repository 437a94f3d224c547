"""The ingest step: read the source, validate every row, split, write raw tf.Examples.

``python -m estflow.components.ingest`` runs :mod:`.__main__` (the entry point), which calls
:mod:`.step` (the step's run); :mod:`.job` is the Beam job (read, split, write). The source
is read and validated by the readers ingest shares with batch prediction
(:mod:`estflow.components._sources`).

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.ingest.__main__ import main as entry_main

    return entry_main(argv)
