"""The launch layer on a real single-node SLURM with accounting (started once per session).

Each test uses its own workspace and the test-only counting backend (ARCTL_TEST_BACKEND=count).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.launch.refresh import refresh
from arctl.launch.registry import Registry
from arctl.launch.status_file import read_status
from arctl.launch.workspace import Workspace

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster")]

TRICKY = "x'y\"z; $(touch {marker}) `touch {marker}` && echo hi\nsecond line"


def _records(ws: Path) -> dict:
    workspace = Workspace(ws)
    with Registry(workspace.registry_path) as reg:
        return {r.run_id: r for r in refresh(reg, workspace)}


def _by_arm(ws: Path) -> dict:
    return {r.arm: r for r in _records(ws).values()}


def _steps(run_dir: Path) -> list[tuple[int, int]]:
    if not (run_dir / "steps.log").exists():
        return []
    return [(int(a), int(s)) for a, s, _ in (line.split() for line in (run_dir / "steps.log").read_text().splitlines())]


def _launch(cli, command: str, name: str, ws: Path, *args: str) -> dict:
    out = cli(command, name, *args, "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    return json.loads(out.stdout)


def _kill_wait_s() -> int:
    """The running cluster's KillWait (seconds between scancel's TERM and its KILL)."""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.split("=")[0].strip() == "KillWait"]
    return int(line.split("=", 1)[1].split()[0])


def _sacct(master: str) -> list[tuple[str, str]]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", master],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line]


def test_a_sweep_is_one_array_that_completes_and_resubmitting_launches_nothing(specs, tmp_path, cli, waiter):
    ws = tmp_path / "ws"
    doc = _launch(cli, "sweep", "lt3", ws)
    jobs = sorted(r["job_id"] for r in doc["submitted"])
    master = jobs[0].split("_")[0]
    assert jobs == [f"{master}_0", f"{master}_1", f"{master}_2"]  # ONE array of 3 tasks
    waiter(lambda: all(r.state == "COMPLETED" for r in _records(ws).values()), 120, "3 cells COMPLETED")
    # accounting catches up asynchronously (slurmdbd)
    waiter(lambda: sorted(_sacct(master)) == [(j, "COMPLETED") for j in jobs], 60, "sacct: 3 tasks COMPLETED")
    for rec in _records(ws).values():
        assert rec.executor == "slurm" and rec.attempts == 1 and rec.ended_at and rec.job_id in jobs
        assert (ws / "runs" / rec.run_id / "job" / rec.job_id).resolve() == (ws / "jobs" / rec.job_id).resolve()
        sbatch = (ws / "runs" / rec.run_id / "job" / "sbatch.sh").read_text()
        assert "#SBATCH --array=0-2%" in sbatch and "submitit.core._submit" in sbatch
    logs = cli("logs", jobs and next(iter(_records(ws))), "--follow", "--workdir", str(ws), check=True).stdout
    assert logs.count("] completed") == 1 and "Job completed successfully" in logs  # each file once
    again = _launch(cli, "sweep", "lt3", ws)
    assert again["submitted"] == [] and len(again["skipped"]) == 3
    # squeue as refresh reads it: the ended tasks the controller still holds, and an id it has not: an answer
    from arctl.launch.refresh import controller_jobs

    held = controller_jobs(jobs)
    assert held == {j: ("COMPLETED", "None") for j in jobs}, held  # (MinJobAge=300 s)
    assert controller_jobs([str(int(master) + 100000)]) == {}
    table = cli("status", "lt3", "--workdir", str(ws), check=True).stdout
    assert "3 run(s): 3 completed" in table and master in table


def test_a_sweep_larger_than_max_array_size_goes_out_in_chunks(specs, tmp_path, cli, waiter):
    ws = tmp_path / "ws"
    doc = _launch(cli, "sweep", "lt3", ws, "cluster.max_array_size=2", "trainer.total_steps=2")
    jobs = sorted(r["job_id"] for r in doc["submitted"])
    masters = sorted({j.split("_")[0] for j in jobs})
    assert len(jobs) == 3 and len(masters) == 2  # an array of 2 tasks + a single job
    waiter(lambda: all(r.state == "COMPLETED" for r in _records(ws).values()), 120, "3 cells COMPLETED")


def test_a_job_no_node_can_hold_says_so_in_status_and_is_cancelled(specs, tmp_path, cli, waiter):
    """More memory than the node has: SLURM accepts the job and leaves it pending for ever
    (BadConstraints); `arctl status` says so, naming the setting, and `arctl cancel` ends it."""
    ws = tmp_path / "ws"
    doc = _launch(cli, "sweep", "lt3", ws, "cluster.mem_gb=99999", "cluster.max_array_size=1")
    run_id = doc["submitted"][0]["run_id"]
    warning = waiter(lambda: _records(ws)[run_id].warning, 60, "status to say why the job never starts")
    assert _records(ws)[run_id].state == "PENDING"
    assert "(BadConstraints): no node of its partition has what it asks (cluster.mem_gb" in warning, warning
    table = cli("status", "lt3", "--workdir", str(ws), check=True).stdout
    assert f"{run_id}: SLURM will not start job" in " ".join(table.split())
    cli("cancel", "lt3", "--workdir", str(ws), check=True)
    waiter(lambda: {r.state for r in _records(ws).values()} == {"CANCELLED"}, 60, "the runs CANCELLED")


def test_scancel_is_preempted_after_the_stop_checkpoint_and_only_then_resumed(specs, tmp_path, cli, waiter,
                                                                             monkeypatch):
    """Issue 25 (8): `scancel` (TERM) stops a job with a checkpoint: the run is PREEMPTED (sacct says
    CANCELLED), not before the job has saved it; a sweep meanwhile relaunches nothing; the next sweep
    resumes only that cell, every step once."""
    from arctl.launch.status_file import read_status

    kill_wait = _kill_wait_s()
    if kill_wait < 12:
        pytest.skip(f"this cluster's KillWait is {kill_wait} s: holding a stop checkpoint open while a sweep "
                    "runs needs >= 12 s (tests/launch/slurm/setup_slurm.sh sets 20)")
    gate = tmp_path / "checkpoint-may-finish"
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.25")
    # the stop checkpoint lasts until the test opens the gate (at most KillWait - 2 s): the sweep below
    # runs while it is being saved however slow the machine (CI of 50a4d04 raced a fixed 3 s)
    monkeypatch.setenv("ARCTL_TEST_STOP_S", str(kill_wait - 2))
    monkeypatch.setenv("ARCTL_TEST_STOP_GATE", str(gate))
    ws, args = tmp_path / "ws", ("trainer.total_steps=30",)
    _launch(cli, "sweep", "lt3", ws, *args)
    waiter(lambda: len(_steps(ws / "runs" / _by_arm(ws)["b"].run_id)) >= 2, 90, "cell b running")
    b = _by_arm(ws)["b"]
    run_dir = ws / "runs" / b.run_id
    subprocess.run(["scancel", b.job_id], check=True)
    waiter(lambda: read_status(run_dir).get("state") == "stopping", 30, "cell b saving its stop checkpoint")
    started = time.monotonic()
    during = _launch(cli, "sweep", "lt3", ws, *args)  # refreshes first: b is still active
    try:
        assert read_status(run_dir).get("state") == "stopping", \
            f"the checkpoint ended before the sweep did ({time.monotonic() - started:.1f} s)"
        assert during["submitted"] == [], during
        assert _by_arm(ws)["b"].state in ("PENDING", "RUNNING")  # active (sacct may lag behind the job)
    finally:
        gate.touch()
    waiter(lambda: _by_arm(ws)["b"].state in ("PREEMPTED", "CANCELLED", "FAILED"), 60, "cell b stopped")
    assert _by_arm(ws)["b"].state == "PREEMPTED" and read_status(run_dir)["state"] == "preempted"
    assert any(state.startswith("CANCELLED") for job, state in _sacct(b.job_id.split("_")[0]) if job == b.job_id)
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.02")
    monkeypatch.setenv("ARCTL_TEST_STOP_S", "0")
    before = (run_dir / "steps.log").read_text().splitlines()  # attempt step pid
    doc = _launch(cli, "sweep", "lt3", ws, *args)
    assert [(r["run_id"], r["action"]) for r in doc["submitted"]] == [(b.run_id, "resume")]
    waiter(lambda: all(r.state == "COMPLETED" for r in _records(ws).values()), 120, "all cells COMPLETED")
    assert [s for _, s in _steps(ws / "runs" / b.run_id)] == list(range(1, 31))
    # resumed from its stop checkpoint, not restarted: the first job's lines stand, every later one another's
    after = (run_dir / "steps.log").read_text().splitlines()
    assert before and after[: len(before)] == before
    assert not {line.split()[2] for line in before} & {line.split()[2] for line in after[len(before):]}


def test_usr1_checkpoints_requeues_and_finishes_with_the_same_run_and_wandb_ids(specs, tmp_path, cli, waiter,
                                                                                 monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.3")
    gate = tmp_path / "go"  # the job pauses after step 5 until this exists: the signal comes before its end
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "5")
    ws = tmp_path / "ws"
    doc = _launch(cli, "run", "lt", ws, "--arm", "a", "trainer.total_steps=25", "wandb.mode=offline")
    (run,) = doc["submitted"]
    run_dir = Path(run["run_dir"])
    try:
        waiter(lambda: len(_steps(run_dir)) >= 5, 90, "5 steps")
        subprocess.run(["scancel", "--signal=USR1", run["job_id"]], check=True)
        waiter(lambda: read_status(run_dir).get("state") in ("requeued", "preempted"), 60, "checkpoint + requeue")
    finally:
        gate.touch()  # the requeued attempt goes on from step 5
    waiter(lambda: _records(ws)[run["run_id"]].state == "COMPLETED", 150, "the requeued job to finish")
    steps = _steps(run_dir)
    assert [s for _, s in steps] == list(range(1, 26))  # continuous step count across the requeue
    assert sorted({a for a, _ in steps}) == [1, 2]
    rec = _records(ws)[run["run_id"]]
    assert rec.job_id == run["job_id"] and rec.attempts == 1  # requeued by SLURM, not resubmitted
    assert read_status(run_dir)["attempt"] == 2 and rec.wandb_id == run["run_id"]
    fragments = sorted((run_dir / "wandb").rglob(f"offline-run-*-{run['run_id']}"))
    assert len(fragments) == 2, fragments  # one offline fragment per attempt, same W&B run id
    assert rec.step == 25


def test_a_job_killed_with_sigkill_is_failed_and_resumed_by_the_next_sweep(specs, tmp_path, cli, waiter,
                                                                          monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.25")
    gate = tmp_path / "go"  # the jobs pause after step 3 until this exists: the kill comes before their end
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "3")
    ws, args = tmp_path / "ws", ("trainer.total_steps=20",)
    _launch(cli, "sweep", "lt3", ws, *args)
    try:  # (all three cells run at once on the test SLURM's 8 CPUs)
        waiter(lambda: len(_steps(ws / "runs" / _by_arm(ws)["c"].run_id)) >= 3, 90, "cell c at step 3")
        c = _by_arm(ws)["c"]
        run_dir = ws / "runs" / c.run_id
        os.kill(read_status(run_dir)["pid"], signal.SIGKILL)
    finally:
        gate.touch()
    waiter(lambda: _by_arm(ws)["c"].state == "FAILED", 60, "cell c FAILED")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.02")
    waiter(lambda: all(r.state != "RUNNING" for r in _records(ws).values()), 90, "the other cells to finish")
    doc = _launch(cli, "sweep", "lt3", ws, *args)
    assert [(r["run_id"], r["action"]) for r in doc["submitted"]] == [(c.run_id, "resume")]
    waiter(lambda: _by_arm(ws)["c"].state == "COMPLETED", 90, "cell c COMPLETED")
    steps = _steps(run_dir)
    assert [s for _, s in steps] == list(range(1, 21)) and len({a for a, _ in steps}) == 2


def test_an_array_is_held_until_its_task_folders_exist(specs, tmp_path, cli, waiter):
    """SLURM opens a task's log in the task's folder, which submitit makes only after sbatch returns:
    a task that started first failed at once without a log (seen on this idle node). Jobs are
    submitted held and released after; a scontrol shim records what the release finds."""
    import shutil
    import stat

    ws, log, shim = tmp_path / "ws", tmp_path / "release.log", tmp_path / "bin"
    shim.mkdir()
    real = shutil.which("scontrol")
    script = shim / "scontrol"
    script.write_text(f"""#!/bin/bash
