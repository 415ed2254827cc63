"""User text reaches the terminal as written, from a hunt of every command's output:

- a run target that is not UTF-8 (a byte the shell passes as a lone surrogate) was a traceback in
  status/logs/cancel/resume (SQLite could not take it);
- rich turned ``:smile:`` in a description, a path or a name into an emoji;
- rich's ``escape`` doubled a trailing backslash, printed twice before plain text;
- a benchmark name read from a run's metric keys reached the terminal with its control sequences.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from arctl.cli.common import console, err_console, esc

TRICKY = ["a\\", "a\\\\", "a\\\\\\", "\\", ":smile:", "[bold]x[/]", "b\\[red]", "c\\[/]", "x :warning: \\"]


def _printed(markup: str) -> str:
    out = io.StringIO()
    Console(file=out, emoji=False, highlight=False, width=200, color_system=None).print(markup)
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("around", ["{}", "{}: after", "[red]{}[/]", "[red]{}[/] after", "({})[/dim]"])
def test_esc_prints_the_text_as_written_before_a_tag_or_text(text, around):
    if around.endswith("[/dim]"):
        around = "[dim]" + around
    want = around.replace("[red]", "").replace("[/]", "").replace("[dim]", "").replace("[/dim]", "")
    assert _printed(around.format(esc(text))) == want.format(text)


def test_the_consoles_print_emoji_codes_as_written():
    assert not console._emoji and not err_console._emoji
    out = io.StringIO()
    printer = Console(file=out, emoji=console._emoji, highlight=False, color_system=None)
    printer.print(esc("uses :warning: and :smile:"))
    assert out.getvalue().strip() == "uses :warning: and :smile:"


@pytest.mark.parametrize("command", [["status"], ["logs"], ["cancel"], ["resume"]])
def test_a_target_that_is_not_utf8_is_one_line(sandbox, command):
    sandbox.add_runs()
    bad = b"\xff-run".decode("utf-8", "surrogateescape")
    result = sandbox.check_refused(*command, bad, "--workdir", str(sandbox.ws))
    assert "is not UTF-8 text" in result.err and "'\\udcff-run'" in result.err


def test_a_trailing_backslash_in_an_unknown_option_is_printed_once(sandbox):
    result = sandbox.check_refused("status", "--foo\\")
    assert "No such option: --foo\\ " in result.err and "--foo\\\\" not in result.err


def test_an_experiment_description_keeps_its_emoji_codes(sandbox):
    (sandbox.specs / "experiments" / "emo.yaml").write_text(
        'description: "uses :warning: and :smile: [bold]literally[/]"\narms:\n  a: [algo=grpo]\n')
    result = sandbox.run("ls", "experiments")
    assert result.code == 0 and result.crash is None, result.err
    assert ":warning:" in result.out and ":smile:" in result.out and "[bold]" in result.out  # the table may wrap it
    assert "\u26a0" not in result.out and "\U0001f604" not in result.out


def test_a_benchmark_name_from_a_runs_metric_keys_reaches_the_terminal_without_control_sequences(sandbox, tmp_path):
    import wandb_workspace  # tests/support/wandb_workspace.py

    bad = "eval/x\x1b[2J\x1b]0;PWNED\x07y :smile:"
    wandb_workspace._write_run(tmp_path / "ws", "main-grpo", "grpo", 0, list(range(wandb_workspace.LAST_STEP + 1)),
                               extra_rows=[{"trainer/global_step": wandb_workspace.LAST_STEP + 1,
                                            bad + "/final_acc": float("nan"), bad + "/anytime_acc": 0.5}])
    result = sandbox.run("report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(tmp_path / "ws"),
                         "--out", str(tmp_path / "out"))
    assert result.crash is None and result.code == 0, result.err + (result.crash or "")
    printed = result.out + result.err
    assert "PWNED" in printed and "\\x1b" in printed  # said, escaped
    assert "\x1b" not in printed and "\x07" not in printed


def test_json_says_what_the_text_says_of_a_failed_run_and_of_a_run_not_active(sandbox, monkeypatch):
    """From the hunt: `run --json` gave a FAILED run no reason (the text prints it and the W&B folder), and
    `cancel --json` left out the runs that were not active (the text counts them)."""
    import json

    ids = sandbox.add_run_dirs()  # lt's three arms, COMPLETED
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "b")
    failed = sandbox.run("run", "lt", "--seeds", "2", "--executor", "debug", "--workdir", str(sandbox.ws), "--json")
    assert failed.code == 1 and failed.crash is None, failed.err + (failed.crash or "")
    runs = {r["arm"]: r for r in json.loads(failed.out)["submitted"]}
    assert runs["b"]["state"] == "FAILED" and "fails on purpose" in runs["b"]["error"]
    assert runs["a"]["state"] == "COMPLETED" and runs["a"]["error"] is None and runs["a"]["wandb"] == []
    done = sandbox.run("cancel", ids[0], "--workdir", str(sandbox.ws), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out) == [{"run_id": ids[0], "job_id": "debug", "state": "COMPLETED", "cancelled": False,
                                     "outcome": "not cancelled: not active"}]
