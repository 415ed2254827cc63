"""The one exception the report layer raises for user mistakes (one line: what, where, what to do)."""

from __future__ import annotations


class ReportError(ValueError):
    """A report cannot be built as asked (unknown figure, no runs, ...); the message says why and
    which command fixes it."""


def out_dir_problem(out, workdir=None, given: bool = True) -> str | None:
    """Why ``--out`` cannot be a report's or an export's output folder, or None: it lies inside the
    workspace's ``runs/`` (where arctl reads run folders), or it cannot be a folder this process writes
    in (:func:`arctl.config.files.folder_problem`: a file on its path, a name too long, a folder where
    no file can be created: ``/proc``, a read-only mount, another user's). ``given``: whether the user
    named ``out`` (else it is the default under the workspace, and said so)."""
    from pathlib import Path

    from arctl.config.files import folder_problem

    out = Path(out)
    what, choose = (f"--out {out}", "choose") if given else (f"the default report folder {out}", "give --out")
    if workdir is not None and Path(workdir, "runs").is_dir():  # first: it reads, the next check writes a probe
        runs = Path(workdir, "runs").resolve()
        if out.resolve() == runs or out.resolve().is_relative_to(runs):
            return f"{what} is inside the workspace's runs/; {choose} a folder outside {runs}"
    if problem := folder_problem(out):
        return f"{what}: {problem}; {choose} a folder you can write"
    return None
