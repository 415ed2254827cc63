"""A spec is found by its exact file name on every filesystem. From a hunt on a Mac: macOS's APFS (and Windows) finds
``experiments/My-Exp.yaml`` for a probe of ``my-exp.yaml``, so ``arctl run my-exp`` ran there a spec that Linux (the
cluster) refuses as unknown, and ``arctl run ABLATION-VR`` was told to rename ``ablation-vr.yaml``. The tests make
this machine's filesystem case-insensitive for the path probes Python offers (``Path.is_file``, ``os.path.isfile``
...); a folder's listing still has the names as written, as on APFS."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_errors import error_line  # tests/support/cli_errors.py

from arctl.compose.paths import ORIGIN_SHIPPED, find_spec

SPEC = "seeds: [0]\narms:\n  a: [algo=grpo]\n"
_exists, _isdir = os.path.exists, os.path.isdir  # the real probes, before a test patches them


def _case_insensitive(path: Path) -> Path:
    """``path`` as a case-insensitive filesystem finds it: its last part matched in its folder in any case."""
    if _exists(path) or not _isdir(path.parent):
        return path
    return next((path.parent / n for n in os.listdir(path.parent) if n.lower() == path.name.lower()), path)


@pytest.fixture
def apfs(monkeypatch):
    """Path probes that ignore the case of a file's name, as on macOS's default filesystem."""
    is_file, exists, isfile, pexists = Path.is_file, Path.exists, os.path.isfile, os.path.exists

    def probe(real):
        return lambda path, *a, **k: real(_case_insensitive(Path(path)), *a, **k)

    monkeypatch.setattr(Path, "is_file", probe(is_file))
    monkeypatch.setattr(Path, "exists", lambda self, *a, **k: exists(_case_insensitive(self), *a, **k))
    monkeypatch.setattr(os.path, "isfile", probe(isfile))
    monkeypatch.setattr(os.path, "exists", probe(pexists))


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path))
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "My-Exp.yaml").write_text(SPEC)
    return tmp_path


def test_the_simulation_is_case_insensitive(specs, apfs):
    """The fixture does what APFS does (else the tests below would pass on any lookup)."""
    assert (specs / "experiments" / "my-exp.yaml").is_file() and os.path.isfile(specs / "experiments" / "MY-EXP.yaml")
    assert "my-exp.yaml" not in os.listdir(specs / "experiments")


@pytest.mark.parametrize("fs", ["linux", "apfs"])
def test_a_name_in_another_case_than_its_file_is_unknown_on_every_filesystem(specs, fs, request):
    if fs == "apfs":
        request.getfixturevalue("apfs")
    assert find_spec("experiments", "my-exp") is None
    work = specs / "ws"
    for args in (["run", "my-exp", "--dry-run"], ["run", "my-exp"], ["show", "my-exp"]):
        line = error_line(*args, *(["--workdir", str(work)] if args[0] == "run" else []))
        assert line.startswith("error: unknown experiment 'my-exp' — did you mean 'My-Exp'?"), line
    assert not work.exists()


@pytest.mark.parametrize("fs", ["linux", "apfs"])
def test_a_shipped_name_in_capitals_is_not_a_name_never_a_file_to_rename(specs, fs, request):
    if fs == "apfs":
        request.getfixturevalue("apfs")
    line = error_line("run", "ABLATION-VR", "--dry-run", "--workdir", str(specs / "ws"))
    assert line.startswith("error: experiment name 'ABLATION-VR' is not a name"), line
    assert "rename" not in line and "ablation-vr.yaml" not in line.lower(), line


@pytest.mark.parametrize("fs", ["linux", "apfs"])
def test_the_exact_file_name_is_still_found_and_a_file_in_another_case_overlays_nothing(specs, fs, request):
    if fs == "apfs":
        request.getfixturevalue("apfs")
    (specs / "experiments" / "Ablation-VR.yaml").write_text(SPEC)
    found = find_spec("experiments", "My-Exp")
    assert found is not None and found.path == specs / "experiments" / "My-Exp.yaml"
    line = error_line("run", "My-Exp", "--dry-run", "--workdir", str(specs / "ws"))
    assert "its file name 'My-Exp' is not a valid experiment name" in line and "rename it" in line, line
    shipped = find_spec("experiments", "ablation-vr")  # the project's Ablation-VR.yaml is another name
    assert shipped is not None and shipped.origin == ORIGIN_SHIPPED and shipped.shadows == (), shipped
