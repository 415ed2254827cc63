"""Which runs `arctl cancel`, `arctl resume` and `arctl status` act on, and what their --json and last lines say of
them (from the hunt "cli", 2026-12-07: mutants of arctl/cli/cmd_cancel.py, cmd_resume.py and cmd_status.py that the
suite let through):

- `arctl cancel PREFIX` where the prefix starts several run ids is refused (exit 2, nothing cancelled, no scancel),
  as `arctl resume PREFIX` is: a mutant that read a prefix as "every run it starts" cancelled all three runs;
- `arctl cancel A B --json` lists every run named, the one that was not active too, and the text says how many
  were not active;
- a resume of runs that ran under different executors takes none of them for all (the configured default);
- a cancel of a run its launch is submitting says no checkpoint is saved (a mutant counted it among the runs that
  "save a checkpoint first", with the hint to cancel again);
- a resume skips a completed run unless --force (a mutant made --force the default).

SLURM's programs are shims (tests/support/slurm_shims.py): the jobs are the launch's "Submitted batch job 101".
"""

from __future__ import annotations

import json

import slurm_shims  # tests/support/slurm_shims.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace


def _slurm_runs(tmp_path, monkeypatch):
    """(workspace, lt3's three run ids, the file scancel's calls are written to): the runs PENDING in SLURM's
    queue as jobs 101_0..101_2 (shims; sacct and squeue answer nothing, so a refresh keeps the rows as they are)."""
    from arctl.compose import resolve_sweep

    calls = tmp_path / "scancel-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch='echo "Submitted batch job 101"\n', srun="exit 0\n",
                    scontrol="echo 'MaxArraySize            = 1001'\n", scancel=f'echo "$*" >> {calls}\n')
    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="slurm", members=["lt3"])
    ids = [i.run_id for i in items]
    with Registry(ws.registry_path) as reg:
        assert [reg.get(r).state for r in ids] == [states.PENDING] * 3
    return ws, ids, calls


def _states(ws, ids):
    with Registry(ws.registry_path) as reg:
        return [reg.get(r).state for r in ids]


