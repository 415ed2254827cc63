"""The launcher against a fake sbatch: chunking, and a refused chunk after an accepted one."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from dead_launch import dead_claim_token, dead_launch_run  # tests/support/dead_launch.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.executors import LaunchError
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry
from arctl.launch.status_file import read_status
from arctl.launch.workspace import Workspace


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch accepts the first submission and refuses the next; MaxArraySize is 1001."""
    count = tmp_path / "sbatch-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo "$1" >> {count}\n'
                            f'if [ "$(wc -l < {count})" -eq 1 ]; then echo "Submitted batch job 101"; exit 0; fi\n'
                            'echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; exit 1\n'),
                    srun="exit 0\n",
                    scontrol="echo 'MaxArraySize            = 1001'\n",
    )
    yield count


def test_a_refused_chunk_keeps_the_accepted_one_pending_and_leaves_no_trace_of_the_rest(specs, tmp_path, fake_slurm):
    from arctl.compose import resolve_sweep

    items = items_from_resolved(resolve_sweep("lt3", ["cluster.max_array_size=2"]))
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(LaunchError, match="QOSMaxSubmitJobPerUserLimit"):
        launch(items, ws, executor="slurm", members=["lt3"])
    assert len(fake_slurm.read_text().splitlines()) == 2  # two chunks: 2 tasks + 1
    with Registry(ws.registry_path) as reg:
        got = {r.run_id: (r.state, r.job_id) for r in reg.list("lt3")}
    first, second, third = (i.run_id for i in items)
    assert got[first] == (states.PENDING, "101_0") and got[second] == (states.PENDING, "101_1")
    assert third not in got and not ws.run_dir(third).exists()  # refused: new to the next sweep, nothing written
    script = (ws.jobs_dir / "101" / "101_submission.sh").read_text()
    assert "#SBATCH --array=0-1%2" in script and (ws.run_dir(first) / "job" / "sbatch.sh").exists()


def test_a_refused_sbatch_writes_nothing_and_says_why_in_one_line(specs, tmp_path, refusing_sbatch, capfd):
    """e.g. cluster.partition=nosuch: no registry row, no run dir, no workspace left behind; sbatch's
    complaint is inside arctl's one error, not printed before it."""
    from arctl.compose import resolve_experiment

    items = items_from_resolved(resolve_experiment("lt", ["cluster.partition=nosuch"], arms=["a"]))
    ws = Workspace(tmp_path / "ws")
    capfd.readouterr()
    with pytest.raises(LaunchError) as info:
        launch(items, ws, executor="slurm")
    assert "invalid partition specified: nosuch" in str(info.value) and "\n" not in str(info.value)
    out, err = capfd.readouterr()
    assert "invalid partition" not in err + out  # nothing printed besides the error the CLI shows
    assert not ws.root.exists()


def test_a_slurm_launch_says_which_secrets_its_jobs_go_without(specs, tmp_path, refusing_sbatch, monkeypatch):
    """A job that needs a secret it was not given (a gated model's HF_TOKEN) would fail on the cluster: the
    launch names what it leaves out (never the value) and how to pass one."""
    from arctl.compose import resolve_experiment

    monkeypatch.setenv("HF_TOKEN", "hf_" + "q" * 30)
    said: list[str] = []
    items = items_from_resolved(resolve_experiment("lt", ["cluster.partition=nosuch"], arms=["a"]))
    with pytest.raises(LaunchError):
        launch(items, Workspace(tmp_path / "ws"), executor="slurm", echo=said.append)
    (line,) = [m for m in said if "HF_TOKEN" in m]
    assert "cluster.secrets=[NAME]" in line and "q" * 30 not in line


def test_a_refused_sbatch_in_an_existing_workspace_leaves_no_job_files(specs, tmp_path, refusing_sbatch):
    """submitit writes its pickle and script into jobs/ before sbatch answers: a refusal removes
    them (and the run's row and run dir), so the workspace holds only what it held before."""
    from arctl.compose import resolve_experiment

    ws = Workspace(tmp_path / "ws")
    ws.jobs_dir.mkdir(parents=True)
    (ws.jobs_dir / "kept.txt").write_text("an earlier job's file\n")
    items = items_from_resolved(resolve_experiment("lt", ["cluster.partition=nosuch"], arms=["a"]))
    with pytest.raises(LaunchError, match="invalid partition"):
        launch(items, ws, executor="slurm")
    assert sorted(p.name for p in ws.jobs_dir.iterdir()) == ["kept.txt"]
    assert not ws.run_dir(items[0].run_id).exists()
    with Registry(ws.registry_path) as reg:
        assert reg.get(items[0].run_id) is None


def _folder_tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _three_done_b_failed(tmp_path):
    """lt3's three runs completed (debug executor), then b FAILED ("OOM"): (workspace, run ids, rows)."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    a, b, c = (i.run_id for i in items_from_resolved(resolve_sweep("lt3", [])))
    with Registry(ws.registry_path) as reg:
        reg.update_many([(b, {"state": states.FAILED, "error": "OOM"})])
        rows = {r.run_id: (r.state, r.error, r.generation) for r in reg.list()}
    return ws, (a, b, c), rows


@pytest.mark.parametrize("registry", ["deleted", "emptied"])
def test_run_folders_the_registry_does_not_know_are_never_taken_for_new_runs(specs, tmp_path, refusing_sbatch,
                                                                             registry):
    """Found by an adversarial pass (2026-11-29): with registry.sqlite deleted or truncated to 0 bytes,
    a sweep planned the existing (completed) run folders "new", and when sbatch refused the job, the
    rollback of the "new" runs removed those folders and their W&B files. Now the launch is refused
    in one line naming `arctl repair`, before anything is claimed, written or submitted."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import plan, planned_problem

    items = items_from_resolved(resolve_sweep("lt3", []))
    ws = Workspace(tmp_path / "ws")
    for item in items:
        run_dir = ws.run_dir(item.run_id)
        (run_dir / "wandb").mkdir(parents=True)
        (run_dir / "config.yaml").write_text(f"experiment: lt\narm: {item.arm}\nseed: 0\n")
        (run_dir / "status.json").write_text('{"state": "completed"}')
        (run_dir / "wandb" / "run.wandb").write_bytes(b"history")
    if registry == "emptied":
        ws.registry_path.write_bytes(b"")
    before = _folder_tree(ws.runs_dir)
    assert {i.action for i in plan(items, ws)} == {"refused"}
    with pytest.raises(LaunchError) as info:
        launch(items, ws, executor="slurm", members=["lt3"])
    message = str(info.value)
    assert "has no row for them" in message and "arctl repair --workdir" in message and "\n" not in message
    assert planned_problem(items, ws) == message  # a dry run shows the launch's own refusal
    res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(ws.root), "--executor", "slurm", "--dry-run", "--json"])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: a launch would be refused: {message}", res.output
    shown = json.loads(res.stdout)  # the preview still comes, and exits as the launch would
    assert shown["refused"] == message and {r["action"] for r in shown["runs"]} == {"refused"}
    assert _folder_tree(ws.runs_dir) == before  # every folder and file as it was
    assert not ws.jobs_dir.exists()


def test_an_export_is_not_a_workspace_to_launch_into(specs, tmp_path, refusing_sbatch):
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import plan, planned_problem

    items = items_from_resolved(resolve_sweep("lt3", []))
    ws = Workspace(tmp_path / "export")
    ws.root.mkdir()
    (ws.root / "export.json").write_text('{"version": 1, "runs": {}}')
    assert {i.action for i in plan(items, ws)} == {"refused"}
    assert "is an arctl export" in planned_problem(items, ws)
    for executor in ("slurm", "local"):
        with pytest.raises(LaunchError, match="is an arctl export"):
            launch(items, ws, executor=executor, members=["lt3"])
    assert sorted(p.name for p in ws.root.iterdir()) == ["export.json"]  # no registry, no runs/


