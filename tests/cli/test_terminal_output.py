"""What the commands print in a terminal of 80-120 columns and in a pipe: every run id, state and name a user reads or
types is printed whole (found by a hunt of the terminal output, 2026-12-05). CliRunner takes the pipe path; the
terminal path is the CLI's console forced to be a terminal of a given width, as rich would see one."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import time
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, new_claim_token
from arctl.launch.workspace import Workspace

pytestmark = pytest.mark.usefixtures("shipped_specs")  # tests/cli/conftest.py

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def terminal(monkeypatch):
    """``terminal(width)``: the CLI's stdout console is a terminal that wide (as ``script`` or a shell gives it)."""

    def use(width: int) -> None:
        monkeypatch.setattr(common.console, "forced_terminal", True)
        monkeypatch.setattr(common.console, "_width", width)

    return use


def invoke(*args: str):
    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return res, ANSI.sub("", res.stdout)


def _items(experiment: str = "ablation-vr"):
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved

    return items_from_resolved(resolve_experiment(experiment, [], "tiny", None, None))


def _finished_runs(tmp_path, wandb_same: bool = True):
    """A workspace with the three runs of ablation-vr, ended (run ids up to 42 characters): {run id: job id}."""
    ws = Workspace(tmp_path / "ws")
    items = _items()
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([i.record() for i in items], new_claim_token(), members=["ablation-vr"])
        for n, i in enumerate(items):
            ws.run_dir(i.run_id).mkdir(parents=True)
            reg.update(i.run_id, state=[states.COMPLETED, states.CANCELLED, states.PREEMPTED][n], executor="slurm",
                       job_id=f"73130{n}_{n}", claim=None, before_claim=None, step=60, started_at=now - 125,
                       ended_at=now, metric_name="train/anytime_score", metric_value=0.4375,
                       wandb_id=i.run_id if wandb_same else f"{i.run_id}-g2")
    return ws, {i.run_id: f"73130{n}_{n}" for n, i in enumerate(items)}


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("wandb_same", [True, False])
def test_status_in_a_terminal_shows_each_runs_whole_id_state_job_and_step(tmp_path, terminal, width, wandb_same):
    """From a hunt: in 80-120 columns rich collapsed every column alike: run ids cut with "…", the state, job, step
    and elapsed columns gone. Each run's line holds its whole id, its state, its job, its step and elapsed time."""
    ws, jobs = _finished_runs(tmp_path, wandb_same)
    piped = invoke("status", "--no-refresh", "--workdir", str(ws.root))[1]
    terminal(width)
    res, out = invoke("status", "--no-refresh", "--workdir", str(ws.root))
    assert res.exit_code == 0, res.output
    with Registry(ws.registry_path) as reg:
        shown = {r.run_id: r.state for r in reg.list()}
    for run_id, job in jobs.items():
        (line,) = [line for line in out.splitlines() if line.startswith(run_id + " ")]
        assert {shown[run_id], job, "60", "0:02:05"} <= set(line.split()), out
    rows = out.split("3 run(s)")[0].splitlines()
    assert out == piped or max(len(line.rstrip()) for line in rows) <= width, out  # plain lines, or a table that fits


def test_status_drops_the_wandb_column_that_repeats_the_run_id_and_cuts_no_value(tmp_path, terminal):
    ws, _ = _finished_runs(tmp_path, wandb_same=True)
    # in a pipe the plain columns are as they were: every column, whole
    plain = invoke("status", "--no-refresh", "--workdir", str(ws.root))[1]
    assert "W&B run" in plain and "train/anytime_score=0.4375" in plain and "…" not in plain
    terminal(120)
    out = invoke("status", "--no-refresh", "--workdir", str(ws.root))[1]
    assert "W&B run" not in out and "state" in out.splitlines()[0], out  # a table, without the repeated ids
    # nothing cut (from a hunt: the metric's value gave way to "train/anyt…"; a rerun's W&B id lost its -g1)
    assert max(len(line) for line in out.splitlines()[:4]) <= 120, out
    assert "train/anytime_score=0.4375" in out and "…" not in out, out


@pytest.mark.parametrize("width", [None, 40, 100, 160])
def test_ls_prints_the_names_a_user_types_whole(terminal, width):
    """From a hunt: `arctl ls` folded figure `ablation_decouple` as "ablatio", "n_decou", "ple", arms and sweeps'
    experiments too, in a pipe as well; at 40 columns whole columns vanished. Every name, arm and figure is whole
    (None: a pipe, a line per spec)."""
    if width:
        terminal(width)
    for kind, lists in (("experiments", "arms"), ("sweeps", "experiments"), ("figures", "experiments")):
        rows = json.loads(invoke("ls", kind, "--json")[1])
        res, out = invoke("ls", kind)
        assert res.exit_code == 0 and "…" not in out, out
        words = set(re.findall(r"[\w.-]+", out))
        for row in rows:
            names = [row["name"], *row[lists], *([row["figure"]] if row.get("figure") else [])]
            assert set(names) <= words, (kind, names, out)
        if width is None:  # one line per spec, its names on it
            for row in rows:
                (line,) = [line for line in out.splitlines() if line.startswith(row["name"] + " ")]
                assert ", ".join(row[lists]) in line, line
        elif "┃" in out:  # a table (else plain lines, whole): it fits the terminal
            assert max(len(line) for line in out.splitlines()) <= width, out


