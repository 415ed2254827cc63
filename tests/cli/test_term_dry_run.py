"""The dry run's plan on a terminal: its "why" column names run ids ("after <run id>": ThinkPrune's rounds start from
the round before), and it wraps between words only, so that an id is never split over lines (from a hunt: at 125-165
columns the id of the round before was folded over two or three lines)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.parametrize("width", [125, 130, 150, 165])
def test_a_run_id_in_the_reason_is_whole_at_every_width(monkeypatch, tmp_path, width):
    monkeypatch.setattr(common.console, "forced_terminal", True)
    monkeypatch.setattr(common.console, "_width", width)
    monkeypatch.setenv("NO_COLOR", "1")
    args = ["run", "baselines-thinkprune", "--dry-run", "--executor", "local", "--workdir", str(tmp_path / "ws")]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    named = {m for r in json.loads(res.stdout)["runs"] for m in re.findall(r"after (\S+)", r.get("reason") or "")}
    assert named, res.stdout  # the reasons name the rounds before
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = ANSI.sub("", res.stdout)
    words = set(re.findall(r"[\w.-]+", out))
    assert named <= words, (sorted(named - words), out)
    # never cut: no word of the output is a piece of one (the run-id column and the configs' headings have them
    # whole, so a whole one is found anyway; a folded reason leaves its pieces)
    pieces = {w for w in words for run_id in named if w != run_id and "_" in w and run_id.startswith(w)}
    assert not pieces, (pieces, out)
