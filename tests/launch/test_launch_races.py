"""Races between two terminals on one workspace (from a hunt of concurrent commands): `arctl cancel` during a
`--force` rerun's submission, a second `arctl run` of runs another launch has under way, and `arctl logs --follow`
of a run whose launch was killed before it submitted it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from dead_launch import dead_claim_token  # tests/support/dead_launch.py

import arctl.launch.launcher as launcher
from arctl.launch import states
from arctl.launch.launcher import UNSTARTED_RERUN, items_from_resolved, launch, plan
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace


def _items(arm: str = "a"):
    from arctl.compose import resolve_experiment

    return items_from_resolved(resolve_experiment("lt", [], arms=[arm]))


def _completed_run(tmp_path) -> tuple[Workspace, str]:
    """A workspace whose run lt/a/s0 completed (debug executor), with its checkpoint."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(), ws, executor="debug")
    run_id = _items()[0].run_id
    with Registry(ws.registry_path) as reg:
        assert reg.get(run_id).state == states.COMPLETED
    assert (ws.run_dir(run_id) / "checkpoints" / "state.json").is_file()
    return ws, run_id


def _cancel(ws: Workspace, run_id: str) -> list[str]:
    """`arctl cancel RUN`, as another terminal runs it: what it says."""
    from arctl.launch.control import cancel_runs

    with Registry(ws.registry_path) as reg:
        rec = reg.get(run_id)
        assert rec.state == states.SUBMITTING  # claimed by the launch that is submitting it
        return [why for _, why in cancel_runs(reg, ws, [rec])]


def _row(rec) -> dict:
    """What a completed run's row says of it (not when it was last touched)."""
    return {k: v for k, v in rec.as_dict().items() if k != "updated_at"}


def test_a_local_force_rerun_cancelled_before_its_job_started_stays_completed_with_its_files(specs, tmp_path,
                                                                                            monkeypatch):
    """From the hunt: `arctl cancel` while `arctl run --force` submitted a completed run left it CANCELLED at
    generation 1 (a new W&B id), its checkpoints and W&B files moved aside to previous/<time>/, hidden from every
    report, and the dry run said it "resumes from its last checkpoint". A local job cannot have started before
    its launch records it: nothing of the rerun ran, so the run is the completed run it was, as after Ctrl-C."""
    ws, run_id = _completed_run(tmp_path)
    run_dir = ws.run_dir(run_id)
    with Registry(ws.registry_path) as reg:
        before = _row(reg.get(run_id))
    checkpoint = (run_dir / "checkpoints" / "state.json").read_bytes()
    steps = (run_dir / "steps.log").read_text()
    real, said = launcher._submit_local, []

    def submit(*args, **kwargs):  # the queue starts after the cancel (its first look sees the claimed row)
        said.append(_cancel(ws, run_id))
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher, "_submit_local", submit)
    result = launch(_items(), ws, executor="local", force=True)
    assert said == [["cancelled while its launch submits it (its launch cancels the job it submits)"]]
    assert result.submitted == [] and [(i.run_id, why) for i, why in result.skipped] == [(run_id, UNSTARTED_RERUN)]
    with Registry(ws.registry_path) as reg:
        assert _row(reg.get(run_id)) == before  # COMPLETED, generation 0 (its W&B id), its job and attempts
    assert (run_dir / "checkpoints" / "state.json").read_bytes() == checkpoint
    assert not (run_dir / "previous").exists()
    # the local queue started for it skips it: it trains nothing
    logs = lambda: "".join(p.read_text() for p in ws.jobs_dir.glob("local-queue-*.log"))  # noqa: E731
    deadline = time.monotonic() + 60
    while f"skip {run_id}: {states.COMPLETED}" not in logs():
        assert time.monotonic() < deadline, logs()
        time.sleep(0.2)
    assert (run_dir / "steps.log").read_text() == steps
    [item] = plan(_items(), ws)  # the next launch skips it; a report reads it
    assert (item.action, item.reason) == ("skip", "completed")


@pytest.fixture
def counting_sbatch(tmp_path, monkeypatch):
    """sbatch answers job 101, then 102, ...; scancel succeeds; sacct says the jobs were cancelled."""
    count = tmp_path / "sbatch-count"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=f'n=$(( $(cat {count} 2>/dev/null || echo 100) + 1 )); echo $n > {count}; '
                           'echo "Submitted batch job $n"\n',
                    scontrol="echo 'MaxArraySize            = 1001'\n",
                    scancel="exit 0\n",
                    sacct="printf 'JobID|State\\n101|CANCELLED by 0\\n'\n",
                    srun="exit 0\n")


