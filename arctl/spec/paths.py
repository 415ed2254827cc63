"""Where specs live: the package's config groups and the project's experiments/ and sweeps/ dirs.

Experiment and sweep specs are looked up in ``$ARCTL_SPECS`` (a directory holding
``experiments/`` and ``sweeps/``), else the current directory if it has an ``experiments/`` dir,
else the arctl checkout the package was installed from.
"""

from __future__ import annotations

import os
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def specs_root() -> Path:
    env = os.environ.get("ARCTL_SPECS")
    if env:
        return Path(env).expanduser().resolve()
    cwd = Path.cwd()
    if (cwd / "experiments").is_dir():
        return cwd
    return PROJECT_ROOT


def experiments_dir() -> Path:
    return specs_root() / "experiments"


def sweeps_dir() -> Path:
    return specs_root() / "sweeps"


def reports_dir() -> Path:
    return specs_root() / "reports"


def spec_names(directory: Path) -> list[str]:
    """Names (file stems) of the YAML specs in ``directory``, sorted."""
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.yaml"))


def group_options(group: str) -> list[str]:
    """The options of a config group under arctl/conf (e.g. ``prior`` -> base, custom, ...)."""
    return spec_names(CONF_DIR / group)
