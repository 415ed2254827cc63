"""Where specs live: the package's config groups, and the experiment, sweep and report specs.

Specs are found on a search path of *spec roots*, each a directory that may hold ``experiments/``,
``sweeps/`` and ``reports/``; the first root that has a name wins:

1. ``$ARCTL_SPECS`` (one or more directories, separated by ``os.pathsep``); an entry that is missing or holds
   none of those folders (nor ``conf/``) refuses a launch and is noted by the other commands that read specs
   (:func:`spec_path_problems`);
2. the current project: the current directory, when it has any of those folders;
3. the specs shipped with arctl: ``arctl/specs/`` inside an installed wheel, or the repository's
   top-level folders in a source checkout (the source the wheel's copy is built from).

A user spec with the same name as a shipped one overlays it; ``arctl ls`` shows where each comes
from, and ``arctl cp NAME`` copies a shipped spec into the project to edit.

A root may also hold ``conf/<group>/<option>.yaml``: a user's own config-group option (a cluster site
profile, a prior), searched after the package's and the backends' (:func:`config_dirs`), so a pip install
needs no edit of site-packages. An option never replaces one arctl ships: Hydra reads the shipped file of a
name first, and a user's file of that name is never read (:func:`shadowed_option` says so for a choice of it).
Such a file is no error by itself: many Hydra projects have a ``conf/`` of their own (``conf/eval/default.yaml``,
``conf/cluster/slurm.yaml``), and from a review, refusing it stopped every launch from such a project.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arctl.compose.errors import SpecError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "specs"  # filled by the wheel build (setup.py)
SPEC_KINDS = ("experiments", "sweeps", "reports")
USER_CONF = "conf"  # <root>/conf/<group>/<option>.yaml: a user's config-group options
SPECS_ENV = "ARCTL_SPECS"
# where a spec comes from, as `arctl ls` shows it (the file's absolute path is in --json and `arctl show`)
ORIGIN_ENV, ORIGIN_PROJECT, ORIGIN_SHIPPED = f"${SPECS_ENV}", "project", "shipped"


@dataclass(frozen=True)
class SpecRoot:
    path: Path
    origin: str  # ORIGIN_ENV | ORIGIN_PROJECT | ORIGIN_SHIPPED


def shipped_root() -> Path:
    """The specs shipped with arctl: the wheel's package data, else the source checkout."""
    if (SHIPPED_DIR / "experiments").is_dir():
        return SHIPPED_DIR
    return PROJECT_ROOT


def spec_roots() -> list[SpecRoot]:
    """The search path, highest precedence first (a directory appears once)."""
    roots = [SpecRoot(Path(p).expanduser().resolve(), ORIGIN_ENV)
             for p in os.environ.get(SPECS_ENV, "").split(os.pathsep) if p.strip()]
    cwd = Path.cwd().resolve()
    if any((cwd / k).is_dir() for k in (*SPEC_KINDS, USER_CONF)):
        roots.append(SpecRoot(cwd, ORIGIN_PROJECT))
    roots.append(SpecRoot(shipped_root().resolve(), ORIGIN_SHIPPED))
    seen, out = set(), []
    for r in roots:
        if r.path not in seen:
            seen.add(r.path)
            out.append(r)
    return out


def spec_path_problems() -> list[str]:
    """What is wrong with each ``$ARCTL_SPECS`` entry that can hold no spec: one that does not exist, or a
    folder with none of ``experiments/``, ``sweeps/``, ``reports/``, ``conf/`` (most often the
    ``experiments/`` folder itself). The search path skips such an entry, so without this text a user
    sees only "unknown experiment" (from a hunt); an unknown-spec error and ``arctl cp`` add it, a launch is refused
    with it (:func:`spec_path_error`), and the other commands that read specs note it (:func:`spec_path_notes`)."""
    out = []
    for entry in (p for p in os.environ.get(SPECS_ENV, "").split(os.pathsep) if p.strip()):
        path = Path(entry).expanduser()
        if not path.exists():
            out.append(f"${SPECS_ENV} entry {entry} does not exist")
        elif not path.is_dir():
            out.append(f"${SPECS_ENV} entry {entry} is a file, not a folder")
        elif not any((path / k).is_dir() for k in (*SPEC_KINDS, USER_CONF)):
            above = f" ({path.resolve().parent})" if path.name in (*SPEC_KINDS, USER_CONF) else ""
            out.append(f"${SPECS_ENV} entry {entry} holds no {', '.join(k + '/' for k in SPEC_KINDS)} or "
                       f"{USER_CONF}/: point it at the folder above them{above}")
    return out