if [ "$1" = release ]; then
  {{ squeue -h -r -o "%i %r" -j "$2"; ls -d "{ws}/jobs/$2"_*; }} >> "{log}" 2>&1
fi
exec "{real}" "$@"
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    out = cli("sweep", "lt3", "--executor", "slurm", "--workdir", str(ws), "--json", check=True,
              env={"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"})
    master = json.loads(out.stdout)["submitted"][0]["job_id"].split("_")[0]
    seen = log.read_text()
    for task in range(3):
        assert f"{master}_{task} JobHeldUser" in seen, seen  # not started before the release
        assert f"{ws}/jobs/{master}_{task}" in seen, seen  # its folder (and log's place) already there
    waiter(lambda: all(r.state == "COMPLETED" for r in _records(ws).values()), 120, "3 cells COMPLETED")
    assert all(r.attempts == 1 for r in _records(ws).values())


def test_ten_concurrent_sweeps_create_exactly_one_run_per_cell(specs, tmp_path, waiter):
    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "arctl.cli.main", "sweep", "lt3", "trainer.total_steps=4", "--executor", "slurm",
           "--workdir", str(ws), "--no-wait", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(10)]
    outputs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    submitted = [r for out, _ in outputs for r in json.loads(out)["submitted"]]
    assert len(submitted) == 3 and len({r["run_id"] for r in submitted}) == 3, (submitted, _records(ws))
    assert len({r["job_id"] for r in submitted}) == 3
    records = waiter(lambda: (recs := _records(ws)) and all(r.state == "COMPLETED" for r in recs.values()) and recs,
                     120, "3 cells COMPLETED")
    assert len(records) == 3 and all(r.attempts == 1 for r in records.values())
    task_dirs = [d for d in (ws / "jobs").iterdir() if d.is_dir() and list(d.glob("*_log.out"))]
    assert len(task_dirs) == 3  # exactly three SLURM tasks ever ran


