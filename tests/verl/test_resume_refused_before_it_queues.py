"""A verl run whose resume cannot work is refused before it queues (from a review): a node lost right after the
step-30 save took the rows of steps 15..30, and `verl.keep_checkpoints` kept no checkpoint before step 15. The
attempt fails in :func:`arctl.backends.verl.history.resume_point`'s one line as it starts; before, the job queued for
its GPUs to fail there, and the dry run said "resumes from its last checkpoint" (``resume_step`` turned the line into
None). Now the launch and its dry run refuse it in that line (exit 2, nothing submitted), and the dry run's plan
says it cannot resume: one choice, ``resume_point``, asked by the attempt, the launch and the dry run."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from arctl.backends.verl import history, rehearsal
from arctl.backends.verl.run_config import LAUNCH_CHECK_ENV, launch_problem
from arctl.cli.main import app

OVERRIDES = ["cluster=slurm"]


def _config() -> dict:
    from arctl.compose import resolve_experiment

    return resolve_experiment("main-ar-uniform", scale="paper", overrides=OVERRIDES)[0].config


def _lost_rows(run_dir, rows: int, saved=(20, 30)) -> None:
    """What a first attempt left after its node was lost right after the step-30 save: checkpoints ``saved``
    (complete) and verl's file log with the rows of steps ``1..rows``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "verl_metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "data": {"trainer/global_step": s}}) + "\n" for s in range(1, rows + 1)))
    for step in saved:
        rehearsal.save_checkpoint(run_dir / "checkpoints", step)


def _resume_points_line(config, run_dir) -> str:
    with pytest.raises(ValueError) as err:
        history.resume_point(config, run_dir)
    return " ".join(str(err.value).split())


def test_a_resume_with_no_checkpoint_before_the_lost_rows_is_refused_in_resume_points_line(data, tmp_path,
                                                                                         monkeypatch):
    config, run_dir = _config(), tmp_path / "run"
    _lost_rows(run_dir, 14)
    line = _resume_points_line(config, run_dir)
    assert "no complete checkpoint before step 15 is kept" in line
    assert launch_problem(config, run_dir) == line
    assert history.resume_step(config, run_dir) is None
    monkeypatch.setenv(LAUNCH_CHECK_ENV, "0")  # the run's own folder, which the launch writes: checked all the same
    assert launch_problem(config, run_dir) == line
    monkeypatch.setitem(sys.modules, "verl", None)  # without verl here: the records are read all the same
    assert launch_problem(config, run_dir) == line
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir()) == ["global_step_20",
                                                                                       "global_step_30"]


@pytest.mark.parametrize(("rows", "step"), [(30, 30), (24, 20), (0, 0)])
def test_a_resume_that_works_is_not_refused(data, tmp_path, rows, step):
    """Every row kept: from step 30; rows lost after step 24: from step 20 (a checkpoint before them is kept); no
    checkpoint: it starts over."""
    config, run_dir = _config(), tmp_path / "run"
    _lost_rows(run_dir, rows, saved=(20, 30) if step else ())
    assert launch_problem(config, run_dir) is None
    assert history.resume_step(config, run_dir) == step


def _launched_before(tmp_path, monkeypatch, state: str):
    """A workspace whose run's attempt ended ``state`` with the lost rows and checkpoints of :func:`_lost_rows`, SLURM's
    client programs shims that log their calls and submit nothing: (workspace, item, run folder, calls log)."""
    import slurm_shims  # tests/support/slurm_shims.py

    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.workspace import Workspace

    calls = tmp_path / "calls.log"
    shims = slurm_shims.install(tmp_path / "shims", **{
        name: f'echo "{name} $*" >> "{calls}"\nexit 1\n' for name in slurm_shims.CLIENT_PROGRAMS})
    monkeypatch.setenv("PATH", f"{shims}:/usr/bin:/bin")
    ws = Workspace(tmp_path / "ws")
    (item,) = items_from_resolved(resolve_experiment("main-ar-uniform", scale="paper", overrides=OVERRIDES))
    run_dir = ws.run_dir(item.run_id)
    _lost_rows(run_dir, 14)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=item.run_id, experiment=item.experiment, arm=item.arm, seed=item.seed)],
                  new_claim_token())
        reg.update(item.run_id, state=state, claim=None, before_claim=None, executor="slurm", job_id="7")
    (run_dir / "status.json").write_text(json.dumps({"state": state.lower()}))
    return ws, item, run_dir, calls


def test_the_launch_and_its_dry_run_refuse_it_and_submit_nothing(data, tmp_path, monkeypatch):
    from arctl.launch.registry import Registry

    ws, item, run_dir, calls = _launched_before(tmp_path, monkeypatch, "FAILED")  # its attempt failed (node lost)
    line = _resume_points_line(item.config, run_dir)
    args = ["run", "main-ar-uniform", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws.root), *OVERRIDES]

    res = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    said = json.loads(res.stdout)
    assert res.exit_code == 2 and said["refused"] == f"main-ar-uniform/ar-uniform: {line} (its job would fail as it " \
                                                      "starts)", res.output
    (planned,) = said["runs"]
    assert (planned["action"], planned["reason"]) == ("resume", f"failed: cannot resume: {line}")
    res = CliRunner().invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 2 and f"a launch would be refused: main-ar-uniform/ar-uniform: {line}" in res.stdout
    assert "resumes from its last checkpoint" not in res.stdout, res.stdout

    res = CliRunner().invoke(app, args)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and lines == [f"error: main-ar-uniform/ar-uniform: {line} (its job would fail as it "
                                            "starts)"], res.output
    assert "sbatch" not in (calls.read_text() if calls.exists() else "")
    with Registry(ws.registry_path) as reg:
        assert reg.get(item.run_id).state == "FAILED" and reg.get(item.run_id).job_id == "7"
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir()) == ["global_step_20",
                                                                                       "global_step_30"]


def test_a_forced_rerun_of_a_completed_run_is_not_refused_for_its_old_folders_resume(data, tmp_path, monkeypatch):
    """From a review: a ``--force`` rerun starts over (the old files are moved aside), and it was refused, dry run and
    launch alike, with the line of a resume from the old folder's checkpoints that it never does."""
    ws, item, run_dir, calls = _launched_before(tmp_path, monkeypatch, "COMPLETED")
    line = _resume_points_line(item.config, run_dir)  # (a resume of it would be refused)
    args = ["run", "main-ar-uniform", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws.root), *OVERRIDES,
            "--force", "--dry-run"]

    res = CliRunner().invoke(app, [*args, "--json"])
    said = json.loads(res.stdout)
    assert res.exit_code == 0 and not said.get("refused"), res.output
    (planned,) = said["runs"]
    assert (planned["action"], planned["reason"]) == ("rerun", "completed, --force")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "a launch would be refused" not in res.output and line not in res.output, res.output
    assert "rerun  completed, --force" in res.output and "1 would rerun (--force)" in res.output, res.output
    assert "sbatch" not in (calls.read_text() if calls.exists() else "")
