"""Fixtures of the launch tests: a spec directory with a 3-arm experiment, the test-only backend,
and (session scope) a real single-node SLURM with accounting started by tests/launch/slurm/setup_slurm.sh.

The SLURM fixture reuses a SLURM that is already up (``scontrol ping``), else starts one under a
private state dir and stops exactly the daemons it started (teardown by recorded PID). It skips
only when SLURM cannot be installed here (not root, no apt-get, or the packages cannot be
fetched), with the reason; any other start-up failure fails the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import debian  # tests/support/debian.py
import fresh_machine  # tests/support/fresh_machine.py
import pytest
import slurm_shims  # tests/support/slurm_shims.py

HERE = Path(__file__).resolve().parent
SLURM_DIR = HERE / "slurm"

EXPERIMENT = textwrap.dedent(
    """\
    description: launch-layer test experiment (3 arms)
    figure: ablation_vr
    seeds: [0]
    overrides: [trainer.total_steps=6, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      a: [algo=grpo, prior=base]
      b: [algo=grpo-vr, prior=base]
      c: [algo=anytime, prior=uniform]
    """
)
SWEEP = "description: three cells\nexperiments: [lt]\nseeds: [0]\n"


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    """ARCTL_SPECS with experiment ``lt`` (arms a, b, c) and sweep ``lt3``; the counting backend."""
    root = tmp_path / "specs"
    (root / "experiments").mkdir(parents=True)
    (root / "sweeps").mkdir()
    (root / "experiments" / "lt.yaml").write_text(EXPERIMENT)
    (root / "sweeps" / "lt3.yaml").write_text(SWEEP)
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.05")
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    return root


def run_cli(*args: str, env: dict | None = None, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
    """``arctl ARGS`` in a subprocess (the real console script path)."""
    proc = subprocess.run(
        [sys.executable, "-m", "arctl.cli.main", *args], capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"arctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def wait_until(predicate, timeout: float, what: str, poll: float = 0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def status_records(ws: Path, *target: str) -> list[dict]:
    """``arctl status [TARGET] --workdir WS --json`` run in this process (``arctl.cli.main.main``, the
    console script's entry: the same refresh from the jobs and one ``sacct``), its JSON records.

    For the polls of a test that waits on a job: a subprocess per poll spends ~0.4 CPU-s importing
    arctl before the status itself (measured with process accounting: 90 polls, 34 of the 250 CPU-s
    of verl's CPU-loop test), a core's third at one poll every 0.5 s, taken from the jobs it waits on.
    The tests still run ``arctl status`` as a subprocess where its output is what they check."""
    import io
    import json
    from contextlib import redirect_stderr, redirect_stdout

    from arctl.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["arctl", "status", *target, "--workdir", str(ws), "--json"]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code or 0
    finally:
        sys.argv = saved
    if code:
        raise AssertionError(f"arctl status {' '.join(target)} --workdir {ws} --json -> {code}\n{err.getvalue()}")
    return json.loads(out.getvalue())


@pytest.fixture
def cli():
    """``cli("run", "lt", ...)`` runs ``arctl`` in a subprocess."""
    return run_cli


@pytest.fixture
def statuses():
    """``statuses(ws, [TARGET])``: the run records of ``arctl status --json``, in-process
    (:func:`status_records`), for polling."""
    return status_records


@pytest.fixture
def waiter():
    """``waiter(predicate, timeout, what)`` polls until ``predicate()`` is truthy."""
    return wait_until


def _slurm_up() -> bool:
    if not shutil.which("scontrol"):
        return False
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10).stdout
    except (subprocess.SubprocessError, OSError):
        return False
    return "UP" in out


def _cannot_install_reason() -> str | None:
    if "slurm" in os.environ.get(fresh_machine.INSIDE, "").split(","):
        return "SLURM's programs are hidden here (tests/support/fresh_machine.py)"
    if shutil.which("slurmctld") and shutil.which("sbatch"):
        return None
    reason = debian.cannot_install()
    return f"SLURM is not installed and {reason}" if reason else None


SLURM_START = Path("/tmp/arctl-slurm-test.start")  # flock'ed: one session at a time finds the test SLURM up or starts it
SLURM_USERS = Path("/tmp/arctl-slurm-test.users")  # flock'ed shared by every session while it uses it
LAST_USER_WAIT_S = 1800  # how long the session that started SLURM waits for the others to end before it stops it


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running SLURM with accounting (sacct) on localhost for the whole session.

    Each pytest-xdist worker runs its own session, so several may want SLURM at once: one at a time
    (:data:`SLURM_START`) finds it up or starts it; each then holds :data:`SLURM_USERS` shared while
    its tests run, and the session that started SLURM stops it only once it holds that lock alone
    (every other session that used it has ended). Before, two workers could start two SLURMs on one
    port, and the first to end cancelled the other's jobs."""
    import fcntl

    from arctl.config.files import open_lock  # read-only: a lock file another user made in /tmp still opens

    with open_lock(SLURM_START) as start, open_lock(SLURM_USERS) as users:
        fcntl.flock(start, fcntl.LOCK_EX)
        try:
            existing = _slurm_up()
            if not existing:
                base = _start_slurm()
            fcntl.flock(users, fcntl.LOCK_SH)
        finally:
            fcntl.flock(start, fcntl.LOCK_UN)
        if existing:
            yield "existing"
            return
        try:
            yield str(base)
        finally:
            deadline = time.monotonic() + LAST_USER_WAIT_S
            while True:  # the last user (no session holds SLURM_USERS but this one), no other starting
                fcntl.flock(start, fcntl.LOCK_EX)
                try:  # (Linux: a failed shared-to-exclusive upgrade drops the shared lock; the next try asks again)
                    fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    fcntl.flock(start, fcntl.LOCK_UN)
                    time.sleep(0.5)
            env = {**os.environ, "SLURM_BASE": str(base)}
            subprocess.run(["bash", str(SLURM_DIR / "teardown_slurm.sh")], env=env, capture_output=True, timeout=180)
            if not (base / "pids" / "slurmctld.pid").exists():  # every daemon stopped: drop its state
                shutil.rmtree(base, ignore_errors=True)


def _start_slurm() -> Path:
    """Start SLURM (tests/launch/slurm/setup_slurm.sh) under a private state dir; skip where it cannot
    be installed, fail where it does not start."""
    reason = _cannot_install_reason()
    if reason:
        pytest.skip(f"SLURM cannot start here: {reason}")
    base = Path(f"/tmp/arctl-slurm-test-{os.getpid()}")
    env = {**os.environ, "SLURM_BASE": str(base), "SLURM_NODE_CPUS": "8"}
    had_packages = bool(shutil.which("slurmctld"))
    proc = subprocess.run(["bash", str(SLURM_DIR / "setup_slurm.sh")], capture_output=True, text=True,
                          env=env, timeout=600)
    if proc.returncode != 0:
        subprocess.run(["bash", str(SLURM_DIR / "teardown_slurm.sh")], env=env, capture_output=True, timeout=120)
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        if not had_packages and not shutil.which("slurmctld"):
            pytest.skip(f"SLURM cannot start here: its packages could not be installed ({tail})")
        pytest.fail(f"setup_slurm.sh failed: {tail}")
    return base


@pytest.fixture(autouse=True)
def _max_array_size_asked_afresh():
    """The site's MaxArraySize is cached per process (one ``scontrol`` call): forgotten around every
    test, so a test's shimmed ``scontrol`` (or the real SLURM's) is what the code under test asks."""
    from arctl.launch.executors import site_max_array_size

    site_max_array_size.cache_clear()
    yield
    site_max_array_size.cache_clear()


@pytest.fixture
def refusing_sbatch(tmp_path, monkeypatch):
    """An sbatch that refuses every job as a site would ("invalid partition specified: nosuch");
    MaxArraySize is 1001."""

    return slurm_shims.use(tmp_path / "bin", monkeypatch,
                           sbatch='echo "sbatch: error: invalid partition specified: nosuch" >&2; exit 1\n',
                           scontrol="echo 'MaxArraySize            = 1001'\n", srun="exit 0\n")
