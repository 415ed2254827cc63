"""Run ids, the registry's claims (also under concurrent processes) and state merging."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.launch import states
from arctl.launch.refresh import merge_state
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.run_id import config_hash, make_run_id

CONFIG = {
    "experiment": "ablation-vr", "arm": "grpo-vr", "seed": 0, "backend": "tiny",
    "thinking": {"budgets": [16, 32], "lam": 0.5}, "optim": {"lr": 1e-4},
    "cluster": {"executor": "local", "partition": None}, "wandb": {"mode": "offline", "group": "x"},
}


def _copy(cfg: dict) -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in cfg.items()}


def test_run_id_is_stable_and_ignores_launch_only_fields():
    reordered = dict(reversed(list(CONFIG.items())))
    assert make_run_id(CONFIG) == make_run_id(reordered)
    moved = _copy(CONFIG)
    moved["cluster"] = {"executor": "slurm", "partition": "gpu"}
    moved["wandb"] = {"mode": "disabled", "group": "a-sweep"}
    moved["run_dir"] = "/elsewhere"
    assert make_run_id(moved) == make_run_id(CONFIG)
    assert make_run_id(CONFIG).startswith("ablation-vr_grpo-vr_s0_")
    # a scale's memory need (cluster.mem_gb's default) is what a run asks of the machine: the tiny
    # scale's mem_gb, added after its runs were written, renamed none of them
    sized = {**_copy(CONFIG), "scale": {"name": "tiny", "cpus_per_task": 1}}
    assert make_run_id({**sized, "scale": {**sized["scale"], "mem_gb": 4}}) == make_run_id(sized)
    assert make_run_id({**sized, "scale": {**sized["scale"], "cpus_per_task": 2}}) != make_run_id(sized)  # threads: computed


def test_run_id_changes_with_what_the_run_computes():
    ids = {make_run_id(CONFIG)}
    for change in ({"seed": 1}, {"optim": {"lr": 2e-4}}, {"thinking": {"budgets": [16, 32], "lam": 0.7}}):
        cfg = {**_copy(CONFIG), **change}
        ids.add(make_run_id(cfg))
    assert len(ids) == 4


def test_the_grader_key_renames_only_verl_runs_that_grade_differently_than_before_it_existed():
    """verl.grader arrived with a new default (the authors' grader): a tiny run keeps its id at the
    default, a verl run keeps its id under math-verify (what it computed before) and gets a new one
    under the authors' grader; the key's value is read from the one home of both values."""
    from arctl.algo.verify import DEFAULT_GRADER, GRADER_BEFORE_THE_KEY

    assert (DEFAULT_GRADER, GRADER_BEFORE_THE_KEY) == ("deepscaler", "math-verify")

    def with_grader(backend, grader=None):
        cfg = {**_copy(CONFIG), "backend": backend, "verl": {"tree_attention": "flex"}}
        if grader:
            cfg["verl"]["grader"] = grader
        return make_run_id(cfg)

    assert with_grader("tiny", DEFAULT_GRADER) == with_grader("tiny")
    assert with_grader("tiny", GRADER_BEFORE_THE_KEY) != with_grader("tiny")
    assert with_grader("verl", GRADER_BEFORE_THE_KEY) == with_grader("verl")
    assert with_grader("verl", DEFAULT_GRADER) != with_grader("verl")


def test_run_id_is_a_safe_name():
    cfg = {**_copy(CONFIG), "experiment": "a/b c;$(x)", "arm": "../.."}
    run_id = make_run_id(cfg)
    assert all(ch.isalnum() or ch in "-_" for ch in run_id), run_id
    assert len(config_hash(cfg)) == 10


def _rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, experiment="e", arm="a", seed=0)


def test_registry_uses_wal(tmp_path):
    with Registry(tmp_path / "registry.sqlite") as reg:
        assert reg._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_name_that_is_not_a_column_is_refused_before_any_sql_and_changes_nothing(tmp_path):
    """Column names go into the SQL text: every update checks them, in what it sets and in what it expects."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1")], new_claim_token())
        before = reg.get("r1")
        for call in (lambda: reg.update("r1", **{"state=1; --": "x"}),
                     lambda: reg.update_if("r1", {"state": before.state}, {"nope": 1}),
                     lambda: reg.update_if("r1", {"state IS NOT ? OR 1": None}, {"state": states.FAILED}),
                     lambda: reg.update_claimed("t", [("r1", {"nope": 1})])):
            with pytest.raises(ValueError, match="unknown registry columns"):
                call()
        assert reg.get("r1") == before


def test_claim_skips_active_and_completed_and_relaunches_failed(tmp_path):
    with Registry(tmp_path / "r.sqlite") as reg:
        first = reg.claim([_rec("r1"), _rec("r2"), _rec("r3")], new_claim_token())
        assert [r.run_id for r in first.claimed] == ["r1", "r2", "r3"]
        reg.update_many([("r1", {"state": states.PENDING, "claim": None}), ("r2", {"state": states.COMPLETED}),
                         ("r3", {"state": states.FAILED})])
        second = reg.claim([_rec("r1"), _rec("r2"), _rec("r3")], new_claim_token())
        assert [r.run_id for r in second.claimed] == ["r3"]
        assert second.claimed[0].previous["state"] == states.FAILED
        assert {r.run_id: why for r, why in second.skipped} == {
            "r1": "already pending", "r2": "completed (use --force to rerun)"}
        forced = reg.claim([_rec("r2")], new_claim_token(), force=True)
        assert [r.run_id for r in forced.claimed] == ["r2"]
        assert forced.claimed[0].generation == 1
        assert forced.claimed[0].wandb_run_id == "r2-g1"  # a forced rerun is a fresh W&B run


def _dead_token() -> str:
    dead = mp.get_context("fork").Process(target=os._exit, args=(0,))
    dead.start()
    dead.join()
    return f"{socket.gethostname()}:{dead.pid}:x"


def test_a_claim_of_a_dead_process_is_stale(tmp_path):
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1")], _dead_token())
        again = reg.claim([_rec("r1")], new_claim_token())
        assert [r.run_id for r in again.claimed] == ["r1"]
        assert again.claimed[0].previous["state"] is None  # the dead launch made the row: a new run again
        live = reg.claim([_rec("r1")], new_claim_token())  # now held by this (live) process
        assert live.claimed == [] and live.skipped[0][1] == "already submitting"


