"""What the training curves, the score curve and cov_variance draw, asserted on the data of the lines and bands
(matplotlib's) and on the table written beside them as CSV. From a mutation hunt of the report layer's figures:
a band whose upper edge was the mean, the arms no spec lists in the order they were read in, cov_variance's median
for its mean and each run's first evaluation read at the first step of all runs each survived the report tests."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from arctl.report.data import ReportData
from arctl.track.runs import Runs

ANYTIME = "eval/{dataset}/anytime_acc"


def _data(rows) -> ReportData:
    """ReportData of history ``rows`` (run_id, arm, step, metric, value); each run's seed is its id's last digit."""
    h = pd.DataFrame([{"run_id": r, "arm": a, "experiment": "e", "seed": int(r[-1]), "step": s, "metric": m,
                       "value": v} for r, a, s, m, v in rows])
    for col in ("run_id", "arm", "experiment", "metric"):
        h[col] = h[col].astype("category")
    runs = h[["run_id", "experiment", "arm", "seed"]].astype({"run_id": str, "experiment": str, "arm": str})
    return ReportData(Runs(h, runs.drop_duplicates("run_id").reset_index(drop=True)), None, source="t")


def _line(ax, label):
    return next(line for line in ax.lines if line.get_label() == label)


def _band_edges(ax, line) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper edge of the band drawn in ``line``'s colour, at each x of the line."""
    from matplotlib.colors import to_rgb

    (band,) = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], to_rgb(line.get_color()))]
    v = band.get_paths()[0].vertices
    xs = line.get_xdata()
    return (np.array([v[v[:, 0] == x, 1].min() for x in xs]), np.array([v[v[:, 0] == x, 1].max() for x in xs]))


def _training(spec_extra: dict, rows):
    from arctl.report.training_curves import build

    data = _data(rows)
    fig, table = build({"name": "t", "panels": [{"key": ANYTIME, "label": "Anytime accuracy (%)", "scale": 100}],
                        **spec_extra}, data)
    return fig, table, data


def _three_seeds(arm="grpo", ds="aime24", base=0.3):
    return [(f"{arm}-{s}", arm, step, f"eval/{ds}/anytime_acc", base + 0.05 * s * s + 0.001 * step)
            for s in range(3) for step in (0, 10, 20)]


def test_a_training_curve_s_band_is_the_mean_plus_minus_the_csv_s_half_width():
    """The band around a training curve spans mean - ci .. mean + ci of its CSV rows, in the panel's scale, on both
    sides (three seeds: a t-interval of 2 df)."""
    fig, table, _ = _training({}, _three_seeds())
    ax = fig.axes[0]
    line = _line(ax, "GRPO")
    rows = table[table["arm"] == "grpo"].sort_values("step")
    np.testing.assert_array_equal(line.get_xdata(), rows["step"])
    np.testing.assert_allclose(line.get_ydata(), rows["mean"])
    values = np.array([[0.3 + 0.05 * s * s + 0.001 * step for s in range(3)] for step in (0, 10, 20)])
    from arctl.report.stats import t975

    half = 100 * t975(2) * values.std(axis=1, ddof=1) / math.sqrt(3)  # percent, as drawn
    np.testing.assert_allclose(rows["ci"], half)
    lo, hi = _band_edges(ax, line)
    np.testing.assert_allclose(lo, rows["mean"] - rows["ci"])
    np.testing.assert_allclose(hi, rows["mean"] + rows["ci"])
    plt.close(fig)




def _cov(rows):
    from arctl.report.cov_variance import build

    h = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    return build({"name": "cov_variance"}, ReportData(runs=Runs(history=h, runs=pd.DataFrame()), experiments=None,
                                                       source="here"))


def test_cov_variance_draws_the_mean_over_runs():
    """corr(V1, R) at a budget is the mean over runs (and datasets) of each run's first evaluation: 0.1, 0.2 and
    0.6 are drawn 0.3 (their median is 0.2), and the CSV says so with n = 3."""
    fig, table = _cov([(f"r{i}", 0, "eval/toy/corr_v1@8", v) for i, v in enumerate((0.1, 0.2, 0.6))])
    left = fig.axes[0]
    np.testing.assert_allclose(_line(left, "$V_1$").get_ydata(), [0.3])
    assert table.to_dict("records") == [{"series": "corr_v1", "budget": 8, "value": pytest.approx(0.3), "n": 3}]
    plt.close(fig)


def test_cov_variance_reads_each_run_s_own_first_evaluation():
    """A run whose first evaluation came at step 10 (a run that evaluates every 10 steps from step 10, or resumed
    from a checkpoint) is read there, beside a run evaluated at step 0: both are in the mean."""
    fig, table = _cov([("r0", 0, "eval/toy/corr_v1@8", 0.2), ("r0", 10, "eval/toy/corr_v1@8", 0.9),
                       ("r1", 10, "eval/toy/corr_v1@8", 0.4), ("r1", 20, "eval/toy/corr_v1@8", 0.8)])
    np.testing.assert_allclose(_line(fig.axes[0], "$V_1$").get_ydata(), [0.3])
    assert table["n"].tolist() == [2]
    plt.close(fig)



def test_arms_the_spec_does_not_list_follow_in_name_order_whatever_order_they_were_read_in():
    """An arm no spec ``arms`` lists is drawn after the listed ones in the order of their ids, the same legend
    whichever order the runs were read in."""
    rows = _three_seeds("zeta") + _three_seeds("grpo") + _three_seeds("alpha")
    fig, _, _ = _training({"arms": ["grpo"]}, rows)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["GRPO", "alpha", "zeta"]
    plt.close(fig)