@pytest.mark.parametrize("where", ["a file", "below a file", "not writable"])
def test_a_workdir_that_cannot_be_a_folder_refuses_the_launch_and_its_dry_run(specs, tmp_path, refusing_sbatch, where):
    """Found by a black-box pass: `--dry-run --workdir FILE` (or below one, or under /proc) previewed the
    launch and exited 0, where the launch itself failed at mkdir ("FILE: File exists")."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import planned_problem

    (tmp_path / "afile").write_text("mine\n")
    root = {"a file": tmp_path / "afile", "below a file": tmp_path / "afile" / "ws",
            "not writable": Path("/proc/arctl-ws")}[where]
    items = items_from_resolved(resolve_sweep("lt3", []))
    says = {"a file": f"workspace {root} is a file, not an arctl workspace (a folder)",
            "below a file": f"workspace {root}: {tmp_path / 'afile'} is a file, not a folder",
            "not writable": "workspace /proc/arctl-ws: cannot create files in /proc ("}[where]
    assert says in planned_problem(items, Workspace(root))
    for executor in ("slurm", "local"):
        with pytest.raises(LaunchError, match="choose"):
            launch(items, Workspace(root), executor=executor, members=["lt3"])
        res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(root), "--executor", executor, "--dry-run"])
        lines = res.stderr.strip().splitlines()
        # the command line names the workspace as the user gave it (--workdir), and says what to do
        said = says.replace("workspace ", "--workdir ", 1)
        assert res.exit_code == 2 and len(lines) == 1 and said in lines[0] and "--workdir" in lines[0], res.output
    assert (tmp_path / "afile").read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "bin", "specs"]


@pytest.mark.parametrize("executor", ["local", None])
def test_a_gpu_run_on_a_machine_without_one_refuses_the_launch_and_its_dry_run(tmp_path, monkeypatch, executor):
    """Found by a docs pass: a paper-scale (verl) run for the local executor on a machine without a GPU
    (``auto`` picks local where no SLURM controller answers) was refused by the launch, while its dry run
    previewed it and exited 0 (README: a dry run exits 2 where the launch would be refused)."""
    import torch

    from arctl.backends.verl import overrides
    from arctl.compose import resolve_experiment

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine, as on every CI machine
    monkeypatch.delenv(overrides.ALLOW_CPU_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no sbatch: auto picks local
    root = tmp_path / "ws"
    items = items_from_resolved(resolve_experiment("main-ar-uniform", scale="paper"))
    with pytest.raises(LaunchError) as info:
        launch(items, Workspace(root), executor="local")
    message = str(info.value)
    assert "trains on GPUs and this machine has none" in message and "\n" not in message
    assert not root.exists()  # nothing written
    res = CliRunner().invoke(app, ["run", "main-ar-uniform", "--scale", "paper", "--workdir", str(root), "--dry-run",
                                   "--json", *(["--executor", executor] if executor else [])])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: a launch would be refused: {message}", res.output
    assert json.loads(res.stdout)["refused"] == message and not root.exists()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with one: no GPU refusal
    res = CliRunner().invoke(app, ["run", "main-ar-uniform", "--scale", "paper", "--workdir", str(root), "--dry-run",
                                   "--json", *(["--executor", executor] if executor else [])])
    assert "this machine has none" not in str(json.loads(res.stdout)["refused"]), res.output


def test_a_folder_a_launch_only_prepared_does_not_block_the_next(specs, tmp_path, refusing_sbatch):
    """From the review of the guard above: an interrupted rollback (or a concurrent launch's
    preparation) leaves a folder with config.yaml and status "submitted" and nothing a job made; it
    is no lost registry and must not refuse later launches. (The rollback now also removes folders
    before it deletes rows.)"""
    from arctl.compose import resolve_experiment

    items = items_from_resolved(resolve_experiment("lt", [], arms=["a"]))
    ws = Workspace(tmp_path / "ws")
    shell = ws.run_dir(items[0].run_id)
    (shell / "wandb").mkdir(parents=True)
    (shell / "checkpoints").mkdir()
    (shell / "config.yaml").write_text("experiment: lt\narm: a\nseed: 0\n")
    (shell / "status.json").write_text('{"state": "submitted"}')
    with pytest.raises(LaunchError, match="invalid partition"):  # sbatch's refusal, not the registry's
        launch(items, ws, executor="slurm")


def test_a_repair_keeps_a_queued_slurm_job_pending_so_a_resume_does_not_submit_it_twice(specs, tmp_path, monkeypatch):
    """Left by the last review of `arctl repair`: a run whose job was still queued (status.json
    "submitted", its job id only in the lost registry) was rebuilt FAILED, and `arctl resume` would
    have submitted a second job to train it. The launcher links ``job/<job id>`` once sbatch accepts
    the job; with the registry gone, a launch is refused (naming `arctl repair`), and repair enters
    the run PENDING with that id when the scheduler still has the job. From the review of that fix:
    a job the scheduler does not have (purged, another cluster's) or has ended is not entered
    pending (the row would stay pending for ever); a run whose later resubmission sbatch refused
    ("submitted" written after its only link, by a launch killed before it submitted; status.json
    still names its first job, which ran) is FAILED with the message to check squeue, not RUNNING
    under its first job."""
    import os

    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import plan
    from arctl.launch.refresh import refresh
    from arctl.launch.repair import QUEUED, rebuild_registry
    from arctl.launch.status_file import write_status

    calls, sacct_out = tmp_path / "sbatch-calls", tmp_path / "sacct.out"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo "$1" >> {calls}\n'
                            f'if [ "$(wc -l < {calls})" -eq 1 ]; then echo "Submitted batch job 101"; exit 0; fi\n'
                            'echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; exit 1\n'),
                    srun="exit 0\n", scontrol="echo 'MaxArraySize            = 1001'\n",
                    # the controller has the jobs accounting says are pending
                    sacct=f'cat {sacct_out}\n', squeue=f"sed -n 's/|PENDING$/|PENDING|Priority/p' {sacct_out}\n",
    )

    def sweep():
        return items_from_resolved(resolve_sweep("lt3", []))

    a, b, c = (i.run_id for i in sweep())
    ws = Workspace(tmp_path / "ws")
    launch(sweep(), ws, executor="slurm", members=["lt3"])
    # c's job ran and failed; the retry, ten minutes later, was killed after it wrote "submitted"
    write_status(ws.run_dir(c), state="failed", job_id="101_2", executor="slurm", error="killed")
    made = (ws.run_dir(c) / "job" / "101_2").lstat().st_mtime - 600
    os.utime(ws.run_dir(c) / "job" / "101_2", (made, made), follow_symlinks=False)
    write_status(ws.run_dir(c), state="submitted", error=None)
    assert read_status(ws.run_dir(c))["job_id"] == "101_2"

    ws.registry_path.unlink()  # lost while a's and b's jobs wait in the queue
    assert {i.run_id: i.action for i in plan(sweep(), ws)} == {a: "refused", b: "refused", c: "new"}
    with pytest.raises(LaunchError, match="arctl repair"):
        launch(sweep(), ws, executor="slurm", members=["lt3"])
    assert len(calls.read_text().splitlines()) == 1  # nothing more submitted

    sacct_out.write_text("JobID|State\n101_0|PENDING\n101_2|FAILED\n")  # b's job: not in accounting
    done = rebuild_registry(ws)
    got = {r.run_id: (r.state, r.executor, r.job_id, r.error) for r in done.runs}
    assert got[a] == (states.PENDING, "slurm", "101_0", None)
    # each names the command that resumes that run in this workspace (it said a bare `arctl resume`)
    assert got[b][0] == states.FAILED and got[b][3] == QUEUED.format(resume=f"`arctl resume {b} --workdir {ws.root}`")
    assert got[c][0] == states.FAILED and got[c][2] is None
    assert got[c][3] == QUEUED.format(resume=f"`arctl resume {c} --workdir {ws.root}`")
    with Registry(ws.registry_path) as reg:
        assert {r.run_id: r.state for r in refresh(reg, ws)} == {a: states.PENDING, b: states.FAILED, c: states.FAILED}
    assert {i.run_id: i.action for i in plan(sweep(), ws)} == {a: "active", b: "resume", c: "resume"}

    sacct_out.write_text("JobID|State\n101_0|CANCELLED by 0\n101_1|PENDING\n")  # a's job cancelled meanwhile
    got = {r.run_id: (r.state, r.job_id, r.error) for r in rebuild_registry(ws).runs}
    assert got[a][:2] == (states.FAILED, None) and "job 101_0 ended (cancelled) before the run started" in got[a][2]
    assert got[b][:2] == (states.PENDING, "101_1")


def test_a_refused_rerun_or_resume_leaves_the_run_as_it_was(specs, tmp_path, refusing_sbatch):
    """From the same review: `--force` on a completed run moved its checkpoints, W&B files and status
    to previous/<time>/ before submitting, and when sbatch refused the job nothing put them back:
    the registry said COMPLETED, the folder said "submitted" and held no W&B file (reports and
    export no longer saw the run; a later repair made it FAILED). A refused resume left "submitted"
    over its last job's status likewise. Both are now as they were."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="debug", members=["lt3"])  # the counting backend: three completed runs
    done, stopped = items[0].run_id, items[1].run_id
    with Registry(ws.registry_path) as reg:
        assert {r.state for r in reg.list()} == {states.COMPLETED}
        reg.update_many([(stopped, {"state": states.FAILED})])
    before = {rid: _folder_tree(ws.run_dir(rid)) for rid in (done, stopped)}
    assert "checkpoints/state.json" in before[done] and "status.json" in before[stopped]
    for force in (True, False):  # the rerun of `done`; the resume of `stopped`
        with pytest.raises(LaunchError, match="invalid partition"):
            launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=force, members=["lt3"])
        for rid in (done, stopped):
            assert _folder_tree(ws.run_dir(rid)) == before[rid], rid
            assert not (ws.run_dir(rid) / "previous").exists()
    with Registry(ws.registry_path) as reg:
        assert reg.get(done).state == states.COMPLETED and reg.get(stopped).state == states.FAILED


def test_cancel_goes_on_past_a_job_slurm_no_longer_has_or_that_is_ending(specs, tmp_path, monkeypatch):
    """From the same review: one scancel for all the runs' jobs, and any error failed the whole cancel,
    so a run whose job SLURM no longer had (purged, another cluster's) could never be cancelled and
    the others' cancellations, which scancel had made, were not recorded. Now: "Invalid job id
    specified" for a run that never started cancels it (nothing to stop); for one that reported it
    started, it is left as it is with why (from the review of that fix: it may be training on another
    cluster); "already completing" is left to the next refresh; any other error still fails."""
    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.status_file import write_status

    calls, scancel_err = tmp_path / "scancel-calls", tmp_path / "scancel.err"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch='echo "Submitted batch job 101"\n', srun="exit 0\n",
                    scontrol="echo 'MaxArraySize            = 1001'\n",
                    scancel=f'echo "$*" >> {calls}\nif [ -s {scancel_err} ]; then cat {scancel_err} >&2; exit 1; fi\n',
    )
    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="slurm", members=["lt3"])
    a, b, c = (i.run_id for i in items)
    write_status(ws.run_dir(a), state="running")
    write_status(ws.run_dir(b), state="running")  # on another cluster, or killed without a word and purged
    scancel_err.write_text("scancel: error: Kill job error on job id 101_2: Access/permission denied\n")
    with Registry(ws.registry_path) as reg, pytest.raises(LaunchError, match="permission denied"):
        cancel_runs(reg, ws, reg.list())
    scancel_err.write_text("scancel: error: Kill job error on job id 101_1: Invalid job id specified\n"
                           "scancel: error: Kill job error on job id 101_2: Invalid job id specified\n")
    with Registry(ws.registry_path) as reg:
        said = {r.run_id: why for r, why in cancel_runs(reg, ws, reg.list())}
        got = {r.run_id: (r.state, r.cancel_requested is not None) for r in reg.list()}
    assert calls.read_text().split("\n")[1].split() == ["101_0", "101_1", "101_2"]
    assert got == {a: (states.PENDING, True), b: (states.PENDING, False), c: (states.CANCELLED, True)}
    assert said[a].startswith("cancelling") and "another cluster" in said[b] and said[c].startswith("cancelled")
    silent = time.time() - 2 * 3600
    for path in (*ws.run_dir(b).rglob("*"), *ws.jobs_dir.rglob("*")):
        os.utime(path, (silent, silent), follow_symlinks=False)
    (ws.run_dir(b) / "metrics.jsonl").write_text('{"step": 7}\n')  # quiet status, but it still logs: alive
    with Registry(ws.registry_path) as reg:
        said = {r.run_id: why for r, why in cancel_runs(reg, ws, [reg.get(b)])}
        assert said[b].startswith("not cancelled") and "--force" in said[b] and reg.get(b).state == states.PENDING
    os.utime(ws.run_dir(b) / "metrics.jsonl", (silent, silent))  # killed without a word two hours ago
    with Registry(ws.registry_path) as reg:
        said = {r.run_id: why for r, why in cancel_runs(reg, ws, [reg.get(b)])}
        assert said[b].startswith("cancelled") and reg.get(b).state == states.CANCELLED
        reg.update(b, state=states.PENDING, cancel_requested=None, ended_at=None)  # as it was, logging lately
    os.utime(ws.run_dir(b) / "metrics.jsonl")
    res = CliRunner().invoke(app, ["cancel", b, "--workdir", str(ws.root), "--force"])  # the user knows better
    assert res.exit_code == 0 and "1 run(s) cancelled" in res.stdout, res.output
    with Registry(ws.registry_path) as reg:
        assert reg.get(b).state == states.CANCELLED
    scancel_err.write_text("scancel: error: Kill job error on job id 101_0: Job/step already completing or completed\n")
    with Registry(ws.registry_path) as reg:
        (rec, why), = cancel_runs(reg, ws, [reg.get(a)])
        assert "already ending" in why and reg.get(a).state == states.PENDING
    res = CliRunner().invoke(app, ["cancel", a, "--workdir", str(ws.root), "--json"])  # says so, also in JSON
    assert res.exit_code == 0, res.output
    (shown,) = json.loads(res.stdout)
    assert shown["cancelled"] is False and "already ending" in shown["outcome"]
    res = CliRunner().invoke(app, ["cancel", a, "--workdir", str(ws.root)])
    assert "0 run(s) cancelled; 1 not cancelled" in res.stdout