def test_tricky_overrides_are_data_and_the_api_key_never_reaches_the_workspace(specs, tmp_path, cli, waiter,
                                                                              monkeypatch):
    marker = tmp_path / "PWNED"
    tricky = TRICKY.format(marker=marker)
    quoted = "'" + tricky.replace("\\", "\\\\").replace("'", "\\'") + "'"
    key = "planted" + "fedcba9876543210" * 2
    monkeypatch.setenv("WANDB_API_KEY", key)
    ws = tmp_path / "ws"
    doc = _launch(cli, "run", "lt", ws, "--arm", "b", f"wandb.notes={quoted}", "wandb.mode=offline")
    (run,) = doc["submitted"]
    waiter(lambda: _records(ws)[run["run_id"]].state == "COMPLETED", 120, "the run to complete")
    received = json.loads((Path(run["run_dir"]) / "received_config.json").read_text())
    assert received["wandb"]["notes"] == tricky and not marker.exists()
    assert list((ws / "jobs").rglob("*_submission.sh")), "the sbatch script is in the workspace"
    hits = subprocess.run(["grep", "-rl", key, str(ws)], capture_output=True, text=True).stdout
    assert hits == "", f"the API key leaked into {hits}"
    # an sbatch option cannot smuggle in script lines: refused before anything is written
    other = tmp_path / "ws-evil"
    out = cli("run", "lt", "--arm", "a", f"cluster.partition='debug\ntouch {marker}'", "--executor", "slurm",
              "--workdir", str(other))
    assert out.returncode == 2 and "line break" in out.stderr and not other.exists() and not marker.exists()


