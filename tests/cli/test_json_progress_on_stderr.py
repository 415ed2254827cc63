"""``--json`` keeps stdout for its one document, and only stdout: what a command says while it works goes to stderr
as without it (from a hunt: `arctl run EXP --json > launch.json` showed nothing for a 15-minute run, no executor
line, no state change; `arctl report/export --json` drew no progress bar on a terminal). The state lines are plain
lines, in a pipe too (a CI log shows them); progress bars only where stderr is a terminal that is not TERM=dumb."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app
from arctl.launch import states


@pytest.mark.parametrize("as_json", [True, False])
def test_a_waiting_launch_says_its_executor_and_each_state_change_json_or_not(shipped_specs, tmp_path, monkeypatch,
                                                                              capsys, as_json):
    from arctl.cli.launching import launch_and_report
    from arctl.compose import resolve_experiment
    from arctl.launch import launcher
    from arctl.launch.launcher import items_from_resolved

    items = items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, None))[:2]
    for i in items:
        i.action = "new"
    result = SimpleNamespace(executor="local", executor_note="executor: local (--executor); 2 at a time",
                             submitted=items, skipped=[], job_ids={i.run_id: "queue:4242" for i in items},
                             parallelism=2, failed=[], in_flight=[])

    def wait_for(workspace, run_ids, on_update=None, on_problem=None):
        polls = [[dataclasses.replace(i.record(), state=s, job_id="555", executor="local") for i in items]
                 for s in (states.RUNNING, states.COMPLETED)]
        for records in polls:
            on_update(records)
        return polls[-1]

    monkeypatch.setattr(launcher, "launch", lambda *a, **k: result)
    monkeypatch.setattr(launcher, "wait_for", wait_for)
    launch_and_report(items, workdir=tmp_path / "ws", executor="local", force=False, wait=True,
                      array_parallelism=None, as_json=as_json, members=["ablation-vr"], dry_run=False)
    out, err = capsys.readouterr()
    said = err if as_json else out  # the state lines: stdout's without --json, as before
    assert "executor: local (--executor); 2 at a time" in err
    for i in items:
        for state in (states.RUNNING, states.COMPLETED):
            assert re.search(rf"^\d\d:\d\d:\d\d {re.escape(i.run_id)} {state}$", said, re.M), said
    if as_json:
        doc = json.loads(out)  # stdout: the document alone
        assert [r["state"] for r in doc["submitted"]] == [states.COMPLETED] * 2


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    """report (figure, table, claims) and export with their work stubbed: {command: the progress it was given}."""
    import arctl.report.claims_render as claims_render
    import arctl.report.export as export
    import arctl.report.render as render

    given: dict[str, bool] = {}

    def recorder(name, result):
        def stub(*_args, **kwargs):
            given[name] = kwargs["progress"]
            return result
        return stub

    doc = SimpleNamespace(to_json=lambda: {"ok": True}, as_json=lambda: {"ok": True})
    monkeypatch.setattr(render, "render_figure", recorder("figure", doc))
    monkeypatch.setattr(render, "render_table", recorder("table", doc))
    monkeypatch.setattr(claims_render, "build_claims_report", recorder("claims", doc))
    monkeypatch.setattr(export, "export_runs", recorder("export", doc))
    (tmp_path / "ws").mkdir()
    return given


COMMANDS = {"figure": ["report", "--figure", "main_training"], "table": ["report", "--table", "final"],
            "claims": ["report", "--claims"], "export": ["export", "--out", "OUT"]}


def _json_run(tmp_path, name: str) -> dict:
    args = [str(tmp_path / "exp") if a == "OUT" else a for a in COMMANDS[name]]
    res = CliRunner().invoke(app, [*args, "--workdir", str(tmp_path / "ws"), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_report_and_export_json_draw_their_progress_bars_on_a_terminal(shipped_specs, tmp_path, monkeypatch, stubs,
                                                                       name):
    monkeypatch.setattr(common.err_console, "forced_terminal", True)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert _json_run(tmp_path, name) == {"ok": True}
    assert stubs[name] is True


@pytest.mark.parametrize("term", ["dumb", None])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_progress_bar_in_a_pipe_or_on_a_dumb_terminal(shipped_specs, tmp_path, monkeypatch, stubs, name, term):
    """A dumb terminal cannot redraw a bar: rich's transient bars left blank lines there (from a hunt)."""
    if term is None:
        monkeypatch.setattr(common.err_console, "forced_terminal", False)
    else:
        monkeypatch.setattr(common.err_console, "forced_terminal", True)
        monkeypatch.setenv("TERM", term)
    _json_run(tmp_path, name)
    assert stubs[name] is False


def test_progress_bars_follow_stderr(monkeypatch):
    monkeypatch.setattr(common.err_console, "forced_terminal", True)
    monkeypatch.setenv("TERM", "xterm")
    assert common.progress_bars()
    monkeypatch.setenv("TERM", "dumb")
    assert not common.progress_bars()
    monkeypatch.setattr(common.err_console, "forced_terminal", False)
    monkeypatch.setenv("TERM", "xterm")
    assert not common.progress_bars()
