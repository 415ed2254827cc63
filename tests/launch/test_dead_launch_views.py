"""What `arctl status` and `arctl cancel` say of runs an interrupted launch left behind, and of a run whose folder
was deleted while its job waits (found by a read-only hunt of interrupted launches, 2026-12-04)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from dead_launch import dead_claim_token, dead_launch_run  # tests/support/dead_launch.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry, new_claim_token
from arctl.launch.status_file import mark_submitted
from arctl.launch.workspace import Workspace


def _new_runs_claimed(tmp_path, token: str):
    """(workspace, run ids b and c): lt3's run a completed (debug executor); b and c new runs claimed by the launch
    of ``token``, which registered them and prepared b's folder but submitted nothing."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items[:1], ws, executor="debug", members=["lt3"])
    with Registry(ws.registry_path) as reg:
        claim = reg.claim([i.record() for i in items[1:]], token, members=["lt3"])
    assert [r.state for r in claim.claimed] == [states.SUBMITTING] * 2
    b, c = (i.run_id for i in items[1:])
    ws.run_dir(b).mkdir(parents=True)
    mark_submitted(ws.run_dir(b))
    return ws, b, c


def _status(ws, *args: str):
    res = CliRunner().invoke(app, ["status", *args, "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    return res.output


def test_status_says_a_dead_launchs_new_runs_are_not_being_submitted(specs, tmp_path):
    """A launch killed between registering its new runs and submitting them: they showed SUBMITTING until the
    next launch, as if still being submitted. Status says the launch is gone and which command submits them."""
    ws, b, c = _new_runs_claimed(tmp_path, dead_claim_token())
    out = _status(ws)
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines() if line.startswith(("lt_", b, c))}
    assert rows[b] == rows[c] == "INTERRUPTED", out
    assert "SUBMITTING" not in out and "2 interrupted" in out
    (note,) = [line for line in out.splitlines() if line.startswith(f"{b}:")]
    assert "its launch was interrupted before it submitted it" in note and f"`arctl sweep lt3 --scale tiny --seeds 0 --workdir {ws.root}` (with the overrides it was launched with) submits it" in note
    doc = {r["run_id"]: r for r in json.loads(_status(ws, "--json"))}  # the state the table shows (a script polling
    assert doc[b]["state"] == states.INTERRUPTED and "its launch was interrupted" in doc[b]["warning"]  # for it)
    assert doc[b]["recorded_state"] == states.SUBMITTING and doc[c]["state"] == states.INTERRUPTED
    with Registry(ws.registry_path) as reg:  # shown, nothing written: the next launch takes them for new runs
        assert (reg.get(b).state, reg.get(b).warning) == (states.SUBMITTING, None)
    with Registry(ws.registry_path) as reg:  # a stored warning stays beside the note (a review: it was replaced)
        reg.update_many([(c, {"warning": "an earlier attempt's warning"})])
    (note,) = [line for line in _status(ws).splitlines() if line.startswith(f"{c}:")]
    assert "its launch was interrupted" in note and note.endswith("; an earlier attempt's warning")
    logs = CliRunner().invoke(app, ["logs", c, "--workdir", str(ws.root)])  # it said "the job has not started"
    assert logs.exit_code == 0 and "no log files: its launch was interrupted before it submitted it" in logs.output
    assert logs.output.split()[:2] == [c, states.INTERRUPTED], logs.output  # as status says, not SUBMITTING
    doc = json.loads(CliRunner().invoke(app, ["logs", c, "--json", "--workdir", str(ws.root)]).stdout)
    assert (doc["state"], doc["recorded_state"]) == (states.INTERRUPTED, states.SUBMITTING)


def test_status_shows_a_live_launchs_runs_as_submitting(specs, tmp_path):
    """The runs a launch that is alive still submits (a concurrent `arctl status`) stay SUBMITTING, without a note."""
    ws, b, c = _new_runs_claimed(tmp_path, new_claim_token())  # this process: alive
    out = _status(ws)
    assert "2 submitting" in out and "INTERRUPTED" not in out and "interrupted" not in out, out
    res = CliRunner().invoke(app, ["cancel", b, "--workdir", str(ws.root)])
    assert res.exit_code == 0 and "cancelled while its launch submits it" in res.output, res.output


def test_cancel_of_a_dead_launchs_new_run_says_there_was_nothing_to_cancel(specs, tmp_path):
    """`arctl cancel` of such a run said "cancelled" and the row stayed SUBMITTING. No job was submitted for it:
    it says so, changes nothing, and status goes on saying what submits it."""
    ws, b, c = _new_runs_claimed(tmp_path, dead_claim_token())
    res = CliRunner().invoke(app, ["cancel", b, "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{b}: not cancelled: nothing to cancel"), res.output
    assert "0 run(s) cancelled; 1 not cancelled" in res.output
    with Registry(ws.registry_path) as reg:
        row = reg.get(b)
    assert (row.state, row.cancel_requested) == (states.SUBMITTING, None)
    out = _status(ws, b)
    assert "INTERRUPTED" in out and "cancel requested" not in out, out


def test_status_warns_of_a_pending_runs_deleted_folder(specs, tmp_path, monkeypatch):
    """A run folder deleted by hand while its job waits in SLURM's queue: status said nothing, and the job failed
    when it started. Status warns on that run, in one line."""
    ws, b, _ = _new_runs_claimed(tmp_path, new_claim_token())
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="printf 'JobID|State\\n77_1|PENDING\\n'\n",
                    squeue="printf '77_1|PENDING|Priority\\n'\n", scancel="exit 0\n", srun="exit 0\n")
    with Registry(ws.registry_path) as reg:
        reg.update(b, state=states.PENDING, executor="slurm", job_id="77_1", claim=None, before_claim=None,
                   submitted_at=time.time() - 100)
    assert "folder" not in _status(ws)
    shutil.rmtree(ws.run_dir(b))
    out = _status(ws)
    (line,) = [line for line in out.splitlines() if line.startswith(f"{b}:")]
    assert "PENDING" in out and f"its run folder {ws.run_dir(b)} is gone" in line, out
    assert "`arctl cancel" in line
    # what it says to do works: the cancel, then the sweep launches it afresh (debug executor here)
    res = CliRunner().invoke(app, ["cancel", b, "--workdir", str(ws.root)])
    assert res.exit_code == 0 and "1 run(s) cancelled" in res.output, res.output
    out = _status(ws, b)  # ended: no job to cancel, what launches it again is said
    (line,) = [line for line in out.splitlines() if line.startswith(f"{b}:")]
    assert "CANCELLED" in out and "is gone" in line and "`arctl cancel" not in line, out
    assert f"`arctl sweep lt3 --scale tiny --seeds 0 --workdir {ws.root}` (with the overrides it was launched with) launches it" in line
    from arctl.compose import resolve_sweep

    result = launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    assert b in {i.run_id for i in result.submitted} and not result.failed
    with Registry(ws.registry_path) as reg:
        assert (reg.get(b).state, reg.get(b).warning) == (states.COMPLETED, None)


@pytest.mark.parametrize("linked", [False, True])
def test_cancel_of_a_dead_launchs_claim_no_refresh_settled_says_what_it_did(specs, tmp_path, linked):
    """A dead launch's claim on an existing run that a refresh has not settled yet (another process raced it):
    without a job, nothing is cancelled and the run is as before; with the job that launch had linked, the request
    is recorded for the refresh that adopts the job (which cancels it), and the outcome says so (it said "its launch
    died before submitting it" of that job too)."""
    from arctl.launch.control import cancel_runs

    ws, b = dead_launch_run(tmp_path, "41" if linked else None)
    with Registry(ws.registry_path) as reg:
        ((_, said),) = cancel_runs(reg, ws, [reg.get(b)])
        row = reg.get(b)
    assert row.state == states.SUBMITTING
    if linked:
        assert said == "cancelled: its launch died after submitting job 41, which the next `arctl status` cancels"
        assert row.cancel_requested is not None
    else:
        assert said == ("not cancelled: nothing to cancel, its launch was interrupted before it submitted it; it is "
                        "FAILED as before")
        assert row.cancel_requested is None


def test_a_full_registry_after_sbatch_says_the_jobs_were_submitted_and_who_adopts_them(specs, tmp_path, monkeypatch):
    """sbatch accepted the jobs, then recording them failed ("database or disk is full"): the error said only that,
    and the user, told to run the command again, could not know the jobs were out. It names the jobs and says the
    next `arctl status` or launch adopts them; and it does (nothing is submitted twice)."""
    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep
    from arctl.launch.registry import RegistryError

    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch=f'echo sbatch >> {calls}; echo "Submitted batch job 101"\n',
                    scontrol=f'[ "$1" = release ] && echo scontrol "$@" >> {calls}; echo "MaxArraySize = 1001"\n',
                    sacct="printf 'JobID|State\\n101_0|PENDING\\n101_1|PENDING\\n101_2|PENDING\\n'\n",
                    squeue="printf '101_0|PENDING|Priority\\n101_1|PENDING|Priority\\n101_2|PENDING|Priority\\n'\n",
                    srun="exit 0\n")
    monkeypatch.setattr(launcher, "new_claim_token", dead_claim_token)  # the launch that fails: gone once it has

    def full(self, token, updates, cancelled=None):
        raise RegistryError(f"{self.path}: database or disk is full (0.0 MiB free there): free some space and run "
                            "the command again", "full")

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    with monkeypatch.context() as patched:
        patched.setattr(Registry, "update_claimed", full)
        with pytest.raises(RegistryError) as info:
            launch(items, ws, executor="slurm", members=["lt3"])
    said = str(info.value)
    assert "database or disk is full" in said and "\n" not in said, said
    assert "submitted job 101 (3 runs)" in said and "the next `arctl status` or launch" in said, said
    again = launch(items, ws, executor="slurm", members=["lt3"])  # as the error says: the jobs adopted
    assert again.submitted == [] and {why for _, why in again.skipped} == {"already pending"}
    with Registry(ws.registry_path) as reg:
        got = {r.run_id: (r.state, r.job_id) for r in reg.list()}
    assert got == {item.run_id: (states.PENDING, f"101_{n}") for n, item in enumerate(items)}
    assert calls.read_text().split().count("sbatch") == 1