def test_a_launch_interrupted_around_the_release_of_its_array_leaves_no_job_behind(specs, tmp_path, monkeypatch):
    """Every run folder links its job while the array is held, before the release: a launch killed after the
    release leaves the next launch the job to adopt (from a hunt: released but not linked yet, it was invisible
    and submitted again: two jobs training one run). Interrupted before the release (while linking, or in it),
    the held job is cancelled (it would wait in the queue for ever), no link to it stays, and nothing else. A
    SIGTERM or SIGHUP (kill, a closed ssh session) is such an interrupt too (it ended the process where it
    stood, a held job queued for ever)."""
    import os
    import signal

    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep

    handler_before = signal.getsignal(signal.SIGTERM)
    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch='echo "Submitted batch job 101"\n', srun="exit 0\n",
                    scontrol=f"echo \"scontrol $*\" >> {calls}\n"
                             f"case \"$1\" in release) ls -1 {tmp_path}/ok/runs/*/job/ >> {calls} 2>&1;; esac\n"
                             "echo 'MaxArraySize            = 1001'\n",
                    scancel=f'echo "scancel $*" >> {calls}\n',
    )
    ws = Workspace(tmp_path / "ok")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    said = calls.read_text()
    assert "scontrol release 101" in said and all(f"101_{i}" in said.split("scontrol release 101", 1)[1]
                                                  for i in range(3))  # linked before the release
    real_link, real_release = launcher._link_job_dir, launcher._release

    def interrupted(*args):
        raise KeyboardInterrupt

    def terminated(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("SIGTERM did not interrupt the launch")

    for where, patch in (("link", ("_link_job_dir", interrupted)), ("release", ("_release", interrupted)),
                         ("sigterm", ("_release", terminated))):
        monkeypatch.setattr(launcher, "_link_job_dir", real_link)
        monkeypatch.setattr(launcher, "_release", real_release)
        monkeypatch.setattr(launcher, *patch)
        ws = Workspace(tmp_path / where)
        with pytest.raises(KeyboardInterrupt) as info:
            launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
        assert "scancel 101" in calls.read_text().splitlines()[-1], where
        # said on the CLI's "interrupted" line (a Ctrl-C during a launch exited 130 without a word of it)
        assert "nothing was submitted; its claims are undone" in getattr(info.value, "__notes__", []), where
        assert "sbatch accepted job 101, then the launch was interrupted (job cancelled)" in info.value.__notes__, where
        assert not ws.root.exists(), where  # the workspace this launch made, and nothing else
    assert signal.getsignal(signal.SIGTERM) is handler_before  # the caller's handler, back

    # two arrays (cluster.max_array_size=2), the second's release interrupted: the first is out, and said
    monkeypatch.setattr(launcher, "_link_job_dir", real_link)
    releases = []

    def second_interrupted(*args):
        releases.append(args)
        if len(releases) == 2:
            raise KeyboardInterrupt
        return real_release(*args)

    monkeypatch.setattr(launcher, "_release", second_interrupted)
    ws = Workspace(tmp_path / "two")
    with pytest.raises(KeyboardInterrupt) as info:
        launch(items_from_resolved(resolve_sweep("lt3", ["cluster.max_array_size=2"])), ws, executor="slurm",
               members=["lt3"])
    assert f"submitted before it: 2 run(s) (job(s) 101_0, 101_1), recorded (`arctl status --workdir {ws.root}` shows " \
           "them); the others are undone" in info.value.__notes__, info.value.__notes__


def test_a_launch_that_fails_while_preparing_folders_leaves_every_run_as_it_was(specs, tmp_path, monkeypatch,
                                                                                   refusing_sbatch):
    """From the same review: a full disk (or Ctrl-C) while the launch prepared the run folders was
    outside the rollback: rows stayed SUBMITTING, completed runs of a --force sweep stayed moved to
    previous/. Also: a refused resume kept a folder it had made (the run's was gone), and the registry
    lost the run's error and, for a rerun, its generation (its W&B id)."""
    import errno

    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    a, b, c = (i.run_id for i in items_from_resolved(resolve_sweep("lt3", [])))
    with Registry(ws.registry_path) as reg:
        reg.update_many([(b, {"state": states.FAILED, "error": "OOM at step 3"}),
                         (c, {"state": states.FAILED, "error": "killed"})])
        rows = {r.run_id: (r.state, r.error, r.generation, r.wandb_run_id) for r in reg.list()}
    shutil.rmtree(ws.run_dir(c))
    before = _folder_tree(ws.runs_dir)
    with pytest.raises(LaunchError, match="invalid partition"):  # sbatch refuses: rerun a, resume b and c
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])
    assert _folder_tree(ws.runs_dir) == before and not ws.run_dir(c).exists()
    with Registry(ws.registry_path) as reg:
        assert {r.run_id: (r.state, r.error, r.generation, r.wandb_run_id) for r in reg.list()} == rows

    def full(run_dir, version):  # the disk fills up at the second run (a's rerun is prepared by then)
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / "provenance.json"))

    monkeypatch.setattr(launcher, "record_resume", full)
    with pytest.raises(OSError, match="No space"):  # the CLI names the file in one line
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])
    assert _folder_tree(ws.runs_dir) == before
    with Registry(ws.registry_path) as reg:
        assert {r.run_id: (r.state, r.error, r.generation, r.wandb_run_id) for r in reg.list()} == rows


def test_a_claim_left_by_a_rollback_that_could_not_write_the_registry_is_undone_by_the_next_launch(
        specs, tmp_path, monkeypatch, refusing_sbatch):
    """From the fourth review: a --force sweep refused by sbatch whose rollback could not give the rows
    back (the registry unwritable) left them SUBMITTING under a claim whose process then exited; the
    next plain sweep took them over as resumes and trained the completed run again (under the refused
    rerun's generation). The row now keeps what it was before the claim: the next launch undoes the dead
    claim from the row, then decides (the completed run is skipped, the failed one resumed)."""
    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep
    from arctl.launch.registry import RegistryError

    ws, (a, b, c), rows = _three_done_b_failed(tmp_path)
    dead = dead_claim_token()
    real_token, real_unclaim = launcher.new_claim_token, Registry.unclaim
    monkeypatch.setattr(launcher, "new_claim_token", lambda: dead)

    def unwritable(self, claimed, token):
        raise RegistryError(f"{self.path}: attempt to write a readonly database", "readonly")

    monkeypatch.setattr(Registry, "unclaim", unwritable)
    with pytest.raises(LaunchError, match="could not undo: the registry rows of 3 run"):
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])
    with Registry(ws.registry_path) as reg:
        assert {r.state for r in reg.list()} == {states.SUBMITTING}  # the dead claim, as the rollback left it
    monkeypatch.setattr(launcher, "new_claim_token", real_token)
    monkeypatch.setattr(Registry, "unclaim", real_unclaim)
    planned = {i.run_id: i.action for i in launcher.plan(items_from_resolved(resolve_sweep("lt3", [])), ws)}
    assert planned == {a: "skip", b: "resume", c: "skip"}  # the dry run decides as the launch does
    result = launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    assert {i.run_id: why for i, why in result.skipped} == {a: "completed (use --force to rerun)",
                                                          c: "completed (use --force to rerun)"}
    assert [(i.run_id, i.action) for i in result.submitted] == [(b, "resume")]
    with Registry(ws.registry_path) as reg:
        now = {r.run_id: (r.state, r.error, r.generation) for r in reg.list()}
    assert now == {**rows, b: (states.COMPLETED, None, 0)}
    assert all(r.before_claim is None and r.claim is None for r in Registry(ws.registry_path).list())


