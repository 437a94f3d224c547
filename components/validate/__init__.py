"""Data validation: statistics of each run's data, a schema, anomalies, drift and skew.

The statistics, schemas and anomaly kinds are tensorflow-metadata's and TF Data Validation's
(``DatasetFeatureStatisticsList``, ``Schema``, ``AnomalyInfo.Type`` names), so TFDV and Facets
read what estflow writes. The modules import Beam and tensorflow-metadata: import them only in
steps, never from the DSL.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the validate step with command-line arguments (``__main__.main``); returns the exit
    status. Imports the step only when called."""
    from estflow.components.validate.__main__ import main as entry_main  # noqa: PLC0415

    return entry_main(argv)