def test_status_warns_of_an_ended_runs_deleted_folder_and_what_it_says_works(specs, tmp_path):
    """A run folder deleted by hand after its run ended: status showed a completed run COMPLETED without a word
    (reports cannot read it, and a launch skips it). Status warns on it (in JSON too, as the row's warning), with
    what runs it again; so it does for a failed one, which a launch starts again from the start."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="debug", members=["lt3"])
    a, b, c = (i.run_id for i in items)
    with Registry(ws.registry_path) as reg:
        reg.update(b, state=states.FAILED, error="OOM")
    assert "folder" not in _status(ws)
    shutil.rmtree(ws.run_dir(a))
    shutil.rmtree(ws.run_dir(b))
    out = _status(ws)
    notes = {line.split(":")[0]: line for line in out.splitlines() if line.startswith((f"{a}:", f"{b}:"))}
    assert f"its run folder {ws.run_dir(a)} is gone" in notes[a] and "reports cannot read it" in notes[a], out
    rerun = f"`arctl run lt --arm a --scale tiny --seeds 0 --force --workdir {ws.root}` (with the overrides it was launched with, its sweep's"
    assert rerun in notes[a], notes[a]
    assert f"its run folder {ws.run_dir(b)} is gone" in notes[b], out
    assert f"`arctl sweep lt3 --scale tiny --seeds 0 --workdir {ws.root}` (with the overrides it was launched with)" in notes[b], notes[b]
    assert out.count("is gone") == 2 and "COMPLETED" in out and "FAILED" in out
    doc = {r["run_id"]: r for r in json.loads(_status(ws, "--json"))}
    assert "is gone" in doc[a]["warning"] and "is gone" in doc[b]["warning"] and doc[c]["warning"] is None
    # what it says to do works: the failed one is launched again by the sweep, the completed one by --force
    again = launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    assert [i.run_id for i in again.submitted] == [b] and not again.failed
    res = CliRunner().invoke(app, ["run", "lt", "--arm", "a", "--scale", "tiny", "--seeds", "0", "--force",
                                   "--executor", "debug", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    out = _status(ws)
    assert "3 run(s): 3 completed" in out and "is gone" not in out, out


def test_logs_of_a_name_that_starts_several_run_ids_says_what_logs_takes(specs, tmp_path):
    """`arctl logs lt`, lt an experiment whose runs' ids it starts: the error said to give "the sweep or experiment
    name", which logs does not take (it shows one run). It says to give one run's id, and where they are listed."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    res = CliRunner().invoke(app, ["logs", "lt", "--workdir", str(ws.root)])
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: 'lt' starts 3 run ids") and "sweep or experiment name" not in line, line
    assert "give the whole run id" in line and f"`arctl status lt --workdir {ws.root}` lists them" in line, line


