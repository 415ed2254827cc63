"""From a hunt of docs vs code: ``eval/{ds}/anytime_acc`` is each run's mean accuracy over its ``eval.budgets``, and
``eval.budgets: null`` is the scale's budgets and the arm's thinking budgets, so ``main-ar-uniform
thinking.budgets=[1000,...,8000]`` averages 8 budgets where GRPO averages 4. A training curve or table of
anytime_acc drew them side by side without a word; it says so now, in one line naming the arms and their budgets.
From its review: the other summaries that depend on the budgets had the same gap (``thinking.budgets=[1000,...,6000]``:
``final_acc`` at 6000 where GRPO's is at 8000, and a 32-budget ``eval.grid`` up to 6000 for ``grid_anytime_acc``,
``curve_auc``, ``acc_at_frac/*`` of Tables 1 and 2); each is checked against its own config fact now."""

from __future__ import annotations

import math

import pytest

GRPO = [2000, 4000, 6000, 8000]
EIGHT = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
SIX = [1000, 2000, 3000, 4000, 5000, 6000]  # main-ar-uniform thinking.budgets=[1000,...,6000]: its eval.budgets


def _grid(top: int) -> list[int]:
    """The 32-budget eval.grid an arm whose largest thinking budget is ``top`` composes (``eval.grid: null``)."""
    from arctl.compose.resolvers import budget_grid

    return budget_grid(top, 32)


