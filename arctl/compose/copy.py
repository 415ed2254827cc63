"""``arctl cp``: copy a spec (experiment, sweep or report) into the user's folder to edit, where it
overlays the shipped one of the same name (:mod:`arctl.compose.paths`).

A copy is only useful where arctl reads it: ``<root>/<kind>s/NAME.yaml`` of a root on the spec search path,
NAME a spec name. A DEST whose file name is no name (``My_Exp.yaml``), or in a folder of another kind
(an experiment in ``sweeps/``), would break ``arctl ls`` for every spec, so it is refused; a DEST off the
search path (``mine.yaml``, ``ideas/x.yaml``) is written, since a copy to read or share is a fair use,
with a warning that arctl will not find it and how to make it found (from a hunt: both were written in
silence, and ``arctl run mine`` said "unknown experiment")."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.experiment import NAME_RE
from arctl.compose.paths import (
    ORIGIN_ENV,
    SPECS_ENV,
    SpecFile,
    shipped_root,
    spec_files,
    spec_path_hint,
    spec_path_problems,
    spec_roots,
    user_spec_dir,
)
from arctl.config.files import atomic_write, folder_problem

KINDS = {"experiment": "experiments", "sweep": "sweeps", "report": "reports"}


@dataclass(frozen=True)
class Copied:
    kind: str
    name: str
    source: SpecFile
    dest: Path
    warnings: list[str] = field(default_factory=list)  # what the user should know: arctl will not read dest


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
        raise SpecError(f"no experiment, sweep or report named {name!r}", None,
                        did_you_mean(name, known) + spec_path_hint())
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
    _check_place(kind, source, target)
    if target.exists() and target.resolve() == source.path.resolve():
        raise SpecError(f"{target} is the spec itself", "DEST", "copy it somewhere else")
    if target.exists() and not force:
        raise SpecError(f"{target} exists", "DEST", "pass --force to overwrite it")
    if problem := folder_problem(target.parent):  # a file on the path, a folder no file can be made in
        raise SpecError(f"{target}: {problem}", "DEST", "give a folder you can write, or a .yaml path in one")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, source.path.read_bytes())
    return Copied(kind, name, source, target, [*_unfound(kind, target), *spec_path_problems()])


def _check_place(kind: str, source: SpecFile, target: Path) -> None:
    """Refuse a DEST that would break the listing of its folder: a file name that is no spec name, a
    folder of another kind, ``reports/labels.yaml`` (display names, not a spec), a second report spec of
    one name in one folder (``arctl ls figures`` refuses two)."""
    from arctl.compose.report_specs import NOT_SPECS

    folder, parent = KINDS[kind], target.parent.resolve().name  # `mine.yaml` typed inside sweeps/ is in sweeps/
    if parent in KINDS.values() and parent != folder:
        raise SpecError(f"{target} is in {_a(parent)}/ folder, but {source.name!r} is {_a(kind)}", "DEST",
                        f"copy it into {_a(folder)}/ folder (e.g. {folder}/{target.name}): arctl reads every "
                        f"file in {parent}/ as {_a(parent[:-1])}")
    if kind != "report" and not NAME_RE.match(target.stem):
        suggestion = "".join(c if NAME_RE.match(f"a{c}") else "-" for c in target.stem.lower()).strip("-._") or "mine"
        raise SpecError(f"{target.stem!r} is not a valid {kind} name", "DEST",
                        f"name the file {suggestion}.yaml or so (lowercase letters, digits, '.', '_' and '-'): "
                        f"the file's name is the {kind}'s name")
    if kind == "report" and parent == folder:
        if target.stem in NOT_SPECS:
            raise SpecError(f"{folder}/{target.name} holds display names, not a report spec", "DEST",
                            f"give the copy another name (e.g. {folder}/{source.path.stem}.yaml)")
        _check_report_name(source, target)


def _check_report_name(source: SpecFile, target: Path) -> None:
    """A report spec copied beside another of its kind and name (``arctl cp score_curve reports/a.yaml``
    where ``reports/score_curve.yaml`` is already a copy) would make every listing of that kind an error
    (:func:`arctl.compose.report_specs.all_report_specs` refuses two of one origin)."""
    from arctl.compose.experiment import read_yaml_mapping

    def kind_and_name(path: Path, stem: str) -> tuple[object, str]:
        data = read_yaml_mapping(path, confined=True)
        return data.get("kind"), str(data.get("name", stem))

    mine = kind_and_name(source.path, target.stem)  # without a name: field, the copy is named by its file
    if mine[0] is None or not target.parent.is_dir():
        return
    for other in sorted(target.parent.glob("*.yaml")):
        if not other.is_file() or other.resolve() == target.resolve():
            continue
        try:
            theirs = kind_and_name(other, other.stem)
        except SpecError:
            continue  # a broken file says so itself, in `arctl ls`
        if theirs == mine:
            raise SpecError(f"{other} is already the {mine[0]} spec named {mine[1]!r} in this folder", "DEST",
                            f"edit that one, or remove it first: two {mine[0]} specs of one name in one folder "
                            f"make `arctl ls {mine[0]}s` an error")


def _unfound(kind: str, target: Path) -> list[str]:
    """Why arctl will not read ``target`` as ``kind`` (empty when it will): off the spec search path, or
    behind a file of its name earlier on it."""
    folder = KINDS[kind]
    parent = target.parent.resolve()
    roots = spec_roots()
    paths = [r.path for r in roots]
    cwd = Path.cwd().resolve()
    name = target.name
    if parent.name != folder or (parent.parent not in paths and parent.parent != cwd):
        made_found = f"move it to {folder}/{target.name} here, or into {folder}/ of a folder named in ${SPECS_ENV}"
        if parent.name == folder:
            made_found = f"add {parent.parent} to ${SPECS_ENV} (folders separated by '{os.pathsep}'), or " + made_found
        return [f"arctl will not find {target}: it reads {kind}s only from {folder}/ in a folder on the spec "
                f"search path (${SPECS_ENV}, the current folder, the shipped set); {made_found}"]
    root = parent.parent
    # a root that is not on the path yet (./experiments/ made now) becomes the project: after $ARCTL_SPECS
    ahead = paths[:paths.index(root)] if root in paths else [r.path for r in roots if r.origin == ORIGIN_ENV]
    for other in ahead:
        if (other / folder / name).is_file():
            return [f"arctl will read {other / folder / name} for {kind} {target.stem!r}, not this copy: it comes "
                    f"earlier on the spec search path; rename the copy or remove that file"]
    return []
