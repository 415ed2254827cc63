"""A ``scale.*`` value out of its range is said as the key the user wrote, not as a key that takes it as its default
(``thinking.budgets: ${scale.budgets}``, ``rollout.n: ${scale.rollout_n}``, the scale's ThinkPrune and L1 limits).
From a hunt: ``arctl show main-grpo --scale tiny "scale.budgets=[8,16,24,100000000]"`` blamed ``thinking.budgets
(no override writes it: a default, a config group's or derived)`` and told the user to override that key, while
``[8,16,24,0]`` (refused by a resolver first) named scale.budgets."""

from __future__ import annotations

import pytest

from arctl.compose.limits import range_problem

TOO_BIG = "scale.budgets=[8,16,24,100000000]"


@pytest.mark.parametrize("override", [TOO_BIG, "scale.budgets=[8,16,24,0]"])
def test_show_names_the_scale_key_the_user_wrote(sandbox, override):
    err = sandbox.check_refused("show", "main-grpo", "--scale", "tiny", override).err
    assert "scale.budgets" in err and "thinking.budgets" not in err and "no override writes it" not in err, err
    assert "e.g. scale.budgets=" in err, err


def test_a_scale_key_is_checked_before_the_keys_it_is_the_default_of():
    """Both out of range (the one derived from the other): the source is named, a list before a number too (the
    ranges' order is otherwise kept: a derived number used to be checked before every list)."""
    too_big = [8, 16, 24, 10**8]
    cfg = {"thinking": {"budgets": too_big}, "scale": {"budgets": too_big}}
    assert range_problem(cfg)[0] == "scale.budgets"
    cfg = {"rollout": {"n": 5000}, "scale": {"rollout_n": 5000, "budgets": too_big}}
    assert range_problem(cfg)[0] in ("scale.rollout_n", "scale.budgets")
    assert range_problem({"rollout": {"n": 5000}, "thinking": {"budgets": too_big}})[0] == "rollout.n"
