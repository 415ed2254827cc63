"""`arctl status` on a terminal of any width: no run id, W&B run id or metric value is cut; too wide, the table leaves
out the experiment/arm/seed column (its run id says it), then gives way to plain lines (found by a hunt of the
terminal output, 2026-12-06: at 114-175 columns `ablation-vr_grpo_s0_8bedeb121f-g1` was `ablation-…` and
`train/loss=nan` was `train/loss…`, while 80-110 columns showed them whole)."""

from __future__ import annotations

import re
import time

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, new_claim_token
from arctl.launch.workspace import Workspace

pytestmark = pytest.mark.usefixtures("shipped_specs")  # tests/cli/conftest.py

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _runs(tmp_path) -> tuple[Workspace, dict[str, tuple[str, str]]]:
    """ablation-vr's three runs, ended; each a --force rerun whose W&B id is its run id and -g1; a NaN loss, a long
    metric name: {run id: (W&B id, metric cell)}."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, None))
    metrics = [("train/loss", None), ("train/anytime_score", 0.4375), ("val/anytime_score_at_budget", 0.5)]
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([i.record() for i in items], new_claim_token(), members=["ablation-vr"])
        for n, i in enumerate(items):
            ws.run_dir(i.run_id).mkdir(parents=True)
            name, value = metrics[n]
            reg.update(i.run_id, state=states.COMPLETED, executor="slurm", job_id=f"1675{n}", claim=None,
                       before_claim=None, step=3, started_at=now - 11, ended_at=now, metric_name=name,
                       metric_value=value, metric_nonfinite="nan" if value is None else None,
                       wandb_id=f"{i.run_id}-g1")
    return ws, {i.run_id: (f"{i.run_id}-g1", f"{m[0]}=") for i, m in zip(items, metrics)}


def _status(ws, width: int | None, monkeypatch) -> str:
    monkeypatch.setattr(common.console, "forced_terminal", None if width is None else True)
    monkeypatch.setattr(common.console, "_width", width)
    res = CliRunner().invoke(app, ["status", "--no-refresh", "--workdir", str(ws.root)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return ANSI.sub("", res.stdout)


@pytest.mark.parametrize("width", [80, 100, 114, 120, 130, 140, 150, 160, 175, 200, 260])
def test_no_id_and_no_metric_value_is_cut_at_any_width(tmp_path, monkeypatch, width):
    ws, runs = _runs(tmp_path)
    piped = _status(ws, None, monkeypatch)
    out = _status(ws, width, monkeypatch)
    assert "…" not in out, out
    table = out.split("3 run(s)")[0].splitlines()
    assert out == piped or max(len(line.rstrip()) for line in table) <= width, out  # plain lines, or a table that fits
    for run_id, (wandb_id, metric) in runs.items():
        (line,) = [line for line in table if line.startswith(run_id + " ")]
        words = line.split()
        assert wandb_id in words, out
        assert any(w.startswith(metric) and len(w) > len(metric) for w in words), out  # the value after "="
    assert "train/loss=nan" in out, out


def test_the_experiment_arm_seed_column_is_left_out_first(tmp_path, monkeypatch):
    """The width at which the whole table just does not fit: the redundant column goes, the W&B ids stay."""
    ws, runs = _runs(tmp_path)
    wide = _status(ws, 400, monkeypatch)
    header = wide.splitlines()[0]
    assert "experiment/arm/seed" in header and "W&B run" in header, wide
    full = max(len(line.rstrip()) for line in wide.split("3 run(s)")[0].splitlines())
    out = _status(ws, full - 1, monkeypatch)
    header = out.splitlines()[0]
    assert "experiment/arm/seed" not in header and "W&B run" in header and "last metric" in header, out
    assert out != _status(ws, None, monkeypatch), out  # a table, not plain lines


@pytest.mark.parametrize("width", [100, 120, 150, 170, 200])
def test_a_column_that_says_more_than_the_run_id_is_never_left_out(monkeypatch, width):
    """A shared run's "as EXP/ARM" is not in its run id: the table keeps the column whole, or plain lines show it."""
    import io

    from rich.console import Console

    from arctl.cli import cmd_status

    headers = ("run id", "experiment/arm/seed", "state", "job", "step", "last metric", "W&B run", "elapsed")
    rows = [("ablation-vr_grpo_s0_8bedeb121f", "ablation-vr/grpo/s0 as other-exp/x", "COMPLETED", "1", "3",
             "train/loss=nan", "ablation-vr_grpo_s0_8bedeb121f-g1", "0:00:11")]
    monkeypatch.setattr(common.console, "_width", width)
    table = cmd_status._table(headers, rows)
    if table is not None:
        screen = io.StringIO()
        Console(file=screen, width=width, color_system=None).print(table)
        assert all(cell in screen.getvalue() for cell in rows[0]), screen.getvalue()


@pytest.mark.parametrize("env", [{"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1"}])
def test_status_in_a_file_is_plain_lines_under_forced_colour(tmp_path, monkeypatch, env):
    """`arctl status > file` with FORCE_COLOR (or TTY_COMPATIBLE): the plain lines a pipe gets, not a table sized to
    a guessed width of 80 (from a hunt)."""
    ws, _ = _runs(tmp_path)
    piped = _status(ws, None, monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "150")  # a table would differ from the plain lines there
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _status(ws, None, monkeypatch) == piped