@pytest.mark.parametrize("job", ["queued", "started", "earlier", "local"])
def test_a_dead_launchs_job_is_recorded_not_submitted_again(specs, tmp_path, monkeypatch, job):
    """A launch killed between sbatch and the registry leaves its claim (SUBMITTING, a dead process)
    and a job training the run. The next launch (or `arctl status`) takes that job from the run
    folder, the queued job's link or the started job's status, and submits nothing: taking the run
    over as a new claim put a second job on it. Not a job the row already names (an earlier attempt's
    that never started: "earlier") nor a local one (the local queue starts no job whose row names
    another): those runs are resumed (the review found the earlier attempt's job adopted, PENDING for
    ever)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import plan
    from arctl.launch.refresh import refresh
    from arctl.launch.status_file import write_status

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="debug", members=["lt3"])
    a, b, c = (i.run_id for i in items)
    with Registry(ws.registry_path) as reg:
        reg.update_many([(b, {"state": states.FAILED, "error": "OOM", "executor": "slurm", "job_id": "40"})])
    with Registry(ws.registry_path) as reg:  # b's resume, as the killed launch left it
        reg.claim([i.record() for i in items if i.run_id == b], dead_claim_token())
    write_status(ws.run_dir(b), state="submitted", error=None)
    (ws.run_dir(b) / "job").mkdir(exist_ok=True)
    (ws.run_dir(b) / "job" / ("40" if job == "earlier" else "41")).symlink_to(tmp_path)
    if job in ("started", "local"):
        write_status(ws.run_dir(b), state="running", job_id="41", executor="slurm" if job == "started" else "local")
    calls = tmp_path / "calls"
    sacct = f"echo sacct \"$@\" >> {calls}\nprintf 'JobID|State\\n41|RUNNING\\n'\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, sbatch=f"echo sbatch >> {calls}; exit 1\n",
                    srun="exit 0\n", scontrol="echo 'MaxArraySize = 1001'\n")
    if job in ("earlier", "local"):
        assert {i.run_id: i.action for i in plan(items, ws)} == {a: "skip", b: "resume", c: "skip"}
        with pytest.raises(LaunchError):  # submitted again (this sbatch refuses it)
            launch(items, ws, executor="slurm", members=["lt3"])
        assert "sbatch" in calls.read_text()
        assert (Registry(ws.registry_path).get(b).state, Registry(ws.registry_path).get(b).error) == (
            states.FAILED, "OOM")
        return
    assert {i.run_id: i.action for i in plan(items, ws)} == {a: "skip", b: "active", c: "skip"}
    result = launch(items, ws, executor="slurm", members=["lt3"])
    assert result.submitted == [] and "sbatch" not in calls.read_text()
    assert dict((i.run_id, why) for i, why in result.skipped)[b] == "already running"
    with Registry(ws.registry_path) as reg:
        row = reg.get(b)
        assert (row.state, row.job_id, row.executor, row.claim, row.before_claim, row.error) == (
            states.RUNNING, "41", "slurm", None, None, None)
        assert refresh(reg, ws) and reg.get(b).state == states.RUNNING


def test_a_debug_run_training_in_a_live_arctl_process_is_left_to_it(specs, tmp_path, monkeypatch):
    """From the reviews: `arctl cancel` of a debug run wrote it CANCELLED while it kept training inside
    the arctl process that ran it, whose end then wrote COMPLETED over it. Such a run is not cancelled
    (Ctrl-C in that process stops it), from the moment its row says RUNNING; --force records it CANCELLED
    and its end leaves that; a run whose process is gone (or whose pid another process now holds) is
    CANCELLED; one on another host is taken for alive."""
    import subprocess
    import sys

    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.job import RunJob
    from arctl.launch.status_file import write_status

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    run = items[0].run_id
    said = []

    def trains(force):
        def call(self, run_dir):  # inside the debug run, before the job wrote its own status
            with Registry(ws.registry_path) as reg:
                said.append(cancel_runs(reg, ws, [reg.get(run)], force=force)[0][1])
            write_status(run_dir, state="completed")
            return "completed"
        return call

    monkeypatch.setattr(RunJob, "__call__", trains(False))
    launch(items, ws, executor="debug", members=["lt3"])
    assert said[-1].startswith(f"not cancelled: it trains inside the arctl process {os.getpid()}"), said
    assert Registry(ws.registry_path).get(run).state == states.COMPLETED
    monkeypatch.setattr(RunJob, "__call__", trains(True))
    launch(items, ws, executor="debug", members=["lt3"], force=True)
    assert said[-1].startswith("cancelled"), said
    assert Registry(ws.registry_path).get(run).state == states.CANCELLED  # its end did not write over it

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    from arctl.launch.status_file import process_identity

    me = process_identity(os.getpid())
    other = None if me is None else me.rsplit(":", 1)[0] + ":1"  # a process of this boot that started at its tick 1
    for status, state in (({"pid": gone}, states.CANCELLED),
                          # reused: held by a process that started after the run (a status.json without pid_start,
                          # as an older arctl wrote it), or by another process than the one it names
                          ({"pid": os.getpid(), "pid_start": None, "started_at": time.time() - 10 * 86400},
                           states.CANCELLED),
                          *([({"pid": os.getpid(), "pid_start": other}, states.CANCELLED)] if other else []),
                          ({"pid": gone, "host": "another-node"}, states.RUNNING)):
        with Registry(ws.registry_path) as reg:
            reg.update(run, state=states.RUNNING, ended_at=None)
            write_status(ws.run_dir(run), **{"state": "running", "host": socket.gethostname(),
                                             "started_at": time.time(), **status})
            ((_, why),) = cancel_runs(reg, ws, [reg.get(run)])
            assert reg.get(run).state == state, (status, why)


def test_a_dead_launchs_job_is_cancelled_when_its_run_was_cancelled_meanwhile(specs, tmp_path, monkeypatch):
    """A run cancelled while its launch submitted it, and the launch killed after sbatch: the refresh
    that gives the run the job the dead launch had submitted cancels that job (no one else knows it)."""
    from arctl.launch.refresh import refresh

    ws, b = dead_launch_run(tmp_path, "41")
    calls, sched = tmp_path / "calls", tmp_path / "sched"
    sched.write_text("PENDING")
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"printf 'JobID|State\\n41|%s\\n' $(cat {sched})\n",
                    scancel=f"echo scancel \"$@\" >> {calls}\n", srun="exit 0\n")
    with Registry(ws.registry_path) as reg:
        reg.update(b, cancel_requested=time.time())  # `arctl cancel` while the launch was alive
        refresh(reg, ws)
        row = reg.get(b)
        # the job may have started (saving its stop checkpoint): active with the request until SLURM says
        assert (row.state, row.job_id, row.claim) == (states.PENDING, "41", None) and row.cancel_requested
        assert calls.read_text().split() == ["scancel", "41"]
        refresh(reg, ws)  # asked once
        assert reg.get(b).warning is None
        sched.write_text("CANCELLED")
        refresh(reg, ws)
        row = reg.get(b)
    assert (row.state, row.job_id) == (states.CANCELLED, "41")
    assert calls.read_text().split() == ["scancel", "41"]


def test_a_dead_launchs_held_job_is_released_when_its_run_is_given_it(specs, tmp_path, monkeypatch):
    """A launch killed after its job was linked (held) but before the release: the refresh that gives the run
    that job releases it (held, it would wait in the queue for ever; released already, scontrol says no and
    nothing changes)."""
    from arctl.launch.refresh import refresh

    ws, b = dead_launch_run(tmp_path, "41_1")
    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="printf 'JobID|State\\n41_1|PENDING\\n'\n",
                    scontrol=f"echo scontrol \"$@\" >> {calls}\n", srun="exit 0\n")
    with Registry(ws.registry_path) as reg:
        refresh(reg, ws)
        row = reg.get(b)
    assert (row.state, row.job_id, row.claim) == (states.PENDING, "41_1", None)
    assert calls.read_text().split() == ["scontrol", "release", "41_1"]  # its task: a sibling may be cancelled


def test_a_dead_launchs_job_that_scancel_cannot_cancel_is_named_in_status(specs, tmp_path, monkeypatch):
    """From the review: the refresh that adopts a dead launch's job for a cancelled run ignored a failed
    scancel; the run showed "cancelling" while the job trained. arctl status now names the job to cancel."""
    from arctl.launch.refresh import refresh

    ws, b = dead_launch_run(tmp_path, "41")
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="printf 'JobID|State\\n41|PENDING\\n'\n",
                    scancel="echo 'scancel: error: Kill job error on job id 41: Access/permission denied' >&2; exit 1\n",
                    srun="exit 0\n")
    with Registry(ws.registry_path) as reg:
        reg.update(b, cancel_requested=time.time())
        refresh(reg, ws)
        row = reg.get(b)
    assert (row.state, row.job_id) == (states.PENDING, "41") and row.warning == "scancel failed: cancel its job yourself (`scancel 41`)"


def test_the_local_queue_stops_a_job_whose_run_was_cancelled_as_it_started(specs, tmp_path, monkeypatch):
    """From the second review: the local queue checked that a run was PENDING, started its job, and then
    wrote RUNNING over whatever the row had become: a cancel in between was undone and the run trained.
    The write is conditional; a run cancelled meanwhile has its job stopped."""
    import arctl.launch.local_queue as local_queue
    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.job import RunJob

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    monkeypatch.setattr(RunJob, "__call__", lambda self, run_dir: "not trained here")
    launch(items, ws, executor="debug", members=["lt3"])  # its folder and row
    run_id, me = items[0].run_id, f"queue:{os.getpid()}"
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, state=states.PENDING, executor="local", job_id=me)
    stopped = []

    class Job:
        job_id = "4242"

        def cancel(self, check=True):
            stopped.append(self.job_id)

        def done(self):
            return True

    class Executor:
        def submit(self, fn, run_dir):
            with Registry(ws.registry_path) as reg:  # `arctl cancel`, as the job starts
                cancel_runs(reg, ws, [reg.get(run_id)])
            return Job()

    monkeypatch.setattr(local_queue, "local_executor", lambda folder, cluster: Executor())
    local_queue.run_queue(ws.root, [run_id], parallelism=1)
    assert stopped == ["4242"]
    with Registry(ws.registry_path) as reg:
        assert (reg.get(run_id).state, reg.get(run_id).job_id) == (states.CANCELLED, me)


def test_a_freed_slot_is_held_only_while_a_live_queue_that_can_take_it_waits_and_it_is_free(tmp_path):
    """A queue that frees a slot holds back its own next run while another queue waits (its
    ``waiting-PID-N`` marker) only if that queue, which tries slot files 0..N-1, can take it, only while
    that queue lives, and only while the slot is still free (a review: a hold kept for a slot the queue had
    itself taken back idled the rest of its slots)."""
    from arctl.launch.local_queue import QUEUE_MODULE, _others_wait, _still_held, take_slot

    folder = tmp_path / "local-slots"
    slots = [take_slot(folder, 3) for _ in range(3)]
    assert [s.index for s in slots] == [2, 1, 0]  # the highest free slot first
    assert not _others_wait(folder, 0)  # no one waits
    waiter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", QUEUE_MODULE])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live pid, not a queue

    def execed(proc) -> bool:  # its command line is its own (right after the fork it is this process's or empty)
        try:
            return b"time.sleep(60)" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        except OSError:
            return not Path("/proc").is_dir()

    end = time.monotonic() + 60
    while not (execed(waiter) and execed(other)) and time.monotonic() < end:
        time.sleep(0.05)
    try:
        (folder / f"waiting-{waiter.pid}-1").touch()  # a live queue of one slot: file 0 only
        assert _others_wait(folder, 0) and not _others_wait(folder, 1)
        (folder / f"waiting-{os.getpid()}-3").touch()  # this queue's own marker does not count
        assert not _others_wait(folder, 2)
        slots[0].close()  # slot 2 freed: the waiting queue cannot take it, so it is not held
        held = {2}
        assert not _still_held(folder, held) and held == set()
        slots[2].close()  # slot 0 freed: held while it is free
        held = {0}
        assert _still_held(folder, held) and _still_held(folder, held) and held == {0}
        taken = take_slot(folder, 1)  # the waiting queue takes it: the hold ends
        assert taken.index == 0 and not _still_held(folder, held) and held == set()
        taken.close()
        (folder / f"waiting-{other.pid}-3").touch()  # a reused pid that is no queue: its marker goes
        (folder / f"waiting-{waiter.pid}-1").unlink()
        assert not _others_wait(folder, 0) and not (folder / f"waiting-{other.pid}-3").exists()
        (folder / f"waiting-{waiter.pid}-1").touch()
    finally:
        for proc in (waiter, other):
            proc.kill()
            proc.wait()
    assert not _others_wait(folder, 0) and not (folder / f"waiting-{waiter.pid}-1").exists()  # a dead one's goes
    (folder / "waiting-x-1").touch()  # not a marker arctl writes: ignored
    assert not _others_wait(folder, 0) and not _others_wait(folder, None)  # None: a slot where nothing locks
    slots[1].close()


def test_a_force_rerun_killed_after_it_moved_the_finished_files_aside_gets_them_back(specs, tmp_path,
                                                                                    refusing_sbatch):
    """From the fifth review: a --force launch killed (kill -9) after it moved a finished run's files to
    previous/ and before sbatch: the next plain sweep undid the dead claim (the row COMPLETED again)
    but the folder kept an empty checkpoints/ and status "submitted", its files in previous/: a run
    that starts from it found no weights, `arctl repair` rebuilt it FAILED. A refresh (`arctl status`,
    `arctl cancel`, every launch) now takes the dead claim over, puts back the archive whose manifest
    names that claim, and gives the row back."""
    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    before = _folder_tree(ws.runs_dir)
    rows = {r.run_id: (r.state, r.generation, r.wandb_id) for r in Registry(ws.registry_path).list()}

    def killed_before_sbatch():
        launcher._submit_slurm = lambda *args, **kwargs: os._exit(9)
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])

    child = mp.get_context("fork").Process(target=killed_before_sbatch)
    child.start()
    child.join()
    assert child.exitcode == 9
    assert all((ws.run_dir(r) / "previous").is_dir() for r in rows)  # moved aside by the killed launch
    from arctl.launch.refresh import refresh

    with Registry(ws.registry_path) as reg:  # `arctl status` (and `arctl cancel`, which refreshes first)
        assert {r.state for r in refresh(reg, ws)} == {states.COMPLETED}
    assert _folder_tree(ws.runs_dir) == before  # the review: cancel made them CANCELLED, files left aside
    result = launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    assert result.submitted == [] and {why for _, why in result.skipped} == {"completed (use --force to rerun)"}
    assert _folder_tree(ws.runs_dir) == before
    assert {r.run_id: (r.state, r.generation, r.wandb_id) for r in Registry(ws.registry_path).list()} == rows


class _RegistryClock:
    """The registry's clock in a claims test (its module's ``time``): claims are stamped, renewed and judged stale
    by a time that moves only when the test moves it (a launch starved of the CPU ages nothing); the rest of
    ``time`` (its locks' waits) is the real one."""

    def __init__(self):
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


def _claims_renewed(ws: Workspace, when: float, bound_s: float = 60.0) -> None:
    """Wait until every claim in the registry was renewed at ``when`` (the registry's clock) or later: the
    launch's renewing thread's turn, however late a loaded machine gives it (the bound only guards a hang; past
    it the test goes on, and the other launch takes the claims)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        with Registry(ws.registry_path) as reg:
            claims = [r for r in reg.list() if r.state == states.SUBMITTING]
        if claims and all((r.updated_at or 0.0) >= when for r in claims):
            return
        time.sleep(0.01)


def test_a_slow_launch_keeps_its_claims_from_being_taken_for_a_dead_ones(specs, tmp_path, monkeypatch):
    """From the fifth review: a claim older than STALE_CLAIM_S is taken for a dead launch's, and a
    live launch slower than that (thousands of runs, a slow file system or sbatch) had its claims
    taken by another launch, which submitted a second job for each. A launch renews its claims as it
    goes. Here each folder takes 0.6 x STALE_CLAIM_S to prepare by the registry's clock, and another
    launch claims while the third is prepared, 1.8 x STALE_CLAIM_S after the claims were made."""
    import arctl.launch.launcher as launcher
    import arctl.launch.registry as registry
    from arctl.compose import resolve_sweep
    from arctl.launch.registry import new_claim_token

    monkeypatch.setattr(launcher, "CLAIM_BEAT_S", 0.01)
    clock = _RegistryClock()
    monkeypatch.setattr(registry, "time", clock)
    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    real_prepare, seen = launcher.prepare_run_dir, []

    def slow_prepare(run_dir, config):
        clock.now += 0.6 * registry.STALE_CLAIM_S
        if len(seen) == 2:  # another launch of the same sweep, while this one prepares its third folder
            _claims_renewed(ws, clock.now)
            with Registry(ws.registry_path) as reg:
                other = reg.claim([i.record() for i in items], new_claim_token())
                seen.extend(other.claimed)
        seen.append(run_dir)
        return real_prepare(run_dir, config)

    monkeypatch.setattr(launcher, "prepare_run_dir", slow_prepare)
    result = launch(items, ws, executor="debug", members=["lt3"])
    assert len(result.submitted) == 3 and len(seen) == 3  # the other launch claimed nothing


@pytest.fixture
def counting_sbatch(tmp_path, monkeypatch):
    """sbatch answers job 101, then 102, ...; scancel records what it is asked (the file it yields)."""
    calls, count = tmp_path / "scancel-calls", tmp_path / "sbatch-count"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=f'n=$(( $(cat {count} 2>/dev/null || echo 100) + 1 )); echo $n > {count}; '
                           'echo "Submitted batch job $n"\n',
                    scontrol="echo 'MaxArraySize            = 1001'\n",
                    scancel=f'echo "$@" >> {calls}\n',
                    sacct="printf 'JobID|State\\n102|CANCELLED by 0\\n'\n",
                    srun="exit 0\n",
    )
    yield calls


def _while_submitting(monkeypatch, work) -> list:
    """Call ``work()`` inside the launch's first sbatch (its claims made, its job not recorded yet);
    what it returns is the list's item."""
    import arctl.launch.launcher as launcher

    real, out = launcher._submit_chunk, []

    def submit(*args, **kwargs):
        if not out:
            out.append(work())
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher, "_submit_chunk", submit)
    return out


