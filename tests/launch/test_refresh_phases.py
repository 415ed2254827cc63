"""What a refresh shows of a SLURM job that is stopping, being cancelled, or requeued and starting again.

From the third mutation hunt of the launch layer: the cancel tests read the phase ``arctl cancel`` wrote only right
after it wrote it, never after a refresh, so a refresh that dropped "stopping/cancelling: saving its checkpoint"
(``or`` -> ``and``) passed every test; and no test had SLURM run a job whose last attempt said "preempted" (a
requeued job starting again: PENDING until its new attempt reports, not RUNNING)."""

from __future__ import annotations

import json
import time

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.refresh import CANCELLING, KILLED, STOPPING, merge_state, refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace


def _running_jobs(tmp_path, monkeypatch, reported: dict[str, str], age_s: float = 5.0) -> Workspace:
    """One run per entry of ``reported`` (run id: the state its status.json says, written ``age_s`` ago), RUNNING
    as SLURM job 7_<i>, which sacct and squeue say runs; scancel succeeds."""
    ids = list(reported)
    rows = "".join(f"7_{i}|RUNNING\\n" for i in range(len(ids)))
    queue = "".join(f"7_{i}|RUNNING|None\\n" for i in range(len(ids)))
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"printf 'JobID|State\\n{rows}'\n",
                    squeue=f"printf '{queue}'\n", scancel="exit 0\n")
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=rid, experiment="e", arm="a", seed=i) for i, rid in enumerate(ids)], new_claim_token())
        reg.update_many((rid, {"state": states.RUNNING, "executor": "slurm", "job_id": f"7_{i}", "claim": None,
                               "before_claim": None, "submitted_at": time.time() - 3600}) for i, rid in enumerate(ids))
    then = time.time() - age_s
    for rid, state in reported.items():
        ws.run_dir(rid).mkdir(parents=True)
        write_status(ws.run_dir(rid), state=state, started_at=time.time() - 1800)
        path = ws.run_dir(rid) / "status.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": then}))
    return ws


def _refreshed(ws: Workspace) -> dict[str, tuple[str, str | None]]:
    """One refresh (``arctl status``), in a registry of its own: what it shows of each run (state, phase)."""
    with Registry(ws.registry_path) as reg:
        shown = {r.run_id: (r.state, r.phase) for r in refresh(reg, ws)}
    with Registry(ws.registry_path) as again:  # what it showed is what it kept (`arctl status --no-refresh`)
        assert {r.run_id: (r.state, r.phase) for r in again.list()} == shown
    return shown


def test_a_job_saving_its_stop_checkpoint_shows_so_after_a_refresh(tmp_path, monkeypatch):
    ws = _running_jobs(tmp_path, monkeypatch, {"saving": "stopping", "training": "running"})
    assert _refreshed(ws) == {"saving": (states.RUNNING, STOPPING), "training": (states.RUNNING, None)}
    assert STOPPING == "stopping: saving its checkpoint"


@pytest.mark.parametrize(("now", "phase"), [(False, CANCELLING), (True, KILLED)])
def test_a_cancelled_job_keeps_its_phase_through_the_refreshes_until_slurm_says_it_ended(tmp_path, monkeypatch,
                                                                                         now, phase):
    ws = _running_jobs(tmp_path, monkeypatch, {"cancelled": "running", "training": "running"})
    with Registry(ws.registry_path) as reg:
        cancel_runs(reg, ws, [reg.get("cancelled")], now=now)
        assert reg.get("cancelled").phase == phase
    for _ in range(2):
        assert _refreshed(ws) == {"cancelled": (states.RUNNING, phase), "training": (states.RUNNING, None)}
    assert (CANCELLING, KILLED) == ("cancelling: saving its checkpoint", "cancelling: killed, its checkpoint not saved")


def test_a_requeued_job_slurm_starts_again_is_pending_until_its_new_attempt_reports(tmp_path, monkeypatch):
    """Its status.json still says its last attempt's "preempted" (or "requeued") while SLURM already runs it."""
    ws = _running_jobs(tmp_path, monkeypatch, {"preempted": "preempted", "requeued": "requeued"})
    shown = _refreshed(ws)
    assert {rid: state for rid, (state, _) in shown.items()} == {"preempted": states.PENDING,
                                                                 "requeued": states.PENDING}


@pytest.mark.parametrize("reported", ["preempted", "requeued"])
@pytest.mark.parametrize("age_s", [5, 3600])
def test_merge_state_of_a_job_slurm_runs_whose_last_attempt_stopped(reported, age_s):
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING)
    status = {"state": reported, "updated_at": time.time() - age_s}
    assert merge_state(rec, status, states.RUNNING, time.time()) == (states.PENDING, None)
