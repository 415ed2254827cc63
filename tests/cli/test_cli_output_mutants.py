"""What `arctl status`, `arctl logs`, a launch and the one-line errors print that no test pinned (from the hunt "cli",
2026-12-07: mutants of arctl/cli/cmd_status.py, cmd_logs.py, launching.py and common.py that the suite let through):

- a running run's time left, rounded to whole minutes from one minute up (a mutant said "~2 min left" of 75 s);
- the hint under `arctl status TARGET` for the failed runs' errors it leaves out names TARGET: the command it gives
  lists that target's failed runs, not every failed run of the workspace;
- a launch without --wait/--no-wait waits for local runs and not for SLURM's (a mutant swapped them: `arctl run`
  returned at once from local runs, and sat in the terminal until a SLURM array ended);
- `arctl status PREFIX` lists every run the prefix starts (a mutant refused it, as cancel does);
- a dry run that prints one config for the seeds of an arm heads it with the arm and how many runs it serves (a
  mutant printed the configs one after another with no heading);
- `arctl logs RUN --json` gives a preempted or cancelled run's error, as the text prints it above the logs (a
  mutant gave a failed run's only);
- the elapsed time of an active run runs to now, an ended run's stops at its end;
- an error line about a path names it once (a mutant wrote "PATH -> None");
- `arctl cp --json` names the file it wrote.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace


def test_the_time_left_is_said_in_whole_minutes_from_one_minute_up():
    from arctl.cli.launching import step_text

    assert step_text(59, 100, 30.0) == "59/100 (<1 min left)"
    assert step_text(59, 100, 75.0) == "59/100 (~1 min left)"
    assert step_text(59, 100, 150.0) == "59/100 (~2 min left)"
    assert step_text(59, 100, 300.0) == "59/100 (~5 min left)"
    assert step_text(59, None, None) == "59" and step_text(None, 100, 30.0) == ""


def test_the_hint_for_errors_left_out_names_the_target(tmp_path):
    """`arctl status e` of an experiment with more failed runs than the errors it prints: the line under the table
    gives `arctl status e --state failed ...`, which lists e's failed runs (another experiment's are not e's)."""
    from arctl.cli.cmd_status import ERRORS_SHOWN

    ws = Workspace(tmp_path / "ws")
    n = ERRORS_SHOWN + 2
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=f"e_a_s{i}", experiment="e", arm="a", seed=i) for i in range(n)]
                  + [RunRecord(run_id="other_a_s0", experiment="other", arm="a", seed=0)], new_claim_token())
        for i in range(n):
            reg.update(f"e_a_s{i}", state="FAILED", claim=None, before_claim=None, error=f"boom {i}",
                       ended_at=1_000_000.0 + i)
        reg.update("other_a_s0", state="FAILED", claim=None, before_claim=None, error="other boom", ended_at=1.0)
    res = CliRunner().invoke(app, ["status", "e", "--workdir", str(ws.root), "--no-refresh"])
    assert res.exit_code == 0, res.output
    (hint,) = [line for line in res.output.splitlines() if line.startswith("... and ")]
    assert hint.startswith(f"... and 2 earlier failed run(s)' errors: `arctl status e --state failed --workdir {ws.root}`"), hint
    assert "other" not in res.output


@pytest.mark.parametrize(("executor", "waits"), [("local", True), ("slurm", False)])
def test_a_launch_waits_by_default_for_local_runs_only(tmp_path, monkeypatch, capsys, executor, waits):
    """launch_and_report of ablation-vr's three runs without --wait/--no-wait (``wait=None``): the runs of the local
    executor are waited for (--json: each in the state it ended in), SLURM's are not (each PENDING, its job id the
    submission's)."""
    from arctl.cli.launching import launch_and_report
    from arctl.compose import resolve_experiment
    from arctl.launch import launcher

    items = launcher.items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, None))
    for i in items:
        i.action = "new"
    result = SimpleNamespace(executor=executor, executor_note=f"executor: {executor}", submitted=items, skipped=[],
                             job_ids={i.run_id: f"77_{n}" for n, i in enumerate(items)}, parallelism=None, failed=[],
                             in_flight=[])
    final = [dataclasses.replace(i.record(), state=states.COMPLETED, job_id=f"77_{n}", executor=executor)
             for n, i in enumerate(items)]
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: result)
    monkeypatch.setattr(launcher, "wait_for", lambda *a, **k: final)
    launch_and_report(items, workdir=tmp_path / "ws", executor=executor, force=False, wait=None,
                      array_parallelism=None, as_json=True, members=["ablation-vr"], dry_run=False)
    doc = json.loads(capsys.readouterr().out)
    assert [r["state"] for r in doc["submitted"]] == [states.COMPLETED if waits else "PENDING"] * 3
    assert [r["job_id"] for r in doc["submitted"]] == [f"77_{n}" for n in range(3)]