def test_the_failure_a_requeued_tasks_log_gives_is_its_last_attempts(tmp_path):
    """From a hunt: SLURM appends a requeued task's attempts to one stderr file, and `arctl logs` gave the last
    error-like line of the whole file: a second attempt that failed without one was said to have failed with the
    first attempt's requeue ("CANCELLED ... DUE TO JOB REQUEUE")."""
    from arctl.launch.control import error_summary
    from arctl.launch.registry import RunRecord

    ws = Workspace(tmp_path / "ws")
    logs = ws.jobs_dir / "101_0"
    logs.mkdir(parents=True)
    (ws.run_dir("r0")).mkdir(parents=True)
    first = ["[arctl job 10:00:00] run r0 attempt 1 on n1 (job 101_0)", "step 1",
             "slurmstepd: error: *** JOB 103 ON n1 CANCELLED AT 2026-12-05T10:05:00 DUE TO JOB REQUEUE ***"]
    second = ["[arctl job 10:09:00] run r0 attempt 2 on n2 (job 101_0)", "step 2"]
    (logs / "101_0_0_log.err").write_text("\n".join(first + second) + "\n")
    rec = RunRecord(run_id="r0", experiment="e", arm="a", seed=0, state="FAILED", job_id="101_0", executor="slurm",
                    error="the job ended FAILED")
    assert error_summary(ws, rec) == "the job ended FAILED"  # nothing of attempt 2's: the run's own record
    (logs / "101_0_0_log.err").write_text("\n".join(first + second + ["RuntimeError: out of disk"]) + "\n")
    assert error_summary(ws, rec) == "RuntimeError: out of disk"
    (logs / "101_0_0_log.err").write_text("\n".join(first) + "\nmodule: command not found (Error)\n")
    assert error_summary(ws, rec) == "module: command not found (Error)"  # before its attempt's own line