# what a $ARCTL_SPECS entry that can hold no spec costs, after each problem (:func:`spec_path_problems`)
_UNREAD = "arctl reads no spec from it"


def spec_path_error() -> SpecError | None:
    """The error of a launch (``arctl run``, ``arctl sweep``, their ``--dry-run``) where a ``$ARCTL_SPECS`` entry can
    hold no spec (:func:`spec_path_problems`), else None. The search path skips such an entry, and the spec of the
    name further down it (the project's, the shipped one) was composed and trained in place of the user's, reported
    as theirs, without a word (from a hunt: ``ARCTL_SPECS=.../myspecs/experiments``, or a misspelled folder)."""
    from arctl.compose.errors import SpecError

    problems = spec_path_problems()
    if not problems:
        return None
    return SpecError("; ".join(problems), None,
                     f"{_UNREAD}, and the launch would run the project's or the shipped spec of the name in place of "
                     f"yours: fix ${SPECS_ENV}, then launch again")


def spec_path_notes() -> list[str]:
    """:func:`spec_path_problems` as the notes of a command that reads specs without launching them (``arctl ls``,
    ``show``, ``status``, ``report``): it goes on, without the specs such an entry was meant to add."""
    return [f"{problem} — {_UNREAD}" for problem in spec_path_problems()]


def spec_path_hint() -> str:
    """:func:`spec_path_problems` as the tail of an unknown-spec error's hint ("" when there is none)."""
    problems = spec_path_problems()
    return "; " + "; ".join(problems) if problems else ""


@dataclass(frozen=True)
class SpecFile:
    name: str
    path: Path
    origin: str
    # the files of that name further down the search path, which this one overlays (never read), winner first
    shadows: tuple[SpecFile, ...] = ()

    def source(self) -> dict[str, str]:
        """``{"source": origin, "path": absolute path}``: where the spec comes from, for listings."""
        return {"source": self.origin, "path": str(self.path)}


def _on_path(kind: str, suffix: str = ".yaml") -> dict[str, list[SpecFile]]:
    """name -> every ``<root>/<kind>/<name><suffix>`` on the search path, highest precedence first: the one place
    that walks the search path for specs (the winner is the first; the rest are what it overlays)."""
    out: dict[str, list[SpecFile]] = {}
    for root in spec_roots():
        folder = root.path / kind
        if folder.is_dir():
            for path in sorted(folder.glob(f"*{suffix}")):
                if path.is_file():
                    out.setdefault(path.stem, []).append(SpecFile(path.stem, path, root.origin))
    return out


def _winner(found: list[SpecFile]) -> SpecFile:
    return SpecFile(found[0].name, found[0].path, found[0].origin, tuple(found[1:]))


def spec_files(kind: str, suffix: str = ".yaml") -> dict[str, SpecFile]:
    """name → the winning file of every ``<root>/<kind>/*<suffix>`` on the search path (its ``shadows``: the
    files of that name it overlays)."""
    return {name: _winner(found) for name, found in sorted(_on_path(kind, suffix).items())}


def _listed_file(folder: Path, filename: str) -> bool:
    """Whether ``folder`` lists a file named exactly ``filename``. A probe of ``folder / filename`` itself (``is_file``)
    is case-insensitive on macOS's APFS and on Windows: there ``my-exp`` found ``My-Exp.yaml``, so a laptop ran a
    spec the cluster refuses as unknown, and ``ABLATION-VR`` was told to rename ``ablation-vr.yaml`` (from a hunt).
    The folder's listing has the names as written, as :func:`_on_path` reads them."""
    try:
        with os.scandir(folder) as entries:
            return any(entry.name == filename and entry.is_file() for entry in entries)
    except OSError:  # no such folder, or not a folder
        return False