def test_a_dead_claim_is_undone_from_the_row_before_deciding(tmp_path):
    """A launch that died (or whose rollback could not write the registry) leaves its claim in the row;
    the next launch gives the run back what it was, from the row alone, then decides: a completed run a
    dead --force rerun had claimed stays completed (it was trained again as a "resume"), a failed one is
    resumed with its generation, and the row keeps no trace of the dead claim."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("done"), _rec("broke")], new_claim_token())
        reg.update_many([("done", {"state": states.COMPLETED, "claim": None, "generation": 2}),
                         ("broke", {"state": states.FAILED, "claim": None, "error": "OOM", "cancel_requested": 5.0})])
        dead = _dead_token()
        reg.claim([_rec("done")], dead, force=True)
        reg.claim([_rec("broke")], dead)
        assert reg.get("done").generation == 3 and reg.get("broke").error is None  # the claims as they were
        again = reg.claim([_rec("done"), _rec("broke")], new_claim_token())
        assert {r.run_id: why for r, why in again.skipped} == {"done": "completed (use --force to rerun)"}
        done = reg.get("done")
        assert (done.state, done.generation, done.claim, done.before_claim) == (states.COMPLETED, 2, None, None)
        [broke] = again.claimed
        assert broke.previous == {"state": states.FAILED, "generation": 0, "error": "OOM", "cancel_requested": 5.0,
                                  "claim": broke.claim}
        forced = reg.claim([_rec("done")], _dead_token(), force=True)
        assert forced.claimed[0].generation == 3
        rerun = reg.claim([_rec("done")], new_claim_token(), force=True)  # the dead rerun's claim undone first
        assert rerun.claimed[0].generation == 3 and rerun.claimed[0].previous["state"] == states.COMPLETED


def test_a_dead_claim_that_did_not_record_the_run_is_resumed_with_its_generation(tmp_path):
    """From a review: a claim an older arctl made (no ``before_claim``; the column is added empty) or
    took over (a ``before_claim`` of another claim) was read as "the claim made the row": the run was
    inserted afresh, generation 0, its W&B id another generation's. Such a run is now FAILED with its
    generation and resumed, as that arctl did; a later arctl's extra keys are ignored, not "damaged"."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("old"), _rec("over"), _rec("later")], new_claim_token())
        reg.update_many([(r, {"state": states.COMPLETED, "claim": None, "generation": 2})
                         for r in ("old", "over", "later")])
        reg.claim([_rec("over")], "elsewhere:1:a", force=True)  # recorded under the claim "elsewhere:1:a"
        dead = _dead_token()
        reg.claim([_rec("later")], dead, force=True)
        later = json.loads(reg.get("later").before_claim)
        reg.update_many([("old", {"state": states.SUBMITTING, "claim": dead, "generation": 3, "before_claim": None}),
                         ("over", {"claim": dead}),  # an older arctl took it over: the note is another claim's
                         ("later", {"before_claim": json.dumps({**later, "archive": "previous/x"})})])
        again = reg.claim([_rec("old"), _rec("over"), _rec("later")], new_claim_token())
        assert [(r.run_id, r.generation, r.previous["state"]) for r in again.claimed] == [
            ("old", 3, states.FAILED), ("over", 3, states.FAILED)]
        assert again.claimed[0].previous["error"].startswith("claimed by a launch that died")
        assert [(r.run_id, why) for r, why in again.skipped] == [("later", "completed (use --force to rerun)")]
        assert reg.get("later").generation == 2


