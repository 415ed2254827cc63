"""The one error type of the spec layer: a user mistake, reported as one clear line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SpecError(ValueError):
    """A bad spec or override. ``str(err)`` is one line: what is wrong, where, what to do."""

    def __init__(self, what: str, where: str | None = None, hint: str | None = None):
        self.what, self.where, self.hint = what, where, hint
        parts = [what if where is None else f"{where}: {what}"]
        if hint:
            parts.append(hint)
        super().__init__(" — ".join(p.replace("\n", " ") for p in parts))


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` names from ``choices`` that look like ``name`` (for 'did you mean')."""
    return difflib.get_close_matches(name, sorted(choices), n=n, cutoff=0.5)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    choices = sorted(choices)
    near = closest(name, choices)
    if near:
        return "did you mean " + " or ".join(repr(c) for c in near) + "?"
    return "choose one of: " + ", ".join(choices)