def find_spec(kind: str, name: str) -> SpecFile | None:
    """The winning ``<kind>/<name>.yaml`` on the search path (its ``shadows``: the ones it overlays), or None. The
    file name must be ``<name>.yaml`` exactly, on every filesystem (:func:`_listed_file`)."""
    found = [SpecFile(name, root.path / kind / f"{name}.yaml", root.origin) for root in spec_roots()
             if _listed_file(root.path / kind, f"{name}.yaml")]
    return _winner(found) if found else None


def overlay_notes(specs: list[tuple[str, str]]) -> list[str]:
    """A note for each spec ``(kind, name)`` (``("experiments", "main-grpo")``) whose winning file overlays
    another of that name further down the search path, naming both: a launch composes the winner only, and
    without this a user's copy in ``$ARCTL_SPECS`` or the project replaced the other without a word (from a hunt:
    two ``$ARCTL_SPECS`` folders with ``experiments/my-lam.yaml``; a project's ``main-grpo.yaml`` under a shipped
    sweep). A file with the same text as the one it overlays (a fresh ``arctl cp``) changes nothing: no note."""
    notes = []
    for kind, name in dict.fromkeys(specs):
        found = find_spec(kind, name)
        if found is None:
            continue
        text = found.path.read_bytes()
        hidden = [f"{s.path} ({s.origin})" for s in found.shadows if s.path.read_bytes() != text]
        if hidden:
            notes.append(f"{kind}/{name}.yaml: {found.path} ({found.origin}) is used; it overlays "
                         f"{', '.join(hidden)}, which {'is' if len(hidden) == 1 else 'are'} not read")
    return notes


def report_file(filename: str) -> Path | None:
    """The winning ``reports/<filename>`` (e.g. ``labels.yaml``, ``paper_tables.csv``), or None."""
    for root in spec_roots():
        path = root.path / "reports" / filename
        if path.is_file():
            return path
    return None


def user_spec_dir(kind: str) -> Path:
    """Where ``arctl cp`` puts a copy: the first ``$ARCTL_SPECS`` directory, else ``./<kind>``. A first
    ``$ARCTL_SPECS`` directory that does not exist is a SpecError (a typo there would have a new spec
    tree made wherever it points, which the search path then also reads)."""
    from arctl.compose.errors import SpecError

    env = [p for p in os.environ.get(SPECS_ENV, "").split(os.pathsep) if p.strip()]
    base = Path(env[0]).expanduser() if env else Path.cwd()
    if env and not base.is_dir():
        raise SpecError(f"${SPECS_ENV} names {base}, which is not a folder", SPECS_ENV,
                        "create it first (mkdir), fix $ARCTL_SPECS, or give the copy's destination (arctl cp NAME DEST)")
    return base / kind


def experiments_dir() -> Path:
    """The highest-precedence experiments folder (where error messages point)."""
    return spec_roots()[0].path / "experiments"


def sweeps_dir() -> Path:
    return spec_roots()[0].path / "sweeps"


def reports_dir() -> Path:
    """The folder of the winning ``reports/`` (figure/table specs are merged over the search path:
    :func:`spec_files`)."""
    for root in spec_roots():
        if (root.path / "reports").is_dir():
            return root.path / "reports"
    return shipped_root() / "reports"


def spec_names(directory: Path) -> list[str]:
    """Names (file stems) of the YAML specs in ``directory``, sorted."""
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.yaml"))


def package_config_dirs() -> list[Path]:
    """The config-group options arctl brings: ``arctl/conf``, then each backend's ``conf_dir`` (its scale
    profiles: ``Backend.conf_dir``, :mod:`arctl.compose.plugins`). They define the groups."""
    from arctl.compose import plugins

    return [CONF_DIR, *plugins.conf_dirs()]


