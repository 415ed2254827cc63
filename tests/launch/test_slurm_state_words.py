"""Every job-state word of sacct and squeue that arctl knows, and the run state arctl shows for it.

From the third mutation hunt of the launch layer: no test read the table, so REQUEUE_HOLD taken for RUNNING (a held
job shown running for ever, its warning lost), REQUEUED for RUNNING and STAGE_OUT for PENDING passed every test.
The expected states are written out here, not read from ``arctl.launch.states.SLURM_STATES``."""

from __future__ import annotations

import json
import time

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.launch import states
from arctl.launch.refresh import refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace

EXPECTED = {
    # waiting, or waiting again (requeued, held, being configured, suspended)
    "PENDING": "PENDING",
    "REQUEUED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "CONFIGURING": "PENDING",
    "RESIZING": "PENDING",
    "SUSPENDED": "PENDING",
    # its processes run, or are still ending
    "RUNNING": "RUNNING",
    "COMPLETING": "RUNNING",
    "STAGE_OUT": "RUNNING",
    "SIGNALING": "RUNNING",
    "COMPLETED": "COMPLETED",
    "CANCELLED": "CANCELLED",
    "FAILED": "FAILED",
    "NODE_FAIL": "FAILED",
    "BOOT_FAIL": "FAILED",
    "OUT_OF_MEMORY": "FAILED",
    "DEADLINE": "FAILED",
    # stopped by the time limit or a preemption: resumable from its last checkpoint
    "TIMEOUT": "PREEMPTED",
    "PREEMPTED": "PREEMPTED",
}


@pytest.mark.parametrize(("word", "expected"), sorted(EXPECTED.items()))
def test_each_slurm_word_is_the_state_arctl_shows(word, expected):
    assert states.slurm_state(word) == expected
    assert states.slurm_state(f" {word.lower()}+ ") == expected  # sacct's "+" (a longer word cut), any case


def test_every_word_arctl_knows_is_tested_here():
    assert set(states.SLURM_STATES) == set(EXPECTED)


@pytest.mark.parametrize(("raw", "expected"), [
    ("CANCELLED by 0", "CANCELLED"),  # sacct names who cancelled it
    ("CANCELLED by 1000", "CANCELLED"),
    ("SPECIAL_EXIT", None),  # a word arctl does not know: no state
    ("", None),
])
def test_the_words_after_the_state_and_unknown_words(raw, expected):
    assert states.slurm_state(raw) == expected


def _held_run(tmp_path, monkeypatch, reported: str) -> tuple[Workspace, Registry]:
    """Run r0 RUNNING as job 7_0, its status.json ``reported`` an hour ago; sacct says REQUEUE_HOLD, squeue says
    SLURM holds it for too many requeues."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="printf 'JobID|State\\n7_0|REQUEUE_HOLD\\n'\n",
                    squeue="printf '7_0|REQUEUE_HOLD|JobHoldMaxRequeue\\n'\n")
    ws = Workspace(tmp_path / "ws")
    reg = Registry(ws.registry_path)
    reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
    old = time.time() - 3600
    reg.update("r0", state=states.RUNNING, executor="slurm", job_id="7_0", submitted_at=old, claim=None,
               before_claim=None)
    ws.run_dir("r0").mkdir(parents=True)
    write_status(ws.run_dir("r0"), state=reported, started_at=old - 600)
    path = ws.run_dir("r0") / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": old}))
    return ws, reg


@pytest.mark.parametrize("reported", ["running", "preempted"])
def test_a_job_held_after_too_many_requeues_is_pending_and_says_how_to_release_it(tmp_path, monkeypatch, reported):
    """A job SLURM requeued past the site's limit (MaxBatchRequeue) is held: it never starts by itself."""
    ws, reg = _held_run(tmp_path, monkeypatch, reported)
    with reg:
        [row] = refresh(reg, ws)
    assert (row.state, row.warning) == (
        states.PENDING,
        "SLURM holds job 7_0 (JobHoldMaxRequeue): it will not start until released; it was requeued more times "
        "than the site allows; `scontrol release 7_0` lets it go on")
    with Registry(ws.registry_path) as again:  # kept: `arctl status --no-refresh` shows it too
        assert (again.get("r0").state, again.get("r0").warning) == (row.state, row.warning)