def test_a_dead_claim_is_settled_by_one_process_only(tmp_path):
    """From the sixth review: a refresh that lost the race for a dead claim (another `arctl status` gave
    it its job, or another launch took it over) must not act on it: settle_claim and take_over write
    only while the row is still that claim's."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1")], new_claim_token())
        reg.update("r1", state=states.FAILED, claim=None, generation=4)
        dead = _dead_token()
        reg.claim([_rec("r1")], dead)
        mine = reg.take_over("r1", dead, "h:1:mine")
        assert mine.claim == "h:1:mine" and mine.previous["state"] == states.FAILED
        assert reg.take_over("r1", dead, "h:2:late") is None
        assert not reg.settle_claim("r1", dead, {"state": states.PENDING, "job_id": "7"})
        assert reg.get("r1").state == states.SUBMITTING
        reg.unclaim([mine], mine.claim)
        row = reg.get("r1")
        assert (row.state, row.generation, row.claim) == (states.FAILED, 4, None)
        assert not reg.settle_claim("r1", None, {"state": states.PENDING})  # not SUBMITTING any more


def test_unclaim_restores_from_the_row_and_only_this_claims_rows(tmp_path):
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1"), _rec("r2")], new_claim_token())
        reg.update_many([("r1", {"state": states.COMPLETED, "claim": None, "generation": 1}),
                         ("r2", {"state": states.FAILED, "claim": None, "error": "boom"})])
        token = new_claim_token()
        mine = reg.claim([_rec("r1"), _rec("r2"), _rec("r3")], token, force=True).claimed
        reg.update("r2", claim="someone-else")  # taken over meanwhile: not this claim's to undo
        reg.unclaim([dataclasses.replace(r, before_claim=None) for r in mine], token)  # the row decides
        r1, r2 = reg.get("r1"), reg.get("r2")
        assert (r1.state, r1.generation, r1.claim, r1.before_claim) == (states.COMPLETED, 1, None, None)
        assert (r2.state, r2.claim) == (states.SUBMITTING, "someone-else")
        assert reg.get("r3") is None


def test_a_damaged_before_claim_is_one_error_line(tmp_path):
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1")], new_claim_token())
        reg.update("r1", before_claim='{"state": "NOPE", "generation": 0, "error": null, "cancel_requested": null, '
                                      '"claim": "x"}')
        with pytest.raises(RegistryError, match="before_claim=.*what the run was before a claim"):
            reg.get("r1")


def _claim_worker(path: str, run_ids: list[str], barrier, out) -> None:
    barrier.wait()
    with Registry(path) as reg:
        got = reg.claim([_rec(r) for r in run_ids], new_claim_token(), members=["sweep"])
        out.put([r.run_id for r in got.claimed])
    time.sleep(0.2)  # stay alive: our claims must not look stale to the others


def test_concurrent_claims_give_each_run_to_exactly_one_process(tmp_path):
    ctx = mp.get_context("fork")
    run_ids = [f"run{i}" for i in range(8)]
    barrier, out = ctx.Barrier(10), ctx.Queue()
    procs = [ctx.Process(target=_claim_worker, args=(str(tmp_path / "r.sqlite"), run_ids, barrier, out))
             for _ in range(10)]
    for p in procs:
        p.start()
    claimed = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    flat = [r for got in claimed for r in got]
    assert sorted(flat) == sorted(run_ids)
    with Registry(tmp_path / "r.sqlite") as reg:
        assert len(reg.list()) == 8 and len(reg.list("sweep")) == 8


@pytest.mark.parametrize(
    ("reported", "scheduler", "expected"),
    [
        ("completed", None, states.COMPLETED),
        ("completed", states.FAILED, states.COMPLETED),
        ("running", states.FAILED, states.FAILED),  # kill -9
        ("running", states.COMPLETED, states.FAILED),  # ended without saying so
        ("preempted", states.COMPLETED, states.PREEMPTED),
        ("preempted", states.CANCELLED, states.PREEMPTED),  # scancel = TERM: a preemption with its checkpoint
        ("preempted", states.FAILED, states.PREEMPTED),
        ("requeued", states.RUNNING, states.PENDING),
        ("running", states.RUNNING, states.RUNNING),
        (None, states.PENDING, states.PENDING),
        ("running", None, states.RUNNING),  # not in sacct yet: keep
        ("running", states.CANCELLED, states.CANCELLED),  # long silent after scancel: it never saved
        ("stopping", states.CANCELLED, states.CANCELLED),  # ... also when it had begun to
        (None, states.CANCELLED, states.CANCELLED),  # cancelled before it started
    ],
)
def test_merge_state(reported, scheduler, expected):
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING)
    status = {"state": reported, "updated_at": time.time() - 3600} if reported else {}
    assert merge_state(rec, status, scheduler, time.time())[0] == expected


@pytest.mark.parametrize(
    ("reported", "cancel", "expected", "error"),
    [
        # SLURM says PREEMPTED (its TIMEOUT too, arctl.launch.states) of a job that did not report its stop (killed
        # at the time limit, or preempted past its grace): resumable from its last checkpoint, not failed
        ("running", False, states.PREEMPTED, None),
        ("stopping", False, states.PREEMPTED, None),  # long silent while saving: the save never ended
        (None, False, states.PREEMPTED, None),
        ("running", True, states.CANCELLED, None),  # `arctl cancel` asked for the stop
    ],
)
def test_a_job_slurm_calls_preempted_is_resumable_whatever_it_reported(reported, cancel, expected, error):
    """From a review: no row had SLURM's PREEMPTED/TIMEOUT without the job's own report, so taking such a job for
    FAILED passed every test."""
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING,
                    cancel_requested=time.time() if cancel else None)
    status = {"state": reported, "updated_at": time.time() - 3600} if reported else {}
    assert merge_state(rec, status, states.PREEMPTED, time.time()) == (expected, error)


@pytest.mark.parametrize(
    ("reported", "scheduler", "error"),
    [
        ("running", states.COMPLETED, "job ended without completing (see `arctl logs r --workdir /w`)"),
        ("running", states.FAILED, "job failed or was killed (see `arctl logs r --workdir /w`)"),
        ("running", states.CANCELLED,
         "stopped before its checkpoint was saved; `arctl resume r --workdir /w` resumes from the last one"),
    ],
)
def test_the_error_a_merged_state_carries_says_what_to_do(reported, scheduler, error):
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING)
    status = {"state": reported, "updated_at": time.time() - 3600}
    # each names the run and its workspace (it said a bare `arctl logs`, which acts on ./arctl-runs)
    assert merge_state(rec, status, scheduler, time.time(), " --workdir /w")[1] == error
    said = {**status, "error": "CUDA out of memory"}  # the job's own words win where it said any
    if scheduler != states.CANCELLED:
        assert merge_state(rec, said, scheduler, time.time(), " --workdir /w")[1] == "CUDA out of memory"


@pytest.mark.parametrize(
    ("reported", "age_s", "scheduler", "cancel", "expected"),
    [
        ("stopping", 5, states.CANCELLED, False, states.RUNNING),  # saving its stop checkpoint: not resumable
        ("stopping", 5, states.FAILED, False, states.RUNNING),
        ("stopping", 5, states.COMPLETED, False, states.RUNNING),
        ("stopping", 5, states.RUNNING, False, states.RUNNING),
        ("running", 5, states.CANCELLED, False, states.RUNNING),  # the TERM has not reached it yet
        ("running", 5, states.FAILED, False, states.FAILED),  # a failure is not a stop
        ("stopping", 3600, states.CANCELLED, False, states.CANCELLED),  # it never finished saving
        ("preempted", 5, states.CANCELLED, False, states.PREEMPTED),
        ("preempted", 5, states.CANCELLED, True, states.CANCELLED),  # `arctl cancel` asked for it
        ("preempted", 5, states.PREEMPTED, True, states.CANCELLED),
        ("stopping", 5, states.CANCELLED, True, states.RUNNING),
    ],
)
def test_a_stopped_job_is_active_until_its_stop_checkpoint_is_saved(reported, age_s, scheduler, cancel, expected):
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING,
                    cancel_requested=time.time() if cancel else None)
    status = {"state": reported, "updated_at": time.time() - age_s}
    assert merge_state(rec, status, scheduler, time.time())[0] == expected


def _fake_scheduler(tmp_path, monkeypatch, squeue_out: str, with_sacct: bool):
    calls = tmp_path / "calls"
    if with_sacct:
        sacct = f"echo sacct \"$@\" >> {calls}\nprintf 'JobID|State\\n7_0|RUNNING\\n7_1|CANCELLED by 0\\n'\n"
    else:  # a site without accounting
        sacct = "echo 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct,
                    squeue=f"echo squeue \"$@\" >> {calls}\nprintf '{squeue_out}'\n")
    return calls


def _slurm_runs(tmp_path, ids):
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    reg = Registry(ws.registry_path)
    reg.claim([_rec(f"r{i}") for i in range(len(ids))], new_claim_token())
    old = time.time() - 3600
    reg.update_many((f"r{i}", {"state": states.RUNNING, "executor": "slurm", "job_id": jid, "submitted_at": old})
                    for i, jid in enumerate(ids))
    for i in range(len(ids)):
        ws.run_dir(f"r{i}").mkdir(parents=True)
        write_status(ws.run_dir(f"r{i}"), state="running")
        path = ws.run_dir(f"r{i}") / "status.json"  # last heard of an hour ago (not a job that is stopping)
        path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": old}))
    return ws, reg


def test_refresh_asks_sacct_once_for_all_jobs_and_squeue_once_for_the_live_ones(tmp_path, monkeypatch):
    from arctl.launch.refresh import refresh

    calls = _fake_scheduler(tmp_path, monkeypatch, "7_0|RUNNING|None\\n", with_sacct=True)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1", "9_0"])
    with reg:
        got = {r.run_id: r.state for r in refresh(reg, ws)}
    assert calls.read_text().splitlines() == ["sacct -X -P -o JobID,State -j 7,9",
                                              "squeue -h -r -t all -o %i|%T|%r|%u|%j -j 7"]  # 7_0: queued or running
    assert got == {"r0": states.RUNNING, "r1": states.CANCELLED, "r2": states.RUNNING}  # 9_0: unknown, kept


def test_a_refresh_does_not_overwrite_a_run_another_launch_resubmitted_meanwhile(tmp_path, monkeypatch):
    """From a review: a refresh read a row, asked sacct (up to a minute), then wrote what it judged with a
    plain UPDATE. A resume in another process that meanwhile submitted job 200 for the failed job 100 had its
    PENDING row turned FAILED (job 200 kept): never refreshed again, `arctl cancel` left the job running,
    the next sweep launched the run twice. Now the write applies only to the attempt the refresh read."""
    from arctl.launch import refresh as refresh_module
    from arctl.launch.status_file import write_status

    ws, reg = _slurm_runs(tmp_path, ["100"])

    def sacct_while_a_resume_submits(ids):
        with Registry(ws.registry_path) as other:  # `arctl resume` in another process
            other.update("r0", state=states.PENDING, job_id="200", attempts=2, error=None)
        write_status(ws.run_dir("r0"), state="submitted", error=None)
        return {"100": states.FAILED}, "sacct"

    monkeypatch.setattr(refresh_module, "scheduler_states", sacct_while_a_resume_submits)
    monkeypatch.setattr(refresh_module, "controller_jobs", lambda ids: None)  # squeue: no answer
    with reg:
        shown = refresh_module.refresh(reg, ws)
        row = reg.get("r0")
    assert (row.state, row.job_id, row.error) == (states.PENDING, "200", None)
    assert [(r.state, r.job_id) for r in shown] == [(states.PENDING, "200")]  # shown as it is now


def test_a_cancel_in_a_workspace_it_cannot_write_cancels_no_job(tmp_path, monkeypatch):
    """From a review: `arctl cancel` in a read-only workspace ran scancel, then failed to record it and
    exited 2 ("read-only"): the user was told nothing was done, the job was cancelled, the row kept RUNNING."""
    import subprocess

    from arctl.launch.control import cancel_runs
    from arctl.launch.executors import LaunchError

    ws, reg = _slurm_runs(tmp_path, ["100"])
    reg.close()
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a) or subprocess.CompletedProcess(a, 0, "", ""))
    with Registry(ws.registry_path, readonly=True) as ro, pytest.raises(LaunchError, match="nothing was cancelled"):
        cancel_runs(ro, ws, ro.list())
    assert ran == []
    with Registry(ws.registry_path) as rw:
        assert rw.get("r0").state == states.RUNNING


def test_a_job_the_controller_lost_is_not_running_for_ever(tmp_path, monkeypatch):
    """From a hunt: a job slurmctld no longer has (it lost its state after a crash) whose accounting record still
    says RUNNING (a runaway record) showed RUNNING for ever, `arctl logs --follow` never ended and a sweep skipped
    the run as active. squeue (the controller) is asked for the jobs sacct says are queued or running; one it
    does not list, which sacct asked again still says is running, has ended: FAILED (CANCELLED where a cancel
    asked it), saying why and how to go on. A job the controller still holds, ended or not, is its word."""
    from arctl.launch.refresh import refresh

    calls = tmp_path / "calls"
    sacct = (f"echo sacct \"$@\" >> {calls}\n"
             "printf 'JobID|State\\n7_0|RUNNING\\n7_1|RUNNING\\n7_2|PENDING\\n7_3|RUNNING\\n8|RUNNING\\n'\n")
    squeue = f"echo squeue \"$@\" >> {calls}\nprintf '7_1|RUNNING|None\\n8|FAILED|NonZeroExitCode\\n'\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue=squeue)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1", "7_2", "7_3", "8"])
    with reg:
        reg.update("r3", cancel_requested=time.time() - 600)
        got = {r.run_id: (r.state, r.error) for r in refresh(reg, ws)}
    assert calls.read_text().splitlines() == ["sacct -X -P -o JobID,State -j 7,8",
                                              "squeue -h -r -t all -o %i|%T|%r|%u|%j -j 7,8",
                                              "sacct -X -P -o JobID,State -j 7"]  # asked again: 7_0, 7_2, 7_3
    assert got["r0"] == (states.FAILED, "SLURM's controller no longer has job 7_0 (squeue does not list it), though "
                         "its accounting still says RUNNING: a runaway record (the controller lost the job, e.g. its "
                         "state after a crash; `sacctmgr show runawayjobs` mends the record); "
                         f"`arctl resume r0 --workdir {ws.root}` restarts it from its last checkpoint")
    assert got["r1"] == (states.RUNNING, None)
    assert got["r2"][0] == states.FAILED and "still says PENDING" in got["r2"][1]
    assert got["r3"][0] == states.CANCELLED  # `arctl cancel` asked for it
    assert got["r4"] == (states.FAILED, f"job failed or was killed (see `arctl logs r4 --workdir {ws.root}`)")  # ended


def test_a_job_that_ends_while_refresh_asks_is_not_called_lost(tmp_path, monkeypatch):
    """The race of the check above: the job ends between sacct's answer and squeue's (which then does not list
    it); sacct asked again says how it ended. And where squeue cannot answer (the controller down), no job is lost."""
    from arctl.launch.refresh import refresh
    from arctl.launch.status_file import write_status

    count = tmp_path / "count"
    sacct = (f"echo x >> {count}\n"
             f"if [ \"$(wc -l < {count})\" -eq 1 ]; then printf 'JobID|State\\n7_0|RUNNING\\n7_1|RUNNING\\n'; "
             "else printf 'JobID|State\\n7_0|COMPLETED\\n7_1|FAILED\\n'; fi\n")
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue="exit 0\n")
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1"])
    write_status(ws.run_dir("r0"), state="completed")
    with reg:
        got = {r.run_id: (r.state, r.error) for r in refresh(reg, ws)}
    assert got == {"r0": (states.COMPLETED, None),
                   "r1": (states.FAILED, f"job failed or was killed (see `arctl logs r1 --workdir {ws.root}`)")}

    ws2, reg2 = _slurm_runs(tmp_path / "down", ["9"])
    slurm_shims.use(tmp_path / "bin2", monkeypatch, sacct="printf 'JobID|State\\n9|RUNNING\\n'\n",
                    squeue="echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\n"
                           "exit 1\n")
    with reg2:
        assert [(r.state, r.error) for r in refresh(reg2, ws2)] == [(states.RUNNING, None)]


def test_a_lost_job_whose_id_another_users_job_took_is_lost(tmp_path, monkeypatch):
    """From a review: after the controller lost its state, a job id can be reused; squeue then lists another
    user's job under it, and the lost run stayed RUNNING. Only this user's jobs count as the controller's word."""
    from arctl.launch import refresh as refresh_module

    monkeypatch.setattr(refresh_module, "_user", lambda: "me")
    sacct = "printf 'JobID|State\\n7_0|RUNNING\\n7_1|RUNNING\\n'\n"
    squeue = "printf '7_0|RUNNING|None|someone\\n7_1|RUNNING|None|me\\n'\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue=squeue)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1"])
    with reg:
        got = {r.run_id: r.state for r in refresh_module.refresh(reg, ws)}
    assert got == {"r0": states.FAILED, "r1": states.RUNNING}


