"""An export that a Ctrl-C stopped part-way is known as unfinished: `arctl export` says the same command
completes it, and a report read from it warns so (from a hunt: a report read 1 of its 3 runs without a word
of it, and told the user to launch the 2 others with `arctl run`, in a folder that launches nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from interrupts import interrupt_placing  # tests/support/interrupts.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report import export

runner = CliRunner()


@pytest.fixture
def ws(completed_ws) -> Path:
    """A copy of the shared workspace of real W&B runs, each completed (tests/report/conftest.py)."""
    return completed_ws


def _lines(text: str) -> str:
    return " ".join(text.split())


def test_an_interrupted_export_says_the_same_command_completes_it_and_reports_warn_until_it_does(
        ws, tmp_path, monkeypatch):
    out = tmp_path / "evidence"
    args = ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo"]  # its seeds 0 and 1
    interrupt_placing(monkeypatch, after=1)
    res = runner.invoke(app, args)
    assert res.exit_code == 130, res.output
    assert f"interrupted: the export in {out} is unfinished; the same command completes it" in _lines(res.output)
    monkeypatch.undo()

    report = ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(out), "--out",
              str(tmp_path / "t")]
    res = runner.invoke(app, [*report, "--json"])
    assert res.exit_code == 0, res.output
    warned = [w for w in json.loads(res.stdout)["warnings"] if w.startswith("export interrupted: ")]
    assert len(warned) == 1 and f"rerun `arctl export --out {out} ...`" in warned[0], warned
    res = runner.invoke(app, report)  # the text says it too
    assert "warning: export interrupted:" in _lines(res.output), res.output

    res = runner.invoke(app, args)  # the same command completes it
    assert res.exit_code == 0, res.output
    assert export.interrupted_export(out) is None and "pending" not in json.loads((out / "export.json").read_text())
    res = runner.invoke(app, [*report, "--json"])
    assert res.exit_code == 0 and not [w for w in json.loads(res.stdout)["warnings"] if "export interrupted" in w]


def test_the_claims_read_from_an_interrupted_export_warn_too(ws, tmp_path, monkeypatch):
    out = tmp_path / "evidence"
    interrupt_placing(monkeypatch, after=1)
    with pytest.raises(KeyboardInterrupt):
        export.export_runs(ws, out)
    monkeypatch.undo()
    res = runner.invoke(app, ["report", "--claims", "priors", "ablations", "--scale", "tiny", "--workdir", str(out),
                              "--out", str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    assert any(w.startswith("export interrupted: ") for w in json.loads(res.stdout)["warnings"])


def test_an_export_left_with_its_staging_folder_by_an_older_arctl_is_unfinished(ws, tmp_path):
    out = tmp_path / "evidence"
    assert export.export_runs(ws, out).runs
    assert export.interrupted_export(out) is None
    (out / export.STAGING / "some_run").mkdir(parents=True)  # what an export before the pending list left
    assert export.interrupted_export(out).startswith("export interrupted: ")
    assert export.interrupted_export(ws) is None  # a workspace is no export


def test_an_export_interrupted_before_it_copied_anything_leaves_nothing_unfinished(ws, tmp_path, monkeypatch):
    out = tmp_path / "evidence"

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "_plan_run", interrupted)
    res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out)])
    assert res.exit_code == 130 and f"interrupted: {out} holds no unfinished export" in _lines(res.output), res.output
    assert not out.exists() or not any(out.iterdir())


def test_claims_lacking_runs_in_an_export_send_the_user_to_arctl_export_not_arctl_run(ws, tmp_path):
    """An export launches nothing (`arctl run` refuses it): the runs it lacks come from an export."""
    out = tmp_path / "evidence"
    assert runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "r1-7b"]).exit_code == 0
    res = runner.invoke(app, ["report", "--claims", "priors", "--workdir", str(out), "--out", str(tmp_path / "c")])
    assert res.exit_code == 2, res.output
    line = _lines(res.output)
    assert f"produce them with `arctl export --out {out} --workdir WORKSPACE`" in line and "arctl sweep" not in line


def test_a_figure_lacking_experiments_in_an_export_sends_the_user_to_arctl_export(ws, tmp_path):
    """The figure and table messages (data.py) too: an export of main-grpo alone, asked for a figure of the
    main experiments, names `arctl export`, not `arctl run`, for the ones it lacks."""
    out = tmp_path / "evidence"
    assert runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "r1-7b"]).exit_code == 0
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(out), "--out", str(tmp_path / "f")])
    line = _lines(res.output)
    assert f"`arctl export --out {out} --workdir WORKSPACE`" in line and "arctl run" not in line, line


def test_a_claim_lacking_runs_in_an_export_names_arctl_export_for_them(ws, tmp_path):
    """Each claim's "Missing runs: ... run `...`" too (claims.md and --json): in an export, `arctl export`."""
    out = tmp_path / "evidence"
    assert runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo",
                               "--experiment", "main-ar-uniform"]).exit_code == 0
    res = runner.invoke(app, ["report", "--claims", "priors", "--workdir", str(out), "--out", str(tmp_path / "c"),
                              "--json"])
    assert res.exit_code == 0, res.output
    commands = {c for claim in json.loads(res.stdout)["claims"] for t in claim.get("tests", [])
                for c in t.get("commands", [])}
    # trained in a workspace, then exported into this one: an export of a workspace alone names runs never trained
    assert commands and all(c.startswith(("arctl sweep ", "arctl run ")) and c.endswith(
        f" --workdir WORKSPACE && arctl export --out {out} --workdir WORKSPACE") for c in commands), commands
