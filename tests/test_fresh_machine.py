"""The non-slow suite on a fresh machine: SLURM never installed, and ``pip install -e '.[test]'`` without verl.

CI runs on a machine that keeps what earlier runs installed (SLURM's packages among them), so a test
that leans on an installed ``srun`` passes there and fails for a new user. This test runs the non-slow
suite inside a private mount namespace where those programs and packages are absent
(tests/support/fresh_machine.py): a test must shim every SLURM program the code under test looks up
(tests/support/slurm_shims.py) or depend on the ``slurm_cluster`` fixture, and a test that needs the
verl extra must skip with its reason; the tests that skipped for want of verl then run with verl
present, SLURM still hidden. This is where the whole suite's non-slow tests run (tests/conftest.py
deselects them from the session that selects this test), so each runs once, on a fresh machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import fresh_machine  # tests/support/fresh_machine.py
import pytest
import slurm_shims  # tests/support/slurm_shims.py
from extras import NO_VERL  # tests/support/extras.py

# it runs the non-slow suite (1,250 tests, 548 s on two workers alone on 2 cores, 2026-11-27): more
# than one test's 600 s
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "support" / "fresh_machine.py"


@pytest.fixture
def fresh(tmp_path):
    """``fresh(*hide, cmd=[...])``: run ``cmd`` in the project root with ``hide`` absent."""
    why = fresh_machine.available()
    if why:
        pytest.skip(f"cannot hide programs here: {why}")

    def run(*hide: str, cmd: list[str], timeout: float = 2000) -> subprocess.CompletedProcess:
        scratch = tmp_path / f"scratch{len(list(tmp_path.glob('scratch*')))}"
        scratch.mkdir()
        return subprocess.run([sys.executable, str(RUNNER), "--scratch", str(scratch), *hide, "--", *cmd],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    return run


def _pytest(tmp_path: Path, name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "-n", "auto", "--basetemp",
            str(tmp_path / name), "--junitxml", str(tmp_path / f"{name}.xml"), "-m", "not slow", *args]


def _tail(proc: subprocess.CompletedProcess) -> str:
    """What a failed nested run said: its summary of failures, errors and skips, and stderr's end."""
    out = proc.stdout
    summary = out.find("short test summary info")
    start = out.rfind("\n", 0, summary) + 1  # the summary's banner line, whole (0 when it is the first)
    return (out[start:] if summary >= 0 else out[-6000:])[-12000:] + proc.stderr[-2000:]


def _skipped(junit: Path) -> dict[str, str]:
    """``{"path[::name]": reason}`` of every skipped test, or module skipped whole at collection,
    in a junit-xml report."""
    out = {}

    def selectable(name: str) -> str:  # a test in an `xdist_group` is reported as "test_x[...]@group"
        return name[: name.rfind("@")] if name.rfind("@") > name.rfind("]") else name

    for case in ElementTree.parse(junit).iter("testcase"):
        skip = case.find("skipped")
        if skip is None:
            continue
        if case.get("classname"):  # a test: classname "tests.x.test_y", name "test_z[...]"
            out[f"{case.get('classname').replace('.', '/')}.py::{selectable(case.get('name'))}"] = skip.get("message", "")
        else:  # a module skipped at collection: name "tests.x.test_y", the reason in the text
            out[f"{case.get('name').replace('.', '/')}.py"] = skip.text or ""
    return out


def test_where_slurm_and_the_verl_extra_were_never_installed_every_test_passes_or_skips_with_its_reason(fresh, tmp_path):
    seen = fresh("--slurm", cmd=[sys.executable, "-c", "import shutil, sys; print([p for p in sys.argv[1:] "
                                 "if shutil.which(p)])", *slurm_shims.ALL_PROGRAMS])
    assert seen.returncode == 0 and seen.stdout.strip() == "[]", seen.stdout + seen.stderr  # really hidden
    gone = fresh("--slurm", "--without-extra", "verl", cmd=[sys.executable, "-c", "import verl"])
    assert gone.returncode != 0 and "No module named 'verl'" in gone.stderr, gone.stderr  # really hidden

    # the whole non-slow suite, as after `pip install -e '.[test]'` on a machine without SLURM
    proc = fresh("--slurm", "--without-extra", "verl", cmd=_pytest(tmp_path, "bare", "tests"))
    assert proc.returncode == 0, _tail(proc)
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED") and "tests/verl/" in line]
    assert skipped and all(line.endswith(NO_VERL) for line in skipped), "\n".join(skipped)
    ran = proc.stdout.splitlines()[-1]
    assert " passed" in ran, proc.stdout[-2000:]

    # every test that skipped for want of verl, again with verl and still without SLURM (a verl code
    # path must not look up a SLURM program either): the non-slow tests of tests/verl/ and the others
    # that need the extra run here, and only here, in the whole suite
    junit = _skipped(tmp_path / "bare.xml")
    assert junit and all(junit.values()), "the junit report lists no skipped test, or one without its reason"
    again = sorted(t for t, reason in junit.items() if NO_VERL in reason)
    assert any(t.startswith("tests/verl/") for t in again), again
    proc = fresh("--slurm", cmd=_pytest(tmp_path, "with-verl", *again))
    assert proc.returncode == 0, _tail(proc)
    assert NO_VERL not in proc.stdout, _tail(proc)  # verl was there: none of them skipped for its want
