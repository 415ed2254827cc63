"""The score curve's band is the mean +- the 95% interval's half-width of the CSV beside it, clipped to [0, 100] only
where it leaves that range (from a mutation hunt: the lower edge clipped to [0, 1] survived; the figure tests checked
only that every band lies within [0, 100])."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
from wandb_workspace import GRID, LAST_STEP, acc  # tests/support/wandb_workspace.py

from arctl.report import score_curve
from arctl.report.data import read_report_runs
from arctl.report.specs import load_spec

T975_1 = 12.7062  # t_{0.975, 1 df} (a printed table): two seeds


def _edges(ax, color: str) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper edge, at each budget of GRID, of the band drawn in ``color``."""
    from matplotlib.colors import to_rgb

    (band,) = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], to_rgb(color))]
    v = band.get_paths()[0].vertices
    lo = np.array([v[v[:, 0] == b, 1].min() for b in GRID])
    hi = np.array([v[v[:, 0] == b, 1].max() for b in GRID])
    return lo, hi


@pytest.fixture(scope="module")
def data(workspace, tmp_path_factory):
    spec = load_spec("figure", "score_curve")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spec, read_report_runs(spec, metrics=score_curve.METRICS, workdir=workspace,
                                      cache_dir=tmp_path_factory.mktemp("cache"), progress=False, processes=1,
                                      final_only=True)


def _aime24_grpo(spec, data):
    fig, table = score_curve.build(spec, data)
    ax = next(ax for ax in fig.axes if ax.get_title() == "AIME24")
    line = next(line for line in ax.lines if line.get_label() == "GRPO")
    rows = table[(table["arm"] == "grpo") & (table["dataset"] == "aime24")].sort_values("budget")
    return _edges(ax, line.get_color()), rows


def test_the_band_is_the_mean_plus_minus_the_csv_s_half_width(data):
    (lo, hi), rows = _aime24_grpo(*data)
    # GRPO's two seeds on AIME24 are 1 point apart at every budget: half-width t_{.975,1} x sd / sqrt(2) with
    # sd = 1 / sqrt(2), i.e. 12.7062 / 2 = 6.3531 points around the mean (34.5 at 1000 tokens, 2 more per 1000)
    mean = np.array([50 * (acc("grpo", 0, "aime24", b, LAST_STEP) + acc("grpo", 1, "aime24", b, LAST_STEP)) for b in GRID])
    np.testing.assert_allclose(mean[:2], [34.5, 36.5])
    np.testing.assert_allclose(lo, mean - T975_1 / 2, atol=1e-3)  # 28.147 at 1000 tokens: not clipped at 1
    np.testing.assert_allclose(hi, mean + T975_1 / 2, atol=1e-3)
    # and the CSV's numbers, to the last bit
    np.testing.assert_allclose(lo, rows["acc_mean_pct"] - rows["acc_ci95_pct"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(hi, rows["acc_mean_pct"] + rows["acc_ci95_pct"], rtol=0, atol=1e-9)


def test_a_band_past_0_or_100_is_clipped_there(data):
    spec, runs = data
    h = runs.history.copy()
    # seed 1 of GRPO at 95% on AIME24 everywhere: mean ~63-66, half-width 12.7062 x |a0 - 95| / 2 ~ 400 points
    at = (h["arm"] == "grpo") & (h["seed"] == 1) & h["metric"].astype(str).str.startswith("eval/aime24/acc@")
    h.loc[at, "value"] = 0.95
    (lo, hi), rows = _aime24_grpo(spec, replace(runs, runs=replace(runs.runs, history=h)))
    assert (rows["acc_mean_pct"] - rows["acc_ci95_pct"] < 0).all() and (rows["acc_mean_pct"] + rows["acc_ci95_pct"] > 100).all()
    np.testing.assert_array_equal(lo, 0.0)
    np.testing.assert_array_equal(hi, 100.0)
