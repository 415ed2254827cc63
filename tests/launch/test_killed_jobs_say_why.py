"""From the hunt of limits: what a refresh says of a job that was killed, and so wrote nothing of its own.

- SLURM killed it for its memory (sacct: OUT_OF_MEMORY): the run read "job failed or was killed", and `arctl resume`,
  which keeps the frozen config's ``cluster.mem_gb``, would run out of memory again. It names the memory now, and the
  relaunch with more (``cluster.*`` is launch-only: the same run id, resumed). NODE_FAIL, BOOT_FAIL, DEADLINE and a
  TIMEOUT before the stop checkpoint say so too.
- `arctl status` of a killed run showed the step it reached (9) where `arctl resume --dry-run` knew it resumes from 8
  (its newest complete checkpoint): the refresh that finds it dead records that step in status.json, as a job that
  fails or stops by itself does."""

from __future__ import annotations

import json
import socket

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from typer.testing import CliRunner

from arctl.backends.verl.rehearsal import save_checkpoint as verl_save
from arctl.cli.main import app
from arctl.launch import refresh as refresh_module
from arctl.launch import states
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status, write_status
from arctl.launch.workspace import Workspace

RUN = "e_a_s0_0123456789"


def _run(tmp_path, executor: str = "slurm", job_id: str = "101", saved: int | None = 8, step: int = 9,
         **cluster) -> tuple[Workspace, Registry]:
    """A verl run (whose backend reads its checkpoints) that reached ``step`` with checkpoint ``saved``, RUNNING as
    job ``job_id``, its status.json "running" as its job left it."""
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "verl", "run_id": RUN, "scale": "tiny",
              "trainer": {"total_steps": 12}, "wandb": {"mode": "disabled", "id": RUN},
              "cluster": {"mem_gb": 4, "time_min": 60, **cluster}}
    run_dir = prepare_run_dir(ws.run_dir(RUN), config)
    if saved is not None:
        verl_save(run_dir / "checkpoints", saved)
    write_status(run_dir, state="running", job_id=job_id, executor=executor, host=socket.gethostname(),
                 started_at=1.0, step=step, attempt=1)
    reg = Registry(ws.registry_path)
    reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0, scale="tiny")], new_claim_token())
    reg.update(RUN, claim=None, before_claim=None, state=states.RUNNING, executor=executor, job_id=job_id,
               started_at=1.0, step=step)
    return ws, reg


def _sacct_says(tmp_path, monkeypatch, state: str) -> None:
    """A stand-in sacct that says job 101 ended ``state``; every other SLURM program fails if asked."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"printf 'JobID|State\\n101|{state}\\n'\n")


def _refreshed(ws: Workspace, reg: Registry) -> RunRecord:
    with reg:
        [rec] = refresh_module.refresh(reg, ws)
    return rec


def test_a_job_slurm_killed_for_its_memory_names_the_memory_and_the_relaunch_with_more(tmp_path, monkeypatch):
    _sacct_says(tmp_path, monkeypatch, "OUT_OF_MEMORY")
    ws, reg = _run(tmp_path)
    rec = _refreshed(ws, reg)
    where = f"--workdir {ws.root}"
    assert rec.state == states.FAILED
    assert rec.error == (
        f"out of memory: SLURM killed job 101 at its cluster.mem_gb=4 GB (OUT_OF_MEMORY); relaunch it with more: "
        f"`arctl run e --arm a --scale tiny --seeds 0 {where} cluster.mem_gb=<GB>` (with the overrides it was "
        f"launched with) resumes it from its last checkpoint, where it has one (`arctl resume {RUN} {where}` keeps "
        "4 GB)")
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--json"])
    assert json.loads(res.stdout)[0]["error"] == rec.error


def test_an_out_of_memory_kill_is_said_before_the_error_the_job_logged(tmp_path, monkeypatch):
    """A job whose helper process the OOM killer took logs its own error (a dead worker), which says nothing of
    memory: SLURM's word comes first."""
    _sacct_says(tmp_path, monkeypatch, "OUT_OF_MEMORY")
    ws, reg = _run(tmp_path)
    write_status(ws.run_dir(RUN), state="failed", error="ActorDiedError: the worker died unexpectedly")
    rec = _refreshed(ws, reg)
    assert rec.error.startswith("out of memory: SLURM killed job 101 at its cluster.mem_gb=4 GB (OUT_OF_MEMORY)")
    assert rec.error.endswith("; its job's own last error: ActorDiedError: the worker died unexpectedly")


