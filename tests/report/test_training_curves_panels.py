"""training_curves' panels whose key has no ``{dataset}`` and its left-out warning's infinities (from a mutation hunt
of the report's figures, where each test failed on 9dcc6c4):

- a panel of ``train/loss`` (docs/reports.md allows it) was drawn once per dataset column and its rows written once
  per dataset into the CSV, which docs/reports.md says has "one row per arm, metric and step";
- a figure of such panels alone was refused with "they must run evaluations" where the runs logged no evaluation,
  though they logged ``train/loss``;
- a run that logged an infinity at a step left out of its arm's mean was not named in the warning (a NaN was):
  ``runs_behind`` told finite values by ``notna``, which an infinity passes.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from arctl.report.data import ReportData
from arctl.report.training_curves import build
from arctl.track.runs import Runs

T975_1 = 12.706204736174707  # t_{0.975, 1}: the 95% half-width of 2 seeds is T975_1 · s / √2


def _data(rows) -> ReportData:
    h = pd.DataFrame([{"run_id": r, "arm": "grpo", "experiment": "e", "seed": int(r[-1]), "step": s, "metric": m,
                       "value": v} for r, s, m, v in rows])
    for col in ("run_id", "arm", "experiment", "metric"):
        h[col] = h[col].astype("category")
    runs = pd.DataFrame({"run_id": ["r0", "r1"], "experiment": ["e"] * 2, "arm": ["grpo"] * 2, "seed": [0, 1]})
    return ReportData(Runs(h, runs), None, source="t")


def _loss(evals: bool):
    """r0 logs train/loss 1/(step+1), r1 1/(step+1) + 1, at steps 0, 10, 20; with ``evals``, both log
    eval/{aime24,amc22}/anytime_acc 0.3 (r0) and 0.5 (r1) there too."""
    rows = []
    for s in range(2):
        for step in (0, 10, 20):
            rows.append((f"r{s}", step, "train/loss", 1.0 / (step + 1) + s))
            if evals:
                rows += [(f"r{s}", step, f"eval/{ds}/anytime_acc", 0.3 + 0.2 * s) for ds in ("aime24", "amc22")]
    return _data(rows)


LOSS_SPEC = {"name": "t", "panels": [{"key": "train/loss", "label": "loss"}]}
# the two seeds' losses differ by 1 at every step: s = 1/√2, half-width T975_1 · (1/√2) / √2 = T975_1 / 2
LOSS_MEANS = [1.5, (2 / 11 + 1) / 2, (2 / 21 + 1) / 2]


def _shown(fig):
    """(title, number of lines) of each axes the figure shows, row by row."""
    return [(ax.get_title(), len(ax.get_lines())) for ax in fig.axes if ax.axison]


def _assert_loss_rows(table):
    loss = table[table["metric"] == "train/loss"]
    assert loss["step"].tolist() == [0, 10, 20] and loss["n"].tolist() == [2, 2, 2]
    assert loss["mean"].tolist() == pytest.approx(LOSS_MEANS)
    assert loss["ci"].tolist() == pytest.approx([T975_1 / 2] * 3)
    assert set(loss["unit"]) == {"as logged"}


def test_a_panel_without_a_dataset_is_drawn_once_and_is_one_row_per_arm_metric_and_step_in_the_csv():
    fig, table = build(LOSS_SPEC, _loss(evals=True))
    assert not table.duplicated(["arm", "metric", "step"]).any(), table
    _assert_loss_rows(table)
    assert len(table) == 3
    assert _shown(fig) == [("train/loss", 1)]  # one panel, not one per dataset (AMC22, AIME24)
    plt.close(fig)


def test_a_figure_of_training_panels_only_needs_no_evaluation():
    data = _loss(evals=False)
    fig, table = build(LOSS_SPEC, data)
    _assert_loss_rows(table)
    assert len(table) == 3 and _shown(fig) == [("train/loss", 1)]
    assert data.runs.warnings == []
    plt.close(fig)


def test_beside_per_dataset_panels_a_training_panel_takes_the_first_column_of_its_row():
    spec = {"name": "t", "panels": [{"key": "train/loss"}, {"key": "eval/{dataset}/anytime_acc", "scale": 100}]}
    fig, table = build(spec, _loss(evals=True))
    assert not table.duplicated(["arm", "metric", "step"]).any(), table
    _assert_loss_rows(table)
    acc = table[table["metric"] != "train/loss"]
    assert acc["metric"].tolist() == ["eval/amc22/anytime_acc"] * 3 + ["eval/aime24/anytime_acc"] * 3
    assert acc["mean"].tolist() == pytest.approx([40.0] * 6)  # (30 + 50) / 2 percent
    # a 2 x 2 grid: the loss row's second axes is off
    assert len(fig.axes) == 4 and _shown(fig) == [("train/loss", 1), ("AMC22", 1), ("AIME24", 1)]
    plt.close(fig)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_run_that_logged_a_non_finite_value_is_named_behind_the_step_it_leaves_out(bad):
    rows = [(f"r{s}", step, "eval/toy/anytime_acc", bad if (s, step) == (1, 20) else 0.4 + 0.1 * s)
            for s in range(2) for step in (0, 10, 20)]
    data = _data(rows)
    fig, table = build({"name": "t", "panels": [{"key": "eval/{dataset}/anytime_acc", "label": "a"}]}, data)
    assert table["n"].tolist() == [2, 2, 1]  # step 20: r0 alone, left out of the curve
    assert data.runs.warnings == ["GRPO: 1 step(s) (20) that not every run of the arm logged are left out of its mean "
                                  "curve (the run(s) without a value there: r1 (logged NaN or an infinity at step 20); "
                                  "the CSV has them with their n)"]
    plt.close(fig)
