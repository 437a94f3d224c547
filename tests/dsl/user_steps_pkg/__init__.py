"""User steps declared in an importable module (not a pipeline file), for the user-step tests."""