def test_cancel_of_a_prefix_of_several_runs_cancels_none_of_them(specs, tmp_path, monkeypatch):
    """`lt_` starts the ids of all three runs: one error line naming them, exit 2, no scancel, every run as it was.
    The whole id (or an unambiguous prefix) cancels that run only, with one scancel of its own job."""
    ws, ids, calls = _slurm_runs(tmp_path, monkeypatch)
    prefix = "lt_"
    assert all(r.startswith(prefix) for r in ids)
    res = CliRunner().invoke(app, ["cancel", prefix, "--workdir", str(ws.root)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert f"'{prefix}' starts 3 run ids" in lines[0]
    assert not calls.exists() and _states(ws, ids) == [states.PENDING] * 3

    res = CliRunner().invoke(app, ["cancel", ids[1], "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert calls.read_text().split() == ["101_1"]
    assert _states(ws, ids) == [states.PENDING, states.CANCELLED, states.PENDING]
    assert res.output.splitlines()[-1] == "1 run(s) cancelled"


def test_resume_of_a_prefix_of_several_runs_is_refused(specs, tmp_path, monkeypatch):
    """As cancel: a resume of `lt_` (three cancelled runs) plans none of them; the whole id plans that one."""
    ws, ids, _ = _slurm_runs(tmp_path, monkeypatch)
    assert CliRunner().invoke(app, ["cancel", "lt3", "--workdir", str(ws.root)]).exit_code == 0
    assert _states(ws, ids) == [states.CANCELLED] * 3
    res = CliRunner().invoke(app, ["resume", "lt_", "--dry-run", "--json", "--workdir", str(ws.root)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and "'lt_' starts 3 run ids" in lines[0], res.output
    res = CliRunner().invoke(app, ["resume", ids[2], "--dry-run", "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [(r["run_id"], r["action"]) for r in doc["runs"]] == [(ids[2], "resume")]


def test_cancel_json_and_text_name_the_runs_that_were_not_active(specs, tmp_path, monkeypatch):
    """Two runs named, one of them cancelled already: --json has both (the second "not active", cancelled false),
    and the text's last line counts it."""
    ws, ids, _ = _slurm_runs(tmp_path, monkeypatch)
    assert CliRunner().invoke(app, ["cancel", ids[0], "--workdir", str(ws.root)]).exit_code == 0
    res = CliRunner().invoke(app, ["cancel", ids[0], ids[2], "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    doc = {r["run_id"]: r for r in json.loads(res.stdout)}
    assert set(doc) == {ids[0], ids[2]}
    assert (doc[ids[2]]["cancelled"], doc[ids[2]]["state"]) == (True, states.CANCELLED)
    assert (doc[ids[0]]["cancelled"], doc[ids[0]]["state"]) == (False, states.CANCELLED)
    assert doc[ids[0]]["outcome"].startswith("not cancelled: not active")
    res = CliRunner().invoke(app, ["cancel", ids[0], ids[1], "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-1] == "1 run(s) cancelled; 1 were not active"
    assert _states(ws, ids) == [states.CANCELLED] * 3


def test_cancel_of_a_run_its_launch_is_submitting_says_no_checkpoint_is_saved(specs, tmp_path):
    """A run a live launch is submitting (SUBMITTING) gets the request, and its launch cancels its job: nothing of
    it trains, so no checkpoint is saved, and the last line says only that it was cancelled."""
    from arctl.compose import resolve_sweep
    from arctl.launch.registry import new_claim_token
    from arctl.launch.status_file import mark_submitted

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    with Registry(ws.registry_path) as reg:  # this process's launch: alive
        claim = reg.claim([i.record() for i in items], new_claim_token(), members=["lt3"])
    assert [r.state for r in claim.claimed] == [states.SUBMITTING] * 3
    ws.run_dir(items[0].run_id).mkdir(parents=True)  # the launch has prepared its folder
    mark_submitted(ws.run_dir(items[0].run_id))
    res = CliRunner().invoke(app, ["cancel", items[0].run_id, "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert "cancelled while its launch submits it" in res.output
    assert res.output.splitlines()[-1] == "1 run(s) cancelled", res.output


def test_resume_of_runs_that_ran_under_different_executors_takes_the_configured_one(specs, tmp_path, monkeypatch):
    """`arctl resume` takes the executor the runs used before where they all used one; where they used several
    (a sweep's cells launched with --executor debug, the rest on SLURM) it takes none of them for all: the
    configured default, never the debug executor (which would train every run inside this process)."""
    ws, ids, _ = _slurm_runs(tmp_path, monkeypatch)
    assert CliRunner().invoke(app, ["cancel", "lt3", "--workdir", str(ws.root)]).exit_code == 0
    res = CliRunner().invoke(app, ["resume", "lt3", "--dry-run", "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    configured = json.loads(res.stdout)["executor"]  # every run's: SLURM (the shims)
    assert configured == "slurm"
    with Registry(ws.registry_path) as reg:
        reg.update(ids[0], executor="debug")
    res = CliRunner().invoke(app, ["resume", "lt3", "--dry-run", "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["executor"] != "debug" and [r["action"] for r in doc["runs"]] == ["resume"] * 3


def test_resume_keeps_a_completed_run_unless_forced(specs, tmp_path, monkeypatch):
    """`arctl resume lt3` of two cancelled runs and a completed one resumes the two and skips the completed one (its
    rerun from scratch is --force's): a mutant that made --force the default reran it."""
    ws, ids, _ = _slurm_runs(tmp_path, monkeypatch)
    assert CliRunner().invoke(app, ["cancel", "lt3", "--workdir", str(ws.root)]).exit_code == 0
    with Registry(ws.registry_path) as reg:
        reg.update(ids[0], state=states.COMPLETED)
    res = CliRunner().invoke(app, ["resume", "lt3", "--dry-run", "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert {r["run_id"]: r["action"] for r in json.loads(res.stdout)["runs"]} == {
        ids[0]: "skip", ids[1]: "resume", ids[2]: "resume"}
    res = CliRunner().invoke(app, ["resume", "lt3", "--force", "--dry-run", "--json", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert {r["run_id"]: r["action"] for r in json.loads(res.stdout)["runs"]}[ids[0]] == "rerun"