def test_without_accounting_a_job_that_left_the_queue_has_ended(tmp_path, monkeypatch):
    from arctl.launch.refresh import refresh

    _fake_scheduler(tmp_path, monkeypatch, "7_0|RUNNING\\n", with_sacct=False)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1", "7_2"])
    with reg:
        reg.update("r2", cancel_requested=time.time())  # `arctl cancel` scancelled it (review: it ended FAILED)
        got = {r.run_id: r.state for r in refresh(reg, ws)}
    assert got == {"r0": states.RUNNING, "r1": states.FAILED, "r2": states.CANCELLED}


def test_a_job_slurm_will_never_start_says_why_and_what_to_change(tmp_path, monkeypatch):
    """squeue(1)'s reason codes: BadConstraints (no node has the memory or CPUs asked) never clears;
    Resources and Priority do (a wait, no warning). One squeue call, for the jobs queued or running."""
    from arctl.launch.refresh import refresh

    calls = tmp_path / "calls"
    sacct = "printf 'JobID|State\\n7_0|PENDING\\n7_1|PENDING\\n8|PENDING\\n9_0|RUNNING\\n'\n"
    squeue = (f"echo squeue \"$@\" >> {calls}\n"
              "printf '7_0|PENDING|BadConstraints\\n7_1|PENDING|Resources\\n8|PENDING|PartitionTimeLimit\\n"
              "9_0|RUNNING|None\\n'\n")
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue=squeue)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1", "8", "9_0"])
    with reg:
        got = {r.run_id: (r.state, r.warning) for r in refresh(reg, ws)}
    assert calls.read_text().splitlines() == ["squeue -h -r -t all -o %i|%T|%r|%u|%j -j 7,8,9"]
    assert got["r0"] == (states.PENDING, "SLURM will not start job 7_0 (BadConstraints): no node of its partition "
                         "has what it asks (cluster.mem_gb, cluster.cpus_per_task, cluster.gpus_per_node); "
                         f"`arctl cancel r0 --workdir {ws.root}`, change it and run again")
    assert got["r1"] == (states.PENDING, None)  # waits for resources: it will start
    assert got["r2"][1].startswith("SLURM will not start job 8 (PartitionTimeLimit)") and "cluster.time_min" in got["r2"][1]
    assert got["r3"] == (states.RUNNING, None)
    with Registry(ws.registry_path) as again:  # kept in the registry: `status --no-refresh` shows it
        assert again.get("r0").warning == got["r0"][1]



