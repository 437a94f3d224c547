"""Internals of :mod:`estflow.components.estimator.boosted_trees` (gradient boosted trees on
core TensorFlow ops)."""