def test_one_sbatch_slower_than_the_staleness_keeps_the_claims(specs, tmp_path, monkeypatch, counting_sbatch):
    """From the sixth review: the claims were renewed between folders and sbatch calls only, so one
    sbatch that blocked longer than STALE_CLAIM_S let another launch take the claims for a dead
    launch's (and submit second jobs). A thread renews them while the launch waits. Here, inside the
    launch's sbatch, 2 x STALE_CLAIM_S after the claims were made by the registry's clock, another
    launch claims."""
    import arctl.launch.launcher as launcher
    import arctl.launch.registry as registry
    from arctl.compose import resolve_sweep
    from arctl.launch.registry import new_claim_token

    monkeypatch.setattr(launcher, "CLAIM_BEAT_S", 0.01)
    clock = _RegistryClock()
    monkeypatch.setattr(registry, "time", clock)
    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))

    def other_launch():
        clock.now += 2 * registry.STALE_CLAIM_S  # a slow sbatch: the claims were made before it began
        _claims_renewed(ws, clock.now)
        with Registry(ws.registry_path) as reg:
            return [r.run_id for r in reg.claim([i.record() for i in items], new_claim_token()).claimed]

    other = _while_submitting(monkeypatch, other_launch)
    result = launch(items, ws, executor="slurm", members=["lt3"])
    assert other == [[]]  # the other launch claimed nothing
    assert len(result.submitted) == 3
    with Registry(ws.registry_path) as reg:
        assert {r.state for r in reg.list("lt3")} == {states.PENDING} and {r.claim for r in reg.list("lt3")} == {None}


def test_a_run_cancelled_while_its_launch_submits_stays_cancelled_and_its_job_goes(specs, tmp_path, monkeypatch,
                                                                                    counting_sbatch):
    """From the sixth review and the review of its fix: `arctl cancel` of a run whose launch was still
    submitting made it CANCELLED, and the launch then wrote it PENDING with its job (the cancel undone,
    the job trained); and a resumed run's row still named its previous job, which the cancel asked
    scancel to stop (an ended job: "already ending", not cancelled). A cancel asks the launch, which
    records the run with its new job and the cancel request and cancels that job (from the second
    review: recorded CANCELLED at once, a job of an earlier chunk, released and started, would train
    beside the next launch's); the run is CANCELLED once SLURM says its job is."""
    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.status_file import write_status

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="slurm", members=["lt3"])
    first = items[0].run_id
    with Registry(ws.registry_path) as reg:  # preempted: the next sweep resumes it under a new job
        reg.update(first, state=states.PREEMPTED)
    write_status(ws.run_dir(first), state="preempted")

    def cancel_first():
        with Registry(ws.registry_path) as reg:
            rec = reg.get(first)
            assert (rec.state, rec.job_id) == (states.SUBMITTING, "101_0")  # the previous attempt's job
            said = [why for _, why in cancel_runs(reg, ws, [rec])]
        shown = CliRunner().invoke(app, ["status", first, "--workdir", str(ws.root), "--no-refresh"])
        assert shown.exit_code == 0 and "cancel requested" in shown.stdout, shown.output  # status says so
        return said

    cancel = _while_submitting(monkeypatch, cancel_first)
    result = launch(items, ws, executor="slurm", members=["lt3"])
    assert cancel == [["cancelled while its launch submits it (its launch cancels the job it submits)"]]
    with Registry(ws.registry_path) as reg:
        got = {r.run_id: (r.state, r.job_id) for r in reg.list("lt3")}
        assert reg.get(first).cancel_requested is not None
    assert got[first] == (states.PENDING, "102")  # one run: a plain job, no array
    assert {v for k, v in got.items() if k != first} == {(states.PENDING, "101_1"), (states.PENDING, "101_2")}
    assert counting_sbatch.read_text().split() == ["102"]  # the new job, and only it, cancelled
    assert result.submitted == [] and (first, "cancelled while this launch submitted it; its job 102 is "
                                              "cancelled") in [(i.run_id, why) for i, why in result.skipped]
    from arctl.launch.refresh import refresh

    with Registry(ws.registry_path) as reg:  # `arctl status`: SLURM says its job was cancelled
        assert [r.state for r in refresh(reg, ws, [reg.get(first)])] == [states.CANCELLED]


