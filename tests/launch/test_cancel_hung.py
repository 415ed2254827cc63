"""`arctl cancel` of a local job whose step hangs. The job heeds the cancel's TERM only at the end of a step, and a
step that hangs (a blocked W&B log, file system or collective) never gets there. From a hunt: the run showed
"cancelling: saving its checkpoint" for ever, a second `arctl cancel` (and `--force`) changed nothing, and only a
`kill -KILL` by hand ended it. Now a run cancelled again once it has been cancelling for a while (or cancelled with
``--now``) is stopped at once: its job's processes (the submitit controller, the training and what it started) are
killed, and the run is CANCELLED, resumable from its last saved checkpoint.

The stub backend below saves step 2, starts a child process, then hangs without ever looking at its stop event;
the jobs import it from this file (``ARCTL_TEST_BACKEND=test_cancel_hung:HANGS``, this folder on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.backends.base import BackendDefaults
from arctl.launch.control import KILL_AFTER_S, STOPPED_AT_ONCE
from arctl.launch.refresh import CANCELLING
from arctl.launch.registry import Registry
from arctl.launch.status_file import read_status
from arctl.launch.workspace import workdir_arg

SAVED = 2  # the step of the checkpoint the stub saves before it hangs
HANGING = "hanging.json"  # the stub's pids, written once it hangs
RELEASE = "release"  # a file that ends the stub's hang (a test's cleanup); else it ends after HANG_MAX_S
HANG_MAX_S = 120.0


class Hangs(BackendDefaults):
    """A job whose step hangs after its checkpoint of step :data:`SAVED`: it never looks at ``stop_event``."""

    name = "hangs"

    def train(self, config, run_dir, stop_event=None):
        run_dir = Path(run_dir)
        (run_dir / "checkpoints").mkdir(exist_ok=True)
        (run_dir / "checkpoints" / "state.json").write_text(json.dumps({"step": SAVED}))
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({HANG_MAX_S})"])  # a data loader
        (run_dir / HANGING).write_text(json.dumps({"pid": os.getpid(), "child": child.pid}))
        deadline = time.monotonic() + HANG_MAX_S
        while time.monotonic() < deadline and not (run_dir / RELEASE).exists():
            time.sleep(0.1)
        child.kill()
        return "preempted"

    def resume_step(self, config, run_dir):
        ckpt = Path(run_dir) / "checkpoints" / "state.json"
        return json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0


HANGS = Hangs()


@pytest.fixture
def hung(specs, tmp_path, cli, waiter, monkeypatch):
    """A local run (arm a of ``lt``) whose job hangs in its step: (workspace, run folder, the job's pids)."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", f"{Path(__file__).stem}:HANGS")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    ws = tmp_path / "ws"
    doc = json.loads(cli("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws), "--no-wait",
                         "--json", check=True).stdout)
    run_dir = Path(doc["submitted"][0]["run_dir"])
    try:
        waiter(lambda: (run_dir / HANGING).exists() and read_status(run_dir).get("state") == "running", 60,
               "the job to hang in its step")
        with Registry(ws / "registry.sqlite") as reg:
            controller = int(waiter(lambda: (reg.get(run_dir.name).job_id or "").isdigit()
                                    and reg.get(run_dir.name).job_id, 30, "the job's pid in the registry"))
        yield ws, run_dir, [controller, *json.loads((run_dir / HANGING).read_text()).values()]
    finally:
        (run_dir / RELEASE).touch()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _row(ws: Path, run_id: str):
    with Registry(ws / "registry.sqlite") as reg:
        return reg.get(run_id)


def _stopped_at_once(ws: Path, run_dir: Path, pids: list[int], out) -> None:
    run_id = run_dir.name
    assert out.returncode == 0, out.stdout + out.stderr
    job = pids[0]
    assert (f"{run_id}: {STOPPED_AT_ONCE} (job {job} killed): its checkpoint was not saved; "
            f"`arctl resume {run_id}{workdir_arg(ws)}` resumes from step {SAVED}") in " ".join(out.stdout.split())
    assert "1 run(s) cancelled" in out.stdout and "save a checkpoint first" not in out.stdout
    assert not any(_alive(pid) for pid in pids)  # the controller, the training, and the training's child
    row = _row(ws, run_id)
    assert (row.state, row.phase) == ("CANCELLED", None)
    assert row.error.startswith("stopped before its checkpoint was saved")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the job's processes in /proc")
def test_a_second_cancel_stops_a_hung_job_at_once(hung, cli):
    ws, run_dir, pids = hung
    run_id, again = run_dir.name, f"`arctl cancel {run_dir.name}{workdir_arg(ws)}` again"
    first = cli("cancel", run_id, "--workdir", str(ws))
    assert first.returncode == 0 and ("1 save a checkpoint first (CANCELLED once saved; if that takes long, "
                                      f"{again} stops it at once, unsaved)") in " ".join(first.stdout.split())
    asked = _row(ws, run_id).cancel_requested

    soon = cli("cancel", run_id, "--workdir", str(ws))  # within the grace (a cancel run twice by a script): it saves on
    said = " ".join(soon.stdout.split())
    assert soon.returncode == 0 and f"{again} after {KILL_AFTER_S:.0f} s, or with --now, stops it at once" in said
    assert all(_alive(pid) for pid in pids)
    row = _row(ws, run_id)
    assert (row.state, row.phase, row.cancel_requested) == ("RUNNING", CANCELLING, asked)  # the first request kept

    with Registry(ws / "registry.sqlite") as reg:  # the first request, made KILL_AFTER_S ago
        reg.update(run_id, cancel_requested=asked - KILL_AFTER_S)
    _stopped_at_once(ws, run_dir, pids, cli("cancel", run_id, "--workdir", str(ws)))
    shown = json.loads(cli("status", run_id, "--workdir", str(ws), "--json", check=True).stdout)
    assert [(r["run_id"], r["state"]) for r in shown] == [(run_id, "CANCELLED")]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the job's processes in /proc")
def test_cancel_now_stops_a_hung_job_without_waiting_for_its_checkpoint(hung, cli):
    ws, run_dir, pids = hung
    _stopped_at_once(ws, run_dir, pids, cli("cancel", run_dir.name, "--now", "--workdir", str(ws)))