def test_a_slurm_force_rerun_cancelled_as_it_was_submitted_says_where_the_finished_files_are(specs, tmp_path,
                                                                                              monkeypatch,
                                                                                              counting_sbatch):
    """A SLURM job may have started once its array was released, so the rerun is cancelled and ends CANCELLED;
    the launch says where the completed run's files went, and the dry run no longer says the run "resumes from
    its last checkpoint" when it has none (it trains from its first step)."""
    from arctl.launch.refresh import refresh

    ws, run_id = _completed_run(tmp_path)
    real, said = launcher._submit_chunk, []

    def submit(*args, **kwargs):
        said.append(_cancel(ws, run_id))
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher, "_submit_chunk", submit)
    result = launch(_items(), ws, executor="slurm", force=True)
    [archive] = (ws.run_dir(run_id) / "previous").iterdir()
    assert (archive / "checkpoints" / "state.json").is_file()
    [(item, why)] = result.skipped
    assert result.submitted == [] and why == ("cancelled while this launch submitted it; its job 101 is cancelled; "
                                              "the files of the completed run it was (checkpoints, W&B) are in "
                                              f"{archive}")
    with Registry(ws.registry_path) as reg:  # `arctl status`: SLURM says the job was cancelled
        assert [r.state for r in refresh(reg, ws, [reg.get(run_id)])] == [states.CANCELLED]
    [planned] = plan(_items(), ws)
    assert (planned.action, planned.reason) == ("resume", "cancelled: starts from the beginning (it has no checkpoint)")


def test_the_dry_run_says_resumes_from_its_last_checkpoint_only_of_a_run_that_has_one(specs, tmp_path):
    ws, run_id = _completed_run(tmp_path)
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, state=states.PREEMPTED)
    [planned] = plan(_items(), ws)
    assert planned.reason == "preempted: resumes from its last checkpoint"


def _arctl(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arctl.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


class _Stderr:
    """The stderr lines of ``proc`` as they come (a thread reads them), to act once it says it waits."""

    def __init__(self, proc: subprocess.Popen):
        import threading

        self.lines: list[str] = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(iter(proc.stderr.readline, "")), daemon=True)
        self.thread.start()

    def waiting(self) -> bool:
        """Has it said it waits for runs another launch has under way (after it planned: a cancel or a dead launch
        from now on is one it waits through, not one it plans around)?"""
        return any("another launch has under way" in line for line in list(self.lines))

    def text(self) -> str:
        self.thread.join(timeout=30)
        return "".join(self.lines)


def _states(ws: Path) -> dict[str, str]:
    with Registry(ws / "registry.sqlite") as reg:
        return {r.run_id: r.state for r in reg.list()}


