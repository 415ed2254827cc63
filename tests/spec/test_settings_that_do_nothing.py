"""Settings that validation let through although the run could not use them: each changed the run id and not
one number (summaries trained with advantage 0, a summary prior nothing reads, a ThinkPrune limit that never
cuts), or failed the tiny job as it started (eval budgets short of the thinking budgets), or gave derived values
two different largest budgets (an unsorted scale.budgets). Each is now one error line naming the key, exit 2,
before anything is written or submitted (from a hunt of the algorithm's settings)."""

from __future__ import annotations

import itertools

import pytest
from bad_input import launch_args  # tests/support/bad_input.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.compose import SpecError, resolve_experiment
from arctl.compose.validate import validate_config


def _refused(name: str, overrides: list[str], scale: str = "tiny", arm: str | None = None) -> str:
    with pytest.raises(SpecError) as info:
        resolve_experiment(name, overrides, scale=scale, arms=[arm] if arm else None)
    text = str(info.value)
    assert "\n" not in text
    return text


# --- 1. one summary per budget and one sample per question: every summary's advantage is 0 -------------------
COUPLED_G1 = [  # (experiment, arm, overrides): coupled arms (summary.decoupled=false, summary.group_size=1)
    ("main-grpo", "grpo", ["rollout.n=1", "thinking.baseline=v1"]),
    ("main-grpo", "grpo", ["rollout.n=1", "thinking.baseline=none"]),
    ("ablation-vr", "grpo-vr", ["rollout.n=1", "thinking.baseline=v1"]),
    ("baselines-l1", "l1-exact", ["rollout.n=1", "thinking.baseline=v1"]),
]


@pytest.mark.parametrize("name, arm, overrides", COUPLED_G1)
def test_a_coupled_arm_with_one_summary_and_one_sample_is_refused(name, arm, overrides):
    """The rule's ground (arctl.algo.tree_loss.tree_advantages): with A = 1 and one tree per question, a summary's
    baseline (the mean over the question's summaries at its budget) is its own reward, coupled or decoupled."""
    from arctl.algo.settings import Objective, Summary, Thinking
    from arctl.algo.tree_loss import Tree, tree_advantages

    text = _refused(name, overrides, arm=arm)
    assert text.startswith(f"{name}/{arm}: summary.group_size: summary.group_size=1 with rollout.n=1 trains the "
                           "summaries with zero advantage")
    assert "use rollout.n>=2 or summary.group_size>=2" in text
    for fix in (["rollout.n=2"], ["summary.group_size=2"]):  # either way the summaries have a baseline to beat
        assert resolve_experiment(name, [*overrides[1:], *fix], scale="tiny", arms=[arm])
    baseline = overrides[1].split("=")[1]
    for decoupled in (False, True):
        s = Objective(Thinking(budgets=(48, 96, 144, 192), prior="base", baseline=baseline),
                      Summary(decoupled=decoupled, group_size=1))
        for think_len, rewards in itertools.product((5, 100, 192), itertools.product((0.0, 1.0), repeat=4)):
            trees = [Tree(think_len, tuple((r,) for r in rewards)), Tree(7, ((1.0,), (0.0,), (1.0,), (0.0,)))]
            for adv in tree_advantages(trees, ["q0", "q1"], s):
                assert float(adv.summaries.abs().max()) == 0.0


# --- 2. tiny: eval budgets short of the thinking budgets (the job refused them as it started) ------------------
def test_tiny_eval_budgets_below_the_thinking_budgets_are_refused_at_submission():
    text = _refused("main-ar-uniform", ["eval.budgets=[48]"])
    assert text.startswith("main-ar-uniform/ar-uniform: eval.budgets: eval.budgets go up to 48 but thinking.budgets "
                           "to 192")
    assert "eval.budgets=[48,192]" in text
    # the same rule as the job's own check (arctl.backends.tiny.trainer.check_config), which stays as a second guard
    from arctl.backends.tiny.trainer import check_config

    cfg = arm_config("main-ar-uniform", "ar-uniform", scale="tiny")
    cfg["eval"]["budgets"] = [48]
    with pytest.raises(ValueError, match="thinking.budgets exceed the largest eval budget"):
        check_config(cfg)
    with pytest.raises(SpecError, match="eval.budgets go up to 48"):
        validate_config(cfg)
    assert resolve_experiment("main-ar-uniform", ["eval.budgets=[48,192]"], scale="tiny")


