"""`arctl status --state STATE`: only the runs in those states (from a hunt of large workspaces: 1,109 lines for
1,008 runs, and no way to see only the failed ones but grep)."""

from __future__ import annotations

import json

import pytest
from dead_launch import dead_claim_token  # tests/support/dead_launch.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace

STATES = {"r0": "COMPLETED", "r1": "COMPLETED", "r2": "FAILED", "r3": "PREEMPTED", "r4": "CANCELLED"}


def _workspace(tmp_path) -> Workspace:
    """Five runs in four states, and r5, claimed by a launch that died before submitting it (shown INTERRUPTED)."""
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=r, experiment="e", arm="a", seed=i) for i, r in enumerate(STATES)], new_claim_token())
        for r, state in STATES.items():
            reg.update(r, state=state, claim=None, before_claim=None, **({"error": "boom"} if state == "FAILED" else {}))
        reg.claim([RunRecord(run_id="r5", experiment="e", arm="a", seed=5)], dead_claim_token())
    return ws


def _status(ws, *args: str):
    return CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh", *args])


def test_status_shows_only_the_states_asked_for_and_counts_them_all(tmp_path):
    ws = _workspace(tmp_path)
    res = _status(ws, "--state", "failed", "--state", "Preempted")
    assert res.exit_code == 0, res.output
    rows = [line.split()[:3:2] for line in res.output.splitlines() if line.startswith("r") and " e/a/s" in line]
    assert rows == [["r2", "FAILED"], ["r3", "PREEMPTED"]], res.output
    assert "r2: boom" in res.output  # a shown run's error line
    (total,) = [line for line in res.output.splitlines() if "run(s)" in line]
    assert total.startswith("2 of 6 run(s) shown (FAILED, PREEMPTED); all: 1 cancelled, 2 completed, 1 failed, "
                            "1 interrupted, 1 preempted"), total
    res = _status(ws, "--state", "interrupted")  # the state the table shows, not the registry's SUBMITTING
    assert res.exit_code == 0 and "r5" in res.output and "r0" not in res.output, res.output
    doc = json.loads(_status(ws, "--json", "--state", "COMPLETED", "--state", "cancelled").stdout)
    assert sorted((r["run_id"], r["state"]) for r in doc) == [("r0", "COMPLETED"), ("r1", "COMPLETED"),
                                                             ("r4", "CANCELLED")]
    assert len(json.loads(_status(ws, "--json").stdout)) == 6  # no --state: every run
    res = _status(ws, "--state", "running")  # none: an empty table, the totals still said
    assert res.exit_code == 0 and "0 of 6 run(s) shown (RUNNING)" in res.output, res.output


def test_an_unknown_state_is_one_error_line_and_nothing_is_read(tmp_path):
    ws = _workspace(tmp_path)
    before = ws.registry_path.read_bytes()
    res = _status(ws, "--state", "failed", "--state", "done")
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --state 'done' is not a run state: use one of CANCELLED, "
                                                   "COMPLETED, FAILED, INTERRUPTED, PENDING"), res.output
    assert ws.registry_path.read_bytes() == before


def test_a_stopped_run_whose_next_attempt_resumes_behind_its_step_says_from_which(tmp_path):
    """From a hunt: a verl step abandoned on TERM keeps an older checkpoint; `arctl status` showed the run at step 14
    while its next attempt resumes from 10 (status.json's resume_step, which its job wrote)."""
    from arctl.launch.status_file import write_status

    ws = _workspace(tmp_path)
    with Registry(ws.registry_path) as reg:
        for r in ("r3", "r4", "r0"):  # preempted, cancelled, completed: each reached step 14
            reg.update(r, step=14)
    for r, step in (("r3", 10), ("r4", 14), ("r0", 10)):
        ws.run_dir(r).mkdir(parents=True)
        write_status(ws.run_dir(r), state="preempted", resume_step=step)
    rows = {line.split()[0]: line for line in _status(ws).output.splitlines() if line.startswith("r")}
    assert "14 (resumes from 10)" in rows["r3"], rows["r3"]
    assert "resumes" not in rows["r4"] and "resumes" not in rows["r0"]  # where it stopped; completed
    doc = {r["run_id"]: r for r in json.loads(_status(ws, "--json").stdout)}
    assert (doc["r3"]["resume_step"], doc["r4"]["resume_step"], doc["r0"]["resume_step"]) == (10, None, None)


def test_elapsed_in_json_is_never_negative_as_in_the_table(tmp_path):
    """A job on another host whose clock runs behind this one's reported a start after its end (from a hunt, read
    from the code): the table clamped its elapsed at 0, --json gave a negative elapsed_s."""
    import time

    ws = _workspace(tmp_path)
    with Registry(ws.registry_path) as reg:
        reg.update("r0", started_at=time.time() + 30, ended_at=time.time())
    doc = {r["run_id"]: r for r in json.loads(_status(ws, "--json").stdout)}
    assert doc["r0"]["elapsed_s"] == 0.0


@pytest.mark.parametrize("states", [("FAILED",), ("PREEMPTED",), ("FAILED", "PREEMPTED")],
                         ids=["failed", "preempted", "both"])
def test_the_errors_under_the_table_are_the_latest_failures_and_state_failed_lists_every_one(tmp_path, states):
    """From a hunt of a workspace after a year of use: 438 failed runs' errors, some a year old, under the totals.
    A preempted run's error (SLURM's TIMEOUT before its stop checkpoint) is one of them, and the line that counts those
    left out counts it (from a hunt of the CLI: it counted failed runs only, so preempted ones left out went unsaid)."""
    from arctl.cli.cmd_status import ERRORS_SHOWN

    ws = Workspace(tmp_path / "ws")
    n = ERRORS_SHOWN + 5
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=f"f{i:02d}", experiment="e", arm="a", seed=i) for i in range(n)], new_claim_token())
        for i in range(n):  # f00 ended first
            reg.update(f"f{i:02d}", state=states[i % len(states)], claim=None, before_claim=None, error=f"boom {i}",
                       ended_at=1_000_000.0 + i)
    said = [line.split(":")[0] for line in _status(ws).output.splitlines() if ": boom " in line]
    assert said == [f"f{i:02d}" for i in range(5, n)], said  # the latest ERRORS_SHOWN, in the table's order
    left_out = sorted({states[i % len(states)].lower() for i in range(5)})
    tail = _status(ws).output.strip().splitlines()
    flags = "".join(f" --state {k}" for k in left_out)
    assert any(line.startswith(f"... and 5 earlier {' or '.join(left_out)} run(s)' errors: `arctl status{flags} "
                               "--workdir ") for line in tail), tail
    every = [line for line in _status(ws, *[a for k in left_out for a in ("--state", k)]).output.splitlines()
             if ": boom " in line]
    assert len(every) == n, every
    few = _workspace(tmp_path / "few")  # fewer than ERRORS_SHOWN: each said, no "earlier" line
    out = _status(few).output
    assert "r2: boom" in out and "earlier failed" not in out, out
