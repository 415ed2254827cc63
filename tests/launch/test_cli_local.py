"""`arctl run/sweep/status/cancel/logs/resume` end to end with the local and debug executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arctl.launch import states
from arctl.launch.registry import Registry
from arctl.launch.status_file import named_job_process, process_identity, read_status

pytestmark = pytest.mark.slow  # jobs in processes through the local executor

TRICKY = "x'y\"z; $(touch {marker}) `touch {marker}` && echo hi\nsecond line"


def _hydra_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _steps(run_dir: Path) -> list[int]:
    return [int(line.split()[1]) for line in (run_dir / "steps.log").read_text().splitlines()]


def _resumed_from_its_checkpoint(before: list[str], after: list[str]) -> None:
    """``steps.log`` lines (``attempt step pid``) before a resume and after it: the steps up to the checkpoint
    are the first job's lines, as they were, and every later one another process's (from a review: comparing
    step numbers alone, a resume that restarted from step 0 passed too)."""
    assert after[: len(before)] == before, (before, after[: len(before) + 2])
    first = {line.split()[2] for line in before}
    assert after[len(before):] and not first & {line.split()[2] for line in after[len(before):]}


def _states(ws: Path) -> dict[str, str]:
    with Registry(ws / "registry.sqlite") as reg:
        return {r.run_id: r.state for r in reg.list()}


def _queue_parallelism(ws: Path) -> int | None:
    """The ``--parallelism`` of the live local queue of workspace ``ws`` (its command line: /proc, else
    ``ps``), or None."""
    proc = Path("/proc")
    if proc.is_dir():
        lines = []
        for cmdline in proc.glob("[0-9]*/cmdline"):
            try:
                lines.append(cmdline.read_bytes().decode(errors="replace").replace("\0", " "))
            except OSError:
                continue
    else:  # macOS
        lines = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    for line in lines:
        words = line.split()
        if "arctl.launch.local_queue" in words and str(ws) in words and "--parallelism" in words:
            return int(words[words.index("--parallelism") + 1])
    return None


def test_run_local_waits_records_and_resubmitting_launches_nothing(specs, tmp_path, cli, waiter, monkeypatch):
    ws = tmp_path / "ws"
    gate = tmp_path / "go"  # each job waits before its first step until this exists
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    proc = subprocess.Popen([sys.executable, "-m", "arctl.cli.main", "run", "lt", "--executor", "local", "--workdir",
                             str(ws), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the queue runs `at_once` jobs side by side: all of them are running at one moment (held before their
        # first step), which no run's end can precede
        at_once = waiter(lambda: _queue_parallelism(ws), 120, "the local queue to start")

        def running() -> int:
            return sum(read_status(d).get("state") == "running" for d in (ws / "runs").iterdir())

        waiter(lambda: running() == at_once, 120, f"{at_once} jobs running at once")
        # each started job's process is named as no other beside its job id (from the hunt of clocks: a clock step
        # made a live local job read as a reused pid): what the registry records is what the folder names
        with Registry(ws / "registry.sqlite") as reg:
            started = [r for r in reg.list() if r.state == states.RUNNING and r.job_id.isdigit()]
        assert started and all(named_job_process(ws / "runs" / r.run_id, r.job_id) == process_identity(int(r.job_id))
                               is not None for r in started), started
    finally:
        gate.touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    doc = json.loads(out)
    assert doc["executor"] == "local" and len(doc["submitted"]) == 3
    # as many at a time as the cores allow, and more where the memory holds them (one-thread runs of 1 GB
    # share the cores where the last ends sooner: 3 on 2 cores with 3 GB free; tests/launch/test_executors.py
    # sizes it with the memory given), and the queue was told so
    assert doc["parallelism"] == at_once and min(3, os.cpu_count()) <= at_once <= 3
    assert {r["state"] for r in doc["submitted"]} == {"COMPLETED"}
    assert doc["figures"] == [f"arctl report --figure ablation_vr --experiment lt --workdir {ws}"]  # the spec's figure:
    for run in doc["submitted"]:
        run_dir = Path(run["run_dir"])
        assert (run_dir / "config.yaml").is_file() and (run_dir / "checkpoints" / "state.json").is_file()
        assert list((run_dir / "job").rglob("*_log.err")), "submitit logs are under the run's job/"
        assert _steps(run_dir) == list(range(1, 7))
    again = json.loads(cli("run", "lt", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert again["submitted"] == [] and len(again["skipped"]) == 3
    status = json.loads(cli("status", "lt", "--workdir", str(ws), "--json", check=True).stdout)
    assert [(r["arm"], r["state"]) for r in status] == [("a", "COMPLETED"), ("b", "COMPLETED"), ("c", "COMPLETED")]
    table = cli("status", "--workdir", str(ws), check=True).stdout
    assert "3 run(s): 3 completed" in table and doc["submitted"][0]["run_id"] in table
    done = cli("run", "lt", "--executor", "local", "--workdir", str(ws), check=True).stdout
    assert done.splitlines()[-1] == f"draw the figure: arctl report --figure ablation_vr --experiment lt --workdir {ws}"


def test_dry_run_prints_configs_and_one_sbatch_array_and_writes_nothing(specs, tmp_path, cli):
    ws = tmp_path / "ws"
    out = cli("sweep", "lt3", "--dry-run", "--executor", "slurm", "--array-parallelism", "2",
              "--workdir", str(ws), "cluster.partition=debug", check=True)
    assert not ws.exists()
    assert out.stdout.count("#!/bin/bash") == 1 and "#SBATCH --array=0-2%2" in out.stdout
    assert "#SBATCH --partition=debug" in out.stdout and "thinking:" in out.stdout
    doc = json.loads(cli("run", "lt", "--dry-run", "--json", "--workdir", str(ws), "--executor", "local").stdout)
    assert [r["action"] for r in doc["runs"]] == ["new"] * 3 and doc["sbatch"] == []
    assert not ws.exists()


def test_dry_run_splits_a_sweep_larger_than_max_array_size(specs, tmp_path, cli):
    out = cli("sweep", "lt3", "--dry-run", "--executor", "slurm", "cluster.max_array_size=2",
              "--workdir", str(tmp_path / "ws"), check=True)
    assert out.stdout.count("#!/bin/bash") == 2
    assert "#SBATCH --array=0-1%2" in out.stdout and out.stdout.count("#SBATCH --array=") == 1


def test_a_spec_error_is_one_line_exit_2_and_nothing_is_written(specs, tmp_path, cli):
    ws = tmp_path / "ws"
    out = cli("run", "lt", "thinking.lamda=0.3", "--workdir", str(ws))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "lamda" in out.stderr and not ws.exists()
    out = cli("status", "--workdir", str(ws))
    assert out.returncode == 2 and "no arctl workspace" in out.stderr


def test_kill_9_is_failed_in_status_and_resumed_from_its_checkpoint(specs, tmp_path, cli, waiter, monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.2")
    gate = tmp_path / "go"  # the job pauses after step 3 until this exists: the signal comes before its end
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "3")
    ws = tmp_path / "ws"
    args = ["run", "lt", "--arm", "a", "trainer.total_steps=40", "--executor", "local", "--workdir", str(ws)]
    doc = json.loads(cli(*args, "--no-wait", "--json", check=True).stdout)
    run_dir = Path(doc["submitted"][0]["run_dir"])
    try:
        # 3 steps logged and checkpointed (the job pauses there): a kill between a step's line and its checkpoint
        # would make the resume rewrite that line (a review: a race the line comparison below would fail on)
        waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 3
               and json.loads((run_dir / "checkpoints" / "state.json").read_text())["step"] >= 3, 60, "3 steps saved")
        os.kill(read_status(run_dir)["pid"], signal.SIGKILL)
    finally:
        gate.touch()
    status = waiter(lambda: [r for r in json.loads(cli("status", "--workdir", str(ws), "--json").stdout)
                             if r["state"] != "RUNNING"], 30, "the killed run to stop")
    assert status[0]["state"] == "FAILED"
    # the local queue tidies the job's folder once it sees the job end (a poll later, under load seconds)
    waiter(lambda: not (run_dir / "job" / "%j").exists(), 30, "the local queue to see the job end")
    before = (run_dir / "steps.log").read_text().splitlines()
    files = sorted(p.name for p in run_dir.rglob("*"))
    dry = json.loads(cli("resume", run_dir.name, "--workdir", str(ws), "--dry-run", "--json", check=True).stdout)
    assert [(r["run_id"], r["action"]) for r in dry["runs"]] == [(run_dir.name, "resume")] and dry["sbatch"] == []
    assert dry["runs"][0]["config"]["trainer"]["total_steps"] == 40  # the frozen config, shown
    # the executor line says where the executor came from (a black-box pass found "(--executor)" without one)
    text = cli("resume", run_dir.name, "--workdir", str(ws), "--dry-run", check=True).stdout
    assert "executor: local (where the run ran before)" in " ".join(text.split())
    text = cli("resume", run_dir.name, "--workdir", str(ws), "--dry-run", "--executor", "local", check=True).stdout
    assert "executor: local (--executor)" in " ".join(text.split())
    assert sorted(p.name for p in run_dir.rglob("*")) == files and _states(ws)[run_dir.name] == "FAILED"  # nothing written
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    doc = json.loads(cli(*args, "--json", check=True).stdout)
    assert doc["submitted"][0]["action"] == "resume" and doc["submitted"][0]["state"] == "COMPLETED"
    assert _steps(run_dir) == list(range(1, 41))
    _resumed_from_its_checkpoint(before, (run_dir / "steps.log").read_text().splitlines())


def test_usr1_on_a_local_job_checkpoints_and_submitit_restarts_it(specs, tmp_path, cli, waiter, monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.2")
    gate = tmp_path / "go"  # the job pauses after step 3 until this exists: the signal comes before its end
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "3")
    ws = tmp_path / "ws"
    doc = json.loads(cli("run", "lt", "--arm", "a", "trainer.total_steps=25", "--executor", "local",
                         "--workdir", str(ws), "--no-wait", "--json", check=True).stdout)
    run_dir = Path(doc["submitted"][0]["run_dir"])
    try:
        waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 3, 60, "3 steps")
        first_pid = read_status(run_dir)["pid"]
        os.kill(first_pid, signal.SIGUSR1)
        waiter(lambda: read_status(run_dir).get("state") != "running" or read_status(run_dir).get("pid") != first_pid,
               30, "the signalled job to stop")
    finally:
        gate.touch()  # the restarted attempt goes on from step 3
    waiter(lambda: read_status(run_dir).get("state") == "completed", 90, "the restarted job to complete")
    status = read_status(run_dir)
    assert status["attempt"] == 2 and status["pid"] != first_pid  # requeued by submitit's local controller
    assert _steps(run_dir) == list(range(1, 26))
    waiter(lambda: _states(ws) == {run_dir.name: "COMPLETED"}, 30, "COMPLETED in the registry")


def test_cancel_then_resume_only_once_the_stop_checkpoint_is_saved(specs, tmp_path, cli, waiter, monkeypatch):
    """Issue 25 (8): a cancelled job that is saving its stop checkpoint stays active; a resume meanwhile
    starts nothing; once saved the run is CANCELLED and resumes from that checkpoint."""
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.2")
    gate = tmp_path / "saved"  # the stop checkpoint takes until the test creates this file (at most 120 s)
    monkeypatch.setenv("ARCTL_TEST_STOP_S", "120")
    monkeypatch.setenv("ARCTL_TEST_STOP_GATE", str(gate))
    ws = tmp_path / "ws"
    doc = json.loads(cli("run", "lt", "trainer.total_steps=100", "--executor", "local", "--workdir", str(ws),
                         "--no-wait", "--json", check=True).stdout)
    first = Path(doc["submitted"][0]["run_dir"])
    waiter(lambda: (first / "steps.log").exists(), 60, "the first run to start")
    out = cli("cancel", "lt", "--workdir", str(ws), check=True)
    assert "3 run(s) cancelled" in out.stdout
    waiter(lambda: read_status(first).get("state") == "stopping", 30, "the job to start saving")
    try:
        assert _states(ws)[first.name] == "RUNNING"  # not resumable while it saves
        early = json.loads(cli("resume", first.name, "--workdir", str(ws), "--no-wait", "--json", check=True).stdout)
        assert early["submitted"] == [] and early["skipped"][0]["reason"] == "already running"
    finally:
        gate.touch()
    waiter(lambda: read_status(first).get("state") == "preempted", 30, "the job to checkpoint and stop")
    waiter(lambda: set(_states(ws).values()) == {"CANCELLED"}, 30, "every run CANCELLED")
    with Registry(ws / "registry.sqlite") as reg:  # its stop has ended: no "cancelling: saving ..." (a hunt: --json)
        assert reg.get(first.name).phase is None
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.001")
    monkeypatch.setenv("ARCTL_TEST_STOP_S", "0")
    before = (first / "steps.log").read_text().splitlines()
    out = cli("resume", first.name, "--workdir", str(ws), "--json", check=True)
    resumed = json.loads(out.stdout)["submitted"]
    assert [(r["run_id"], r["action"], r["state"]) for r in resumed] == [(first.name, "resume", "COMPLETED")]
    assert _steps(first) == list(range(1, 101))
    _resumed_from_its_checkpoint(before, (first / "steps.log").read_text().splitlines())
    prov = json.loads((first / "provenance.json").read_text())  # the launch's code, then the resume's
    assert [r["git_commit"] for r in prov["resumed"]] == [prov["git_commit"]] and prov["resumed"][0]["at"] > prov["created_at"]


def test_logs_surface_the_error_of_a_failed_run(specs, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "arctl.launch.no_such_backend:train")
    ws = tmp_path / "ws"
    out = cli("run", "lt", "--arm", "b", "--executor", "debug", "--workdir", str(ws))
    assert out.returncode == 1 and "no_such_backend" in out.stderr and "draw the figure" not in out.stdout
    run_id = next(iter(_states(ws)))
    logs = cli("logs", run_id[:12], "--workdir", str(ws), check=True)
    assert "FAILED" in logs.stdout and "no_such_backend" in logs.stderr.splitlines()[0]
    doc = json.loads(cli("logs", run_id[:12], "--workdir", str(ws), "--json", "--tail", "3", check=True).stdout)
    assert doc["run_id"] == run_id and doc["state"] == "FAILED" and "no_such_backend" in doc["error"]
    assert doc["logs"] and all(Path(f["path"]).is_file() and len(f["lines"]) <= 3 for f in doc["logs"])
    log = Path(doc["logs"][0]["path"])
    log.write_text(log.read_text() + "".join(f"line {i}\n" for i in range(5)))  # longer than --tail
    doc = json.loads(cli("logs", run_id[:12], "--workdir", str(ws), "--json", "--tail", "3", check=True).stdout)
    assert {f["path"]: f["lines"] for f in doc["logs"]}[str(log)] == ["line 2", "line 3", "line 4"]
    full = json.loads(cli("logs", run_id[:12], "--workdir", str(ws), "--json", "--tail", "0", check=True).stdout)
    lines = {f["path"]: f["lines"] for f in full["logs"]}[str(log)]
    assert lines[-5:] == [f"line {i}" for i in range(5)] and len(lines) > 5
    refused = cli("logs", run_id[:12], "--workdir", str(ws), "--json", "--follow")
    assert refused.returncode == 2 and refused.stdout == "" and "leave out --follow" in refused.stderr


def test_tricky_overrides_reach_the_job_as_data_and_the_api_key_stays_out_of_the_workspace(
        specs, tmp_path, cli, monkeypatch):
    marker = tmp_path / "PWNED"
    tricky = TRICKY.format(marker=marker)
    key = "planted" + "0123456789abcdef" * 2
    monkeypatch.setenv("WANDB_API_KEY", key)
    ws = tmp_path / "ws"
    cli("run", "lt", "--arm", "a", f"wandb.notes={_hydra_quote(tricky)}", "wandb.mode=offline",
        "--executor", "local", "--workdir", str(ws), check=True)
    run_dir = next((ws / "runs").iterdir())
    received = json.loads((run_dir / "received_config.json").read_text())
    assert received["wandb"]["notes"] == tricky and not marker.exists()
    assert list((run_dir / "wandb").rglob(f"*{received['wandb']['id']}*.wandb"))
    status = json.loads(cli("status", "--workdir", str(ws), "--json", check=True).stdout)[0]
    assert (status["step"], status["metric_name"], status["wandb_id"]) == (6, "train/loss", received["wandb"]["id"])
    hits = subprocess.run(["grep", "-rl", key, str(ws)], capture_output=True, text=True).stdout
    assert hits == "", f"the API key leaked into {hits}"


def test_two_launches_in_one_workspace_share_its_slots(specs, tmp_path, cli, statuses, waiter, monkeypatch):
    """From a review: each local launch sized its queue to the cores and free memory it saw, so two in a
    row (the Quickstart, then a sweep) ran both queues at once. A run starts only while it holds one of
    the workspace's slots (as many as its queue's parallelism): two launches of one at a time run one at
    a time in all, taking turns (the second does not wait for all of the first), and the run that waits
    for a slot says so in `arctl status`."""
    from arctl.launch.local_queue import slots_folder, take_slot

    held = [take_slot(tmp_path / "slots", 2) for _ in range(3)]
    assert held[0] and held[1] and held[2] is None  # two slots, both taken
    assert take_slot(tmp_path / "slots", 1) is None  # a queue of one slot tries the lowest: taken last
    held[0].close()
    assert take_slot(tmp_path / "slots", 2) is not None  # one freed

    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.4")  # 6 steps: ~2.4 s a run
    gate = tmp_path / "go"  # the first run starts its steps once the second launch waits for a slot
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    ws = tmp_path / "ws"
    for seed in ("0", "1"):
        cli("run", "lt", "--seeds", seed, "--executor", "local", "--array-parallelism", "1", "--no-wait",
            "--workdir", str(ws), "--json", check=True)
    try:
        waiter(lambda: list(slots_folder(ws).glob("waiting-*")), 120, "the second launch to wait for a slot")
    finally:
        gate.touch()
    phases = set()

    def all_done():
        records = statuses(ws)
        phases.update(str(r.get("phase")) for r in records)
        return len(records) == 6 and all(r["state"] in ("COMPLETED", "FAILED") for r in records) and records

    records = waiter(all_done, 240, "both launches' six runs to end")
    assert {r["state"] for r in records} == {"COMPLETED"}
    spans = sorted((read_status(Path(r["run_dir"]))["started_at"], read_status(Path(r["run_dir"]))["ended_at"],
                    r["seed"]) for r in records)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans  # one at a time in all
    order = [seed for _, _, seed in spans]
    assert all(a != b for a, b in zip(order, order[1:])), order  # turns: neither launch ran twice in a row
    assert any("queued for a local slot" in p for p in phases), phases
    assert slots_folder(ws).is_dir()
