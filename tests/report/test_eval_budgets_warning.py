"""From a hunt of docs vs code: ``eval/{ds}/anytime_acc`` is each run's mean accuracy over its ``eval.budgets``, and
``eval.budgets: null`` is the scale's budgets and the arm's thinking budgets, so ``main-ar-uniform
thinking.budgets=[1000,...,8000]`` averages 8 budgets where GRPO averages 4. A training curve or table of
anytime_acc drew them side by side without a word; it says so now, in one line naming the arms and their budgets."""

from __future__ import annotations

import math

import pytest

GRPO = [2000, 4000, 6000, 8000]
EIGHT = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]


def _data(budgets: dict[str, object], metric: str = "eval/aime24/anytime_acc", nan_arm: str | None = None):
    """Two seeds of each arm of ``budgets`` (arm -> its runs' ``config.eval.budgets``), logging ``metric`` at steps
    0 and 20 (NaN for ``nan_arm``: no line of it is drawn)."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.track.runs import Runs

    rows, runs = [], []
    for arm, value in budgets.items():
        for seed in range(2):
            run = f"{arm}-{seed}"
            runs.append({"run_id": run, "experiment": "e", "arm": arm, "seed": seed, "config.eval.budgets": value})
            rows += [{"run_id": run, "arm": arm, "experiment": "e", "seed": seed, "step": step, "metric": metric,
                      "value": math.nan if arm == nan_arm else 0.3 + 0.1 * seed + 0.001 * step} for step in (0, 20)]
    history = pd.DataFrame(rows)
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    return ReportData(Runs(history, pd.DataFrame(runs)), None, source="t")


def _curves(data, key: str = "eval/{dataset}/anytime_acc"):
    import matplotlib.pyplot as plt

    from arctl.report.training_curves import build

    fig, _ = build({"name": "t", "arms": ["grpo", "ar-uniform"], "panels": [{"key": key, "label": "a"}]}, data)
    plt.close(fig)
    return data.runs.warnings


def test_a_training_curve_of_arms_with_other_eval_budgets_says_so():
    # one arm's budgets as a list, the other's in the text form a W&B config gives
    warnings = _curves(_data({"grpo": GRPO, "ar-uniform": str(EIGHT)}))
    assert warnings == [
        "anytime_acc averages each run's accuracy over its eval.budgets, which differ between the runs compared "
        "(GRPO [2000, 4000, 6000, 8000]; AR-uniform [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]): means over "
        "different budgets, not one measure; compare acc@b, or give the arms the same eval.budgets"]


def test_arms_with_the_same_eval_budgets_get_no_warning():
    # the same set, listed in another order and once as text: one measure
    assert _curves(_data({"grpo": GRPO, "ar-uniform": str(GRPO[::-1])})) == []


def test_no_warning_for_a_statistic_not_averaged_over_eval_budgets():
    assert _curves(_data({"grpo": GRPO, "ar-uniform": EIGHT}, "eval/aime24/final_acc"),
                   "eval/{dataset}/final_acc") == []


def test_an_arm_not_drawn_is_not_compared():
    warnings = _curves(_data({"grpo": GRPO, "ar-uniform": EIGHT}, nan_arm="ar-uniform"))
    assert not any("eval.budgets" in w for w in warnings)
    assert len(warnings) == 1  # the arm left out of the figure, said as before


def test_an_arm_whose_seeds_differ_is_named_with_each_set():
    import pandas as pd

    data = _data({"grpo": GRPO})
    data.runs.runs = data.runs.runs.assign(**{"config.eval.budgets": pd.Series([GRPO, EIGHT], dtype=object)})
    (warning,) = _curves(data)
    assert "(GRPO [2000, 4000, 6000, 8000] and [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000])" in warning


@pytest.mark.parametrize("key, warned", [("eval/{dataset}/anytime_acc", True),
                                         ("eval/{dataset}/grid_anytime_acc", False)])
def test_a_table_of_anytime_acc_says_so(tmp_path, key, warned):
    from arctl.report.tables import build

    metric = key.replace("{dataset}", "aime24")
    data = _data({"grpo": GRPO, "ar-uniform": EIGHT}, metric)
    build({"name": "t", "key": key, "scale": 100, "arms": ["grpo", "ar-uniform"]}, data, tmp_path)
    assert [w for w in data.runs.warnings if "eval.budgets" in w] == (
        [_curves(_data({"grpo": GRPO, "ar-uniform": EIGHT}))[0]] if warned else [])
    assert (tmp_path / "t.md").is_file()


def test_a_run_without_eval_budgets_in_its_config_is_not_compared():
    data = _data({"grpo": GRPO, "ar-uniform": None})
    assert _curves(data) == []


def test_the_warning_is_in_the_reports_json(monkeypatch, tmp_path):
    """``arctl report --figure main_training --json``: the line is among the result's warnings."""
    from arctl.report import render

    data = _data({"grpo": GRPO, "ar-uniform": EIGHT})
    monkeypatch.setattr(render, "read_report_runs", lambda *a, **k: data)
    result = render.render_figure("main_training", out_dir=tmp_path)
    assert [w for w in result.to_json()["warnings"] if "eval.budgets" in w] == [
        _curves(_data({"grpo": GRPO, "ar-uniform": EIGHT}))[0]]