CHAIN = """\
description: two rounds, the second from the first one's final weights
seeds: [0]
overrides: [trainer.total_steps=3, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
arms:
  r1: [algo=grpo, prior=base]
  r2: [algo=grpo, prior=base, optim.lr=2e-6, trainer.init_from=r1]
"""


def test_a_run_that_starts_from_another_waits_for_its_job_and_is_cancelled_if_it_fails(specs, tmp_path, cli, waiter,
                                                                                         monkeypatch):
    """trainer.init_from on SLURM: the dependent run is its own job with --dependency=afterok on the
    other run's array task; when that task fails, SLURM cancels it (--kill-on-invalid-dep) and
    `arctl status` says why; the next `arctl run` resumes the first and runs the second after it."""
    (specs / "experiments" / "chain.yaml").write_text(CHAIN)
    ws = tmp_path / "ws"
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "r1")
    doc = _launch(cli, "run", "chain", ws, "--arm", "r2")
    (r1, r2) = doc["submitted"]
    assert (r1["run_id"].split("_")[1], r2["run_id"].split("_")[1]) == ("r1", "r2")
    sbatch = (ws / "runs" / r2["run_id"] / "job" / "sbatch.sh").read_text()
    assert f"#SBATCH --dependency=afterok:{r1['job_id']}" in sbatch and "#SBATCH --kill-on-invalid-dep=yes" in sbatch
    waiter(lambda: _by_arm(ws)["r1"].state == "FAILED" and _by_arm(ws)["r2"].state in ("CANCELLED", "FAILED"), 120,
           "r1 to fail and SLURM to cancel r2")
    rec = _by_arm(ws)["r2"]
    assert rec.error.startswith(f"never started: the run it starts from did not complete (waiting for {r1['run_id']}, "
                                "which ended FAILED); `arctl run chain --arm r2 "), rec.error
    assert not (ws / "runs" / r2["run_id"] / "steps.log").exists()

    monkeypatch.delenv("ARCTL_TEST_FAIL_ARM")
    again = _launch(cli, "run", "chain", ws, "--arm", "r2")
    assert [r["action"] for r in again["submitted"]] == ["resume", "resume"]
    first, second = again["submitted"]
    waiter(lambda: all(r.state == "COMPLETED" for r in _records(ws).values()), 120, "both runs COMPLETED")
    recs = _by_arm(ws)
    assert recs["r1"].ended_at <= recs["r2"].started_at
    init = json.loads((ws / "runs" / second["run_id"] / "init.json").read_text())
    assert init == {"run_id": first["run_id"], "step": 3}
