"""Head internals: the base head (loss, metrics, export outputs), classification, regression
and multi-head. Public names: ``estimator.heads``."""
