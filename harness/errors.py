"""The one error type users see: a bad input, reported as one line and exit code 2."""

from __future__ import annotations

from pathlib import Path


class HarnessInputError(Exception):
    """A user-supplied file or argument is wrong; nothing has been written.

    Carrying file, field and problem separately lets the CLI print the single
    line the standards ask for, and lets tests assert on the field.
    """

    def __init__(self, file: str | Path | None, field: str | None, problem: str) -> None:
        self.file = str(file) if file is not None else None
        self.field = field
        self.problem = problem
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [p for p in (self.file, self.field) if p]
        return ": ".join([*parts, self.problem])


class StaleRunError(HarnessInputError):
    """A resume was refused because something the scoresheet locked has changed."""