def test_a_job_over_a_per_job_limit_of_its_qos_or_association_says_so_and_which_setting(tmp_path, monkeypatch):
    """From a hunt: a job over a per-job limit of its QOS or association (sacctmgr's MaxWall, MaxTRES) stays
    PENDING for ever, which `arctl status` showed as a plain wait. Each such reason names the setting to change;
    the limits that other jobs' ends lift (a group's or a user's total) stay a wait without a warning."""
    from arctl.launch.refresh import refresh

    cases = [  # squeue's reason codes (SLURM's job_state_reason.c: AssocMaxMemPerJob, not ...MemoryPerJob)
        ("QOSMaxWallDurationPerJobLimit", "cluster.time_min"), ("AssocMaxWallDurationPerJobLimit", "cluster.time_min"),
        ("QOSMaxGRESPerJob", "cluster.gpus_per_node"), ("AssocMaxGRESPerJob", "cluster.gpus_per_node"),
        ("QOSMaxCpuPerJobLimit", "cluster.cpus_per_task"), ("AssocMaxCpuPerJobLimit", "cluster.cpus_per_task"),
        ("QOSMaxNodePerJobLimit", "cluster.nodes"), ("AssocMaxNodePerJobLimit", "cluster.nodes"),
        ("QOSMaxMemoryPerJob", "cluster.mem_gb"), ("AssocMaxMemPerJob", "cluster.mem_gb"),
        ("QOSMaxMemoryPerNode", "cluster.mem_gb"), ("AssocMaxMemPerNode", "cluster.mem_gb"),
    ]
    waits = ["QOSMaxJobsPerUserLimit", "QOSGrpGRES", "AssocGrpCpuLimit", "AssocGrpGRES", "Resources", "Priority"]
    reasons = [reason for reason, _ in cases] + waits
    ids = [f"1000_{i}" for i in range(len(reasons))]
    sacct = "printf 'JobID|State\\n" + "".join(f"{j}|PENDING\\n" for j in ids) + "'\n"
    squeue = "printf '" + "".join(f"{j}|PENDING|{r}\\n" for j, r in zip(ids, reasons)) + "'\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue=squeue)
    ws, reg = _slurm_runs(tmp_path, ids)
    with reg:
        got = {r.run_id: (r.state, r.warning) for r in refresh(reg, ws)}
    for i, (reason, setting) in enumerate(cases):
        state, warning = got[f"r{i}"]
        assert state == states.PENDING and warning is not None, reason
        assert warning.startswith(f"SLURM will not start job {ids[i]} ({reason}): "), warning
        assert f"({setting}" in warning and f"`arctl cancel r{i} --workdir {ws.root}`" in warning, warning
    assert "it asks more GPUs than its QOS allows one job (cluster.gpus_per_node" in got["r2"][1]
    for i in range(len(cases), len(reasons)):  # these clear by themselves: the job starts later
        assert got[f"r{i}"] == (states.PENDING, None), reasons[i]

def _metric_rows(run_dir, steps, verl=False):
    if verl:  # verl's file logger
        return "".join(json.dumps({"step": i, "data": {"train/anytime_score": i / 100}}) + "\n" for i in steps)
    return "".join(json.dumps({"trainer/global_step": i, "train/anytime_score": i / 100}) + "\n" for i in steps)


@pytest.mark.parametrize("log_name", ["metrics.jsonl", "verl_metrics.jsonl"])
def test_a_resumed_attempt_shows_its_own_step_not_the_previous_attempts(tmp_path, monkeypatch, log_name):
    """Attempt 1 logged steps 0-57 and its last checkpoint is at 40. Until attempt 2 has restored it
    (the backend rewrites metrics.jsonl to steps <= 40) or logged a step, `arctl status` showed 57,
    a step the attempt will redo; now no step, then 40, 41. Files are told apart by their marks
    (inode, size, mtime), never by comparing clocks. A status file of an older arctl (no marks)
    reads the tail as before."""
    from arctl.config.files import atomic_write
    from arctl.launch.progress import file_marks
    from arctl.launch.refresh import refresh
    from arctl.launch.status_file import write_status

    _fake_scheduler(tmp_path, monkeypatch, "7_0|RUNNING|None\\n", with_sacct=True)  # sacct, squeue: 7_0 RUNNING
    ws, reg = _slurm_runs(tmp_path, ["7_0"])
    run_dir = ws.run_dir("r0")
    verl = log_name == "verl_metrics.jsonl"
    log = run_dir / log_name
    log.write_text(_metric_rows(run_dir, range(58), verl))
    with reg:
        assert refresh(reg, ws)[0].step == 57  # attempt 1, running: its tail
        # attempt 2 starts (the job entry's first write, as arctl.launch.job writes it)
        write_status(run_dir, state="running", attempt=2, step=None, metric_name=None, metric_value=None,
                     metric_files=file_marks(run_dir))
        rec = refresh(reg, ws)[0]
        assert (rec.step, rec.metric_name, rec.metric_value) == (None, None, None)
        assert Registry(ws.registry_path).get("r0").step is None
        atomic_write(run_dir / "metrics.jsonl", _metric_rows(run_dir, range(41)))  # restored at 40
        if verl:
            log.unlink()  # folded into metrics.jsonl (arctl.backends.verl.history.kept_rows)
        assert refresh(reg, ws)[0].step == 40
        with open(run_dir / log_name, "a") as fh:
            fh.write(_metric_rows(run_dir, [41], verl))
        rec = refresh(reg, ws)[0]
        assert (rec.step, rec.metric_name, rec.metric_value) == (41, "train/anytime_score", 0.41)
        # a file appended to in place (same inode, larger) is this attempt's too
        write_status(run_dir, state="running", attempt=3, step=None, metric_files=file_marks(run_dir))
        assert refresh(reg, ws)[0].step is None
        with open(run_dir / log_name, "a") as fh:
            fh.write(_metric_rows(run_dir, [42], verl))
        assert refresh(reg, ws)[0].step == 42
    # an older arctl's attempt: no marks and no step key in status.json
    status = json.loads((run_dir / "status.json").read_text())
    for key in ("metric_files", "step", "metric_name", "metric_value"):
        status.pop(key)
    (run_dir / "status.json").write_text(json.dumps(status))
    with open(run_dir / log_name, "a") as fh:
        fh.write(_metric_rows(run_dir, [43], verl))
    with Registry(ws.registry_path) as again:
        assert refresh(again, ws)[0].step == 43


def test_a_job_killed_before_it_logged_still_shows_how_far_the_run_got(tmp_path):
    """Attempt 2 started (status.json: running, no step, the marks of attempt 1's metrics.jsonl) and
    was killed before its backend rewrote the file: the job never reported again. Its row turns
    FAILED and shows step 57, attempt 1's (from the review of the fix above: the attempt's activity is
    the state found now, not status.json's). `arctl repair` rebuilds the same step, and does for a run
    whose last attempt completed without logging a step (it resumed at its final checkpoint)."""
    from arctl.launch.progress import file_marks
    from arctl.launch.refresh import refresh
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    reg = Registry(ws.registry_path)
    reg.claim([_rec("r0"), _rec("r1")], new_claim_token())
    dead = subprocess_dead_pid()
    reg.update_many((rid, {"state": states.RUNNING, "executor": "local", "job_id": str(dead), "step": 57})
                    for rid in ("r0", "r1"))
    for rid in ("r0", "r1"):
        run_dir = ws.run_dir(rid)
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(f"experiment: e\narm: a{rid}\nseed: 0\nrun_id: {rid}\n")
        (run_dir / "metrics.jsonl").write_text(_metric_rows(run_dir, range(58)))
        write_status(run_dir, state="running", executor="local", job_id=str(dead), attempt=2, step=None,
                     metric_name=None, metric_value=None, metric_files=file_marks(run_dir))
    write_status(ws.run_dir("r1"), state="completed")  # resumed at its last checkpoint: nothing to log
    with reg:
        got = {r.run_id: (r.state, r.step, r.metric_value) for r in refresh(reg, ws)}
    assert got == {"r0": (states.FAILED, 57, 0.57), "r1": (states.COMPLETED, 57, 0.57)}
    rebuild_registry(ws)
    with Registry(ws.registry_path) as again:
        assert [(r.run_id, r.state, r.step) for r in again.list()] == [
            ("r0", states.RUNNING, None), ("r1", states.COMPLETED, 57)]  # r0: the next refresh asks its process
        assert [(r.run_id, r.state, r.step) for r in refresh(again, ws)] == [
            ("r0", states.FAILED, 57), ("r1", states.COMPLETED, 57)]