def _data(budgets: dict[str, object], metric: str | tuple = "eval/aime24/anytime_acc", nan_arm: str | None = None,
          grids: dict[str, object] | None = None):
    """Two seeds of each arm of ``budgets`` (arm -> its runs' ``config.eval.budgets``; ``grids``: their
    ``config.eval.grid``), logging ``metric`` (or each of several) at steps 0 and 20 (NaN for ``nan_arm``: no line of
    it is drawn)."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.track.runs import Runs

    rows, runs = [], []
    for arm, value in budgets.items():
        for seed in range(2):
            run = f"{arm}-{seed}"
            runs.append({"run_id": run, "experiment": "e", "arm": arm, "seed": seed, "config.eval.budgets": value,
                         **({"config.eval.grid": grids[arm]} if grids else {})})
            rows += [{"run_id": run, "arm": arm, "experiment": "e", "seed": seed, "step": step, "metric": m,
                      "value": math.nan if arm == nan_arm else 0.3 + 0.1 * seed + 0.001 * step}
                     for m in ((metric,) if isinstance(metric, str) else metric) for step in (0, 20)]
    history = pd.DataFrame(rows)
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    return ReportData(Runs(history, pd.DataFrame(runs)), None, source="t")


def _curves(data, key: str | tuple = "eval/{dataset}/anytime_acc"):
    import matplotlib.pyplot as plt

    from arctl.report.training_curves import build

    panels = [{"key": k, "label": k} for k in ((key,) if isinstance(key, str) else key)]
    fig, _ = build({"name": "t", "arms": ["grpo", "ar-uniform"], "panels": panels}, data)
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


FINAL_ACC_WARNING = (
    "final_acc gives each run's accuracy at the largest of its eval.budgets, which differs between the runs compared "
    "(GRPO 8000; AR-uniform 6000): accuracies at different budgets, not one measure; compare acc@b, or give the arms "
    "the same largest budget in eval.budgets")


def test_final_acc_of_arms_with_another_largest_eval_budget_says_so():
    assert _curves(_data({"grpo": GRPO, "ar-uniform": SIX}, "eval/aime24/final_acc"),
                   "eval/{dataset}/final_acc") == [FINAL_ACC_WARNING]


def test_final_acc_of_arms_with_the_same_largest_eval_budget_gets_no_warning():
    # other budget sets (anytime_acc would differ), the same largest budget: final_acc is one measure
    assert _curves(_data({"grpo": GRPO, "ar-uniform": EIGHT}, "eval/aime24/final_acc"),
                   "eval/{dataset}/final_acc") == []


def test_a_statistic_that_depends_on_no_budgets_gets_no_warning():
    assert _curves(_data({"grpo": GRPO, "ar-uniform": SIX}, "eval/aime24/chance_acc"),
                   "eval/{dataset}/chance_acc") == []


def test_a_figure_of_several_summaries_says_each_fact_that_differs_once():
    data = _data({"grpo": GRPO, "ar-uniform": SIX}, ("eval/aime24/anytime_acc", "eval/aime24/final_acc"))
    warnings = _curves(data, ("eval/{dataset}/anytime_acc", "eval/{dataset}/final_acc"))
    assert warnings == [_curves(_data({"grpo": GRPO, "ar-uniform": SIX}))[0], FINAL_ACC_WARNING]
    assert warnings[0].startswith("anytime_acc averages each run's accuracy over its eval.budgets, which differ ")


GRID_WARNING = (
    "{names} over its eval.grid, which differs between the runs compared (GRPO 32 budgets, 250 to 8000; AR-uniform "
    "32 budgets, 188 to 6000): summaries over different budgets, not one measure; compare acc@b, or give the arms the "
    "same eval.grid")


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
                                         ("eval/{dataset}/grid_anytime_acc", False),  # no eval.grid in the configs
                                         ("eval/{dataset}/final_acc", False)])  # both arms' largest budget 8000
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


@pytest.mark.parametrize("key", ["eval/{dataset}/grid_anytime_acc", "eval/{dataset}/curve_auc",
                                 "eval/{dataset}/acc_at_frac/50", "eval/{dataset}/final_acc"])
def test_a_table_of_arms_with_another_eval_grid_says_so(tmp_path, key):
    """Tables 1 and 2 of main-ar-uniform thinking.budgets=[1000,...,6000] beside GRPO (the review's reproduction)."""
    from arctl.report.tables import build

    metric = key.replace("{dataset}", "aime24")
    data = _data({"grpo": GRPO, "ar-uniform": SIX}, metric, grids={"grpo": _grid(8000), "ar-uniform": _grid(6000)})
    build({"name": "t", "key": key, "scale": 100, "arms": ["grpo", "ar-uniform"]}, data, tmp_path)
    name = metric.split("/", 2)[-1]
    assert data.runs.warnings == ([FINAL_ACC_WARNING] if name == "final_acc" else
                                  [GRID_WARNING.format(names=f"{name} summarises each run's accuracy")])


def test_a_figure_of_the_grid_summaries_names_them_in_one_line():
    keys = ("eval/{dataset}/curve_auc", "eval/{dataset}/acc_at_frac/50")
    data = _data({"grpo": GRPO, "ar-uniform": SIX}, tuple(k.replace("{dataset}", "aime24") for k in keys),
                 grids={"grpo": _grid(8000), "ar-uniform": str(_grid(6000))})  # one as a W&B config's text
    assert _curves(data, keys) == [
        GRID_WARNING.format(names="acc_at_frac/50, curve_auc summarise each run's accuracy")]


def test_arms_with_the_same_eval_grid_get_no_warning():
    # other eval.budgets (anytime_acc would differ), one grid, listed in another order once
    data = _data({"grpo": GRPO, "ar-uniform": EIGHT}, "eval/aime24/grid_anytime_acc",
                 grids={"grpo": _grid(8000), "ar-uniform": _grid(8000)[::-1]})
    assert _curves(data, "eval/{dataset}/grid_anytime_acc") == []


def test_grids_alike_in_size_and_ends_are_each_shown_in_full():
    inside = [250, 600, *_grid(8000)[2:]]  # 32 budgets, 250 to 8000, another second budget
    data = _data({"grpo": GRPO, "ar-uniform": GRPO}, "eval/aime24/grid_anytime_acc",
                 grids={"grpo": _grid(8000), "ar-uniform": inside})
    (warning,) = _curves(data, "eval/{dataset}/grid_anytime_acc")
    assert f"(GRPO [{', '.join(map(str, _grid(8000)))}]; AR-uniform [{', '.join(map(str, inside))}])" in warning