def test_the_relaunch_with_more_memory_resumes_the_run_with_it(specs, tmp_path):
    """The command the memory error gives resumes the run it names (``cluster.mem_gb`` is no part of a run's id),
    with the memory it was given."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved, launch, plan

    def items(*overrides: str):
        return items_from_resolved(resolve_experiment("lt", list(overrides), arms=["a"]))

    ws = Workspace(tmp_path / "ws")
    launch(items(), ws, executor="debug")
    [before] = items()
    with Registry(ws.registry_path) as reg:
        reg.update(before.run_id, state=states.FAILED, error="out of memory")
    [planned] = plan(items("cluster.mem_gb=16"), ws)
    assert (planned.run_id, planned.action) == (before.run_id, "resume")
    assert planned.config["cluster"]["mem_gb"] == 16


@pytest.mark.parametrize(("word", "state", "said"), [
    ("NODE_FAIL", states.FAILED, "the node running job 101 failed (NODE_FAIL), not the run; `arctl resume"),
    ("BOOT_FAIL", states.FAILED, "the node given job 101 failed to boot (BOOT_FAIL), not the run; `arctl resume"),
    ("DEADLINE", states.FAILED, "SLURM ended job 101 at its deadline (DEADLINE: sbatch --deadline) before it"),
    ("TIMEOUT", states.PREEMPTED, "SLURM's time limit (cluster.time_min=60) ended job 101 before it saved its stop "
                                  "checkpoint (TIMEOUT): saving it took longer than SLURM's warning before the limit "
                                  "(cluster.preempt_warning_s"),
])
def test_slurms_other_ends_say_what_ended_the_job(tmp_path, monkeypatch, word, state, said):
    _sacct_says(tmp_path, monkeypatch, word)
    ws, reg = _run(tmp_path)
    rec = _refreshed(ws, reg)
    assert (rec.state, rec.error[:len(said)]) == (state, said), rec.error


def test_a_plain_failure_still_points_to_the_logs(tmp_path, monkeypatch):
    _sacct_says(tmp_path, monkeypatch, "FAILED")
    ws, reg = _run(tmp_path)
    assert _refreshed(ws, reg).error.startswith("job failed or was killed (see `arctl logs")


def test_a_killed_slurm_run_shows_the_step_it_resumes_from(tmp_path, monkeypatch):
    _sacct_says(tmp_path, monkeypatch, "OUT_OF_MEMORY")
    ws, reg = _run(tmp_path)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    [row] = [line for line in res.output.splitlines() if line.startswith(RUN) and " e/a/s0 " in line]
    assert " FAILED " in row and "9 (resumes from 8)" in row, res.output
    assert read_status(ws.run_dir(RUN))["resume_step"] == 8
    [doc] = json.loads(CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--json"]).stdout)
    assert (doc["step"], doc["resume_step"]) == (9, 8)


def test_a_killed_local_run_shows_the_step_it_resumes_from(tmp_path):
    ws, reg = _run(tmp_path, executor="local", job_id="4194303")  # (above any pid: its process is gone)
    rec = _refreshed(ws, reg)
    assert rec.state == states.FAILED and "died without reporting" in rec.error
    status = read_status(ws.run_dir(RUN))
    assert (status["state"], status["step"], status["resume_step"]) == ("running", 9, 8)  # its last write kept


def test_a_read_only_look_records_nothing(tmp_path, monkeypatch):
    _sacct_says(tmp_path, monkeypatch, "OUT_OF_MEMORY")
    ws, reg = _run(tmp_path)
    before = (ws.run_dir(RUN) / "status.json").read_text()
    [rec] = refresh_module.fresh_view(ws, reg.list())
    assert rec.state == states.FAILED and rec.error.startswith("out of memory")
    assert (ws.run_dir(RUN) / "status.json").read_text() == before


def test_a_later_attempts_status_is_not_written_over(tmp_path, monkeypatch):
    """The step is recorded only where status.json is still the dead attempt's: a resume that wrote its own
    meanwhile keeps it."""
    from arctl.launch.status_file import note_resume_step

    ws, _reg = _run(tmp_path)
    seen = read_status(ws.run_dir(RUN))
    write_status(ws.run_dir(RUN), state="running", job_id="102", attempt=2, step=None)
    assert not note_resume_step(ws.run_dir(RUN), seen, 8)
    assert read_status(ws.run_dir(RUN)).get("resume_step") is None


# what SLURM >= 22.05.4 writes at the end of the stderr of a job whose srun step the OOM killer hit (and older SLURM)
STEPD = "slurmstepd: error: Detected 1 oom_kill event in StepId=101.0. Some of the step tasks have been OOM Killed.\n"
STEPD_OLD = ("slurmstepd: error: Detected 1 oom-kill event(s) in step 101.0 cgroup. Some of your processes may have "
             "been killed by the cgroup out-of-memory handler.\n")
SRUN = "srun: error: node1: task 0: Out Of Memory\n"


def _job_log(ws: Workspace, text: str) -> None:
    """Job 101's stderr (submitit's ``jobs/<job id>/<job id>_0_log.err``): an attempt's line, then ``text``."""
    folder = ws.jobs_dir / "101"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"[arctl job 12:00:00] run {RUN} attempt 1 on node1\n", "x" * 100 + "\n"] * 2000  # (past 64 KiB)
    (folder / "101_0_log.err").write_text("".join(lines) + text)