# --- 3. ThinkPrune: a limit above the largest thinking budget never cuts --------------------------------------
def test_thinkprune_limits_above_the_thinking_budget_are_refused():
    text = _refused("baselines-thinkprune", ["budget_control.thinkprune_limits=[4000,3000,2000]"])
    assert text.startswith("baselines-thinkprune/thinkprune-r1: budget_control.thinkprune_limits: "
                           "budget_control.thinkprune_limits=[4000,3000,2000] holds limits above the largest "
                           "thinking budget (192)")
    assert "round 1's 4000" in text
    # a limit equal to b_m still binds (a thinking cut there unfinished is over it): allowed
    assert resolve_experiment("baselines-thinkprune", ["budget_control.thinkprune_limits=[192,150,100]"], scale="tiny")


def test_thinkprune_refuses_only_the_limits_in_force():
    """A round's run (thinkprune_round=k) holds round k's limit alone; a schedule holds every round's in turn."""
    from arctl.algo.methods.registry import method_of
    from arctl.algo.settings import BudgetControl

    def problem(limits, round_k=None):
        control = BudgetControl(method="thinkprune", thinkprune_limits=limits, thinkprune_round=round_k)
        return method_of(control).config_problem(control, 192, 100)

    assert problem((400, 150, 100), 1)[1] == "budget_control.thinkprune_limits"
    assert problem((400, 150, 100), 2) is None and problem((400, 150, 100), 3) is None
    scheduled = problem((400, 300, 100))
    assert scheduled[1] == "budget_control.thinkprune_limits" and "round 1's 400, round 2's 300" in scheduled[0]
    assert problem((192, 150, 100)) is None and problem((192,), 1) is None
    # the rule's ground: the thinking never passes b_m, so a limit above it never zeroes a reward; one at it does
    from arctl.algo.methods import control as bc

    c, b_m = BudgetControl(method="thinkprune"), 192

    def shaped(limit):
        return [bc.shape_rewards(c, [[1.0, 0.0]], [min(b_m, t)], [[3, 3]], t, done, limit=limit)
                for t, done in itertools.product(range(b_m + 1), (True, False))]

    assert shaped(b_m + 1) == shaped(4000) == [((1.0, 0.0),)] * (2 * (b_m + 1))
    assert shaped(b_m) != shaped(b_m + 1)


# --- 4. a summary prior that nothing reads --------------------------------------------------------------------
@pytest.mark.parametrize("name, overrides, key, says", [
    ("main-ar-uniform", ["summary.prior=base"], "summary.prior",
     "summary.prior=base is read only with summary.weighting=paper"),
    ("main-ar-uniform", ["summary.prior=linear"], "summary.prior",
     "add summary.weighting=paper, or drop summary.prior"),
    ("main-ar-uniform", ["summary.prior=custom", "summary.probs=[0.1,0.2,0.3,0.4]"], "summary.prior",
     "summary.prior=custom is read only with summary.weighting=paper"),
    ("main-ar-uniform", ["summary.probs=[0.1,0.2,0.3,0.4]"], "summary.probs",
     "summary.probs=[0.1,0.2,0.3,0.4] is read only with summary.weighting=paper"),
    ("main-grpo", ["summary.weighting=paper"], "summary.weighting",
     "summary.weighting=paper weighs decoupled summaries only"),
    ("main-grpo", ["summary.weighting=paper", "summary.prior=base"], "summary.weighting",
     "drop summary.weighting=paper, or set summary.decoupled=true"),
    ("main-grpo", ["summary.prior=linear"], "summary.prior", "this arm's are coupled (summary.decoupled=false)"),
])
def test_a_summary_prior_nothing_reads_is_refused(name, overrides, key, says):
    text = _refused(name, overrides)
    assert text.startswith(f"{name}/") and f": {key}: " in text and says in text


