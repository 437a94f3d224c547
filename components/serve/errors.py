"""The one error type of ``estflow serve``: answered to the client as TF Serving does,
``{"error": message}`` with an HTTP status (stdlib only: the HTTP layer raises it too)."""

from __future__ import annotations

__all__ = ["ServingError"]


class ServingError(Exception):
    """An error answered to the client as ``{"error": message}`` with an HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
