"""Where specs live: the package's config groups, and the experiment, sweep and report specs.

Specs are found on a search path of *spec roots*, each a directory that may hold ``experiments/``,
``sweeps/`` and ``reports/``; the first root that has a name wins:

1. ``$ARCTL_SPECS`` (one or more directories, separated by ``os.pathsep``);
2. the current project: the current directory, when it has any of those folders;
3. the specs shipped with arctl: ``arctl/specs/`` inside an installed wheel, or the repository's
   top-level folders in a source checkout (the source the wheel's copy is built from).

A user spec with the same name as a shipped one overlays it; ``arctl ls`` shows where each comes
from, and ``arctl cp NAME`` copies a shipped spec into the project to edit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "specs"  # filled by the wheel build (setup.py)
SPEC_KINDS = ("experiments", "sweeps", "reports")
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
    if any((cwd / k).is_dir() for k in SPEC_KINDS):
        roots.append(SpecRoot(cwd, ORIGIN_PROJECT))
    roots.append(SpecRoot(shipped_root().resolve(), ORIGIN_SHIPPED))
    seen, out = set(), []
    for r in roots:
        if r.path not in seen:
            seen.add(r.path)
            out.append(r)
    return out


@dataclass(frozen=True)
class SpecFile:
    name: str
    path: Path
    origin: str

    def source(self) -> dict[str, str]:
        """``{"source": origin, "path": absolute path}``: where the spec comes from, for listings."""
        return {"source": self.origin, "path": str(self.path)}


def spec_files(kind: str, suffix: str = ".yaml") -> dict[str, SpecFile]:
    """name → the winning file of every ``<root>/<kind>/*<suffix>`` on the search path."""
    out: dict[str, SpecFile] = {}
    for root in reversed(spec_roots()):  # lowest precedence first: later roots overwrite
        folder = root.path / kind
        if folder.is_dir():
            for path in sorted(folder.glob(f"*{suffix}")):
                if path.is_file():
                    out[path.stem] = SpecFile(path.stem, path, root.origin)
    return dict(sorted(out.items()))


def find_spec(kind: str, name: str) -> SpecFile | None:
    """The winning ``<kind>/<name>.yaml`` on the search path, or None."""
    for root in spec_roots():
        path = root.path / kind / f"{name}.yaml"
        if path.is_file():
            return SpecFile(name, path, root.origin)
    return None


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


def config_dirs() -> list[Path]:
    """Where config-group options are found: ``arctl/conf``, then each backend's ``conf_dir`` (its
    scale profiles: ``Backend.conf_dir``, :mod:`arctl.compose.plugins`)."""
    from arctl.compose import plugins

    return [CONF_DIR, *plugins.conf_dirs()]


def config_groups() -> tuple[str, ...]:
    """The config groups (``algo``, ``cluster``, ``scale``, ...): the folders of :func:`config_dirs`."""
    return tuple(sorted({p.name for d in config_dirs() for p in d.iterdir() if p.is_dir() and p.name != "__pycache__"}))


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
    profiles the backends bring), over :func:`config_dirs`."""
    return sorted({name for d in config_dirs() for name in spec_names(d / group)})
