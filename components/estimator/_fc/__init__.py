"""Feature-column internals: raw inputs, vocabulary lookups, categorical and dense columns, and
the dense-features / linear-model layers behind ``estimator.feature_column``."""
