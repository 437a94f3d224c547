"""The preprocess step: ingest and transform fused in one Beam job.

``python -m estflow.components.preprocess`` runs :mod:`.__main__` (the entry point), which
calls :mod:`.step` (the step's run); the work is ingest's and transform's (their modules),
wired into one pipeline.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.preprocess.__main__ import main as entry_main

    return entry_main(argv)