def subprocess_dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_pid_alive_right_after_spawn_and_not_for_another_program():
    import subprocess
    import sys

    from arctl.launch.refresh import pid_alive

    for _ in range(20):  # /proc/PID/cmdline is empty for a moment after Popen returns
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)", "arctl.launch.local_queue"])
        try:
            assert pid_alive(proc.pid, "arctl.launch.local_queue")
        finally:
            proc.kill()
            proc.wait()
    assert not pid_alive(proc.pid, "arctl.launch.local_queue")  # reaped
    other = subprocess.Popen(["sleep", "5"])
    try:
        time.sleep(0.3)
        assert not pid_alive(other.pid, "arctl.launch.local_queue")  # a reused pid
    finally:
        other.kill()
        other.wait()


def test_an_interrupted_repair_leaves_the_old_registry_in_place(tmp_path, monkeypatch):
    """Found by an adversarial pass: Ctrl-C during `arctl repair` of a large workspace left no
    registry.sqlite at all (the old one was moved aside first), and the next `arctl status` said
    "no arctl workspace". The new registry is now written beside the old one and swapped in last."""
    from arctl.launch import repair
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([_rec("r0")], new_claim_token())
    for rid in ("r0", "r1"):
        ws.run_dir(rid).mkdir(parents=True)
        (ws.run_dir(rid) / "config.yaml").write_text(f"experiment: e\narm: a{rid}\nseed: 0\nrun_id: {rid}\n")
    real = repair._record

    def interrupted(run_id, *args):
        if run_id == "r1":
            raise KeyboardInterrupt
        return real(run_id, *args)

    monkeypatch.setattr(repair, "_record", interrupted)
    with pytest.raises(KeyboardInterrupt):
        repair.rebuild_registry(ws)
    assert sorted(p.name for p in ws.root.iterdir()) == ["registry.sqlite", "runs"]
    with Registry(ws.registry_path) as reg:
        assert [r.run_id for r in reg.list()] == ["r0"]  # the old one, untouched
    monkeypatch.setattr(repair, "_record", real)
    done = repair.rebuild_registry(ws)
    assert done.kept and sorted(p.name for p in ws.root.iterdir()) == [
        "registry.sqlite", Path(done.kept).name, "runs"]
    with Registry(ws.registry_path) as reg:
        assert sorted(r.run_id for r in reg.list()) == ["r0", "r1"]


def test_a_repair_is_not_undone_by_a_deleted_registrys_write_ahead_log(tmp_path):
    """From the review of the swap: registry.sqlite deleted while a process still held it leaves its
    -wal/-shm; the rebuilt file renamed in beside them had that log replayed over it (every later
    open saw the deleted registry's rows). The old log now goes aside first."""
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    # its log as a killed holder leaves it (lock=False: this process's own open, which the repair's lock of
    # the workspace folder would wait for, stands in for it)
    holder = Registry(ws.registry_path, lock=False)
    holder.claim([_rec(f"old{i}") for i in range(30)], new_claim_token())
    assert ws.registry_path.with_name("registry.sqlite-wal").stat().st_size > 0
    ws.registry_path.unlink()
    for rid in ("r0", "r1"):
        ws.run_dir(rid).mkdir(parents=True)
        (ws.run_dir(rid) / "config.yaml").write_text(
            f"experiment: e\narm: a{rid}\nseed: 0\nrun_id: {rid}\nwandb: {{id: {rid}-g2}}\n")
    try:
        rebuild_registry(ws)
        with Registry(ws.registry_path) as reg:
            assert [(r.run_id, r.generation) for r in reg.list()] == [("r0", 2), ("r1", 2)]  # a rerun's W&B id kept
    finally:
        holder.close()
    with Registry(ws.registry_path) as reg:
        assert [r.run_id for r in reg.list()] == ["r0", "r1"]


def test_status_says_a_running_runs_step_of_how_many_and_the_time_left_at_its_pace(tmp_path, statuses):
    """A user waiting on the Quickstart saw "step 59" and not of how many or for how long. A running
    run's step shows its total and, once the attempt's pace spans an evaluation cycle (test_freq steps
    after its first logged one), the time left at that pace (status.json's total_steps and test_freq, as
    the job entry writes them, first_step, first_step_at, last_step and last_step_at, as its progress tap does: the
    job's node's clock, here an hour ahead of this host's, which the time left never compares); --json gives both."""
    import io
    from contextlib import redirect_stdout

    from arctl.cli.main import main
    from arctl.launch.status_file import write_status

    ws, _ = _slurm_runs(tmp_path, ["7_0", "7_1", "7_2"])
    now = time.time()
    # r0 went from step 10 to 50 in 2,400 s (60 s a step): 50 steps, 3,000 s left; r1's pace holds no evaluation
    # yet (10 -> 19); r2 was launched by an arctl that wrote no schedule
    node = now + 3600  # the job's node's clock
    write_status(ws.run_dir("r0"), step=50, first_step=10, first_step_at=node - 2400, last_step=50, last_step_at=node,
                 total_steps=100, test_freq=20)
    write_status(ws.run_dir("r1"), step=19, first_step=10, first_step_at=node - 180, last_step=19, last_step_at=node,
                 total_steps=100, test_freq=20)
    write_status(ws.run_dir("r2"), step=30, first_step=10, first_step_at=node - 400, last_step=30, last_step_at=node)
    with Registry(ws.registry_path) as again:
        again.update_many([("r0", {"step": 50}), ("r1", {"step": 19}), ("r2", {"step": 30})])
    records = {r["run_id"]: r for r in statuses(ws.root, "--no-refresh")}
    assert records["r0"]["total_steps"] == 100 and records["r0"]["time_left_s"] == pytest.approx(3000)
    assert records["r1"]["total_steps"] == 100 and records["r1"]["time_left_s"] is None
    assert records["r2"]["total_steps"] is None and records["r2"]["time_left_s"] is None
    out, saved = io.StringIO(), sys.argv
    sys.argv = ["arctl", "status", "--no-refresh", "--workdir", str(ws.root)]
    try:
        with redirect_stdout(out):
            main()
    except SystemExit as exit_:
        assert not exit_.code
    finally:
        sys.argv = saved
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.startswith("r")}
    assert rows["r0"].rstrip().endswith(" 50/100 (~50 min left)")
    assert rows["r1"].rstrip().endswith(" 19/100") and rows["r2"].rstrip().endswith(" 30")


def _at(step: int, at: float) -> dict:
    """status.json's step and the job's record of when it saw it (last_step, last_step_at)."""
    return {"step": step, "last_step": step, "last_step_at": at}