def user_config_dirs() -> list[Path]:
    """The ``<root>/conf`` folders of the spec search path's user roots ($ARCTL_SPECS, the project), first
    first; the shipped root's are the package's. Only their folders named after a group of
    :func:`package_config_dirs` are options (a ``conf/`` of another tool's beside them is left alone)."""
    shipped = shipped_root().resolve()
    return [r.path / USER_CONF for r in spec_roots() if r.path != shipped and (r.path / USER_CONF).is_dir()]


def shadowed_option(group: str, option: str) -> SpecError | None:
    """The error for choosing ``group=option`` where a user's ``conf/<group>/<option>.yaml`` is named like an
    option arctl ships: Hydra reads the shipped file (the package's folders come first) and never the user's,
    so a user who edited a copy would run the shipped one without a word. None where no user file is shadowed.
    For the check of a choice (only a choice is refused): a file of another tool's ``conf/`` that no choice
    names is left alone."""
    from arctl.compose.errors import SpecError

    if not any((d / group / f"{option}.yaml").is_file() for d in package_config_dirs()):
        return None
    shipped = shipped_root().resolve()
    # only where the conf/ is surely arctl's: an $ARCTL_SPECS folder, or a project with arctl's spec folders beside
    # it; a project's conf/ alone may be another tool's (Hydra's conf/cluster/slurm.yaml), whose files a choice of
    # the shipped option must not be refused for (from a review)
    ours = [r.path / USER_CONF for r in spec_roots() if r.path != shipped and (r.path / USER_CONF).is_dir()
            and (r.origin == ORIGIN_ENV or any((r.path / k).is_dir() for k in SPEC_KINDS))]
    for conf in ours:
        path = conf / group / f"{option}.yaml"
        if path.is_file():
            return SpecError(f"arctl ships a {group} option {option!r} too, and reads its own for {group}={option}, "
                             f"never this file", str(path),
                             f"rename it (e.g. to {group}/my-{option}.yaml) and choose it with {group}=my-{option}")
    return None


def config_dirs() -> list[Path]:
    """Where config-group options are found, in Hydra's order (the first file of a name wins): the
    package's (:func:`package_config_dirs`), then the user's (:func:`user_config_dirs`). A user's file named
    like a shipped option is never read (:func:`shadowed_option`) and is no error here."""
    return [*package_config_dirs(), *user_config_dirs()]


def hydra_searchpath() -> str:
    """The ``hydra.searchpath=[...]`` override that puts :func:`config_dirs` after ``arctl/conf`` (Hydra's
    primary config dir) in a compose. Each folder is quoted: a user's folder may hold a space, a comma or a
    quote, which an unquoted list item would split or stop at."""
    def quoted(d: Path) -> str:  # Hydra's quoted string: a quote, and backslashes before one, escaped
        text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, f"file://{d}")
        return "'" + text.replace("'", "\\'") + "'"

    return f"hydra.searchpath=[{','.join(quoted(d) for d in config_dirs()[1:])}]"


def config_groups() -> tuple[str, ...]:
    """The config groups (``algo``, ``cluster``, ``scale``, ...): the folders of :func:`package_config_dirs`
    (a user's ``conf/`` adds options, never groups)."""
    return tuple(sorted({p.name for d in package_config_dirs() for p in d.iterdir()
                         if p.is_dir() and p.name != "__pycache__"}))


def default_option(group: str) -> str | None:
    """The option ``arctl/conf/config.yaml``'s defaults list chooses for ``group`` (``scale`` -> tiny): the one
    home of each group's default."""
    from arctl.config.safe_yaml import load

    for entry in (load((CONF_DIR / "config.yaml").read_text()) or {}).get("defaults") or []:
        if isinstance(entry, dict) and group in entry:
            return str(entry[group])
    return None


def group_options(group: str) -> list[str]:
    """The options of a config group (e.g. ``prior`` -> base, custom, ...; ``scale`` -> the scale
    profiles the backends bring; a user's ``conf/cluster/mysite.yaml`` -> mysite), over :func:`config_dirs`."""
    dirs = config_dirs() if group in config_groups() else package_config_dirs()  # a user's folder makes no group
    return sorted({name for d in dirs for name in spec_names(d / group)})
