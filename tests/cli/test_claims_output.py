"""`arctl report --claims` as text: each command that produces missing runs is printed whole on one line, in a pipe
(plain lines) and on a terminal (under the table, which folds them), so that a user can copy it from a CI log or
`| tee` output (from a hunt: the table folded `arctl sweep paper --seeds 0-3,7 'scale.budgets=[8,16,24,32]' ...`
mid-token at 80 columns). Its ``meta.created`` is ISO 8601 UTC (it was local time with a zone abbreviation,
"2026-12-06 21:46:28 IST", which no parser reads and which names three zones)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from arctl.cli import common


@pytest.fixture
def claims_box(sandbox, tmp_path):
    """A workspace with two of the priors sweep's runs (the others missing), and the --json document of its claims."""
    import wandb_workspace  # tests/support/wandb_workspace.py

    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-base", "ar-base")):
        wandb_workspace._write_run(sandbox.ws, experiment, arm, 0, range(wandb_workspace.LAST_STEP + 1))
    sandbox.args = ("report", "--claims", "priors", "--scale", "tiny", "--workdir", str(sandbox.ws),
                    "--out", str(tmp_path / "report"))
    before = time.time()
    done = sandbox.run(*sandbox.args, "--json")
    assert done.code == 0 and done.crash is None, done.out + done.err + (done.crash or "")
    sandbox.doc, sandbox.before, sandbox.after = json.loads(done.out), before, time.time()
    sandbox.commands = sorted({c for claim in sandbox.doc["claims"] for t in claim["tests"] for c in t["commands"]})
    assert sandbox.commands
    return sandbox


def test_in_a_pipe_each_command_for_missing_runs_is_on_one_line(claims_box):
    done = claims_box.run(*claims_box.args)
    assert done.code == 0, done.err
    for command in claims_box.commands:
        assert any(command in line for line in done.out.splitlines()), (command, done.out)
    for claim in claims_box.doc["claims"]:  # each verdict on a line that a grep finds
        assert f"claim {claim['id']}: " in done.out and claim["verdict"] in done.out


def test_on_a_terminal_the_commands_follow_the_table_whole(claims_box, monkeypatch):
    monkeypatch.setattr(common.console, "forced_terminal", True)
    monkeypatch.setattr(common.console, "_width", 80)
    monkeypatch.setenv("NO_COLOR", "1")
    done = claims_box.run(*claims_box.args)
    assert done.code == 0, done.err
    assert "┃" in done.out or "│" in done.out  # the table
    lines = [line.strip() for line in done.out.splitlines()]
    numbers = {}
    for command in claims_box.commands:  # whole on its line, its number a comment a shell ignores
        (line,) = [line for line in lines if line.startswith(command + "  # ")]
        numbers[command] = int(line.removeprefix(command + "  # "))
    assert sorted(numbers.values()) == list(range(1, len(numbers) + 1))
    # the table's cells name them by number (from a hunt: each cell held the whole command, folded mid-token: 841
    # lines at 80 columns that buried the verdicts)
    cells = [line for line in done.out.splitlines() if "│" in line or "┃" in line]
    assert not any("arctl " in line for line in cells), done.out
    assert "missing: " in done.out and "below)" in done.out, done.out


def test_the_claims_creation_time_is_iso_8601_utc(claims_box):
    created = claims_box.doc["meta"]["created"]
    assert created.endswith("Z"), created
    when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    assert when.utcoffset() == timezone.utc.utcoffset(None)
    assert int(claims_box.before) - 1 <= when.timestamp() <= claims_box.after + 1, created
    files = json.loads((claims_box.ws.parent / "report" / "claims.json").read_text())
    assert files["meta"]["created"].endswith("Z")