def test_time_left_is_the_attempts_pace_since_its_first_logged_step():
    from arctl.launch.progress import time_left

    paced = {"first_step": 10, "first_step_at": 1000.0, "total_steps": 100, **_at(30, 1400.0)}
    assert time_left(paced) == 70 * 20.0  # 20 steps in 400 s, 70 to go
    assert time_left({**paced, **_at(100, 1400.0)}) == 0.0
    assert time_left({**paced, **_at(11, 1400.0)}) is None  # one step: no pace yet
    assert time_left({**paced, "total_steps": None}) is None and time_left({"step": 30}) is None
    # evaluations every 20 steps: the pace is said once it holds the first after its start (a step's row
    # comes after its evaluation: 10 -> 20 holds the one at 20, 10 -> 19 none yet)
    assert time_left({**paced, "test_freq": 20}) == 70 * 20.0
    assert time_left({**paced, "test_freq": 20, **_at(20, 1400.0)}) == 80 * 40.0
    assert time_left({**paced, "test_freq": 20, **_at(19, 1400.0)}) is None
    # none comes before the last step (resumed at 80 of 100, every 50): 2 steps are enough
    assert time_left({**paced, "test_freq": 50, "first_step": 81, **_at(90, 1400.0)}) == 10 * 400.0 / 9
    # the step shown may be past the job's last record of one (it looks every few seconds): from the step shown
    assert time_left({**paced, "step": 32}) == 68 * 20.0
    # the time since the last step (this host's clock: now less when it first saw it) comes off, a step's at most
    assert time_left(paced, now=5000.0, last_at=4995.0) == 70 * 20.0 - 5
    assert time_left(paced, now=5000.0, last_at=4000.0) == 69 * 20.0


def test_a_read_only_view_sees_what_an_open_writer_committed(tmp_path):
    """From a review: the read-only registry (a workspace this user cannot write) was opened immutable,
    which never reads the -wal file: while another process kept the registry open (a local queue, a launch
    that waits), `arctl status` showed old states and missed new runs, and a new workspace's read-only open
    said "damaged (no such table: runs)", pointing at `arctl repair` for a healthy registry."""
    path = tmp_path / "registry.sqlite"
    with Registry(path) as first:
        first.claim([_rec("r1")], new_claim_token())
        first.update("r1", state=states.PENDING, claim=None, before_claim=None)
    writer = Registry(path)  # stays open: its commits stay in the WAL
    try:
        writer.update("r1", state=states.COMPLETED, step=100)
        writer.claim([_rec("r2")], new_claim_token())
        with Registry(path, readonly=True) as ro:
            assert sorted((r.run_id, r.state) for r in ro.list()) == [("r1", states.COMPLETED),
                                                                       ("r2", states.SUBMITTING)]
        fresh = tmp_path / "new" / "registry.sqlite"
        with Registry(fresh) as made, Registry(fresh, readonly=True) as ro:  # a workspace just created
            made.claim([_rec("r9")], new_claim_token())
            assert [r.run_id for r in ro.list()] == ["r9"]
    finally:
        writer.close()


def test_a_read_only_view_writes_no_file_where_no_writer_is(tmp_path):
    """From the review of the fix above: a read-only open (mode=ro) created -wal and -shm files owned by the
    reader, which the workspace's owner could then not write (every arctl run/cancel failed 'read-only').
    With no writer there (no -wal/-shm), the main file is read as it is (immutable) and nothing is made."""
    path = tmp_path / "registry.sqlite"
    with Registry(path) as first:
        first.claim([_rec("r1")], new_claim_token())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.sqlite"]
    with Registry(path, readonly=True) as ro:
        assert [r.run_id for r in ro.list()] == ["r1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.sqlite"]


def test_a_diverged_run_keeps_its_nan_through_refresh_repair_and_status(tmp_path, cli):
    """From a review: the registry (SQLite stores a NaN as NULL) and `arctl status` showed a run whose
    loss had gone NaN with its last finite metric. Now the row says ``metric_nonfinite``, status shows
    ``train/loss=nan`` and --json carries it (strict JSON: no NaN token), `arctl repair` rebuilds it, and a
    later finite row clears it."""
    from arctl.launch.refresh import refresh
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    reg = Registry(ws.registry_path)
    reg.claim([_rec("r0")], new_claim_token())
    run_dir = ws.run_dir("r0")
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("experiment: e\narm: a\nseed: 0\nrun_id: r0\n")
    rows = [{"trainer/global_step": 0, "train/loss": 0.5, "train/anytime_score": 0.4},
            {"trainer/global_step": 1, "train/loss": float("nan"), "train/anytime_score": 0.4}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_status(run_dir, state="completed", executor="local", attempt=1, ended_at=time.time())
    reg.update_many([("r0", {"state": states.RUNNING, "executor": "local", "job_id": "1"})])
    with reg:
        (rec,) = refresh(reg, ws)
    assert (rec.state, rec.step, rec.metric_name, rec.metric_value, rec.metric_nonfinite) == (
        states.COMPLETED, 1, "train/loss", None, "nan")
    out = cli("status", "--workdir", str(ws.root), "--no-refresh", check=True).stdout
    assert "train/loss=nan" in out and "0.4" not in out.split("train/loss")[1][:8]
    doc = json.loads(cli("status", "--workdir", str(ws.root), "--json", check=True).stdout)
    assert (doc[0]["metric_name"], doc[0]["metric_value"], doc[0]["metric_nonfinite"]) == ("train/loss", None, "nan")
    rebuild_registry(ws)
    with Registry(ws.registry_path) as again:
        assert again.get("r0").metric_nonfinite == "nan"
    with open(run_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"trainer/global_step": 2, "train/loss": 0.3, "train/anytime_score": 0.5}) + "\n")
    rebuild_registry(ws)  # (a completed row is not refreshed again)
    with Registry(ws.registry_path) as again:
        rec = again.get("r0")
    assert (rec.step, rec.metric_name, rec.metric_value, rec.metric_nonfinite) == (2, "train/anytime_score", 0.5, None)


def test_cancel_and_resume_act_only_on_the_runs_named_not_on_every_id_a_name_starts(tmp_path):
    """From a review: `arctl cancel main-grpo_grpo_s1` cancelled seeds 10 and 11 too (a run id prefix took every
    match), and `arctl cancel baselines` (a sweep with no runs here) cancelled baselines-l1's and -elastic's runs."""
    from arctl.launch.control import select_runs
    from arctl.launch.executors import LaunchError

    ids = ["main-grpo_grpo_s1_aaaa", "main-grpo_grpo_s10_bbbb", "main-grpo_grpo_s11_cccc", "baselines-l1_l1_s0_dddd",
           "baselines-elastic_el_s0_eeee"]
    with Registry(tmp_path / "registry.sqlite") as reg:
        reg.claim([RunRecord(run_id=i, experiment=i.split("_")[0], arm=i.split("_")[1], seed=0) for i in ids],
                  new_claim_token())
        with pytest.raises(LaunchError, match=r"'main-grpo_grpo_s1' starts 3 run ids .* give the whole run id"):
            select_runs(reg, ["main-grpo_grpo_s1"])
        with pytest.raises(LaunchError, match="sweep 'baselines' has no runs"):
            select_runs(reg, ["baselines"])
        assert [r.run_id for r in select_runs(reg, ["main-grpo_grpo_s1_aaaa"])] == ["main-grpo_grpo_s1_aaaa"]
        assert [r.run_id for r in select_runs(reg, ["main-grpo_grpo_s10"])] == ["main-grpo_grpo_s10_bbbb"]
        assert len(select_runs(reg, ["main-grpo"])) == 3  # an experiment: all its runs
        # what only reads (`arctl status PREFIX`) still lists every run a prefix starts
        assert len(select_runs(reg, ["main-grpo_grpo_s1"], prefixes=True)) == 3
        with pytest.raises(LaunchError, match="sweep 'baselines' has no runs"):
            select_runs(reg, ["baselines"], prefixes=True)


