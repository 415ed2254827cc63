"""The suite on a fresh machine: SLURM never installed, and ``pip install -e '.[test]'`` without verl.

CI runs on a machine that keeps what earlier runs installed (SLURM's packages among them), so a test
that leans on an installed ``srun`` passes there and fails for a new user. These tests run pytest
again inside a private mount namespace where those programs and packages are absent
(tests/support/fresh_machine.py) and fail if any non-slow test needs them: a test must shim every
SLURM program the code under test looks up (tests/support/slurm_shims.py) or depend on the
``slurm_cluster`` fixture, and a test that needs the verl extra must skip with its reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fresh_machine  # tests/support/fresh_machine.py
import pytest
import slurm_shims  # tests/support/slurm_shims.py
from extras import NO_VERL  # tests/support/extras.py

# each runs a part of the suite again: more than one test's 600 s (the no-verl run took 263 s on
# 2026-11-25 and 600 s on 2026-11-26 on the same 2-core machine)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "support" / "fresh_machine.py"


@pytest.fixture
def fresh(tmp_path):
    """``fresh(*hide, cmd=[...])``: run ``cmd`` in the project root with ``hide`` absent."""
    why = fresh_machine.available()
    if why:
        pytest.skip(f"cannot hide programs here: {why}")

    def run(*hide: str, cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
        scratch = tmp_path / f"scratch{len(list(tmp_path.glob('scratch*')))}"
        scratch.mkdir()
        return subprocess.run([sys.executable, str(RUNNER), "--scratch", str(scratch), *hide, "--", *cmd],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    return run


def _pytest(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "--basetemp",
            str(tmp_path / "nested"), "-m", "not slow", *args]


def test_the_launch_and_cli_tests_pass_where_slurm_was_never_installed(fresh, tmp_path):
    seen = fresh("--slurm", cmd=[sys.executable, "-c", "import shutil, sys; print([p for p in sys.argv[1:] "
                                 "if shutil.which(p)])", *slurm_shims.ALL_PROGRAMS])
    assert seen.returncode == 0 and seen.stdout.strip() == "[]", seen.stdout + seen.stderr  # really hidden

    proc = fresh("--slurm", cmd=_pytest(tmp_path, "tests/launch", "tests/cli"))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]


def test_without_the_verl_extra_every_test_passes_or_skips_with_its_reason(fresh, tmp_path):
    gone = fresh("--slurm", "--without-extra", "verl", cmd=[sys.executable, "-c", "import verl"])
    assert gone.returncode != 0 and "No module named 'verl'" in gone.stderr, gone.stderr  # really hidden

    proc = fresh("--slurm", "--without-extra", "verl", cmd=_pytest(tmp_path, "tests"))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED") and "tests/verl/" in line]
    assert skipped and all(line.endswith(NO_VERL) for line in skipped), "\n".join(skipped)
