"""The errors of declarations: each names the field, what was expected and what was received."""

from __future__ import annotations

__all__ = ["DslError", "DslErrors"]


class DslError(ValueError):
    """A declaration is invalid. Raised by the declaration's constructor; a ``ValueError``.

    Each argument is kept as an attribute of the same name.

    Args:
        path: dotted path of the offending field, e.g. ``features[2].boundaries``.
        expected: what a valid value looks like.
        received: the value (or a description of it) that was given.
        note: an optional hint appended to the message.

    Example:
        >>> import estflow.dsl as ef
        >>> try:
        ...     ef.Numeric("fare", normalize="zscore")
        ... except ef.DslError as err:
        ...     caught = err
        >>> caught.path, caught.received
        ('normalize', 'zscore')
        >>> print(caught)
        Received an invalid value for `normalize`, expected one of [None, 'z_score', 'min_max', 'log']. Received: normalize='zscore'
    """

    def __init__(self, path: str, expected: str, received: object, *, note: str = "") -> None:
        self.path = path
        self.expected = expected
        self.received = received
        self.note = note
        message = (
            f"Received an invalid value for `{path}`, expected {expected}. "
            f"Received: {path}={received!r}"
        )
        if note:
            message += f" ({note})"
        super().__init__(message)

    def under(self, prefix: str) -> DslError:
        """The same error with its path nested under ``prefix`` (e.g. ``pipeline.features[0]``)."""
        return DslError(f"{prefix}.{self.path}", self.expected, self.received, note=self.note)


class DslErrors(ValueError):
    """Several declaration errors found at once by a cross-object validation (``Pipeline``
    checks every cross-reference and reports all that fail); a ``ValueError``.

    Args:
        errors: the :class:`DslError` of each failed check (kept as ``errors``), with paths
            from the pipeline's root.

    Example:
        >>> import estflow.dsl as ef
        >>> try:
        ...     ef.Pipeline(name="demo", source=ef.CsvSource("data.csv"),
        ...                 features=(ef.Numeric("fare", default=0.0),),
        ...                 label=ef.Label("tipped"),
        ...                 model=ef.LinearClassifier(feature_columns=("fare", "miles")),
        ...                 train=ef.TrainSpec(max_steps=100),
        ...                 eval=ef.EvalSpec(slices=("company",)))
        ... except ef.DslErrors as err:
        ...     caught = err
        >>> [e.path for e in caught.errors]
        ['eval.slices[0]', 'model.feature_columns[1]']
    """

    def __init__(self, errors: list[DslError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} invalid declaration(s):\n{lines}")
