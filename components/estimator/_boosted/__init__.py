"""Internals of :mod:`estflow.estimator.boosted_trees` (gradient boosted trees on
core TensorFlow ops)."""
