"""Module-level derive functions for the transform tests (pipelines reference them by
``module:function``, so the transform subprocess must be able to import them)."""


def label_from_x(columns):
    """label = 1 when x > 2 (returned as bool: the declared int dtype is applied by estflow)."""
    return {"label": columns["x"] > 2.0}


def forgets_label(columns):
    """Declares ``label`` but returns something else."""
    return {"lable": columns["x"] > 2.0}
