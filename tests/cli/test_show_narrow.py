"""`arctl show` in a narrow terminal heads each run with its whole name, scale and backend (from a hunt of
determinism: at 50 columns its rule read "─ baselines-thinkprune/thinkprune-r1/s0  scale=… ─")."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.parametrize("width", [50, 200])
def test_show_heads_each_run_whole_in_a_narrow_terminal(tmp_path, monkeypatch, width):
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(common.console, "forced_terminal", True)
    monkeypatch.setattr(common.console, "_width", width)
    res = CliRunner().invoke(app, ["show", "baselines-thinkprune", "--scale", "tiny", "--seeds", "0"],
                             catch_exceptions=False)
    out = ANSI.sub("", res.stdout)
    assert res.exit_code == 0, res.output
    heads = [" ".join(out[m.start():].split()[:3]) for m in re.finditer(r"baselines-thinkprune/\S+/s0", out)]
    assert heads and "…" not in out, out
    for head in heads:  # the name, then its scale and backend, whole (a wrapped title: one line or two)
        assert re.fullmatch(r"baselines-thinkprune/\S+/s0 scale=tiny backend=\S+", head), (head, out)
