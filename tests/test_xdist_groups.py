"""The suite's `xdist_group` marks keep a module's tests on one pytest-xdist worker.

Six modules share one expensive module fixture (a two-node SLURM cluster, the GPU check suite's run,
the rendered figures, the wheel, the claims page, the memory model) and mark themselves with an
``xdist_group`` so that one worker builds it once. pytest 9.2 with pytest-xdist 3.8 drops the group
without a word (pytest-dev/pytest-xdist#1386: xdist still writes a node-id field pytest no longer
reads): each worker then builds the fixture for itself, which cost CI minutes unnoticed
(two two-node clusters, the GPU suite twice, the figures twice). pyproject pins pytest below 9.2;
this test fails on a pair of versions that drops the groups again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# The inner sessions load pytest-xdist alone: the installed plugins pytest would load on its own
# (hypothesis, hydra's, anyio's) have nothing to do with how xdist groups tests, and importing them in
# the session and both workers was ~90% of each run's CPU (8.5 s wall alone against 1.1 s; inside CI's
# nested suite, with both cores shared by a dozen processes, one run passed its 120 s guard).
NO_AUTOLOAD = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}  # no option of an unloaded plugin
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin", "-n", "2",
          "--dist", "loadgroup"]
GUARD_S = 120


def _run(args: list[str], cwd: Path, records: dict[str, Path]) -> subprocess.CompletedProcess:
    """The inner session, ``records`` (variable → file its tests append to) in its environment. One
    that runs past the guard (once in CI, 120 s against ~1-3 s here; a hang of an xdist worker's
    start, pytest-dev/pytest-xdist#110, or a machine that busy) is killed with its workers, its
    records removed, and run once more; a second one fails with what both printed."""
    printed = []
    for _ in range(2):
        proc = subprocess.Popen(PYTEST + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **NO_AUTOLOAD, **{k: str(v) for k, v in records.items()}},
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=GUARD_S)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the session and its workers, none left to write below
            out, err = proc.communicate()
            printed.append((out + err)[-3000:])
            for path in records.values():  # what the killed session recorded goes; the next one records afresh
                path.unlink(missing_ok=True)
        finally:
            if proc.poll() is None:  # an exception here (Ctrl-C, pytest-timeout's signal): nothing left running
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    raise AssertionError(f"the inner pytest ran past {GUARD_S} s twice; it printed:\n" + "\n---\n".join(printed))


MODULE = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("shared")

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")

@pytest.mark.parametrize("i", range(6))
def test_grouped(shared, i):
    with open(os.environ["RAN"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
'''
OTHER = '''
import pytest

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
'''


def test_a_modules_xdist_group_runs_on_one_worker_and_builds_its_fixture_once(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # none of the project's options
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "test_free.py").write_text(OTHER)
    setups, ran = tmp_path / "setups.txt", tmp_path / "ran.txt"
    proc = _run([str(tmp_path)], tmp_path, {"SETUPS": setups, "RAN": ran})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers = ran.read_text().split()
    assert len(workers) == 6 and all(w.startswith("gw") for w in workers), workers  # really on xdist workers
    assert len(set(workers)) == 1, f"the group ran on workers {sorted(set(workers))} (pytest-dev/pytest-xdist#1386)"
    assert setups.read_text().split() == workers[:1]  # the module fixture once


def test_the_unit_queued_behind_the_fresh_machine_test_is_the_last_one(tmp_path):
    """tests/conftest.py's scheduler: a worker holds one unit beyond the test it runs, so whatever is
    queued behind the fresh-machine test (the whole nested suite) waits for it; that is the last unit
    of the order, not the next (verl's CPU loop waited 900 s there and ran alone at the end of CI)."""
    conftest = Path(__file__).with_name("conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(conftest)!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "pytest_xdist_make_scheduler = suite.pytest_xdist_make_scheduler\n")
    record = ("import os, time\n\ndef note(name):\n    with open(os.environ['RAN'], 'a') as f:\n"
              "        f.write(os.environ['PYTEST_XDIST_WORKER'] + ' ' + name + '\\n')\n")
    (tmp_path / "tests" / "test_fresh_machine.py").write_text(
        record + "\ndef test_nested_suite():\n    note('fresh')\n"  # until the other worker ran five others (<= 60 s)
        "    end = time.monotonic() + 60\n    while open(os.environ['RAN']).read().count('other') < 5 and "
        "time.monotonic() < end:\n        time.sleep(0.1)\n")
    (tmp_path / "tests" / "test_other.py").write_text(
        record + "\nimport pytest\n\n@pytest.mark.parametrize('i', range(6))\n"
        "def test_other(i):\n    note(f'other{i}')\n    time.sleep(0.3)\n")
    ran = tmp_path / "ran.txt"
    proc = _run(["tests"], tmp_path, {"RAN": ran})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line.split() for line in ran.read_text().splitlines()]
    fresh_worker = next(w for w, name in lines if name == "fresh")
    assert [name for w, name in lines if w == fresh_worker] == ["fresh", "other5"], lines
    assert sorted(name for w, name in lines if w != fresh_worker) == [f"other{i}" for i in range(5)], lines