def test_a_cancel_that_read_a_run_before_its_launch_recorded_the_job_cancels_that_job(specs, tmp_path,
                                                                                     counting_sbatch):
    """From the review of the fix above: `arctl cancel` read a run SUBMITTING, its launch then recorded
    the job (PENDING), and the cancel wrote CANCELLED over it without cancelling the job. Each cancel
    write is conditional on the row as read; a changed row is read again and cancelled as it is."""
    from dataclasses import replace

    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="slurm", members=["lt3"])
    first = items[0].run_id
    with Registry(ws.registry_path) as reg:
        as_read = replace(reg.get(first), state=states.SUBMITTING, claim="elsewhere:1:x", job_id=None)
        said = [why for _, why in cancel_runs(reg, ws, [as_read])]
        assert (reg.get(first).state, reg.get(first).job_id) == (states.CANCELLED, "101_0")
    assert said == ["cancelled (job 101_0)"] and counting_sbatch.read_text().split() == ["101_0"]
    second = items[1].run_id  # read PENDING; a refresh made it RUNNING before the cancel wrote: asked once, and
    # cancelling until SLURM says its job ended (it may have caught the TERM as it started: test_cancel_race_fix.py)
    with Registry(ws.registry_path) as reg:
        as_read = reg.get(second)
        reg.update(second, state=states.RUNNING)
        said = [why for _, why in cancel_runs(reg, ws, [as_read])]
        assert reg.get(second).state == states.RUNNING and reg.get(second).cancel_requested is not None
    assert said == ["cancelling (job 101_1): it was starting; CANCELLED once it has stopped"]
    assert counting_sbatch.read_text().split() == ["101_0", "101_1"]


def test_a_debug_run_cancelled_while_the_one_before_it_runs_does_not_run(specs, tmp_path, monkeypatch):
    """From the same review: the debug executor set each run RUNNING when its turn came, over a cancel
    made while the runs before it trained."""
    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.job import RunJob
    from arctl.launch.status_file import write_status

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    ran = []

    def fake_run(self, run_dir):
        ran.append(Path(run_dir).name)
        if len(ran) == 1:
            with Registry(ws.registry_path) as reg:
                cancel_runs(reg, ws, [reg.get(items[1].run_id)])
        write_status(Path(run_dir), state="completed")
        return "done"

    monkeypatch.setattr(RunJob, "__call__", fake_run)
    launch(items, ws, executor="debug", members=["lt3"])
    assert ran == [items[0].run_id, items[2].run_id]
    with Registry(ws.registry_path) as reg:
        assert [reg.get(i.run_id).state for i in items] == [states.COMPLETED, states.CANCELLED, states.COMPLETED]


def test_only_the_archive_of_the_dead_claim_is_put_back(tmp_path):
    """From the sixth review: "the newest archive" was taken for the dead rerun's, but every finished
    rerun leaves its archive (and manifest) behind, and names order by local time. An archive names the
    claim that made it; only that one is the dead claim's."""
    import arctl.launch.rundir as rundir

    run_dir = tmp_path / "run"
    for n, claim in enumerate(["h:1:early", None, "h:2:dead"]):
        (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        (run_dir / "checkpoints" / "final.pt").write_text(f"weights {n}")
        (run_dir / "status.json").write_text('{"state": "completed"}')
        rundir.archive_previous(run_dir, claim=claim)
    assert rundir.claimed_archive(run_dir, "h:9:other") is None and rundir.claimed_archive(run_dir, None) is None
    archive = rundir.claimed_archive(run_dir, "h:2:dead")
    rundir.restore_previous(run_dir, archive)
    assert (run_dir / "checkpoints" / "final.pt").read_text() == "weights 2"
    assert rundir.claimed_archive(run_dir, "h:2:dead") is None  # put back: no longer an archive to restore
    assert rundir.claimed_archive(run_dir, "h:1:early") is not None


def test_a_rollback_that_fails_too_keeps_the_first_error_and_gives_the_rows_back(specs, tmp_path, monkeypatch,
                                                                                 refusing_sbatch):
    """From the third review: on a full disk the rollback's own writes fail too; the first failure
    aborted it before the rows were given back (they stayed SUBMITTING under a dead claim, and the
    next sweep "resumed" completed runs), and its error replaced sbatch's. Each step is now alone,
    the rows are given back whatever fails, and the one error line says both. Also: an archive of a
    finished run that fails halfway puts back what it moved (it left the run's files in previous/)."""
    import errno

    import arctl.launch.launcher as launcher
    import arctl.launch.rundir as rundir
    from arctl.compose import resolve_sweep

    ws, (a, b, c), rows = _three_done_b_failed(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(ws.run_dir(b) / "status.json"))

    real_put_back = launcher._put_back
    monkeypatch.setattr(launcher, "_put_back", full)  # b's resume cannot be undone
    with pytest.raises(LaunchError) as info:
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])
    message = str(info.value)
    assert message.startswith("sbatch refused the job") and "could not undo" in message and str(ws.run_dir(b)) in message
    with Registry(ws.registry_path) as reg:
        assert {r.run_id: (r.state, r.error, r.generation) for r in reg.list()} == rows  # every row given back
    assert read_status(ws.run_dir(a))["state"] == "completed"  # a's rerun was undone
    monkeypatch.setattr(launcher, "_put_back", real_put_back)

    # a second Ctrl-C while the rollback puts a's files back: it finishes that first, then stops
    real_restore, restores = launcher.restore_previous, []

    def interrupted_once(run_dir, archive):
        restores.append(run_dir)
        real_restore(run_dir, archive)  # halfway, as it were: the retry must find it done
        if len(restores) == 1:
            raise KeyboardInterrupt

    everything = _folder_tree(ws.runs_dir)
    monkeypatch.setattr(launcher, "restore_previous", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", force=True, members=["lt3"])
    monkeypatch.setattr(launcher, "restore_previous", real_restore)
    assert restores[0] == restores[1] == ws.run_dir(a) and _folder_tree(ws.runs_dir) == everything
    with Registry(ws.registry_path) as reg:
        assert {r.run_id: (r.state, r.error, r.generation) for r in reg.list()} == rows

    before = _folder_tree(ws.run_dir(a))
    real_rename, renames = os.rename, []

    def rename_then_fail(src, dst):  # e.g. checkpoints/ on another file system (EXDEV): no copy, ever
        renames.append(src)
        if len(renames) == 2:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real_rename(src, dst)

    monkeypatch.setattr(rundir.os, "rename", rename_then_fail)
    with pytest.raises(OSError, match="cross-device"):
        rundir.archive_previous(ws.run_dir(a))
    monkeypatch.setattr(rundir.os, "rename", real_rename)
    assert len(renames) == 2 and _folder_tree(ws.run_dir(a)) == before and not (ws.run_dir(a) / "previous").exists()
    # put back twice (a second Ctrl-C during the first): the second changes nothing
    archive = rundir.archive_previous(ws.run_dir(a))
    rundir.restore_previous(ws.run_dir(a), archive)
    rundir.restore_previous(ws.run_dir(a), archive)
    assert _folder_tree(ws.run_dir(a)) == before


def test_a_job_sbatch_accepted_before_submitit_failed_is_cancelled(specs, tmp_path, monkeypatch):
    """From the same review: after sbatch answers, submitit still moves the job's files into its
    folder; a failure (or Ctrl-C) there was reported "sbatch refused the job" and the held job stayed
    in the queue for ever. The job id submitit parsed from sbatch's answer is cancelled, and only its
    folders are removed (from the next review: another launch into the same workspace may be
    submitting its own job meanwhile; its job and folders were cancelled and removed too)."""
    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep

    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch='echo "Submitted batch job 101"\n', srun="exit 0\n",
                    scontrol="echo 'MaxArraySize            = 1001'\n", scancel=f'echo "scancel $*" >> {calls}\n',
    )
    real = launcher.slurm_executor

    class Failing:
        def __init__(self, folder, params):
            self.jobs_dir = Path(str(folder)).parent

        @staticmethod
        def _get_job_id_from_submission_command(output):
            return output.split()[-1]

        def map_array(self, fn, args):
            self._get_job_id_from_submission_command("Submitted batch job 101")
            (self.jobs_dir / "101_0").mkdir(parents=True)  # submitit had moved task 0's pickle
            (self.jobs_dir / "202_0").mkdir(parents=True)  # another launch's job, meanwhile
            raise self.exc

    for exc, raised in ((OSError("No space left on device"), LaunchError), (KeyboardInterrupt(), KeyboardInterrupt)):
        Failing.exc = exc
        monkeypatch.setattr(launcher, "slurm_executor", Failing)
        ws = Workspace(tmp_path / f"ws-{raised.__name__}")
        ws.jobs_dir.mkdir(parents=True)  # a workspace in use (by the other launch too)
        calls.unlink(missing_ok=True)
        with pytest.raises(raised) as info:
            launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
        assert calls.read_text().splitlines() == ["scancel 101"]
        if raised is LaunchError:
            assert "sbatch accepted job 101, then the submission failed (job cancelled)" in str(info.value)
        else:  # said on the "interrupted" line too
            assert "sbatch accepted job 101, then the launch was interrupted (job cancelled)" in info.value.__notes__
        assert sorted(p.name for p in ws.jobs_dir.iterdir()) == ["202_0"]
    monkeypatch.setattr(launcher, "slurm_executor", real)


