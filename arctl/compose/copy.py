"""``arctl cp``: copy a spec (experiment, sweep or report) into the user's folder to edit, where it
overlays the shipped one of the same name (:mod:`arctl.compose.paths`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.experiment import NAME_RE
from arctl.compose.paths import SpecFile, shipped_root, spec_files, spec_roots, user_spec_dir
from arctl.config.files import atomic_write, folder_problem

KINDS = {"experiment": "experiments", "sweep": "sweeps", "report": "reports"}


@dataclass(frozen=True)
class Copied:
    kind: str
    name: str
    source: SpecFile
    dest: Path


def _candidates(name: str) -> dict[str, SpecFile]:
    """kind → the file that ``name`` names, preferring the shipped copy (what a user starts from)."""
    from arctl.compose.report_specs import all_report_specs

    out = {}
    shipped = shipped_root().resolve()
    for kind, folder in KINDS.items():
        found = None
        for root in reversed(spec_roots()):  # shipped first
            path = root.path / folder / f"{name}.yaml"
            if path.is_file():
                found = SpecFile(name, path, root.origin)
                if root.path == shipped:
                    break
        if found is None and kind == "report":  # a report spec by its name (table_anytime.yaml is `anytime`)
            for spec_kind in ("figure", "table", "claims"):
                spec = all_report_specs(spec_kind).get(name)
                if spec is not None:
                    found = SpecFile(Path(spec["_path"]).stem, Path(spec["_path"]), spec["_origin"])
        if found is not None:
            out[kind] = found
    return out


def _a(kind: str) -> str:
    """``"an experiment"``, ``"a sweep"``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def copy_spec(name: str, dest: str | Path | None = None, kind: str | None = None, force: bool = False) -> Copied:
    """Copy spec ``name`` to ``dest`` (a file, or a folder; default ``./<kind>s/`` or the first
    ``$ARCTL_SPECS`` directory); refuses to overwrite unless ``force``."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SpecError(f"{name!r} is not a spec name", None, "names are lowercase letters, digits, '.', '_' and '-' "
                        "(`arctl ls experiments|sweeps|figures|tables` lists them)")
    if kind is not None and kind not in KINDS:
        raise SpecError(f"unknown kind {kind!r}", "--kind", f"choose one of {', '.join(KINDS)}")
    found = _candidates(name)
    if kind is not None:
        other = [k for k in found if k != kind]
        found = {k: v for k, v in found.items() if k == kind}
        if not found and other:
            raise SpecError(f"{name!r} is {' and '.join(map(_a, other))}, not {_a(kind)}", "--kind",
                            f"use --kind {other[0]} or leave --kind out")
    if not found:
        known = [n for folder in KINDS.values() for n in spec_files(folder)]
        raise SpecError(f"no experiment, sweep or report named {name!r}", None, did_you_mean(name, known))
    if len(found) > 1:
        raise SpecError(f"{name!r} is {' and '.join(map(_a, found))}", None, "choose with --kind " + "|".join(found))
    (kind, source), = found.items()
    if dest is not None and not str(dest).strip():  # `arctl cp NAME "$DIR"` with DIR unset: not "here"
        raise SpecError("DEST is empty", "DEST", "give a folder or a path ending in .yaml, or leave DEST out")
    target = Path(dest) if dest is not None else user_spec_dir(KINDS[kind])
    if target.is_dir() or dest is None or str(dest).endswith(os.sep):
        target = target / source.path.name
    if target.suffix != ".yaml":
        raise SpecError(f"{target} is not a .yaml file", "DEST", "give a folder or a path ending in .yaml")
    if target.exists() and target.resolve() == source.path.resolve():
        raise SpecError(f"{target} is the spec itself", "DEST", "copy it somewhere else")
    if target.exists() and not force:
        raise SpecError(f"{target} exists", "DEST", "pass --force to overwrite it")
    if problem := folder_problem(target.parent):  # a file on the path, a folder no file can be made in
        raise SpecError(f"{target}: {problem}", "DEST", "give a folder you can write, or a .yaml path in one")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, source.path.read_bytes())
    return Copied(kind, name, source, target)