@pytest.mark.parametrize("case", ["another host", "a reused pid", "its job", "its job after the queue"])
def test_a_local_runs_process_is_its_jobs_only_on_its_host_and_since_its_submission(tmp_path, case):
    """From a review: a local run's pid was trusted as it stood. A workspace on a shared disk read from another
    host took the job for dead (FAILED) and left it running; a pid reused by another submitit controller (another
    run's, started later) kept a dead run RUNNING, and `arctl cancel` sent that other job TERM."""
    import subprocess
    import sys

    from arctl.launch.control import NOT_CANCELLED, cancel_runs
    from arctl.launch.refresh import refresh
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    # a submitit controller's command line names its run's job folder (a process of another workspace's copy is not it)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "submitit", f"{tmp_path}/ws/runs/r0/job/%j"])
    try:
        time.sleep(0.3)
        ws = Workspace(tmp_path / "ws")
        # "its job after the queue": submitted an hour ago, started by the local queue when a slot freed (its
        # started_at; a review found such a run taken for dead while it trained)
        submitted = time.time() - (3600 if case in ("a reused pid", "its job after the queue") else 0)
        started = time.time() if case == "its job after the queue" else None
        with Registry(ws.registry_path) as reg:
            reg.claim([_rec("r0")], new_claim_token())
            reg.update_many([("r0", {"state": states.RUNNING, "executor": "local", "job_id": str(proc.pid),
                                     "submitted_at": submitted, "started_at": started, "claim": None})])
            ws.run_dir("r0").mkdir(parents=True)
            write_status(ws.run_dir("r0"), state="running",
                         host="gpu-node-7" if case == "another host" else socket.gethostname())
            (row,) = refresh(reg, ws)
            expected = {"another host": states.RUNNING, "a reused pid": states.FAILED}.get(case, states.RUNNING)
            assert row.state == expected
            if row.state in states.ACTIVE:
                ((_, said),) = cancel_runs(reg, ws, [row])
                assert said.startswith(NOT_CANCELLED) == (case == "another host"), said
                if case == "another host":
                    assert "gpu-node-7" in said
        time.sleep(0.3)
        assert (proc.poll() is None) == (not case.startswith("its job"))  # only the run's own job was sent TERM
    finally:
        proc.kill()
        proc.wait()


def test_a_repair_while_another_process_has_the_registry_open_is_refused_and_one_killed_is_not_a_holder(tmp_path):
    """From a review: `arctl repair` replaced the registry under a live local queue (or launch, or waiter): it
    went on writing to the old file, now registry.sqlite.damaged-*, so a cancel written to the new one never
    reached it (the cancelled run started) and the job ids it recorded were lost (a resume submitted twice)."""
    import subprocess
    import sys

    from arctl.launch.executors import LaunchError
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([_rec("r0")], new_claim_token())
    hold = ("import sys, time; sys.path[:0] = {path!r}; from arctl.launch.registry import Registry; "
            "r = Registry({reg!r}); r.list(); print('open', flush=True); time.sleep(60)")
    code = hold.format(path=sys.path, reg=str(ws.registry_path))
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(LaunchError, match=rf"open in process {holder.pid} .* then run `arctl repair` again"):
            rebuild_registry(ws)
        assert not list(ws.registry_path.parent.glob("registry.sqlite.damaged-*"))  # nothing replaced
    finally:
        holder.kill()
        holder.wait()
    # killed, its -shm file stays, its lock does not: the repair goes ahead
    assert ws.registry_path.with_name("registry.sqlite-shm").exists()
    rebuild_registry(ws)


def test_a_pid_of_another_users_process_is_judged_by_its_command_line(monkeypatch):
    """From a review: kill(pid, 0) failing with EPERM (another user's process, e.g. root's after a reboot, holding
    a dead job's pid) answered "alive" before the command line was looked at."""
    import subprocess
    import sys

    from arctl.launch import refresh

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "not-ours"])
    try:
        time.sleep(0.3)
        real_kill = os.kill

        def eperm(pid, sig):
            if pid == other.pid:
                raise PermissionError(1, "Operation not permitted")
            return real_kill(pid, sig)

        monkeypatch.setattr(refresh.os, "kill", eperm)
        assert not refresh.pid_alive(other.pid, "submitit")
        assert refresh.pid_alive(other.pid, "not-ours") and refresh.pid_alive(other.pid)
    finally:
        monkeypatch.undo()  # os.kill is os's own: put back before the process is killed
        other.kill()
        other.wait()


def test_another_hosts_queued_run_is_cancelled_and_its_reported_end_is_read(tmp_path):
    """From a review of the host check: a run waiting in another host's local queue could no longer be cancelled
    (the registry, which that queue reads, is enough); and a run another host's job reported failed stayed
    RUNNING here for ever once that host's queue was gone."""
    from arctl.launch.control import NOT_CANCELLED, cancel_runs
    from arctl.launch.refresh import refresh
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([_rec("q0"), _rec("f0")], new_claim_token())
        reg.update_many([("q0", {"state": states.PENDING, "executor": "local", "job_id": "queue:4242",
                                 "submitted_at": time.time(), "claim": None}),
                         ("f0", {"state": states.RUNNING, "executor": "local", "job_id": "4243",
                                 "submitted_at": time.time(), "claim": None})])
        for rid, state in (("q0", "submitted"), ("f0", "failed")):
            ws.run_dir(rid).mkdir(parents=True)
            write_status(ws.run_dir(rid), state=state, host="gpu-node-7", error="boom" if state == "failed" else None)
        shown = {r.run_id: r for r in refresh(reg, ws)}
        assert shown["f0"].state == states.FAILED and shown["q0"].state == states.PENDING
        ((_, said),) = cancel_runs(reg, ws, [shown["q0"]])
        assert not said.startswith(NOT_CANCELLED) and reg.get("q0").state == states.CANCELLED


def test_a_held_job_says_so_and_how_it_is_released(tmp_path, monkeypatch):
    """From a hunt: a job SLURM holds (a launch that died before releasing its array; too many requeues; an
    administrator) was shown plain PENDING for ever, and `arctl sweep` skipped it as already pending."""
    from arctl.launch.refresh import refresh

    sacct = "printf 'JobID|State\\n7_0|PENDING\\n7_1|PENDING\\n8|PENDING\\n'\n"
    squeue = "printf '7_0|PENDING|JobHeldUser\\n7_1|PENDING|JobHoldMaxRequeue\\n8|PENDING|JobHeldAdmin\\n'\n"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=sacct, squeue=squeue)
    ws, reg = _slurm_runs(tmp_path, ["7_0", "7_1", "8"])
    with reg:
        got = {r.run_id: (r.state, r.warning) for r in refresh(reg, ws)}
    assert got["r0"] == (states.PENDING, "SLURM holds job 7_0 (JobHeldUser): it will not start until released; "
                         "`scontrol release 7_0` releases it (a launch that died before its release leaves it held)")
    assert "requeued more times than the site allows; `scontrol release 7_1`" in got["r1"][1]
    assert got["r2"][1].endswith("an administrator holds it: ask them to release it")


@pytest.mark.parametrize("scheduler", [states.CANCELLED, states.PREEMPTED])
def test_a_stop_the_job_says_arctl_cancel_asked_for_is_cancelled_without_the_registrys_request(scheduler):
    """A cancel interrupted between its scancel (or TERM) and its registry write leaves the request only in the run's
    folder, where the job found it (status.json ``cancelled``): CANCELLED, as `arctl repair` reads it, not PREEMPTED."""
    rec = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING)
    said = {"state": "preempted", "cancelled": True, "updated_at": time.time() - 60}
    assert merge_state(rec, said, scheduler, time.time())[0] == states.CANCELLED
    assert merge_state(rec, {**said, "cancelled": False}, scheduler, time.time())[0] == states.PREEMPTED