@pytest.mark.parametrize("said", [STEPD + SRUN, STEPD_OLD, SRUN], ids=["slurmstepd+srun", "older", "srun"])
def test_an_out_of_memory_kill_of_its_srun_step_is_said_though_the_job_line_says_failed(tmp_path, monkeypatch, said):
    """From a review: arctl's jobs train in an srun step, and since SLURM 22.05.4 only that step is OUT_OF_MEMORY,
    the job FAILED (``sacct -X``'s line); its stderr's end holds slurmstepd's (srun's) word."""
    _sacct_says(tmp_path, monkeypatch, "FAILED")
    ws, reg = _run(tmp_path)
    _job_log(ws, said)
    rec = _refreshed(ws, reg)
    assert rec.state == states.FAILED
    assert rec.error.startswith("out of memory: SLURM killed job 101 at its cluster.mem_gb=4 GB (OUT_OF_MEMORY); "
                                "relaunch it with more: `arctl run e --arm a"), rec.error


def test_an_out_of_memory_kill_is_read_from_the_log_without_accounting(tmp_path, monkeypatch):
    """Without sacct, a job that left squeue's queue ended FAILED: its log says it ran out of memory."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue="exit 0\n")
    ws, reg = _run(tmp_path)
    _job_log(ws, STEPD)
    reg.update(RUN, submitted_at=1.0)
    assert _refreshed(ws, reg).error.startswith("out of memory: SLURM killed job 101")


@pytest.mark.parametrize("said", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",  # the GPU's, not cluster.mem_gb's
    STEPD + f"[arctl job 12:05:00] run {RUN} attempt 2 on node1\n",  # an earlier attempt's
], ids=["cuda", "earlier-attempt"])
def test_a_failed_job_whose_log_says_no_memory_kill_is_a_plain_failure(tmp_path, monkeypatch, said):
    _sacct_says(tmp_path, monkeypatch, "FAILED")
    ws, reg = _run(tmp_path)
    _job_log(ws, said)
    assert _refreshed(ws, reg).error.startswith("job failed or was killed (see `arctl logs")


def test_a_timeout_before_the_stop_checkpoint_is_said_under_the_status_table(tmp_path, monkeypatch):
    """From a review: the TIMEOUT line is a PREEMPTED run's error, and `arctl status` printed FAILED runs' only."""
    _sacct_says(tmp_path, monkeypatch, "TIMEOUT")
    ws, _reg = _run(tmp_path, preempt_warning_s=900)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    [line] = [text for text in res.output.splitlines() if text.startswith(f"{RUN}: ")]
    assert "(TIMEOUT): saving it took longer than SLURM's warning before the limit (cluster.preempt_warning_s=900); " \
           "`arctl run e --arm a --scale tiny --seeds 0 --workdir" in line, res.output
    assert "cluster.preempt_warning_s=<seconds>` (with the overrides it was launched with) gives it longer" in line


def test_a_sweeps_relaunch_with_more_memory_says_it_resumes_the_sweeps_other_stopped_runs(tmp_path, monkeypatch):
    """From a review: `arctl sweep S --seeds N ... cluster.mem_gb=<GB>` resumes every failed, preempted or cancelled
    run of the sweep at that seed, with that memory."""
    _sacct_says(tmp_path, monkeypatch, "OUT_OF_MEMORY")
    ws, reg = _run(tmp_path)
    reg.update(RUN, sweep="lam")
    error = _refreshed(ws, reg).error
    assert (f"`arctl sweep lam --scale tiny --seeds 0 --workdir {ws.root} cluster.mem_gb=<GB>` (with the overrides it "
            "was launched with) resumes it from its last checkpoint, where it has one, and, with that memory, the "
            "sweep's other failed, preempted or cancelled runs of seed 0 (`arctl resume") in error, error


def test_a_run_with_no_checkpoint_is_not_told_it_resumes_from_one(tmp_path, monkeypatch):
    _sacct_says(tmp_path, monkeypatch, "NODE_FAIL")
    ws, reg = _run(tmp_path, saved=None)
    assert _refreshed(ws, reg).error.endswith("resumes it from its last checkpoint, where it has one")
