"""User-facing errors: one line naming the field and what was expected; the CLI exits 2."""

from __future__ import annotations


class UserError(ValueError):
    """A mistake in the user's input (not a bug). Rendered as one line, exit code 2."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class DoesNotFit(UserError):
    """A model or layout that does not fit the memory of the system asked for."""