def test_status_of_a_prefix_lists_every_run_it_starts(tmp_path):
    """`arctl status PREFIX` reads only: every run whose id the prefix starts (cancel and resume refuse such a prefix,
    status lists them), and the totals count those."""
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=f"e_a_s{i}", experiment="e", arm="a", seed=i) for i in range(3)]
                  + [RunRecord(run_id="f_a_s0", experiment="f", arm="a", seed=0)], new_claim_token())
        for run_id in ("e_a_s0", "e_a_s1", "e_a_s2", "f_a_s0"):
            reg.update(run_id, state="COMPLETED", claim=None, before_claim=None)
    res = CliRunner().invoke(app, ["status", "e_a_", "--workdir", str(ws.root), "--no-refresh", "--json"])
    assert res.exit_code == 0, res.output
    assert [r["run_id"] for r in json.loads(res.stdout)] == ["e_a_s0", "e_a_s1", "e_a_s2"]
    res = CliRunner().invoke(app, ["status", "e_a_", "--workdir", str(ws.root), "--no-refresh"])
    assert res.exit_code == 0 and "3 run(s): 3 completed" in res.output, res.output


def test_a_dry_runs_config_shown_once_for_an_arms_seeds_is_headed_by_the_arm(tmp_path, monkeypatch):
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    res = CliRunner().invoke(app, ["run", "ablation-vr", "--dry-run", "--scale", "tiny", "--seeds", "0-4",
                                   "--executor", "local", "--workdir", str(tmp_path / "ws")])
    assert res.exit_code == 0, res.output
    for arm in ("grpo", "grpo-vr", "grpo-vr-decouple"):
        (heading,) = [line for line in res.output.splitlines() if f" ablation-vr/{arm}  (" in line]
        assert heading.split(f"ablation-vr/{arm}  ")[1].startswith("(5 runs, one config)"), heading


@pytest.mark.parametrize("state", ["PREEMPTED", "CANCELLED", "FAILED"])
def test_logs_json_gives_the_error_of_a_stopped_run_as_the_text_does(tmp_path, state):
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="e_a_s0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("e_a_s0", state=state, claim=None, before_claim=None, error="DUE TO TIME LIMIT", ended_at=1.0)
    ws.run_dir("e_a_s0").mkdir(parents=True)
    res = CliRunner().invoke(app, ["logs", "e_a_s0", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert f"{state.lower()}: DUE TO TIME LIMIT" in res.output, res.output
    res = CliRunner().invoke(app, ["logs", "e_a_s0", "--workdir", str(ws.root), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["state"], doc["error"]) == (state, "DUE TO TIME LIMIT")


def test_elapsed_runs_to_now_while_a_run_is_active_and_stops_at_its_end():
    """The table's elapsed column and --json's elapsed_s: an active run's to now, an ended run's to its end (its
    ended_at, else its row's last write), never to now (a mutant swapped the two: an active run's elapsed stood still
    at its row's last write, an ended one's grew on every call)."""
    from arctl.cli.cmd_status import _elapsed, elapsed_s

    now = 1_000_000.0
    running = RunRecord(run_id="r", experiment="e", arm="a", seed=0, state="RUNNING", started_at=now - 3600,
                        updated_at=now - 1800)
    assert elapsed_s(running, now) == 3600 and _elapsed(running, now) == "1:00:00"
    killed = RunRecord(run_id="f", experiment="e", arm="a", seed=0, state="FAILED", started_at=now - 3600,
                       updated_at=now - 1800)  # ended without an ended_at (an older arctl's kill)
    assert elapsed_s(killed, now) == 1800 and elapsed_s(killed, now + 600) == 1800
    ended = RunRecord(run_id="c", experiment="e", arm="a", seed=0, state="COMPLETED", started_at=now - 3600,
                      ended_at=now - 600, updated_at=now - 60)
    assert elapsed_s(ended, now) == 3000


def test_an_error_about_a_path_names_the_path_once():
    """A full disk or a read-only folder is one error line naming the path (and the second path of a rename only
    where there is one): a mutant wrote "PATH -> None" of every such error."""
    import errno

    from arctl.cli.common import place_problem

    full = OSError(errno.ENOSPC, "No space left on device", "/ws/registry.sqlite")
    assert place_problem(full) == ("/ws/registry.sqlite: No space left on device "
                                   "(free some space and run the command again)")
    moved = OSError(errno.EROFS, "Read-only file system", "/ws/a", None, "/ws/b")
    assert place_problem(moved).startswith("/ws/a -> /ws/b: Read-only file system")


def test_cp_json_names_the_file_it_wrote(tmp_path, monkeypatch):
    """`arctl cp NAME DEST --json`: where the copy is ("dest"), as the text's "to ..." says (a mutant left it out)."""
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["cp", "main-grpo", "mine/", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (tmp_path / doc["dest"]).resolve() == (tmp_path / "mine" / "main-grpo.yaml").resolve()
    assert (tmp_path / "mine" / "main-grpo.yaml").is_file()