def test_a_debug_run_cancelled_while_the_runs_before_it_ran_is_not_run_and_not_named_this_process(
        specs, tmp_path, monkeypatch):
    """From the review: a debug launch named its process in a run's status.json before it knew the run
    was still pending; a run cancelled meanwhile kept that pid, host and start."""
    from arctl.compose import resolve_sweep
    from arctl.launch.control import cancel_runs
    from arctl.launch.job import RunJob
    from arctl.launch.status_file import read_status, write_status

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))[:2]
    first, second = (i.run_id for i in items)
    ran = []

    def call(self, run_dir):  # the first run cancels the second, which waits for it
        ran.append(Path(run_dir).name)
        with Registry(ws.registry_path) as reg:
            cancel_runs(reg, ws, [reg.get(second)])
        write_status(run_dir, state="completed")
        return "completed"

    monkeypatch.setattr(RunJob, "__call__", call)
    said = []
    launch(items, ws, executor="debug", members=["lt3"], echo=said.append)
    assert ran == [first] and any(line.startswith(f"not running {second}: it was cancelled") for line in said), said
    with Registry(ws.registry_path) as reg:
        assert (reg.get(first).state, reg.get(second).state) == (states.COMPLETED, states.CANCELLED)
    status = read_status(ws.run_dir(second))
    assert (status.get("pid"), status.get("host"), status.get("started_at")) == (None, None, None), status
    assert read_status(ws.run_dir(first))["pid"] == os.getpid()


def test_single_ray_jobs_of_a_sweep_keep_to_array_parallelism(specs, tmp_path, monkeypatch):
    """From a review of the GPU path: a verl run is a job of its own (its Ray body is per run), so
    cluster.array_parallelism, which bounds an array's tasks (%P), bounded nothing: 27 jobs of 8 GPUs went
    out at once. Now the job P places later waits for each one to end, whatever its end (afterany)."""
    from arctl.compose import resolve_experiment

    count, scripts = tmp_path / "n", tmp_path / "scripts"
    scripts.mkdir()
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo x >> {count}\nn=$(wc -l < {count})\ncp "$1" {scripts}/$((200 + n)).sh\n'
                            'echo "Submitted batch job $((200 + n))"\n'),
                    scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                    squeue="exit 0\n", sacct="exit 0\n", srun="exit 0\n")
    runs = resolve_experiment("main-grpo", scale="paper", seeds=[0, 1, 2, 3, 4],
                              overrides=["cluster=slurm", "cluster.array_parallelism=2", "verl.rehearsal_steps=2"])
    items = items_from_resolved(runs)
    result = launch(items, Workspace(tmp_path / "ws"), executor="slurm")
    assert len(result.submitted) == 5 and len(count.read_text().splitlines()) == 5  # five jobs, none an array
    deps = []
    for k in range(5):
        text = (scripts / f"{201 + k}.sh").read_text()
        assert "#SBATCH --array" not in text
        deps.append([line for line in text.splitlines() if line.startswith("#SBATCH --dependency")])
    assert deps == [[], [], ["#SBATCH --dependency=afterany:201"], ["#SBATCH --dependency=afterany:202"],
                    ["#SBATCH --dependency=afterany:203"]], deps
    from arctl.track.phase import read_phase

    phases = [read_phase(Workspace(tmp_path / "ws").run_dir(i.run_id)) for i in items]
    assert phases[:2] == [None, None] and phases[2] == f"queued behind {items[0].run_id}'s job (cluster.array_parallelism)"
    from arctl.launch import refresh as refresh_module

    # cancelled before its slot came: ended, no longer queued
    monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({j: "CANCELLED" for j in ids}, "sacct"))
    with Registry(Workspace(tmp_path / "ws").registry_path) as reg:
        refreshed = {r.run_id: r for r in refresh_module.refresh(reg, Workspace(tmp_path / "ws"))}
    assert refreshed[items[2].run_id].state in states.TERMINAL and refreshed[items[2].run_id].phase is None
    # the dry run shows the same chain, the job ids still unknown (a review)
    res = CliRunner().invoke(app, ["run", "main-grpo", "--scale", "paper", "--seeds", "0-4", "--executor", "slurm",
                                   "--workdir", str(tmp_path / "ws3"), "--dry-run", "--json", "cluster=slurm",
                                   "cluster.array_parallelism=2", "verl.rehearsal_steps=2"])
    shown = json.loads(res.stdout)["sbatch"]
    assert ["#SBATCH --dependency=afterany:SLOT_JOB" in s["script"] for s in shown] == [False, False, True, True, True]
    assert f"it waits for the end of {items[0].run_id}'s job" in shown[2]["title"], shown[2]["title"]
    # runs that start from another (init_from: afterok on it) take their place in the same chain (a review)
    runs = resolve_experiment("baselines-l1", scale="paper", seeds=[0, 1],
                              overrides=["cluster=slurm", "cluster.array_parallelism=1", "verl.rehearsal_steps=2"])
    launch(items_from_resolved(runs), Workspace(tmp_path / "ws2"), executor="slurm")
    deps = {k: [line for line in (scripts / f"{k}.sh").read_text().splitlines() if line.startswith("#SBATCH --dep")]
            for k in range(206, 210)}
    assert deps == {206: [], 207: ["#SBATCH --dependency=afterany:206"],
                    208: ["#SBATCH --dependency=afterok:206,afterany:207"],
                    209: ["#SBATCH --dependency=afterok:207,afterany:208"]}, deps


def test_a_sweep_shares_no_cell_with_a_run_whose_job_died_and_prefers_a_completed_one(specs, tmp_path, monkeypatch):
    """From a review of sweeps: share_arms decided on the registry's states as they were last written. A run
    outside the sweep with the cell's config, RUNNING in the registry though its local queue had died, took
    the cell (nothing submitted, and every later sweep skipped it again until some `arctl status`); and of a
    cell's runs, a dead one was kept over a completed one. The states are refreshed first (read-only), and a
    completed run is kept first."""
    from arctl.compose import resolve_experiment, resolve_sweep
    from arctl.launch.registry import new_claim_token
    from arctl.launch.rundir import frozen_config, prepare_run_dir
    from arctl.launch.shared import mark_shared, workspace_runs

    (specs / "experiments" / "lt2.yaml").write_text(
        "description: shares arm a with lt\nseeds: [0]\noverrides: [trainer.total_steps=6, wandb.mode=disabled, "
        "cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]\narms:\n  a: [algo=grpo, prior=base]\n")
    (specs / "sweeps" / "share.yaml").write_text("description: x\nexperiments: [lt]\nseeds: [0]\nshare_arms: true\n")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (outside,) = items_from_resolved(resolve_experiment("lt2", arms=["a"], seeds=[0]))
    ws = Workspace.open(str(tmp_path / "ws"))
    ws.root.mkdir(parents=True)
    with Registry(ws.registry_path) as reg:
        reg.claim([outside.record()], new_claim_token())
        prepare_run_dir(ws.run_dir(outside.run_id), frozen_config(outside.config, outside.run_id, outside.run_id))
        reg.update_many([(outside.run_id, {"state": states.RUNNING, "executor": "local", "job_id": f"queue:{dead}",
                                           "claim": None, "before_claim": None})])
    items = items_from_resolved(resolve_sweep("share", [], None, None))
    a = next(i for i in items if i.arm == "a")
    mark_shared(items, *workspace_runs(items, ws))
    assert a.shares is None and a.run_id != outside.run_id  # the dead run serves no cell: lt/a runs
    with Registry(ws.registry_path) as reg:
        assert reg.get(outside.run_id).state == states.RUNNING  # read-only: the launch's own refresh writes it
        reg.update_many([(outside.run_id, {"state": states.COMPLETED})])
    items = items_from_resolved(resolve_sweep("share", [], None, None))
    mark_shared(items, *workspace_runs(items, ws))
    assert next(i for i in items if i.arm == "a").shares == outside.run_id  # a completed outside run serves it
    # of a cell group's own runs, the completed one is kept over one that is (still) running
    cells = [type("I", (), {"run_id": "r-running", "config": a.config, "experiment": "e", "arm": "x", "seed": 0,
                            "after": None, "shares": None})(),
             type("I", (), {"run_id": "r-done", "config": a.config, "experiment": "e", "arm": "y", "seed": 0,
                            "after": None, "shares": None})()]
    mark_shared(cells, {"r-running": states.RUNNING, "r-done": states.COMPLETED}, [])
    assert cells[0].shares == "r-done" and cells[1].shares is None


