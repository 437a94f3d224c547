"""The evaluate step's internals: metrics, the blessing (thresholds and the comparison with
the served baseline) and the HTML report. Entry point: ``estflow.components.evaluate``."""
