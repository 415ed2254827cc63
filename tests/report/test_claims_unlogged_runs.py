"""`arctl report --claims` names the runs of the cells it tests that have logged nothing yet, as a table and a
figure do (tests/report/test_reports_unlogged_runs.py): a claims report peeked at mid-sweep must not read as a
finished one with fewer seeds. The line is one of claims.json's ``warnings`` (and of claims.md's and claims.html's
warning lists), the runs are claims.json's ``waiting``; a seed the claims expect that has no run at all stays a
missing one, not a waiting one."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner
from unlogged_runs import add_mid_sweep, add_unlogged, waiting_text  # tests/support/unlogged_runs.py
from wandb_workspace import TRUNCATED, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.workspace import Workspace, workdir_arg
from arctl.report.export import NOT_LOGGED_PENDING, NOT_LOGGED_RERUN, NOT_LOGGED_RUNNING
from arctl.report.style import path_from

runner = CliRunner()

RUNNING = ("main-grpo", "grpo", 4)  # its job started, no W&B file yet
PENDING = ("main-ar-base", "ar-base", 2)  # submitted, waiting: a seed the claims test
RERUN = ("main-ar-uniform", "ar-uniform", 2)  # a --force rerun queued: its finished files moved aside
ENDED = ("main-grpo", "grpo", 7)  # failed before it logged anything: not waited for
OTHER_SWEEP = ("r1-7b", "grpo", 5)  # pending, of an experiment no sweep of the report holds
OTHER_SCALE = ("main-grpo", "grpo", 8)  # pending, at another scale than --scale
MISSING = "ar-base (seeds 1)"  # the fixture's main-ar-base has seed 0 only: no run of seed 1 at all


@pytest.fixture
def ws(completed_ws) -> Path:
    add_mid_sweep(completed_ws, running=RUNNING, pending=PENDING, rerun=RERUN, ended=ENDED, elsewhere=OTHER_SWEEP,
                  other_scale=OTHER_SCALE)
    return completed_ws


def _claims(ws: Path, out: Path):
    return runner.invoke(app, ["report", "--claims", "priors", "--scale", "tiny", "--workdir", str(ws), "--out",
                               str(out), "--json"])


def test_a_claims_report_names_the_runs_of_its_cells_that_logged_nothing_yet(ws, tmp_path):
    res = _claims(ws, tmp_path / "c")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    line = (f"not read: 3 run(s) of this claims report's cells have logged nothing yet: "
            f"{waiting_text((PENDING, NOT_LOGGED_PENDING), (RERUN, NOT_LOGGED_RERUN), (RUNNING, NOT_LOGGED_RUNNING))}"
            f" (`arctl status{workdir_arg(ws)}`)")
    assert [w for w in doc["warnings"] if w.startswith("not read: ")] == [line], doc["warnings"]
    assert doc["waiting"] == [{"run_id": run_id(*cell), "experiment": cell[0], "arm": cell[1], "seed": cell[2],
                               "state": state} for cell, state in ((PENDING, NOT_LOGGED_PENDING),
                                                                   (RERUN, NOT_LOGGED_RERUN),
                                                                   (RUNNING, NOT_LOGGED_RUNNING))]
    for cell in (ENDED, OTHER_SWEEP, OTHER_SCALE):  # ended, of another experiment, of another scale
        assert run_id(*cell) not in json.dumps(doc["warnings"]) + json.dumps(doc["waiting"])
    # a seed without any run is missing (with the command that trains it), not waiting
    missing = [m for c in doc["claims"] for t in c["tests"] for m in t["missing"]]
    assert MISSING in missing and run_id("main-ar-base", "ar-base", 1) not in json.dumps(doc["waiting"])
    assert json.loads((tmp_path / "c" / "claims.json").read_text())["waiting"] == doc["waiting"]
    # the files: its command names the workspace relative to their folder, as their commands do
    in_files = line.replace(f"`arctl status{workdir_arg(ws)}`", f"`arctl status --workdir {path_from(tmp_path / 'c', ws)}`")
    assert f"- {in_files}" in (tmp_path / "c" / "claims.md").read_text().splitlines()
    assert f"<li>{html.escape(in_files)}</li>" in (tmp_path / "c" / "claims.html").read_text()


def test_a_claims_report_whose_runs_all_logged_nothing_says_to_wait_not_to_produce_them(ws, tmp_path):
    """One error line, exit 2, nothing written: not "produce them with `arctl sweep priors`"."""
    only = tmp_path / "only"
    (only / "runs").mkdir(parents=True)
    shutil.copy2(Workspace(ws).registry_path, Workspace(only).registry_path)
    shutil.copytree(ws / "runs" / run_id(*RUNNING), only / "runs" / run_id(*RUNNING))
    res = _claims(only, tmp_path / "c")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith(f"error: no runs of priors at scale tiny in {only} yet: ") and \
        "run(s) of this claims report's cells have logged nothing yet: " in lines[0] and \
        f"{run_id(*RUNNING)} ({NOT_LOGGED_RUNNING})" in lines[0] and \
        f"wait for them (`arctl status{workdir_arg(only)}`)" in lines[0] and "produce them" not in lines[0], lines[0]
    assert not (tmp_path / "c").exists()


def test_they_are_named_in_the_line_of_the_runs_left_out_unfinished(completed_ws, tmp_path):
    """Beside a run left out as not finished (with W&B files: its last values are an earlier evaluation's), the runs
    that logged nothing are in the same line, as a table's."""
    vr_pending = ("ablation-vr", "grpo-vr", 5)
    add_unlogged(completed_ws, vr_pending, states.SUBMITTING)
    (completed_ws / "runs" / run_id(*TRUNCATED) / "status.json").write_text(json.dumps({"state": "running"}))
    res = runner.invoke(app, ["report", "--claims", "ablations", "--scale", "tiny", "--workdir", str(completed_ws),
                              "--out", str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (said,) = [w for w in doc["warnings"] if w.startswith("left out ") or w.startswith("not read: ")]
    assert said.startswith("left out 1 run(s) that have not finished") and f"{run_id(*TRUNCATED)} (" in said, said
    assert said.endswith(f"; not read: 1 run(s) of this claims report's cells have logged nothing yet: "
                         f"{waiting_text((vr_pending, NOT_LOGGED_PENDING))}"), said
    assert [w["run_id"] for w in doc["waiting"]] == [run_id(*vr_pending)]


def test_a_seed_under_way_is_not_given_a_command_that_launches_it():
    """From a review: a pending seed another arm of the test has was listed with ``arctl run ... --seeds N``, a launch
    that finds the run under way and does nothing. Its seeds under way are left out of the command; where every seed
    is, the command says to wait for those runs."""
    from arctl.report.claims_render import seeds_not_under_way

    def command(arm, seeds=None):
        return f"arctl run e --arm {arm}" + (f" --seeds {','.join(map(str, seeds))}" if seeds else "")

    waiting = [{"run_id": "e_ar-base_s2_x", "experiment": "e", "arm": "ar-base", "seed": 2, "state": NOT_LOGGED_PENDING},
               {"run_id": "e_ar-base_s3_x", "experiment": "e", "arm": "ar-base", "seed": 3, "state": NOT_LOGGED_RUNNING}]
    wrapped = seeds_not_under_way(command, waiting, "`arctl status`")
    assert wrapped("ar-base", [1, 2]) == "arctl run e --arm ar-base --seeds 1"
    assert wrapped("ar-base", [2, 3]) == "(arm ar-base seeds 2,3: under way as e_ar-base_s2_x, e_ar-base_s3_x: `arctl status`)"
    assert wrapped("grpo", [2]) == "arctl run e --arm grpo --seeds 2"  # another arm's seed 2 is not under way
    assert wrapped("ar-base") == "arctl run e --arm ar-base"  # the spec's seeds: the launch skips those under way


def test_the_report_gives_no_command_for_a_seed_under_way(ws, tmp_path):
    """The mid-sweep workspace with the pending ar-base seed 2 read by the report as a seed the test's other arms have
    (their seed 2 finished): the claims list ar-base's seeds 1-2 as missing and train only seed 1."""
    from unittest import mock

    import arctl.report.claims as claims

    real = claims._by_arm_seed

    def with_seed_2(runs):  # the other arms of each test have a seed 2 (a copy of their seed 0's run)
        by = real(runs)
        for arm, seeds in by.items():
            if arm != "ar-base" and 0 in seeds and 2 not in seeds:
                seeds[2] = seeds[0]
        return by

    with mock.patch.object(claims, "_by_arm_seed", with_seed_2):
        res = _claims(ws, tmp_path / "c")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    tests = [t for c in doc["claims"] for t in c["tests"] if any(m.startswith("ar-base (seeds") for m in t["missing"])]
    assert tests and all("ar-base (seeds 1,2)" in t["missing"] for t in tests), [t["missing"] for t in tests]
    commands = [c for t in tests for c in t["commands"] if "--arm ar-base" in c]
    assert commands and all(" --seeds 1 " in c and "--seeds 1,2" not in c for c in commands), commands


def test_a_seed_whose_launch_died_or_whose_folder_nothing_speaks_for_gets_its_command():
    """From a review: a run whose launch died before it submitted it ("interrupted: ... relaunch it") was taken for
    one under way, and the claim said to wait for a run that will never start."""
    from arctl.report.claims_render import seeds_not_under_way
    from arctl.report.export import NOT_EXPORTED, NOT_LOGGED_INTERRUPTED, NOT_LOGGED_UNKNOWN

    def command(arm, seeds=None):
        return f"arctl run e --arm {arm}" + (f" --seeds {','.join(map(str, seeds))}" if seeds else "")

    waiting = [{"run_id": "e_a_s1_x", "arm": "a", "seed": 1, "state": NOT_LOGGED_INTERRUPTED},
               {"run_id": "e_a_s2_x", "arm": "a", "seed": 2, "state": NOT_LOGGED_UNKNOWN},
               {"run_id": "e_a_s3_x", "arm": "a", "seed": 3, "state": f"running{NOT_EXPORTED}"}]
    wrapped = seeds_not_under_way(command, waiting, "`arctl status`")
    assert wrapped("a", [1, 2]) == "arctl run e --arm a --seeds 1,2"
    assert wrapped("a", [1, 3]) == "arctl run e --arm a --seeds 1"  # an exported run not ended then: under way