def test_slot_files_are_locked_through_a_writable_descriptor_and_kept_per_host(tmp_path, monkeypatch):
    """From a review: the slot files were flock'ed through a read-only descriptor, which NFS (flock emulated with
    POSIX locks) refuses with EBADF: the queue then ran unlocked, oversubscribing without a word; and a
    workspace shared by two hosts pooled their slots (one host's queue waited for the other's runs)."""
    import fcntl as fcntl_
    import socket

    from arctl.config.files import open_lock
    from arctl.launch.local_queue import slots_folder

    with open_lock(tmp_path / "new.lock") as made, open_lock(tmp_path / "new.lock") as existing:
        for handle in (made, existing):
            assert fcntl_.fcntl(handle.fileno(), fcntl_.F_GETFL) & os.O_ACCMODE == os.O_RDWR
    # another user's lock file (opened for writing: EACCES) is still locked read-only, as before
    real_open = os.open

    def refuse_writing(path, flags, *a):
        if flags & os.O_ACCMODE == os.O_RDWR and not flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", refuse_writing)
    with open_lock(tmp_path / "new.lock") as theirs:
        assert fcntl_.fcntl(theirs.fileno(), fcntl_.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    monkeypatch.undo()
    assert slots_folder(tmp_path / "ws") == tmp_path / "ws" / "local-slots" / socket.gethostname()


def test_online_and_offline_runs_are_submitted_apart_so_no_offline_job_carries_the_key():
    """From a review of secrets: runs were grouped into one array by their sbatch settings alone, and an online
    run's submission keeps WANDB_API_KEY in the environment sbatch stores with every task of the array."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import LaunchItem, _groups, needs_api_key

    offline = resolve_experiment("ablation-vr", seeds=[0, 1])
    online = resolve_experiment("ablation-vr", ["wandb.mode=online"], seeds=[2])
    items = [LaunchItem(f"r{i}", run) for i, run in enumerate([*offline, *online])]
    groups = _groups(items, None, ask_site=False)
    assert sorted(len(chunk) for _, chunk in groups) == [len(online), len(offline)]
    for _, chunk in groups:
        assert len({needs_api_key([item]) for item in chunk}) == 1  # each submission is one kind
    assert _groups(items[: len(offline)], None, ask_site=False)[0][1] == items[: len(offline)]  # offline: one array


def test_a_slurm_submission_leaves_every_secret_out_but_those_its_runs_name(monkeypatch):
    """sbatch stores the environment it exports in SLURM's state: an HF token, a cloud key, a GitHub token of the
    launching shell went there with every job (from a review). Now a SLURM submission carries only the secrets
    its runs name in cluster.secrets (and an online run the W&B key); runs that name others go in another
    array; a local submission (no scheduler state) still drops only the W&B key of offline runs."""
    import os

    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import LaunchItem, _groups, job_environment, left_out_secrets

    shell = {"HF_TOKEN": "hf_" + "x" * 20, "GITHUB_TOKEN": "ghp_" + "y" * 20, "WANDB_API_KEY": "k" * 40,
             "AWS_SECRET_ACCESS_KEY": "z" * 30, "MY_PASSWORD": "short", "TOKENIZERS_PARALLELISM": "false"}
    from arctl.track.identity import is_secret_name

    for name in [n for n in os.environ if is_secret_name(n)]:  # the developer's own (an OPENAI_API_KEY, a GH_TOKEN)
        monkeypatch.delenv(name)
    for name, value in shell.items():
        monkeypatch.setenv(name, value)
    plain = LaunchItem("plain", resolve_experiment("ablation-vr", arms=["grpo"])[0])
    hf = LaunchItem("hf", resolve_experiment("ablation-vr", ["cluster.secrets=[HF_TOKEN]"], arms=["grpo"])[0])
    online = LaunchItem("on", resolve_experiment("ablation-vr", ["wandb.mode=online"], arms=["grpo"])[0])
    secret = ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "HF_TOKEN", "MY_PASSWORD", "WANDB_API_KEY"]
    assert left_out_secrets([plain]) == secret  # by name, whatever the value's length; TOKENIZERS_* is no secret
    named = LaunchItem("named", resolve_experiment(
        "ablation-vr", ["wandb.mode=online", "cluster.secrets=[WANDB_API_KEY]"], arms=["grpo"])[0])
    # an online run's key goes only where its run names it: sbatch stores the environment in SLURM's state (from
    # an audit: the key sat in slurm/ctld/hash.N/job.N/environment); its job reads ~/.netrc (`wandb login`)
    for items, kept in (([plain], set()), ([hf], {"HF_TOKEN"}), ([online], set()), ([named], {"WANDB_API_KEY"})):
        with job_environment(items, scheduler=True):
            assert {n for n in secret if n in os.environ} == kept
            assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
        assert all(os.environ[n] == v for n, v in shell.items())  # the shell's own environment, back
    with job_environment([online]):  # local (no scheduler state): an online run's job gets the key
        assert os.environ["WANDB_API_KEY"] == shell["WANDB_API_KEY"]
    with job_environment([plain]):  # local: only the key of an offline run goes
        assert "WANDB_API_KEY" not in os.environ and os.environ["HF_TOKEN"] == shell["HF_TOKEN"]
    chunks = [sorted(i.run_id for i in chunk) for _, chunk in _groups([plain, hf, online], None, ask_site=False)]
    assert sorted(chunks) == [["hf"], ["on"], ["plain"]]  # one array each: sbatch stores one environment per array


def test_an_online_slurm_submission_needs_a_wandb_login_or_the_key_named(tmp_path, monkeypatch):
    """arctl never puts WANDB_API_KEY into SLURM's state on its own: an online run's job reads the key from
    ~/.netrc (`wandb login`); without one here, the submission (and its dry run) is refused in one line that says
    both ways, before anything is claimed; cluster.secrets=[WANDB_API_KEY] passes it knowingly."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import LaunchItem, online_key_problem

    key = "k" * 40
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "WANDB_API_KEY": key}
    online = LaunchItem("on", resolve_experiment("ablation-vr", ["wandb.mode=online"], arms=["grpo"])[0])
    offline = LaunchItem("off", resolve_experiment("ablation-vr", arms=["grpo"])[0])
    named = LaunchItem("named", resolve_experiment(
        "ablation-vr", ["wandb.mode=online", "cluster.secrets=[WANDB_API_KEY]"], arms=["grpo"])[0])
    with pytest.raises(LaunchError, match=r"ablation-vr/grpo: wandb.mode=online on SLURM needs the W&B key .* "
                                          r"`wandb login` on the cluster .* cluster.secrets=\[WANDB_API_KEY\]"):
        online_key_problem([offline, online], env)
    online_key_problem([offline, named], env)  # named: passed knowingly
    online_key_problem([offline], env)  # offline: no key needed
    (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {key}\n")
    online_key_problem([online], env)  # `wandb login` done: the job reads it there
    (home / ".netrc").write_text(f"machine github.com login me password {key}\n")  # no W&B login
    with pytest.raises(LaunchError):
        online_key_problem([online], env)
    slurm_shims.use(tmp_path / "bin", monkeypatch)  # every SLURM program the dry run may look up
    res = CliRunner().invoke(app, ["run", "ablation-vr", "--arm", "grpo", "wandb.mode=online", "--executor", "slurm",
                                   "--dry-run", "--workdir", str(tmp_path / "ws")], env=env)
    assert res.exit_code == 2 and "wandb.mode=online on SLURM needs the W&B key" in res.output, res.output
    assert not (tmp_path / "ws").exists()


def test_cluster_secrets_takes_variable_names():
    from arctl.compose import resolve_experiment
    from arctl.compose.errors import SpecError

    with pytest.raises(SpecError, match="cluster.secrets"):
        resolve_experiment("ablation-vr", ["cluster.secrets=[HF-TOKEN]"], arms=["grpo"])
    with pytest.raises(SpecError, match="which only an online run.s job uses"):  # an offline run's job never gets the W&B key
        resolve_experiment("ablation-vr", ["cluster.secrets=[WANDB_API_KEY]"], arms=["grpo"])


def _accepting_sbatch(tmp_path, monkeypatch) -> Path:
    """sbatch accepts every submission as job 101, 102, ... and keeps each script (its path in a log)."""
    scripts = tmp_path / "sbatch-scripts"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo "$1" >> {scripts}\n'
                            f'echo "Submitted batch job $((100 + $(wc -l < {scripts})))"\n'),
                    srun="exit 0\n", scontrol="echo 'MaxArraySize            = 1001'\n")
    return scripts


def _array_lines(ws: Workspace) -> list[tuple[str, str]]:
    """(the --array line, the --dependency line; '' where none) of each array's sbatch script, in job-id order
    (submitit submits an array of one task as a plain job)."""
    out = []
    for folder in sorted((p for p in ws.jobs_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        lines = (folder / f"{folder.name}_submission.sh").read_text().splitlines()
        array = next((x for x in lines if x.startswith("#SBATCH --array")), "")
        dep = next((x for x in lines if x.startswith("#SBATCH --dependency")), "")
        out.append((array, dep))
    return out


def test_several_arrays_of_one_launch_keep_to_array_parallelism_in_all(specs, tmp_path, monkeypatch):
    """A launch whose runs need different sbatch settings (here: online and offline, which go apart so that the W&B
    key stays out of the offline tasks) goes out as several arrays. Each had its own %P, so a launch with P=4 ran up
    to 8 (from a review). Now P is split in proportion to the arrays' sizes; with more arrays than P, each array
    waits for the one P places before it (afterany)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import array_shares

    assert array_shares([6, 3], 4) == [3, 1] and array_shares([1, 10], 4) == [1, 3] and array_shares([5], 4) == [4]
    assert array_shares([2, 2], 64) == [2, 2] and array_shares([5, 5, 5], 2) == [1, 1, 1]
    _accepting_sbatch(tmp_path, monkeypatch)
    items = items_from_resolved(resolve_sweep("lt3", ["cluster.max_array_size=2"]))  # 3 runs: arrays of 2 + 1
    launch(items, ws := Workspace(tmp_path / "ws"), executor="slurm", members=["lt3"], array_parallelism=2)
    assert _array_lines(ws) == [("#SBATCH --array=0-1%1", ""), ("", "")]  # P=2: 1 + the single task
    launch(items_from_resolved(resolve_sweep("lt3", ["cluster.max_array_size=1"])), ws2 := Workspace(tmp_path / "ws2"),
           executor="slurm", members=["lt3"], array_parallelism=2)  # three arrays of 1 task, P=2
    assert _array_lines(ws2) == [("", ""), ("", ""), ("", "#SBATCH --dependency=afterany:103")]  # the third waits
    # for the first (jobs 103, 104, 105 of the shim's count)


def test_two_launches_into_one_workspace_submit_one_at_a_time(specs, tmp_path, monkeypatch):
    """submitit writes its pickles and script into jobs/ under temporary names before sbatch answers, and a refused
    submission removes the new entries there: while two launches submitted at once, those were the other launch's
    own (from a review). Submissions into one workspace now take turns: two launches' sbatch calls never overlap."""
    import subprocess
    import sys

    spans = tmp_path / "sbatch-spans"
    count = tmp_path / "sbatch-count"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'start=$(date +%s.%N); sleep 1.5\necho x >> {count}\n'
                            f'echo "$start $(date +%s.%N)" >> {spans}\n'
                            f'echo "Submitted batch job $((100 + $(wc -l < {count})))"\n'),
                    srun="exit 0\n", scontrol="echo 'MaxArraySize            = 1001'\n")
    ws = tmp_path / "ws"
    procs = [subprocess.Popen([sys.executable, "-m", "arctl.cli.main", "run", "lt", "--arm", arm, "--executor", "slurm",
                               "--workdir", str(ws), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for arm in ("a", "b")]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
    (s1, e1), (s2, e2) = sorted(tuple(map(float, line.split())) for line in spans.read_text().splitlines())
    assert e1 <= s2, f"sbatch calls overlapped: {s1:.2f}-{e1:.2f} and {s2:.2f}-{e2:.2f}"


def test_a_rollback_note_reaches_the_user_on_a_python_without_exception_notes(capsys):
    """pyproject admits Python 3.10, whose exceptions have no add_note: a Ctrl-C during a submission whose rollback
    left something undone raised AttributeError there (masking the Ctrl-C and the note). The note goes to stderr."""
    from arctl.launch.signals import add_note

    class NoNotes(KeyboardInterrupt):  # as Python 3.10's exceptions are
        @property
        def add_note(self):
            raise AttributeError("add_note")

    err = NoNotes()
    add_note(err, "and could not undo: x")
    assert capsys.readouterr().err == "note: and could not undo: x\n"
    now = KeyboardInterrupt()
    add_note(now, "and could not undo: y")
    assert now.__notes__ == ["and could not undo: y"]
