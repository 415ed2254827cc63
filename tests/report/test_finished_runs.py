"""A run is finished at its last step, not one step before it (from a mutation hunt: `last < total` ->
`last + 1 < total` survived; a run preempted one step short would have fed its last mid-training evaluation to every
table, score curve and claim as its final one)."""

from __future__ import annotations

import pandas as pd
import pytest

from arctl.report.cells import finished_run, unfinished

TOTAL = 20


def rec(last_step, run_id: str = "main-grpo-s1") -> dict:
    """A runs-table row whose W&B run closed cleanly (state finished) at ``last_step`` of trainer.total_steps 20."""
    return {"run_id": run_id, "state": "finished", "config.trainer.total_steps": TOTAL, "last_step": last_step}


@pytest.mark.parametrize("last_step, finished", [
    (TOTAL - 1, False), (TOTAL, True), (TOTAL + 1, True),
    (float(TOTAL - 1), False), (float(TOTAL), True),  # a column with a NaN elsewhere holds floats
    (0, False), (10, False),
])
def test_a_run_is_finished_from_its_last_step_on(last_step, finished):
    assert finished_run(rec(last_step)) is finished


def test_a_run_stopped_one_step_short_is_left_out_and_said_so():
    table = pd.DataFrame([rec(TOTAL, "main-grpo-s0"), rec(TOTAL - 1, "main-grpo-s1"), rec(10, "main-grpo-s2"),
                          rec(TOTAL + 1, "main-grpo-s3")])
    assert unfinished(table) == ["main-grpo-s1 (stopped before its last step at step 19 of 20)",
                                 "main-grpo-s2 (stopped before its last step at step 10 of 20)"]
