"""A command a hint suggests acts on the workspace the hint is about: it names ``--workdir`` unless a bare
command means that workspace (``$ARCTL_HOME``, else ``./arctl-runs``).

From a hunt: after ``--workdir ws``, ``arctl report --claims`` said ``arctl sweep paper --seeds 0`` (run as
printed, it planned 9 new runs in ./arctl-runs, an empty workspace); a failed run said ``arctl logs RUN``
("no arctl workspace at .../arctl-runs"); a launch said "`arctl status` shows progress"; a run whose folder was
deleted said ``arctl run ... --force``; an export said "run them first (`arctl run NAME`)".
"""

from __future__ import annotations

import shlex
import shutil

import pytest

EXP = "description: two quick runs\nseeds: [0]\noverrides: [trainer.total_steps=2, wandb.mode=disabled]\n" \
      "arms:\n  a: [algo=grpo, prior=base]\n  b: [algo=grpo-vr, prior=base]\n"


@pytest.fixture
def box(sandbox, monkeypatch, tmp_path):
    """The sandbox, the counting test backend (a debug run takes a second), and a working directory that is
    not the workspace's: a bare command there means ./arctl-runs, which must never appear."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    (sandbox.specs / "experiments" / "hx.yaml").write_text(EXP)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sandbox.elsewhere = elsewhere
    return sandbox


def quoted(text: str, start: str) -> str:
    """The backquoted command in ``text`` that starts with ``start``."""
    parts = text.replace("\n", " ").split("`")
    found = [p for p in parts[1::2] if p.startswith(start)]
    assert found, f"no `{start}...` in:\n{text}"
    return found[0]


def runs_as_printed(box, command: str):
    """``command`` (``arctl ...``, as a hint prints it) run here; ./arctl-runs is never made."""
    done = box.run(*shlex.split(command)[1:])
    assert done.crash is None, done.crash
    assert not (box.elsewhere / "arctl-runs").exists(), f"{command} acted on ./arctl-runs"
    return done


def test_workdir_arg_names_any_workspace_but_the_one_a_bare_command_means(tmp_path, monkeypatch):
    from arctl.launch.workspace import workdir_arg

    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert workdir_arg(tmp_path / "arctl-runs") == "" and workdir_arg("arctl-runs") == ""
    assert workdir_arg("ws") == f" --workdir {tmp_path / 'ws'}"  # absolute: a report's file is read from elsewhere
    spaced = tmp_path / "my runs"
    assert workdir_arg(spaced) == f" --workdir {shlex.quote(str(spaced))}"
    assert shlex.split(f"arctl status{workdir_arg(spaced)}") == ["arctl", "status", "--workdir", str(spaced)]
    monkeypatch.setenv("ARCTL_HOME", str(spaced))
    assert workdir_arg(spaced) == ""  # ARCTL_HOME is what a bare command means now
    assert workdir_arg(tmp_path / "arctl-runs") == f" --workdir {tmp_path / 'arctl-runs'}"


def test_a_failed_run_s_logs_command_and_the_status_hint_name_the_workspace(box, monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "b")
    done = box.run("run", "hx", "--executor", "debug", "--workdir", str(box.ws))
    assert done.code == 1 and done.crash is None, done.out + done.err + (done.crash or "")
    progress = quoted(done.out, "arctl status")
    assert progress == f"arctl status --workdir {box.ws}"
    logs = quoted(done.err, "arctl logs")
    assert logs.endswith(f" --workdir {box.ws}"), done.err
    shown = runs_as_printed(box, logs)
    assert shown.code == 0, shown.err
    assert runs_as_printed(box, progress).code == 0


def test_the_detach_line_after_ctrl_c_names_the_workspace(box, monkeypatch, capsys):
    import typer

    import arctl.launch.launcher as launcher
    from arctl.cli.launching import wait_with_progress
    from arctl.launch.workspace import Workspace

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "wait_for", interrupted)
    with pytest.raises(typer.Exit):
        wait_with_progress(Workspace.open(str(box.ws)), ["x"], False)
    err = capsys.readouterr().err
    assert quoted(err, "arctl status") == f"arctl status --workdir {box.ws}", err


def test_a_run_whose_folder_is_gone_is_launched_again_in_its_workspace(box):
    done = box.run("run", "hx", "--executor", "debug", "--workdir", str(box.ws), "--arm", "a", "--json")
    assert done.code == 0, done.err
    import json

    (run_id,) = [r["run_id"] for r in json.loads(done.out)["submitted"]]
    shutil.rmtree(box.ws / "runs" / run_id)
    shown = box.run("status", "--workdir", str(box.ws))
    again = quoted(shown.out, "arctl run hx")
    assert again.endswith(f"--force --workdir {box.ws}"), shown.out
    planned = runs_as_printed(box, again + " --dry-run --executor debug")
    assert planned.code == 0 and f"workspace: {box.ws}" in planned.out, planned.out + planned.err
    assert "1 planned: 1 would rerun (--force)" in planned.out, planned.out
    doc = json.loads(box.run("status", "--workdir", str(box.ws), "--json").out)
    assert f"--workdir {box.ws}`" in doc[0]["warning"]  # the same words in --json


def test_the_interrupted_launch_and_scheduler_hints_name_the_workspace(tmp_path):
    from arctl.launch.refresh import interrupted_note, never_starts, runaway_error
    from arctl.launch.registry import RunRecord

    rec = RunRecord(run_id="hx_a_s0_0000000000", experiment="hx", arm="a", seed=0, executor="slurm", scale="tiny",
                    backend="tiny")
    ws = tmp_path / "ws"
    assert f"--seeds 0 --workdir {ws}`" in interrupted_note(rec, ws)
    assert f"`arctl cancel {rec.run_id} --workdir {ws}`" in never_starts("BadConstraints", "12", rec.run_id, ws)
    assert f"`arctl resume {rec.run_id} --workdir {ws}`" in runaway_error("12", "RUNNING", rec.run_id, ws)


def test_an_export_of_an_experiment_without_runs_says_to_run_it_in_that_workspace(box, tmp_path):
    (box.ws / "runs").mkdir()
    refused = box.check_refused("export", "--workdir", str(box.ws), "--out", str(tmp_path / "out"),
                                "--experiment", "hx")
    assert quoted(refused.err, "arctl run") == f"arctl run NAME --workdir {box.ws}", refused.err


def test_the_claims_report_s_commands_produce_the_missing_runs_in_its_workspace(box, tmp_path):
    """`arctl report --claims --workdir WS`: each missing run's command names WS, as this shell does on the terminal
    and in --json, relative to --out in the files (claims.json, .md, .html: the same bytes however --workdir was
    typed, from the hunt of determinism); run as printed (dry), it plans in WS."""
    import json
    import os

    import wandb_workspace  # tests/support/wandb_workspace.py

    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-base", "ar-base")):
        wandb_workspace._write_run(box.ws, experiment, arm, 0, range(wandb_workspace.LAST_STEP + 1))
    out = tmp_path / "report"
    done = box.run("report", "--claims", "priors", "--scale", "tiny", "--workdir", str(box.ws), "--out", str(out),
                   "--json")
    assert done.code == 0 and done.crash is None, done.out + done.err + (done.crash or "")
    commands = [c for claim in json.loads(done.out)["claims"] for t in claim["tests"] for c in t["commands"]]
    assert commands and all(c.endswith(f" --workdir {box.ws}") for c in commands), commands
    md = (out / "claims.md").read_text()
    said = [c for c in md.split("`")[1::2] if c.startswith(("arctl run ", "arctl sweep "))]
    relative = os.path.relpath(box.ws.resolve(), out.resolve())
    assert said and all(c.endswith(f" --workdir {relative}") for c in said), said
    assert f"<code>{said[0]}</code>" in (out / "claims.html").read_text()
    planned = runs_as_printed(box, commands[0] + " --dry-run --executor debug")
    assert planned.code == 0 and f"workspace: {box.ws}" in planned.out, planned.out + planned.err


def test_a_report_without_runs_says_to_produce_them_in_its_workspace(box, tmp_path):
    """`arctl report --figure F --workdir WS` on a workspace without the figure's runs: the command it names
    trains in WS (it said `arctl run hx`, which trains in ./arctl-runs); run as printed (dry), it plans in WS."""
    (box.ws / "runs").mkdir()
    refused = box.check_refused("report", "--figure", "score_curve", "--experiment", "hx", "--workdir", str(box.ws),
                                "--out", str(tmp_path / "out"))
    command = quoted(refused.err, "arctl run")
    assert command == f"arctl run hx --workdir {box.ws}", refused.err
    planned = runs_as_printed(box, command + " --dry-run --executor debug")
    assert planned.code == 0 and f"workspace: {box.ws}" in planned.out, planned.out + planned.err


def test_the_missing_arms_line_names_the_workspace():
    from arctl.report.data import missing_arms_warning

    line = missing_arms_warning({"sweep": "paper"}, {"grpo": ["main-grpo"]}, None, "/w", where=" --workdir /w")
    assert "`arctl run main-grpo --arm grpo --workdir /w` (or the whole sweep: `arctl sweep paper --workdir /w`)" \
        in line, line
    assert "`arctl sweep priors --workdir /w`" in missing_arms_warning({}, {"grpo": []}, "priors", "/w", where=" --workdir /w")


def test_a_spec_s_own_hint_and_the_left_out_lines_name_the_workspace(box, tmp_path):
    """From a review: `cov_variance`'s own hint ("e.g. `arctl run main-ar-uniform`") and the warnings of runs left
    out ("`arctl status`") were said bare after `--workdir WS`."""
    from arctl.report.cells import unfinished_warning
    from arctl.report.data import _unread_note

    (box.ws / "runs").mkdir()
    refused = box.check_refused("report", "--figure", "cov_variance", "--workdir", str(box.ws), "--out",
                                str(tmp_path / "out"))
    assert f"(with `--workdir {box.ws}`: the workspace this report reads)" in " ".join(refused.err.split()), refused.err
    assert "`arctl status --workdir /w`" in unfinished_warning(["r1 (its job says cancelled)"], " --workdir /w")
    assert "`arctl status --workdir /w` shows its runs" in _unread_note("e", ["r1"], {"r1"}, set(), "m", " --workdir /w",
                                                                       "figure")
