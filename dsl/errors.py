"""The one error type of declarations: it names the field, what was expected and what was received."""

from __future__ import annotations

__all__ = ["DslError"]


class DslError(ValueError):
    """A declaration is invalid.

    Attributes:
        path: dotted path of the offending field, e.g. ``features[2].boundaries``.
        expected: what a valid value looks like.
        received: the value (or a description of it) that was given.
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
    """Several declaration errors found at once by a cross-object validation."""

    def __init__(self, errors: list[DslError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} invalid declaration(s):\n{lines}")