def test_the_summary_prior_applies_only_with_the_papers_weighting_on_decoupled_summaries():
    """The rule's ground (arctl.algo.tree_loss.tree_advantages): the prior weighs decoupled summaries under the
    paper's weighting only."""
    import torch

    from arctl.algo.settings import Objective, Summary, Thinking
    from arctl.algo.tree_loss import Tree, tree_advantages

    (run,) = resolve_experiment("main-ar-uniform", ["summary.weighting=paper", "summary.prior=linear"], scale="tiny")
    cfg = run.config
    assert (cfg["summary"]["prior"], cfg["summary"]["weighting"]) == ("linear", "paper")
    validate_config(cfg)
    cfg["summary"]["weighting"] = "authors"
    with pytest.raises(SpecError, match="summary.prior=linear is read only with summary.weighting=paper"):
        validate_config(cfg)
    cfg["summary"].update(weighting="paper", decoupled=False)
    with pytest.raises(SpecError, match="summary.weighting=paper weighs decoupled summaries only"):
        validate_config(cfg)

    trees = [Tree(8, ((0., 1.), (1., 0.), (1., 1.), (1., 0.))), Tree(3, ((1., 0.), (0., 1.), (1., 1.), (0., 0.)))]

    def summaries(**kw):
        s = Objective(Thinking(budgets=(2, 4, 6, 8)), Summary(group_size=2, **kw))
        return torch.stack([a.summaries for a in tree_advantages(trees, [0, 0], s)])

    assert torch.equal(summaries(), summaries(prior="base"))
    assert torch.equal(summaries(decoupled=False), summaries(decoupled=False, weighting="paper", prior="base"))
    assert not torch.equal(summaries(), summaries(weighting="paper", prior="base"))


# --- 5. an unsorted scale.budgets ------------------------------------------------------------------------------
def test_an_unsorted_scale_is_refused_where_a_resolver_reads_it():
    """main-grpo's thinking budget ${arctl.last:${scale.budgets}} took the last entry (6000) while the values
    derived from the sorted budgets took 8000."""
    text = _refused("main-grpo", ["scale.budgets=[2000,8000,4000,6000]"], scale="paper")
    assert text.startswith("main-grpo/grpo: thinking.budgets: arctl.last reads the budgets [2000, 8000, 4000, 6000], "
                           "which are not strictly increasing")
    assert "scale.budgets=[2000,4000,6000,8000]" in text
    from arctl.compose.resolvers import RESOLVERS

    for name, args in (("arctl.last", ()), ("arctl.part", (0.5,)), ("arctl.grid", (4,))):
        for budgets in ([2000, 8000, 4000], [2000, 2000]):
            with pytest.raises(SpecError, match=f"{name} reads the budgets .* not strictly increasing"):
                RESOLVERS[name](budgets, *args)
    assert RESOLVERS["arctl.last"]([2000, 8000]) == [8000]


@pytest.mark.parametrize("budgets", ["[2000,8000,4000,6000]", "[2000,4000,4000,8000]"])
def test_an_unsorted_scale_is_refused_by_validation(budgets):
    text = _refused("main-ar-uniform", [f"scale.budgets={budgets}"], scale="paper")
    assert text.startswith("main-ar-uniform/ar-uniform: scale.budgets: scale.budgets=")
    assert "is not strictly increasing" in text
    cfg = arm_config("main-grpo", "grpo", scale="paper")  # a frozen config edited by hand: validation's own rule
    cfg["scale"]["budgets"] = [2000, 8000, 4000, 6000]
    with pytest.raises(SpecError, match=r"scale.budgets=\[2000, 8000, 4000, 6000\] is not strictly increasing"):
        validate_config(cfg)


# --- the command line: one error line, exit 2, nothing written or submitted -----------------------------------
@pytest.mark.parametrize("args, says", [
    (["main-grpo", "rollout.n=1", "thinking.baseline=v1"], "summary.group_size"),
    (["main-ar-uniform", "eval.budgets=[48]"], "eval.budgets"),
    (["baselines-thinkprune", "budget_control.thinkprune_limits=[4000,3000,2000]"], "budget_control.thinkprune_limits"),
    (["main-ar-uniform", "summary.prior=base"], "summary.prior"),
    (["main-grpo", "summary.weighting=paper"], "summary.weighting"),
    (["main-grpo", "--scale", "paper", "scale.budgets=[2000,8000,4000,6000]"], "scale.budgets"),
])
def test_the_command_line_refuses_them(sandbox, args, says):
    err = sandbox.check_refused("run", *args, *launch_args(sandbox)).err
    assert says in err
