"""The one exception the report layer raises for user mistakes (one line: what, where, what to do)."""

from __future__ import annotations


class ReportError(ValueError):
    """A report cannot be built as asked (unknown figure, no runs, ...); the message says why and
    which command fixes it."""
