"""`pip install arctl` works anywhere: the wheel, installed non-editable into a fresh virtual
environment, finds the paper's specs from an unrelated directory, and a user's copy overlays them.

The new environment gets this environment's dependencies through a ``.pth`` line (no download, no
torch install); that line does not run this environment's own ``.pth`` files, so the editable
install of the checkout is invisible there: only the wheel's ``arctl`` can be imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "arctl", "experiments", "sweeps", "reports")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]  # one worker: the wheel is built once


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], check=True, timeout=300)
    (wheel,) = dist.glob("arctl-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_deps_of_the_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   timeout=300)
    away = tmp / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ARCTL_SPECS", "ARCTL_HOME", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"arctl": str(venv / "bin" / "arctl"), "python": str(py), "cwd": away, "env": env, "wheel": wheel}


def _arctl(inst: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([inst["arctl"], *args], cwd=cwd or inst["cwd"], env=inst["env"], capture_output=True,
                          text=True, timeout=300)


def test_the_wheel_carries_the_specs(installed):
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    for folder in ("experiments", "sweeps", "reports"):
        shipped = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith(f"arctl/specs/{folder}/"))
        assert shipped == sorted(p.name for p in (ROOT / folder).iterdir() if p.is_file()), folder


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    out = subprocess.run([installed["python"], "-c", "import arctl; print(arctl.__file__)"], cwd=installed["cwd"],
                         env=installed["env"], capture_output=True, text=True, check=True).stdout
    assert str(ROOT) not in out and "site-packages" in out


def test_from_an_unrelated_directory_the_shipped_specs_work(installed):
    ls = _arctl(installed, "ls", "experiments", "--json")
    assert ls.returncode == 0, ls.stderr
    rows = {r["name"]: r for r in json.loads(ls.stdout)}
    assert {"ablation-vr", "main-grpo", "main-ar-uniform"} <= set(rows)
    assert rows["ablation-vr"]["source"] == "shipped" and "site-packages" in rows["ablation-vr"]["path"]
    show = _arctl(installed, "show", "ablation-vr")
    assert show.returncode == 0 and "grpo-vr-decouple" in show.stdout, show.stderr
    dry = _arctl(installed, "run", "ablation-vr", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert len(json.loads(dry.stdout)["runs"]) == 3
    help_ = _arctl(installed, "report", "--help")
    assert help_.returncode == 0 and "--claims" in help_.stdout
    assert not any(installed["cwd"].iterdir())  # nothing written where it ran


def test_a_copied_and_edited_spec_overlays_the_shipped_one(installed, tmp_path):
    project = tmp_path / "myproject"
    project.mkdir()
    cp = _arctl(installed, "cp", "ablation-vr", cwd=project)
    assert cp.returncode == 0, cp.stderr
    mine = project / "experiments" / "ablation-vr.yaml"
    assert mine.is_file()
    again = _arctl(installed, "cp", "ablation-vr", cwd=project)
    assert again.returncode == 2 and again.stderr.startswith("error:") and "--force" in again.stderr
    mine.write_text(mine.read_text().replace("seeds: [0]", "seeds: [0, 7]"))
    rows = {r["name"]: r for r in json.loads(_arctl(installed, "ls", "experiments", "--json", cwd=project).stdout)}
    assert rows["ablation-vr"]["seeds"] == [0, 7] and rows["ablation-vr"]["source"] == "project"
    assert rows["ablation-vr"]["path"] == str(mine) and rows["main-grpo"]["source"] == "shipped"
    dry = _arctl(installed, "run", "ablation-vr", "--dry-run", "--json", cwd=project)
    assert sorted({r["seed"] for r in json.loads(dry.stdout)["runs"]}) == [0, 7]
    forced = _arctl(installed, "cp", "ablation-vr", "--force", cwd=project)
    assert forced.returncode == 0 and "seeds: [0]" in mine.read_text()


def test_the_wheel_carries_the_shipped_warm_start(installed):
    """The tiny scale's default warm-up ships with arctl (arctl/backends/tiny/shipped/<key>/), every file
    of it, and the installed package finds it."""
    import zipfile

    folder = ROOT / "arctl" / "backends" / "tiny" / "shipped"
    want = sorted(p.relative_to(ROOT).as_posix() for p in folder.rglob("*") if p.is_file())
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert want and sorted(n for n in names if n.startswith("arctl/backends/tiny/shipped/")) == want
    key = next(p.name for p in folder.iterdir() if p.is_dir())
    found = subprocess.run([installed["python"], "-c", "import sys; from arctl.backends.tiny.warmup import shipped_dir; "
                            "print(shipped_dir(sys.argv[1]))", key], cwd=installed["cwd"], env=installed["env"],
                           capture_output=True, text=True, timeout=300)
    assert found.returncode == 0 and "site-packages" in found.stdout and found.stdout.strip().endswith(key), found.stderr
