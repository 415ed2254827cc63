"""The compared methods as run settings (arctl.algo.methods.control): hand-worked cases from each
method's paper, the reward of a tree against a slow per-summary reference, and the one-home rules."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from method_registry import isolate_methods  # tests/support/method_registry.py
from s1_reference import ForcingState, _advance

from arctl.algo.methods import control as bc
from arctl.algo.methods.budget_forcing import BudgetForcing, extends
from arctl.algo.methods.thinkprune import thinkprune_schedule
from arctl.algo.settings import L1_TARGET_RANGE, BudgetControl


def test_thinkprune_rounds_are_equal_shares_of_training():
    """ThinkPrune (Hou et al. 2025, Sec. 3): rounds 4000 -> 3000 -> 2000; here in one run, each round
    a third of the steps (steps are 1-based, round 0 starts at step 0)."""
    assert thinkprune_schedule([4000, 3000, 2000], 300) == ((0, 4000), (101, 3000), (201, 2000))
    assert thinkprune_schedule([64, 48, 32], 100) == ((0, 64), (34, 48), (67, 32))
    control = BudgetControl(method="thinkprune", thinkprune_limits=(32, 24, 16))
    assert [bc.step_limit(control, s, 3) for s in (1, 2, 3)] == [32, 24, 16]
    assert bc.step_limit(BudgetControl(), 5, 10) is None
    with pytest.raises(ValueError, match="at least 3 training steps"):
        thinkprune_schedule([3, 2, 1], 2)
    with pytest.raises(ValueError, match="non-increasing"):
        thinkprune_schedule([2, 3], 10)


def test_a_thinkprune_round_run_holds_its_rounds_limit_at_every_step():
    """The paper's rounds as runs (Hou et al. 2025: "each round starts from the previous round's
    checkpoint"): round k's run generates and rewards at limit L_k from its first step to its last."""
    for k, limit in ((1, 4000), (2, 3000), (3, 2000)):
        control = BudgetControl(method="thinkprune", thinkprune_limits=(4000, 3000, 2000), thinkprune_round=k)
        assert {bc.step_limit(control, s, 100) for s in range(1, 101)} == {limit}
        assert {bc.generation_limit(control, s, 100) for s in (1, 50, 100)} == {limit}
    assert bc.step_limit(BudgetControl(method="thinkprune", thinkprune_limits=(8, 4), thinkprune_round=2), 1, 1) == 4
    from arctl.algo.methods.registry import method_of

    four = BudgetControl(method="thinkprune", thinkprune_limits=(8, 4), thinkprune_round=3)
    assert "thinkprune_round=3 but thinkprune_limits has 2 round(s)" in method_of(four).config_problem(four, 8, 10)[0]
    one_step = BudgetControl(method="thinkprune", thinkprune_limits=(8, 4, 2), thinkprune_round=2)
    assert method_of(one_step).config_problem(one_step, 8, 1) is None  # one round: one step is enough


def test_thinkprune_reward_is_zero_past_the_limit():
    """ThinkPrune's reward: correctness if the trace fits the limit, else 0 ("unfinished thoughts and
    answers will be discarded"): over the limit, or cut unfinished at it."""
    c = BudgetControl(method="thinkprune")
    args = dict(cuts=[64], summary_lens=[[3, 3]])
    assert bc.shape_rewards(c, [[1.0, 0.0]], think_len=30, finished=True, limit=32, **args) == ((1.0, 0.0),)
    assert bc.shape_rewards(c, [[1.0, 0.0]], think_len=32, finished=True, limit=32, **args) == ((1.0, 0.0),)
    assert bc.shape_rewards(c, [[1.0, 1.0]], think_len=33, finished=True, limit=32, **args) == ((0.0, 0.0),)
    assert bc.shape_rewards(c, [[1.0, 1.0]], think_len=32, finished=False, limit=32, **args) == ((0.0, 0.0),)
    with pytest.raises(ValueError, match="limit"):
        bc.shape_rewards(c, [[1.0]], [8], [[1]], 8, True)


