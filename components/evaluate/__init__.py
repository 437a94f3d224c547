"""The evaluate step: score the eval split, compare with the served baseline, bless.

``python -m estflow.components.evaluate`` runs :mod:`.__main__`. Its modules: metrics, the
blessing (thresholds and the comparison with the served baseline), the HTML report and the
KFP UI outputs.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.evaluate.__main__ import main as entry_main

    return entry_main(argv)
