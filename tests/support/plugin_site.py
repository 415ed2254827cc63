"""Packages from outside ``arctl/``, installed as ``pip install`` leaves them (tests/plugins): a site
directory holding the packages of ``tests/plugins/*/`` and a ``.dist-info`` with their entry points
(the fake backend under ``arctl.backends``, the fake compared method under ``arctl.methods``);
:func:`run_arctl` runs ``arctl`` in a subprocess with that directory on ``PYTHONPATH``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
PACKAGES = (PLUGINS / "fake_backend" / "arctl_fake_backend", PLUGINS / "fake_method" / "arctl_fake_method")
ENTRY_POINTS = """[arctl.backends]
fake = arctl_fake_backend:BACKEND

[arctl.methods]
halve = arctl_fake_method:METHOD
"""


def make_site(root: Path) -> Path:
    """``root`` holding the fake packages and their dist-info; returns ``root``."""
    for package in PACKAGES:
        shutil.copytree(package, root / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    info = root / "arctl_test_plugins-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arctl-test-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


def run_arctl(site: Path | None, *args: str, cwd: Path, env: dict | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess:
    """``arctl ARGS`` in a subprocess; with ``site`` on PYTHONPATH (None: without the plugins)."""
    full = {**os.environ, "WANDB_MODE": "offline", **(env or {})}
    if site is not None:
        full["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "arctl.cli.main", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=timeout)
