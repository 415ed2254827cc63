"""`arctl ls` on a wide terminal: the description gives way first, and a paper's reference folds between its words,
each whole (found by a hunt of the terminal output, 2026-12-06: at 160-200 columns `paper` was folded as
"2505.05315" / "), Sec. 3;" and "docs/basel" / "ines.md" beside a description with ~100 blank columns)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app

pytestmark = pytest.mark.usefixtures("shipped_specs")  # tests/cli/conftest.py

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _ls(monkeypatch, width: int, *args: str) -> str:
    monkeypatch.setattr(common.console, "forced_terminal", True)
    monkeypatch.setattr(common.console, "_width", width)
    res = CliRunner().invoke(app, ["ls", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return ANSI.sub("", res.stdout)


@pytest.mark.parametrize("width", [140, 160, 170, 180, 200, 240])
def test_each_word_of_a_paper_is_whole(monkeypatch, width):
    rows = json.loads(CliRunner().invoke(app, ["ls", "--json"]).stdout)
    out = _ls(monkeypatch, width)
    words = set(out.split())
    for row in rows:
        for word in (row["paper"] or "").split():
            assert word in words, (word, out)


@pytest.mark.parametrize("width", [200, 240])
def test_the_description_gives_way_before_the_paper(monkeypatch, width):
    """A paper's reference as wide as the hunt's (61 columns) is on one line at 200 columns, every one at 240: the
    description folds instead."""
    rows = json.loads(CliRunner().invoke(app, ["ls", "--json"]).stdout)
    out = _ls(monkeypatch, width)
    assert "┃" in out, out  # a table
    for row in rows:
        if row["paper"] and (width >= 240 or len(row["paper"]) <= 61):
            assert any(row["paper"] in line for line in out.splitlines()), (row["paper"], out)