@pytest.mark.slow
@pytest.mark.parametrize("ends", ["completed", "cancelled"])
def test_a_second_run_of_runs_another_launch_has_under_way_waits_for_them(specs, tmp_path, cli, waiter, ends):
    """From the hunt: a second terminal's `arctl run` (local: it waits by default) of a run the first one's launch
    was running returned at once, "skip ... already running", exit 0, and said to draw the figure, which failed
    (no metrics yet). It waits for the run, says "when the runs are done" where it does not wait, and exits 1
    when the run did not complete (here: cancelled meanwhile), as for the runs it submits itself."""
    gate = tmp_path / "gate"
    env = {"ARCTL_TEST_GATE": str(gate), "ARCTL_TEST_PAUSE_AFTER": "1"}
    ws = tmp_path / "ws"
    args = ("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws))
    cli(*args, "--no-wait", env=env, check=True)
    waiter(lambda: set(_states(ws).values()) == {states.RUNNING}, 60, "the first launch's run to start")
    [run_id] = _states(ws)
    try:
        later = cli(*args, "--no-wait", env=env, check=True)  # not waiting: not done yet, said so
        assert "already running" in later.stdout and "when the runs are done, draw the figure" in later.stdout
        second = _arctl(*args, "--json", env=env)
        said = _Stderr(second)
        try:
            # waits for the run the other launch runs (it says so on stderr, with --json too)
            waiter(lambda: said.waiting() or second.poll() is not None, 120, "the second launch to wait")
            assert second.poll() is None, (second.stdout.read(), said.text())
            if ends == "cancelled":
                cli("cancel", run_id, "--workdir", str(ws), check=True)
            else:
                gate.touch()
            second.wait(timeout=120)
            out, err = second.stdout.read(), said.text()
        finally:
            if second.poll() is None:
                second.kill()
                second.wait()
    finally:
        gate.touch()
    doc = json.loads(out)
    assert doc["submitted"] == [] and [s["run_id"] for s in doc["skipped"]] == [run_id]
    if ends == "completed":
        assert second.returncode == 0, err
        assert doc["skipped"][0]["state"] == states.COMPLETED and _states(ws) == {run_id: states.COMPLETED}
    else:
        assert second.returncode == 1 and f"{run_id} {states.CANCELLED}" in err
        assert doc["skipped"][0]["state"] == states.CANCELLED


@pytest.mark.slow
def test_logs_follow_of_a_run_its_killed_launch_never_submitted_ends(specs, tmp_path, cli):
    """From a hunt: `arctl logs --follow` of a run whose launch was killed before submitting it (status says
    INTERRUPTED, the registry SUBMITTING) waited for ever. It ends, saying so and what submits the run: at once
    when the launch is dead already, and while it follows when the launch dies then."""
    ws = Workspace(tmp_path / "ws")
    first, second = (_items(arm)[0] for arm in ("a", "b"))
    with Registry(ws.registry_path) as reg:  # a launch that died after registering run a
        reg.claim([first.record()], dead_claim_token())
    out = cli("logs", first.run_id, "--follow", "--workdir", str(ws.root), timeout=30, check=True)
    assert states.INTERRUPTED in out.stdout and "arctl run lt --arm a" in out.stdout and "submits it" in out.stdout
    launch_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:  # a live launch registers run b; the follow waits for its job, then the launch is killed
        token = f"{socket.gethostname()}:{launch_proc.pid}:x"
        with Registry(ws.registry_path) as reg:
            reg.claim([second.record()], token)
        follow = _arctl("logs", second.run_id, "--follow", "--workdir", str(ws.root), env={})
        time.sleep(3)
        assert follow.poll() is None  # its launch lives: the run may be submitted yet
    finally:
        launch_proc.kill()
        launch_proc.wait()
    try:
        out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, err
    assert f"-- {second.run_id} {states.INTERRUPTED}: its launch was interrupted before it submitted it" in out
    assert "arctl run lt --arm b" in out


@pytest.mark.slow
def test_a_run_waited_for_whose_launch_dies_before_submitting_it_ends_the_wait(specs, tmp_path, waiter):
    """The wait for a run another launch has under way (above) ends when that launch dies before it submitted the
    run (no job will ever end it): INTERRUPTED, as `arctl status` shows it, and exit 1, the run not completed."""
    ws = Workspace(tmp_path / "ws")
    [item] = _items()
    launch_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:  # a live launch has registered the run, not submitted it yet
        with Registry(ws.registry_path) as reg:
            reg.claim([item.record()], f"{socket.gethostname()}:{launch_proc.pid}:x")
        second = _arctl("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws.root), env={})
        said = _Stderr(second)
        # waits for the other launch's run (under load a fixed sleep was too short: the second launch planned after
        # the first had died, took the run over and completed it, exit 0; CI, 2026-12-05)
        waiter(lambda: said.waiting() or second.poll() is not None, 120, "the second launch to wait")
        assert second.poll() is None, (second.stdout.read(), said.text())
    finally:
        launch_proc.kill()
        launch_proc.wait()
    try:
        second.wait(timeout=60)
        out, err = second.stdout.read(), said.text()
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 1 and f"{item.run_id} {states.INTERRUPTED}" in err, (out, err)
    assert "already submitting" in out and "draw the figure" not in out


def test_a_wait_outlasts_a_full_disk_and_says_so_once(specs, tmp_path, monkeypatch):
    """From a hunt: a disk full for a few seconds made a waiting `arctl run` exit 2 ("database or disk is full")
    while its job went on and completed. The wait goes on through it, says so once, and returns the final
    records; a registry that stays unusable past WAIT_THROUGH_S, or another kind of RegistryError, still raises."""
    import arctl.launch.refresh as refresh_mod
    from arctl.launch.registry import RegistryError

    ws, run_id = _completed_run(tmp_path)
    real, calls, said = refresh_mod.refresh, [], []

    def flaky(reg, workspace, records, *a, **k):
        calls.append(1)
        if len(calls) <= 3:
            raise RegistryError(f"{workspace.registry_path}: database or disk is full: free some space", "full")
        return real(reg, workspace, records, *a, **k)

    monkeypatch.setattr(refresh_mod, "refresh", flaky)
    (rec,) = launcher.wait_for(ws, [run_id], poll_s=0.01, on_problem=said.append)
    assert rec.state == states.COMPLETED and len(calls) == 4
    assert len(said) == 1 and "disk is full" in said[0] and "the jobs go on" in said[0]
    calls.clear()
    monkeypatch.setattr(launcher, "WAIT_THROUGH_S", 0.05)
    monkeypatch.setattr(refresh_mod, "refresh", lambda *a, **k: (_ for _ in ()).throw(
        RegistryError("registry.sqlite: database or disk is full", "full")))
    with pytest.raises(RegistryError, match="disk is full"):
        launcher.wait_for(ws, [run_id], poll_s=0.01)
    monkeypatch.setattr(refresh_mod, "refresh", lambda *a, **k: (_ for _ in ()).throw(
        RegistryError("registry.sqlite: file is not a database", "damaged")))
    with pytest.raises(RegistryError, match="not a database"):
        launcher.wait_for(ws, [run_id], poll_s=0.01)


def test_a_new_run_of_a_cell_the_workspace_has_under_another_config_says_so(specs, tmp_path):
    """From a hunt of an upgrade: the same command after an upgrade (a default that changed the run id), or with
    another override, planned the workspace's completed cells "new" without a word of the runs it had of them."""
    from arctl.compose import resolve_experiment

    ws, run_id = _completed_run(tmp_path)
    (item,) = plan(items_from_resolved(resolve_experiment("lt", ["thinking.lam=0.25"], arms=["a"])), ws)
    assert item.action == "new" and item.run_id != run_id
    # with what differs (from a hunt: `arctl sweep baselines` after `arctl sweep paper` planned GRPO "new" beside
    # the completed run that differed in budget_control.forcing_extensions alone, an evaluation setting)
    lam = resolve_experiment("lt", arms=["a"])[0].config["thinking"]["lam"]
    assert item.reason == (f"not in the registry; the workspace has {run_id} (completed; differs in thinking.lam: "
                           f"{lam} there, 0.25 here) of this arm and seed under another config")
    (other,) = plan(items_from_resolved(resolve_experiment("lt", ["thinking.lam=0.25"], arms=["b"])), ws)
    assert other.reason == "not in the registry"  # another arm: nothing to say
    (same,) = plan(_items(), ws)
    assert (same.action, same.reason) == ("skip", "completed")
    # from a review: a launch's own runs are not "another config" of one another (a sweep's grid points)
    both = plan(_items() + items_from_resolved(resolve_experiment("lt", ["thinking.lam=0.25"], arms=["a"])), ws)
    assert [(i.action, i.reason) for i in both] == [("skip", "completed"), ("new", "not in the registry")]


def test_a_local_run_cancelled_while_its_launch_submits_it_says_cancelled_in_its_folder_too(specs, tmp_path,
                                                                                          monkeypatch):
    """A new local run cancelled while its launch submitted it is CANCELLED in the registry; its status.json said
    "submitted" (from a hunt), so `arctl repair`, which rebuilds the registry from the folders, made it FAILED
    ("never started ... resumes it"). Now the folder says "cancelled" too, and a repair keeps it CANCELLED."""
    from arctl.launch.executors import LaunchError
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.status_file import read_status

    ws = Workspace(tmp_path / "ws")
    [item] = _items()
    real, said = launcher._submit_local, []

    def submit(*args, **kwargs):
        said.append(_cancel(ws, item.run_id))
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher, "_submit_local", submit)
    result = launch(_items(), ws, executor="local")
    assert said == [["cancelled while its launch submits it (its launch cancels the job it submits)"]]
    assert result.submitted == [] and [why for _, why in result.skipped] == ["cancelled while this launch submitted it"]
    with Registry(ws.registry_path) as reg:
        assert reg.get(item.run_id).state == states.CANCELLED
    assert (read_status(ws.run_dir(item.run_id))["state"], read_status(ws.run_dir(item.run_id))["executor"]) == \
        ("cancelled", "local")
    logs = lambda: "".join(p.read_text() for p in ws.jobs_dir.glob("local-queue-*.log"))  # noqa: E731
    deadline = time.monotonic() + 60  # the queue started for it skips it, and ends: the repair may run
    while f"skip {item.run_id}: {states.CANCELLED}" not in logs():
        assert time.monotonic() < deadline, logs()
        time.sleep(0.2)
    deadline = time.monotonic() + 60
    while True:
        try:
            [rec] = rebuild_registry(ws).runs
            break
        except LaunchError:  # the queue's process still holds the workspace open
            assert time.monotonic() < deadline
            time.sleep(0.5)
    assert (rec.state, rec.error) == (states.CANCELLED, None), rec


def test_a_queued_force_rerun_shows_no_step_or_metric_of_the_run_it_replaces(specs, tmp_path, counting_sbatch):
    """From a hunt: a --force rerun of a completed run showed the old run's "60/60, train/anytime_score=0" in
    `arctl status` (and --json step 60) for its whole queue wait, until its job wrote status.json: scripts comparing
    step with total_steps took it for done."""
    ws, run_id = _completed_run(tmp_path)
    with Registry(ws.registry_path) as reg:  # what the completed run reached (the count backend logs no metric)
        reg.update(run_id, step=60, metric_name="train/anytime_score", metric_value=0.0)
    launch(_items(), ws, executor="slurm", force=True)  # queued: its job never starts here
    with Registry(ws.registry_path) as reg:
        rec = reg.get(run_id)
    assert (rec.state, rec.step, rec.metric_name, rec.metric_value) == (states.PENDING, None, None, None), rec