@pytest.mark.parametrize("width", [None, 80, 140])
def test_a_dry_runs_table_prints_each_run_id_whole(tmp_path, terminal, width):
    """From a hunt: `arctl run --dry-run`'s table folded run ids over three lines, in a pipe too."""
    if width:
        terminal(width)
    res, out = invoke("run", "ablation-vr", "--dry-run", "--scale", "tiny", "--executor", "local",
                      "--workdir", str(tmp_path / "ws"))
    assert res.exit_code == 0, res.output
    for i in _items():
        (line,) = [line for line in out.split("──")[0].splitlines() if i.run_id in line.split()]  # the table
        assert i.arm in line.split() and "new" in line.split(), line


def _launch(tmp_path, monkeypatch, ended: list[str], as_json: bool):
    """launch_and_report of ablation-vr's three runs, launched locally (each queued as queue:PID) and waited for
    until they ended in ``ended``, their jobs 555_0.. by then."""
    from arctl.cli.launching import launch_and_report
    from arctl.launch import launcher

    items = _items()
    for i in items:
        i.action = "new"
    result = SimpleNamespace(executor="local", executor_note="executor: local", submitted=items, skipped=[],
                             job_ids={i.run_id: "queue:4242" for i in items}, parallelism=None, failed=[], in_flight=[])
    final = [dataclasses.replace(i.record(), state=s, job_id=f"555_{n}", executor="local")
             for n, (i, s) in enumerate(zip(items, ended))]
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: result)
    monkeypatch.setattr(launcher, "wait_for", lambda *a, **k: final)
    import typer

    try:
        launch_and_report(items, workdir=tmp_path / "ws", executor="local", force=False, wait=True,
                          array_parallelism=None, as_json=as_json, members=["ablation-vr"], dry_run=False)
    except typer.Exit as exit_:
        return exit_.exit_code, items
    return 0, items


def test_run_json_gives_the_job_id_of_a_run_it_waited_for(tmp_path, monkeypatch, capsys):
    """From a hunt: `arctl run --json` gave the local queue's queue:PID as each run's job_id after waiting for the
    run, while status, logs and the run folder name its job."""
    code, items = _launch(tmp_path, monkeypatch, [states.COMPLETED] * 3, as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["run_id"], r["job_id"], r["state"]) for r in doc["submitted"]] == [
        (i.run_id, f"555_{n}", states.COMPLETED) for n, i in enumerate(items)]


def test_run_text_names_the_job_of_each_run_it_waited_for(tmp_path, monkeypatch, capsys):
    code, items = _launch(tmp_path, monkeypatch, [states.COMPLETED] * 3, as_json=False)
    out = capsys.readouterr().out
    assert code == 0
    for n, i in enumerate(items):
        (line,) = [line for line in out.splitlines() if f"{i.experiment}/{i.arm}/s{i.seed}:" in line
                   and line.startswith("COMPLETED")]
        assert line.endswith(f"(job 555_{n})"), line


@pytest.mark.parametrize("ended", [states.CANCELLED, states.PREEMPTED, states.FAILED])
@pytest.mark.parametrize("as_json", [False, True])
def test_run_exits_1_when_a_run_it_waited_for_did_not_complete(tmp_path, monkeypatch, capsys, ended, as_json):
    """From a hunt: a run waited for that ended CANCELLED or PREEMPTED exited 0 (only FAILED gave 1), so
    `arctl run X && arctl report ...` went on. Exit 1, and the last line says which runs and how they ended."""
    code, items = _launch(tmp_path, monkeypatch, [states.COMPLETED, ended, states.COMPLETED], as_json=as_json)
    err = ANSI.sub("", capsys.readouterr().err)
    assert code == 1
    assert err.splitlines()[-1] == f"1 of 3 run(s) did not complete: {items[1].run_id} {ended}", err


def test_logs_prints_each_log_files_whole_path(tmp_path):
    """From a hunt: `arctl logs` headed each file with a rule that cut its path with "…" at the width."""
    ws, jobs = _finished_runs(tmp_path / ("deep-" * 12 + "folder"))
    run_id, job = next(iter(jobs.items()))
    logs = ws.run_dir(run_id) / "job" / job
    logs.mkdir(parents=True)
    (logs / f"{job}_0_log.out").write_text("step 60\n")
    (logs / f"{job}_0_log.err").write_text("")
    res, out = invoke("logs", run_id, "--workdir", str(ws.root))
    assert res.exit_code == 0, res.output
    for name in (f"{job}_0_log.out", f"{job}_0_log.err"):
        assert str((logs / name).resolve()) in out and "…" not in out, out
    assert "step 60" in out


def test_help_prints_each_commands_summary_whole(monkeypatch):
    """From a hunt: `arctl --help` broke the command summaries at their docstrings' source line breaks."""
    import typer.rich_utils

    from arctl.cli.main import app as application

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 2000)
    res = CliRunner().invoke(application, ["--help"])
    assert res.exit_code == 0, res.output
    lines = ANSI.sub("", res.stdout).splitlines()
    for info in application.registered_commands:
        summary = " ".join(inspect.cleandoc(info.callback.__doc__).split("\n\n")[0].split())
        (line,) = [line for line in lines if re.match(rf"│ {info.name} +\S", line)]
        assert summary in line, (summary, line)
