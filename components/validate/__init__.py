"""The validate step: the run's data checked before a model trains on it (``Pipeline.checks``):
its statistics against a schema, drift against the served model's training data, and the cells
ingest rejected for their type. :mod:`.step` is the step's run, :mod:`.__main__`
its entry point.

The statistics, schema, anomalies and data report it works with are TFDV's and live in
:mod:`estflow.components._statistics`, which ingest, evaluate and batch prediction share.
Importing this package stays light: :func:`main` imports the step only when called.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the validate step with command-line arguments (``__main__.main``); returns the exit
    status. Imports the step only when called."""
    from estflow.components.validate.__main__ import main as entry_main  # noqa: PLC0415

    return entry_main(argv)