def test_l1_rewards_by_hand():
    """L1 Eq. 1 (Exact): 1[correct] - alpha |n_gold - n_y|; Eq. 2 (Max): 1[correct] clip(alpha (n_gold -
    n_y) + delta, 0, 1); n_y = thinking up to the cut + the answer's tokens."""
    exact = BudgetControl(method="l1", l1_mode="exact", l1_alpha=0.01)
    # n_y = 20 + 3 = 23, 20 + 4 = 24; target 32: 1 - 0.09 = 0.91; 0 - 0.08 = -0.08
    (row,) = bc.shape_rewards(exact, [[1.0, 0.0]], [20], [[3, 4]], 20, True, target=32)
    assert row == pytest.approx((0.91, -0.08))
    mx = BudgetControl(method="l1", l1_mode="max", l1_alpha=0.01, l1_delta=0.5)
    # correct at n_y = 23: clip(0.01 * 9 + 0.5) = 0.59; n_y = 130 over 32: clip(-0.48) = 0; wrong: 0
    (row,) = bc.shape_rewards(mx, [[1.0, 1.0, 0.0]], [20], [[3, 110, 1]], 20, True, target=32)
    assert row == pytest.approx((0.59, 0.0, 0.0))
    assert bc.instruction(mx, 512) == "Think for maximum 512 tokens."
    assert bc.instruction(exact, 512) == "Think for 512 tokens."


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_shaped_tree_equals_a_per_summary_reference(data):
    """A whole tree [m][A] shaped at once equals shaping each summary alone, by the equations."""
    m, a = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    rewards = [[float(data.draw(st.integers(0, 1))) for _ in range(a)] for _ in range(m)]
    cuts = sorted(data.draw(st.lists(st.integers(1, 80), min_size=m, max_size=m)))
    lens = [[data.draw(st.integers(0, 10)) for _ in range(a)] for _ in range(m)]
    target = data.draw(st.integers(1, 100))
    mode = data.draw(st.sampled_from(["exact", "max"]))
    alpha = data.draw(st.sampled_from([0.0003, 0.01, 0.2]))
    c = BudgetControl(method="l1", l1_mode=mode, l1_alpha=alpha, l1_delta=0.5)
    got = bc.shape_rewards(c, rewards, cuts, lens, cuts[-1], True, target=target)
    for j in range(m):
        for k in range(a):
            n_y, r = cuts[j] + lens[j][k], rewards[j][k]
            want = r - alpha * abs(target - n_y) if mode == "exact" else r * min(1.0, max(0.0, alpha * (target - n_y) + 0.5))
            assert math.isclose(got[j][k], want, abs_tol=1e-12)


def test_l1_targets_are_one_per_question_and_in_range():
    fixed = BudgetControl(method="l1", l1_targets=(16, 32, 48, 64))
    seen = {bc.question_target(fixed, f"k{i}", 64) for i in range(200)}
    assert seen == {16, 32, 48, 64}
    assert bc.question_target(fixed, "same", 64) == bc.question_target(fixed, "same", 64)
    free = BudgetControl(method="l1")
    values = [bc.question_target(free, f"q{i}", 8000) for i in range(300)]
    # the paper's range 100..4000 (random.randint(100, 4000) in L1's data script), not up to b_m = 8000
    assert L1_TARGET_RANGE == (100, 4000)
    assert min(values) >= 100 and max(values) <= 4000 and max(values) > 3800 and len(set(values)) > 250
    assert max(bc.question_target(free, f"q{i}", 2000) for i in range(300)) <= 2000  # capped by b_m below 4000


