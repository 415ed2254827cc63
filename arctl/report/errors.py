"""The one exception the report layer raises for user mistakes (one line: what, where, what to do)."""

from __future__ import annotations


class ReportError(ValueError):
    """A report cannot be built as asked (unknown figure, no runs, ...); the message says why and
    which command fixes it."""


def out_dir_problem(out, workdir=None) -> str | None:
    """Why ``--out`` cannot be a report's or an export's output folder, or None: it (or a folder above
    it) is a file, or it lies inside the workspace's ``runs/`` (where arctl reads run folders)."""
    from pathlib import Path

    out = Path(out)
    for place in (out, *out.parents):
        if place.exists() and not place.is_dir():
            return f"--out {out}: {place} is a file; choose a folder"
        if place.exists():
            break
    if workdir is not None and Path(workdir, "runs").is_dir():
        runs = Path(workdir, "runs").resolve()
        if out.resolve() == runs or out.resolve().is_relative_to(runs):
            return f"--out {out} is inside the workspace's runs/; choose a folder outside {runs}"
    return None
