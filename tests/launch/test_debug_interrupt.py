"""A debug run trains inside its arctl process: Ctrl-C (or a closed ssh session: SIGHUP) there is the user's stop,
like `arctl cancel` of a job. The run saves its stop checkpoint and is CANCELLED with the reason "interrupted
(Ctrl-C)"; the runs after it, not started, are CANCELLED too; the command says in one line, without a traceback,
what `arctl resume` does next, and exits 130. A second Ctrl-C stops at once, without the checkpoint. From a hunt:
a Ctrl-C printed a 25-line traceback and the run was FAILED "KeyboardInterrupt:" (later "the process running it
(debug executor) exited")."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import group_killed_at_exit  # tests/support/interrupts.py

ARGS = ["sweep", "lt3", "--executor", "debug", "trainer.total_steps=6"]


def _start(ws: Path, *extra: str, env: dict, ignored: tuple = ()) -> subprocess.Popen:
    """``arctl sweep lt3 --executor debug`` in a session of its own, as a terminal starts it (SIGINT and SIGHUP
    at their defaults: a shell's background job ignores SIGINT), or with ``ignored`` ignored at exec (as a
    script's ``cmd &`` starts it: SIGINT; ``nohup``: SIGHUP)."""
    return subprocess.Popen(
        [sys.executable, "-m", "arctl.cli.main", *ARGS, *extra, "--workdir", str(ws)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env}, start_new_session=True,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_IGN if s in ignored else signal.SIG_DFL)
                            for s in (signal.SIGINT, signal.SIGHUP)])


def _first_run_dir(ws: Path) -> Path:
    runs = [p for p in (ws / "runs").iterdir() if (p / "steps.log").exists()] if (ws / "runs").is_dir() else []
    return runs[0] if len(runs) == 1 else None


def _lines(run_dir: Path) -> list[str]:
    return (run_dir / "steps.log").read_text().splitlines()


def _records(statuses, ws: Path) -> dict[str, dict]:
    return {r["run_id"]: r for r in statuses(ws)}


@pytest.mark.parametrize("sig, how, said", [(signal.SIGINT, "Ctrl-C", "interrupted: "),
                                            (signal.SIGHUP, "signal SIGHUP", "interrupted: by SIGHUP; ")],
                         ids=["ctrl-c", "sighup"])
def test_a_stop_of_a_debug_run_saves_it_cancels_the_rest_and_says_how_to_resume(specs, tmp_path, cli, statuses, waiter,
                                                                                 sig, how, said):
    ws = tmp_path / "ws"
    gate = tmp_path / "never"  # the first run pauses after step 2 until told to stop
    proc = _start(ws, "wandb.mode=offline", env={"ARCTL_TEST_GATE": str(gate), "ARCTL_TEST_PAUSE_AFTER": "2"})
    with group_killed_at_exit(proc):
        run_dir = waiter(lambda: (d := _first_run_dir(ws)) and len(_lines(d)) >= 2 and d, 120, "2 steps")
        os.killpg(proc.pid, sig)  # as the terminal sends it: to the whole foreground group
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    run_id = run_dir.name
    records = _records(statuses, ws)
    others = sorted(set(records) - {run_id})
    last = err.strip().splitlines()[-1]
    # named with its --workdir: the launch named one (from a review: the bare command acted on ./arctl-runs)
    assert last == (f"{said}`arctl resume {run_id} --workdir {shlex.quote(str(ws))}` goes on from step 2; 2 more "
                     "runs of this launch did not start: running the command again starts them"), err
    assert (records[run_id]["state"], records[run_id]["error"], records[run_id]["step"]) == (
        "CANCELLED", f"interrupted ({how})", 2)
    assert json.loads((run_dir / "checkpoints" / "state.json").read_text())["step"] == 2  # its stop checkpoint
    for other in others:
        assert (records[other]["state"], records[other]["error"]) == (
            "CANCELLED", f"not started: its launch was interrupted ({how})")
    # their folders say so too: a repair, which rebuilds the registry from them, keeps them CANCELLED (from a
    # review: the stopped run came back PREEMPTED, the others FAILED "submitted ... and never started")
    cli("repair", "--workdir", str(ws), check=True)
    assert {r: rec["state"] for r, rec in _records(statuses, ws).items()} == dict.fromkeys(records, "CANCELLED")
    # what it says to do goes on from the checkpoint
    before = _lines(run_dir)
    cli("resume", run_id, "--executor", "debug", "--workdir", str(ws), check=True)
    after = _lines(run_dir)
    assert after[:2] == before and [int(line.split()[1]) for line in after[2:]] == [3, 4, 5, 6]
    assert _records(statuses, ws)[run_id]["state"] == "COMPLETED"


def test_a_second_ctrl_c_stops_at_once_without_the_checkpoint(specs, tmp_path, statuses, waiter):
    ws = tmp_path / "ws"
    # the stop checkpoint would take 5 minutes: the second Ctrl-C does not wait for it
    env = {"ARCTL_TEST_GATE": str(tmp_path / "never"), "ARCTL_TEST_PAUSE_AFTER": "2", "ARCTL_TEST_STOP_S": "300"}
    proc = _start(ws, env=env)
    with group_killed_at_exit(proc):
        run_dir = waiter(lambda: (d := _first_run_dir(ws)) and len(_lines(d)) >= 2 and d, 120, "2 steps")
        os.killpg(proc.pid, signal.SIGINT)
        waiter(lambda: json.loads((run_dir / "status.json").read_text()).get("state") == "stopping", 60,
                   "the stop checkpoint to begin")
        again = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - again
    assert proc.returncode == 130 and took < 30, (took, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith(
        f"interrupted: `arctl resume {run_dir.name} --workdir {shlex.quote(str(ws))}` goes on from its last "
        "checkpoint; 2 more runs"), err
    record = _records(statuses, ws)[run_dir.name]
    assert record["state"] == "CANCELLED" and record["error"].startswith(
        "interrupted (Ctrl-C) before its stop checkpoint was saved"), record


def test_a_debug_run_started_ignoring_ctrl_c_and_sighup_goes_on_through_them(specs, tmp_path, statuses, waiter):
    """A debug run started by a script as ``arctl sweep ... &`` (SIGINT ignored) under ``nohup`` (SIGHUP ignored)
    was told not to stop on them: a Ctrl-C at the script's foreground, a closed terminal, leave it training
    (from a review: the run was CANCELLED and the launch exited 130)."""
    ws = tmp_path / "ws"
    gate = tmp_path / "go"
    proc = _start(ws, env={"ARCTL_TEST_GATE": str(gate), "ARCTL_TEST_PAUSE_AFTER": "2"},
                  ignored=(signal.SIGINT, signal.SIGHUP))
    with group_killed_at_exit(proc):
        run_dir = waiter(lambda: (d := _first_run_dir(ws)) and len(_lines(d)) >= 2 and d, 120, "2 steps")
        os.killpg(proc.pid, signal.SIGINT)
        os.killpg(proc.pid, signal.SIGHUP)
        time.sleep(2)  # a stop that was heard writes "stopping" within 0.1 s
        assert proc.poll() is None and json.loads((run_dir / "status.json").read_text())["state"] == "running"
        gate.touch()
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert {rec["state"] for rec in statuses(ws)} == {"COMPLETED"}, err