def test_l1_evaluation_prompts_the_largest_target_that_fits():
    fixed = BudgetControl(method="l1", l1_targets=(16, 32, 48, 64))
    groups = dict(bc.eval_target_groups(fixed, [2, 14, 16, 30, 32, 50, 64]))
    assert groups == {16: [2, 14, 16, 30], 32: [32], 48: [50], 64: [64]}
    free = BudgetControl(method="l1")
    assert bc.eval_target_groups(free, [250, 500]) == [(250, [250]), (500, [500])]
    assert bc.eval_target_groups(BudgetControl(), [250, 500]) == [(None, [250, 500])]


def test_forcing_extends_only_while_cues_remain_and_fit():
    """s1 (Sec. 3.1): an early end of thinking becomes "Wait" up to max_extensions times, if the cue
    leaves room for a model token before the budget."""
    cfg = BudgetForcing(budget=10, end_think_id=1, cue_ids=(7,), max_extensions=2)
    assert extends(5, 0, cfg) and extends(8, 1, cfg)
    assert not extends(9, 0, cfg) and not extends(5, 2, cfg)
    long_cue = BudgetForcing(budget=10, end_think_id=1, cue_ids=(7, 8, 9), max_extensions=2)
    assert extends(6, 0, long_cue) and not extends(7, 0, long_cue)
    # the state machine decides with the same rule
    token, forced, _ = _advance(ForcingState(thinking_len=8, extensions=1), cfg, lambda: 1)
    assert (token, forced) == (7, True)
    token, forced, state = _advance(ForcingState(thinking_len=9, extensions=0), cfg, lambda: 1)
    assert (token, forced, state.closed) == (1, False, True)
    assert bc.forcing_config(BudgetControl(), 10, 1, [7]) is None
    assert bc.forcing_config(BudgetControl(forcing_extensions=2), 10, 1, [7]) == cfg


def test_inactive_is_the_default_and_the_defaults_have_one_home():
    from arctl.config.schema import BudgetControlConfig

    assert not BudgetControl().active and BudgetControl(method="l1").active and BudgetControl(forcing_extensions=1).active
    schema = BudgetControlConfig()  # the config section's defaults are the settings class's
    assert schema.l1_alpha == BudgetControl().l1_alpha == 0.0003
    assert schema.thinkprune_limits == list(BudgetControl().thinkprune_limits) == [4000, 3000, 2000]
    assert BudgetControl.from_config({}) == BudgetControl()


def test_thinkprune_generates_no_further_than_the_rounds_limit():
    """ThinkPrune stops its rollout at the round's limit (its max response length), the same limit
    its reward applies; other methods generate up to the largest budget."""
    tp = BudgetControl(method="thinkprune", thinkprune_limits=(64, 48, 32))
    assert [bc.generation_limit(tp, s, 100) for s in (1, 33, 34, 66, 67, 100)] == [64, 64, 48, 48, 32, 32]
    assert all(bc.generation_limit(tp, s, 100) == bc.step_limit(tp, s, 100) for s in range(1, 101))
    assert bc.limits_generation(tp) and not bc.limits_generation(BudgetControl(method="l1"))
    assert bc.generation_limit(BudgetControl(), 5, 100) is None and bc.generation_limit(BudgetControl(method="l1"), 5, 100) is None


def test_a_methods_limit_that_is_no_number_of_tokens_is_named(monkeypatch):
    """From a hunt of plugin paths: a plugin's step_limit of -5 failed inside torch ("negative dimension")."""
    from arctl.algo.methods import registry

    class Negative(registry.ControlMethod):
        name = "neglimit"

        def step_limit(self, control, step, total_steps):
            return -5

        def generation_limit(self, control, step, total_steps):
            return 0

    isolate_methods(monkeypatch)
    registry.register_method(Negative())
    c = BudgetControl(method="neglimit")
    with pytest.raises(ValueError, match="'neglimit': its step_limit gave -5, not None"):
        bc.step_limit(c, 1, 10)
    with pytest.raises(ValueError, match="its generation_limit gave 0"):
        bc.generation_limit(c, 1, 10)
