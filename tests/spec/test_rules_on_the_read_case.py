"""Two validation rules tested where the setting is read and the config is good (from a mutation hunt: the tests had
only the refused case, so a rule that refused good configs too went unnoticed).

- ``verl.n_gpus_per_node`` is read when ``cluster.gpus_per_node`` is 0 (docs/verl-backend.md): there it composes and
  keeps its value (refused only beside a non-zero ``cluster.gpus_per_node``: test_settings_that_do_nothing).
- ThinkPrune's limits are compared with the LARGEST of several thinking budgets, not the first."""

from __future__ import annotations

import pytest

from arctl.compose import SpecError, resolve_experiment


def test_verl_n_gpus_per_node_composes_where_cluster_gpus_per_node_is_0():
    cfg = resolve_experiment("main-grpo", ["verl.n_gpus_per_node=4", "cluster.gpus_per_node=0"], scale="paper",
                             seeds=[0])[0].config
    assert cfg["cluster"]["gpus_per_node"] == 0 and cfg["verl"]["n_gpus_per_node"] == 4


def _thinkprune(budgets):
    return resolve_experiment("baselines-thinkprune", [f"thinking.budgets={budgets}"], scale="tiny",
                              arms=["thinkprune-r1"], seeds=[0])[0].config


def test_thinkprune_limits_up_to_the_largest_of_several_budgets_are_accepted():
    cfg = _thinkprune("[48,96,192]")  # limits [96, 72, 48]: above 48, the first budget, not above 192
    assert cfg["thinking"]["budgets"] == [48, 96, 192]
    assert cfg["budget_control"]["thinkprune_limits"] == [96, 72, 48]


def test_thinkprune_limits_above_the_largest_of_several_budgets_are_refused_naming_it():
    with pytest.raises(SpecError) as err:
        _thinkprune("[48,64,80]")
    text = str(err.value)
    assert "budget_control.thinkprune_limits=[96,72,48] holds limits above the largest thinking budget (80)" in text
    assert "round 1's 96" in text and "\n" not in text