@pytest.mark.parametrize("ended", [states.FAILED, states.PREEMPTED])
def test_a_run_whose_ended_job_slurm_brought_back_is_cancellable_and_never_submitted_twice(tmp_path, monkeypatch, ended):
    """From a hunt: SLURM requeues a finished task (`scontrol requeue`; after a node failure, which accounting
    first reports NODE_FAIL). arctl, having seen the run end, never looked again: `cancel` said it was not
    active, and a launch submitted a second job for the run, two jobs training it. A launch and a cancel ask
    squeue (the controller's live view) about recently ended SLURM runs; a job in its epilog (COMPLETING) or
    another's job that took the id (slurmctld lost its state) is not the run's (from a review)."""
    import getpass

    from arctl.launch.control import NOT_CANCELLED, cancel_runs
    from arctl.launch.refresh import revive_requeued
    from arctl.launch.registry import Registry, RunRecord, new_claim_token

    ws = Workspace(tmp_path / "ws")
    ws.run_dir("r0").mkdir(parents=True)
    calls, queue = tmp_path / "calls", tmp_path / "queue"
    me = getpass.getuser()
    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue=f'echo squeue "$@" >> {calls}\ncat {queue}\n',
                    scancel=f'echo scancel "$@" >> {calls}\n', sacct="printf 'JobID|State\\n101_0|RUNNING\\n'\n")

    def ended_again(reg, age=60):
        reg.update_many([("r0", {"state": ended, "ended_at": time.time() - age, "cancel_requested": None})])
        return reg.get("r0")

    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update_many([("r0", {"state": ended, "executor": "slurm", "job_id": "101_0", "claim": None,
                                 "ended_at": time.time() - 60, "error": "the job ended NODE_FAIL"})])
        for line in ("101_0|COMPLETING|{me}|e", "101_0|RUNNING|someone-else|e", "101_0|RUNNING|{me}|other-job", ""):
            queue.write_text(line.format(me=me) + "\n")
            assert revive_requeued(reg, [reg.get("r0")])[0].state == ended, line
        queue.write_text(f"101_0|RUNNING|{me}|e\n")
        (row,) = revive_requeued(reg, [reg.get("r0")])
        assert (row.state, row.error, row.ended_at) == (states.RUNNING, None, None)
        assert calls.read_text().split()[:4] == ["squeue", "-h", "-r", "-o"]
        outcome = cancel_runs(reg, ws, [ended_again(reg)])
        assert "scancel 101_0" in calls.read_text() and not outcome[0][1].startswith(NOT_CANCELLED), outcome
        calls.write_text("")  # nothing is asked of a run that ended long ago
        assert revive_requeued(reg, [ended_again(reg, age=30 * 24 * 3600)])[0].state == ended
        assert calls.read_text() == ""


def test_a_launch_does_not_submit_a_second_job_for_a_run_whose_job_slurm_brought_back(specs, tmp_path, monkeypatch):
    """The launch side of the same hunt: a sweep relaunched while an ended run's task runs again skips it."""
    import getpass

    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved, launch
    from arctl.launch.refresh import refresh
    from arctl.launch.registry import Registry

    calls, queue = tmp_path / "calls", tmp_path / "queue"
    queue.write_text("")
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch=f'echo sbatch >> {calls}\necho "Submitted batch job 101"\n',
                    srun="exit 0\n", scontrol="echo 'MaxArraySize            = 1001'\n", squeue=f"cat {queue}\n",
                    sacct="printf 'JobID|State\\n101_0|FAILED\\n101_1|FAILED\\n101_2|FAILED\\n'\n")
    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    with Registry(ws.registry_path) as reg:
        rows = {r.run_id: r for r in refresh(reg, ws)}
    assert {r.state for r in rows.values()} == {states.FAILED}
    first = sorted(rows)[0]
    job = rows[first].job_id
    queue.write_text(f"{job}|RUNNING|{getpass.getuser()}|lt3\n")  # SLURM requeued that task: it runs again
    calls.write_text("")
    res = launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    assert first not in {i.run_id for i in res.submitted} and len(res.submitted) == 2
    assert calls.read_text().split() == ["sbatch"]  # one array for the two others, none for it
