"""Defects of `arctl export` found by a mutation hunt of arctl/report/export.py at bb66def, which FAIL ON HEAD:
a run folder this user cannot read, in an export of chosen run ids (`--sweep S --seeds N`: the runs of its cells),
is named twice in ``skipped``, the second time as "nothing logged yet (state completed)" though it was never read;
one the selection did not ask for is named too; and where every run asked for is in the workspace but has logged
nothing yet, the error says none of them is in it and sends the user to another --scale or --seeds."""

from __future__ import annotations

import json

from typer.testing import CliRunner
from unreadable import forbid  # tests/support/unreadable.py
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.report.export import export_runs

ASKED = run_id("main-grpo", "grpo", 0)
UNREADABLE = run_id("main-ar-base", "ar-base", 0)



def test_an_unreadable_run_asked_for_is_skipped_once_as_unreadable(completed_ws, tmp_path, monkeypatch):
    forbid(monkeypatch, completed_ws / "runs" / UNREADABLE)
    result = export_runs(completed_ws, tmp_path / "out", run_ids=[ASKED, UNREADABLE])
    assert [r.run_id for r in result.runs] == [ASKED]
    said = [why for rid, why in result.skipped if rid == UNREADABLE]
    assert len(said) == 1 and said[0].startswith("its folder") and "cannot be read" in said[0], said


def test_an_unreadable_run_not_asked_for_is_not_named(completed_ws, tmp_path, monkeypatch):
    forbid(monkeypatch, completed_ws / "runs" / UNREADABLE)
    result = export_runs(completed_ws, tmp_path / "out", run_ids=[ASKED])
    assert [r.run_id for r in result.runs] == [ASKED]
    assert result.skipped == []


def test_runs_asked_for_that_have_logged_nothing_yet_are_not_said_absent(completed_ws, tmp_path):
    """`arctl export --sweep priors --scale tiny --seeds 7` just after `arctl sweep` launched those 4 runs (each
    running, nothing logged yet): the error says they have logged nothing yet, not that none of them is in the
    workspace with a hint to another --scale or --seeds (HEAD: "none of the 4 runs asked for is in it")."""
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "priors", "--scale", "tiny", "--seeds", "7", "--dry-run", "--json",
                              "--workdir", str(completed_ws)])
    assert res.exit_code == 0, res.output
    for rid in [r["run_id"] for r in json.loads(res.output)["runs"]]:
        (completed_ws / "runs" / rid).mkdir()
        (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    res = runner.invoke(app, ["export", "--workdir", str(completed_ws), "--out", str(tmp_path / "out"), "--sweep",
                              "priors", "--scale", "tiny", "--seeds", "7"])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and not (tmp_path / "out").exists(), res.output
    assert "nothing logged yet" in said and "another --scale or --seeds" not in said, said
    assert "4 have logged nothing yet" in said and "--unfinished" not in said, said  # it would export nothing either
