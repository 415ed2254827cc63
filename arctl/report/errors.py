"""The one exception the report layer raises for user mistakes (one line: what, where, what to do)."""

from __future__ import annotations


class ReportError(ValueError):
    """A report cannot be built as asked (unknown figure, no runs, ...); the message says why and
    which command fixes it."""


def out_dir_problem(out, workdir=None, given: bool = True) -> str | None:
    """Why ``--out`` cannot be a report's or an export's output folder, or None: it (or a folder above
    it) is a file, its name is too long for the file system, this process cannot create files in it
    (or in the folder above where it would be made: ``/proc``, a read-only mount, another user's
    folder), or it lies inside the workspace's ``runs/`` (where arctl reads run folders). ``given``:
    whether the user named ``out`` (else it is the default under the workspace, and said so)."""
    from pathlib import Path

    from arctl.config.files import write_problem

    out = Path(out)
    what, choose = (f"--out {out}", "choose") if given else (f"the default report folder {out}", "give --out")
    try:
        for place in (out, *out.parents):
            if place.exists() and not place.is_dir():
                return f"{what}: {place} is a file; {choose} a folder"
            if place.exists():
                break
        if why := write_problem(out):
            return f"{what}: cannot create files there ({why}); {choose} a folder you can write"
    except OSError as err:  # a name longer than the file system allows, a path through a file or a loop
        return f"{what}: {err.strerror or err}; {choose} another folder"
    if workdir is not None and Path(workdir, "runs").is_dir():
        runs = Path(workdir, "runs").resolve()
        if out.resolve() == runs or out.resolve().is_relative_to(runs):
            return f"--out {out} is inside the workspace's runs/; choose a folder outside {runs}"
    return None
