"""The tree objective (arctl.algo.tree_loss): hand-worked cases per arm, pinned to the authors'
``compute_cot_advantage`` / ``compute_summary_advantage`` semantics, and a slow loop reference
written the way the authors' code computes it (flat summary scores with split ids), on random trees."""

from __future__ import annotations

import dataclasses
import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from arctl.algo import settings as algo_settings
from arctl.algo.priors import budget_prior
from arctl.algo.settings import Loss, Objective, Reward, Summary, Thinking
from arctl.algo.tree_loss import (
    Tree,
    batch_stats,
    clip_stats,
    kl_loss,
    kl_mean,
    kl_token_penalty,
    policy_loss,
    ppo_token_loss,
    shaped_rewards,
    summary_groups,
    tree_advantages,
)

F64 = torch.float64


def objective(budgets, prior="uniform", baseline="brpo", lam=0.5, decoupled=True, a=2, weighting="authors",
              length_penalty="none", alpha=0.2, summary_prior="uniform", dual_clip=None):
    return Objective(
        Thinking(budgets=tuple(budgets), prior=prior, baseline=baseline, lam=lam),
        Summary(decoupled=decoupled, prior=summary_prior, weighting=weighting, group_size=a),
        Reward(length_penalty=length_penalty, alpha=alpha),
        Loss(dual_clip=dual_clip, loss_norm_len=10),
    )


def summaries(advs):
    return [a.summaries.tolist() for a in advs]


# ------------------------------------------------------------------------------ hand-worked, per arm
# One question, G = 2 thinking samples, budgets {2, 4}.
#   tree 0: 4 thinking tokens (cut at 2 and at 4)          -> two summary groups, one per budget
#   tree 1: 1 thinking token, ended with </think>           -> cuts [1, 1]: one merged group
DECOUPLED = [Tree(4, ((1.0, 0.0), (1.0, 1.0))), Tree(1, ((0.0, 1.0), (1.0, 1.0)))]
Q2 = ["x", "x"]


def test_anytime_decoupled_summaries_by_hand():
    # AR-uniform: A = 2 summaries per budget; the merged prefix of tree 1 holds 2 x 2 summaries.
    # tree 0: group {b0} rewards [1, 0], mean 1/2 -> [1/2, -1/2]; group {b1} [1, 1] -> [0, 0]
    # tree 1: one group {b0, b1} rewards [0, 1, 1, 1], mean 3/4 -> b0 [-3/4, 1/4], b1 [1/4, 1/4]
    # authors: weight 1 (no prior factor); paper: weight P'_j = 1/2
    advs = tree_advantages(DECOUPLED, Q2, objective([2, 4]))
    assert summaries(advs) == [[[0.5, -0.5], [0.0, 0.0]], [[-0.75, 0.25], [0.25, 0.25]]]
    assert all(a.trained.tolist() == [True, True] for a in advs)
    paper = tree_advantages(DECOUPLED, Q2, objective([2, 4], weighting="paper"))
    assert summaries(paper) == [[[0.25, -0.25], [0.0, 0.0]], [[-0.375, 0.125], [0.125, 0.125]]]
    # linear p'_B = [1/3, 2/3] under weighting=paper
    lin = tree_advantages(DECOUPLED, Q2, objective([2, 4], weighting="paper", summary_prior="linear"))
    torch.testing.assert_close(lin[1].summaries, torch.tensor([[-0.25, 1 / 12], [1 / 6, 1 / 6]], dtype=F64),
                               rtol=0, atol=1e-15)


def test_anytime_thinking_by_hand():
    # r_j = mean of each budget's own 2 summaries: tree 0 [1/2, 1], tree 1 [1/2, 1]; P = [1/2, 1/2]
    # R = [3/4, 1/2] for both; V2 = [3/4, 1/2]; V1(k=1) = r_0 * P_2 = 1/4
    # BRPO: k=0 -> V2 -> A = 0; k=1 -> (V1 + V2)/2 = 3/8 -> A = 1/8
    # tokens (segment k on b_{k-1} < t <= b_k): tree 0 [0, 0, 1/8, 1/8]; tree 1 has 1 token -> [0]
    advs = tree_advantages(DECOUPLED, Q2, objective([2, 4]))
    assert advs[0].thinking.tolist() == [0.0, 0.0, 0.125, 0.125]
    assert advs[1].thinking.tolist() == [0.0]
    assert advs[0].scores.tolist() == [0.5, 1.0] and advs[1].scores.tolist() == [0.5, 1.0]
    assert advs[0].reached.tolist() == [True, True] and advs[1].reached.tolist() == [True, False]


# Coupled arms: A = 1. tree 0: 4 tokens, rewards [1 | 0]; tree 1: 3 tokens (truncated at 2), [0 | 1].
COUPLED = [Tree(4, ((1.0,), (0.0,))), Tree(3, ((0.0,), (1.0,)))]


def test_grpo_vr_coupled_summary_is_outcome_grpo_by_hand():
    # grpo-vr: base prior P = [0, 1], BRPO. Summary: only the final budget is trained, with its
    # score minus the question's mean final score: 0 - 1/2 and 1 - 1/2 (the authors' A = 1 branch of
    # compute_summary_advantage). The thinking's last segment is a different number:
    # R = [0, 0] / [1, 1]; V2 = 1/2; V1(k=1) = r_0 * P_2 = 1 / 0; BRPO k=1: (V1 + V2)/2 = 3/4 / 1/4
    # -> segment advantages [-1/2, -3/4] and [1/2, 3/4].
    advs = tree_advantages(COUPLED, Q2, objective([2, 4], prior="base", decoupled=False, a=1))
    assert summaries(advs) == [[[0.0], [-0.5]], [[0.0], [0.5]]]
    assert advs[0].trained.tolist() == [False, True]
    assert advs[0].segments.tolist() == [-0.5, -0.75] and advs[1].segments.tolist() == [0.5, 0.75]
    assert advs[0].thinking.tolist() == [-0.5, -0.5, -0.75, -0.75]


def test_grpo_dense_coupled_summary_has_no_prior_factor_by_hand():
    # grpo-dense: linear P = [1/3, 2/3], V2. Thinking: R = [1/3, 0] / [2/3, 2/3], V2 = [1/2, 1/3]
    # -> [-1/6, -1/3] / [1/6, 1/3]. Summary: r_m - mean = -1/2 / +1/2 (not P_m-scaled, not A_k).
    advs = tree_advantages(COUPLED, Q2, objective([2, 4], prior="linear", baseline="v2", decoupled=False, a=1))
    assert summaries(advs) == [[[0.0], [-0.5]], [[0.0], [0.5]]]
    torch.testing.assert_close(advs[0].segments, torch.tensor([-1 / 6, -1 / 3], dtype=F64), rtol=0, atol=1e-15)


def test_grpo_one_budget_by_hand():
    # GRPO: one budget {4}, base prior, V2: thinking and summary both get r - mean = -/+ 1/2
    trees = [Tree(4, ((0.0,),)), Tree(3, ((1.0,),))]
    advs = tree_advantages(trees, Q2, objective([4], prior="base", baseline="v2", decoupled=False, a=1))
    assert advs[0].thinking.tolist() == [-0.5] * 4 and advs[1].thinking.tolist() == [0.5] * 3
    assert summaries(advs) == [[[-0.5]], [[0.5]]]


def test_length_penalties_by_hand():
    # GRPO + length penalty, b_m = 4, alpha = 0.2, both correct, thinking 4 and 3 tokens
    trees = [Tree(4, ((1.0,),)), Tree(3, ((1.0,),))]
    base = dict(prior="base", baseline="v2", decoupled=False, a=1)
    # v1: 1 - 0.2 * |z| / 4 -> 0.8 and 0.85, mean 0.825 -> -/+ 0.025
    v1 = tree_advantages(trees, Q2, objective([4], length_penalty="v1", **base))
    assert v1[0].summaries.item() == pytest.approx(-0.025, abs=1e-12) and v1[1].thinking[0].item() == pytest.approx(0.025)
    # v2: lengths 4 and 3 -> mean 3.5, std 0.5, z = +1 / -1 -> 1 - 0.2 sigmoid(z); mean 0.9
    v2 = tree_advantages(trees, Q2, objective([4], length_penalty="v2", **base))
    sig = 1 / (1 + math.exp(-1))
    assert v2[0].summaries.item() == pytest.approx(1 - 0.2 * sig - 0.9, abs=1e-6)
    assert v2[1].summaries.item() == pytest.approx(1 - 0.2 * (1 - sig) - 0.9, abs=1e-6)


def test_length_penalty_shapes_decoupled_summaries_too():
    # decoupled, v1, budgets {2, 4}: a correct summary after cut c scores 1 - 0.2 c / 4
    s = objective([2, 4], length_penalty="v1")
    shaped = shaped_rewards(DECOUPLED, Q2, s)
    assert shaped[0].tolist() == [[0.9, 0.0], [0.8, 0.8]]
    assert shaped[1].tolist() == [[0.0, 0.95], [0.95, 0.95]]
    advs = tree_advantages(DECOUPLED, Q2, s)
    assert advs[0].summaries[0].tolist() == pytest.approx([0.45, -0.45])  # mean 0.45 of [0.9, 0]


def test_decoupled_with_one_summary_uses_the_authors_fallback():
    # A = 1: the baseline is the mean over the question's thinking samples at the same budget
    advs = tree_advantages(COUPLED, Q2, objective([2, 4], decoupled=True, a=1))
    assert summaries(advs) == [[[0.5], [-0.5]], [[-0.5], [0.5]]]


def test_questions_are_separate_groups_and_may_be_ragged():
    trees = COUPLED + [Tree(2, ((1.0,), (1.0,)))]
    advs = tree_advantages(trees, ["x", "x", "y"], objective([2, 4], prior="base", decoupled=False, a=1))
    assert summaries(advs)[:2] == [[[0.0], [-0.5]], [[0.0], [0.5]]]
    assert advs[2].summaries.abs().max().item() == 0.0  # alone in its group: r - mean = 0


@pytest.mark.parametrize(
    "trees, fragment",
    [
        ([Tree(4, ((1.0,),))], "rewards for 1 budgets"),
        ([Tree(4, ((1.0,), (1.0, 0.0)))], "summary.group_size is 1"),
        ([Tree(9, ((1.0,), (1.0,)))], "outside 0..4"),
    ],
)
def test_malformed_trees_are_rejected(trees, fragment):
    with pytest.raises(ValueError, match=fragment):
        tree_advantages(trees, ["q"] * len(trees), objective([2, 4], a=1))


def test_summary_groups():
    assert summary_groups([2, 4, 5, 5]) == [[0], [1], [2, 3]]
    assert summary_groups([3, 3, 3]) == [[0, 1, 2]]


# ------------------------------------------------------------------------------ the loss
def test_ppo_token_loss_hand_worked_and_dual_clip():
    # A = +1, ratio e^0.5 = 1.65 -> clipped at 1.2: -1.2; A = -1, ratio e^-0.5 = 0.61 -> clipped at 0.8: 0.8
    s = objective([4]).loss
    logp, old = torch.tensor([0.5, -0.5, 0.3]), torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 5.0])
    assert ppo_token_loss(logp, old, adv, s)[:2].tolist() == pytest.approx([-1.2, 0.8])
    # A = +1 with a ratio below 1 - eps is not clipped (pessimistic bound): -ratio
    assert ppo_token_loss(torch.tensor([-0.5]), torch.zeros(1), torch.ones(1), s).item() == pytest.approx(-math.exp(-0.5))
    # A = -1 with ratio e^2 = 7.39: plain PPO keeps 7.39; dual clip c = 3 caps it at 3
    big = torch.tensor([2.0])
    assert ppo_token_loss(big, torch.zeros(1), -torch.ones(1), s).item() == pytest.approx(math.exp(2))
    dual = dataclasses.replace(s, dual_clip=3.0)
    assert ppo_token_loss(big, torch.zeros(1), -torch.ones(1), dual).item() == pytest.approx(3.0)
    assert ppo_token_loss(big, torch.zeros(1), torch.ones(1), dual).item() == pytest.approx(-1.2)  # A > 0 untouched
    stats = clip_stats(big, torch.zeros(1), -torch.ones(1), torch.ones(1, dtype=torch.bool), dual)
    assert stats["clipfrac_lower"] == 1.0 and stats["approx_kl"] == pytest.approx(-2.0)
    # below the cap: A = -1, ratio 2: the loss max(2, clip(2) = 1.2) = 2 < c = 3 is not capped (from a mutation
    # hunt: only a capped token was checked, and a cap of -A / c = 1/3 passed); beside the capped token: half
    two = torch.tensor([math.log(2.0)])
    assert ppo_token_loss(two, torch.zeros(1), -torch.ones(1), dual).item() == pytest.approx(2.0)
    assert clip_stats(two, torch.zeros(1), -torch.ones(1), torch.ones(1, dtype=torch.bool), dual)["clipfrac_lower"] == 0.0
    both = clip_stats(torch.cat([two, big]), torch.zeros(2), -torch.ones(2), torch.ones(2, dtype=torch.bool), dual)
    assert both["clipfrac_lower"] == 0.5
    # clipfrac (verl's actor/pg_clipfrac): the first two tokens are held back by the clip (above), the third
    # (A > 0, ratio below 1 - eps: the pessimistic bound keeps the ratio) is not, the fourth is masked out
    held = clip_stats(torch.tensor([0.5, -0.5, -0.5, 0.5]), torch.zeros(4), torch.tensor([1.0, -1.0, 1.0, 1.0]),
                      torch.tensor([True, True, True, False]), s)
    assert held["clipfrac"] == pytest.approx(2 / 3) and held["clipfrac_lower"] == 0.0
    assert held["approx_kl"] == pytest.approx((-0.5 + 0.5 + 0.5) / 3)


def test_policy_loss_divides_the_token_sum_by_trees_times_the_constant():
    s = objective([4])  # loss_norm_len = 10
    logp, old = torch.tensor([[0.5, -0.5, 0.3]]), torch.zeros(1, 3)
    adv, mask = torch.tensor([[1.0, -1.0, 5.0]]), torch.tensor([[True, True, False]])
    assert policy_loss(logp, old, adv, mask, 2, s).item() == pytest.approx((-1.2 + 0.8) / 20)


def test_kl_estimators_by_hand():
    # policy log-prob -1, reference -2 (d = ref - logp = -1); and equal log-probs: every estimator 0
    logp, ref = torch.tensor([-1.0, -0.7]), torch.tensor([-2.0, -0.7])
    assert kl_token_penalty(logp, ref, "kl").tolist() == pytest.approx([1.0, 0.0])
    assert kl_token_penalty(logp, ref, "abs").tolist() == pytest.approx([1.0, 0.0])
    assert kl_token_penalty(ref, logp, "abs").tolist() == pytest.approx([1.0, 0.0])
    assert kl_token_penalty(logp, ref, "mse").tolist() == pytest.approx([0.5, 0.0])
    assert kl_token_penalty(logp, ref, "low_var_kl").tolist() == pytest.approx([math.exp(-1) + 1 - 1, 0.0])
    # k3 is clamped: d = 50 -> exp(20) - 20 - 1 -> capped at 10
    assert kl_token_penalty(torch.tensor([-60.0]), torch.tensor([-10.0]), "low_var_kl").item() == 10.0
    with pytest.raises(ValueError, match="optim.kl_type='k9'"):
        kl_token_penalty(logp, ref, "k9")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-8, 0), st.floats(-8, 0), st.booleans()), min_size=1, max_size=12),
       st.sampled_from(algo_settings.KL_TYPES), st.floats(0.0005, 2.0), st.integers(1, 5))
def test_kl_loss_is_the_coefficient_times_the_masked_sum_over_the_constant(tokens, kind, coef, n_trees):
    s = dataclasses.replace(objective([4]), loss=Loss(loss_norm_len=10, kl_coef=coef, kl_type=kind))
    logp = torch.tensor([t[0] for t in tokens], dtype=F64)
    ref = torch.tensor([t[1] for t in tokens], dtype=F64)
    mask = torch.tensor([t[2] for t in tokens])

    def slow(lp, rp):  # Schulman's estimators, one token at a time (verl's clamps for k3)
        if kind == "kl":
            return lp - rp
        if kind == "abs":
            return abs(lp - rp)
        if kind == "mse":
            return 0.5 * (lp - rp) ** 2
        d = min(max(rp - lp, -20.0), 20.0)
        return min(max(math.exp(d) - d - 1, -10.0), 10.0)

    picked = [slow(lp, rp) for lp, rp, keep in tokens if keep]
    assert kl_loss(logp, ref, mask, n_trees, s).item() == pytest.approx(coef * sum(picked) / (n_trees * 10), abs=1e-12)
    assert kl_mean(logp, ref, mask, kind) == pytest.approx(sum(picked) / len(picked) if picked else 0.0, abs=1e-12)
    # no coefficient: no term, whatever the log-probs
    assert kl_loss(logp, ref, mask, n_trees, objective([4])).item() == 0.0


def test_the_loss_constant_is_the_authors_and_one_per_experiment():
    assert algo_settings.authors_loss_norm_len(8000, 128) == 10176  # run_1.5b_8k.sh max_response_length
    assert algo_settings.authors_loss_norm_len(16000, 128) == 18176  # run_1.5b_16k.sh
    grpo = Objective(Thinking(budgets=(8000,)), Summary(group_size=1, max_tokens=128))
    ar = Objective(Thinking(budgets=(2000, 4000, 6000, 8000)), Summary(group_size=4, max_tokens=128))
    assert grpo.norm_len == ar.norm_len == 10176
    assert algo_settings.loss_normaliser(256, ar) == 256 * 10176


# ------------------------------------------------------------------------------ settings
def test_settings_round_trip_and_defaults():
    s = objective([2, 4], prior="linear", weighting="paper", dual_clip=2.5)
    assert Objective.from_dict(s.to_dict()) == s
    assert Thinking(budgets=(1,)).lam == 0.5 and Summary().weighting == "authors"


def test_unknown_weighting_is_rejected():
    with pytest.raises(ValueError, match="summary.weighting"):
        tree_advantages(DECOUPLED, Q2, objective([2, 4], weighting="equal"))


# ------------------------------------------------------------------------------ batch statistics
def test_batch_stats_by_hand():
    stats = batch_stats(COUPLED, Q2, tree_advantages(COUPLED, Q2, objective([2, 4], prior="base", decoupled=False, a=1)),
                        objective([2, 4], prior="base", decoupled=False, a=1), ["brpo", "v2"])
    assert stats.score == (0.5, 0.5) and stats.final_score == 0.5 and stats.anytime_score == 0.5
    assert stats.think_len_mean == 3.5 and stats.reward_mean == 0.5
    # BRPO segment advantages -1/2, -3/4, 1/2, 3/4 (all reached): variance (1/4 + 9/16) / 2 = 13/32
    assert stats.adv_var["brpo"] == pytest.approx(13 / 32)


def test_under_a_compared_method_the_scores_are_the_verifiers_and_the_methods_are_beside_them():
    """A tree whose rewards a method shaped keeps the verifier's in ``verifier``: ``score`` reports
    those (docs/metrics.md: train/score@b is the verifier's), ``method_score`` the shaped ones."""
    s = objective([2, 4], prior="uniform", a=2)
    shaped = [Tree(3, ((0.5, 0.0), (0.5, -0.25)), verifier=((1.0, 0.0), (1.0, 1.0))),
              Tree(4, ((0.0, 0.0), (0.0, 0.0)), verifier=((0.0, 0.0), (0.0, 1.0)))]
    stats = batch_stats(shaped, Q2, tree_advantages(shaped, Q2, s), s, ["brpo"])
    assert stats.score == (0.25, 0.75) and stats.final_score == 0.75 and stats.anytime_score == 0.5
    assert stats.method_score == (0.125, 0.0625) and stats.method_final_score == 0.0625
    assert stats.method_anytime_score == pytest.approx(0.09375)
    plain = batch_stats(DECOUPLED, Q2, tree_advantages(DECOUPLED, Q2, s), s, ["brpo"])
    assert plain.method_score is None and plain.method_anytime_score is None


def test_adv_var_ignores_segments_the_thinking_did_not_reach():
    # tree 1 of DECOUPLED has no tokens in segment 1: only 3 of the 4 segment advantages count
    s = objective([2, 4])
    advs = tree_advantages(DECOUPLED, Q2, s)
    stats = batch_stats(DECOUPLED, Q2, advs, s, ["brpo"])
    reached = torch.tensor([advs[0].segments[0], advs[0].segments[1], advs[1].segments[0]])
    assert stats.adv_var["brpo"] == pytest.approx(float(reached.var(unbiased=False)))


# ------------------------------------------------------------------------------ loop reference
def authors_reference(trees, questions, s: Objective):
    """The advantages written as the authors' code computes them: per tree a flat list of m*A summary
    scores (budget-major) with the split id of their prefix, budget scores as block means, the
    thinking advantage by loops over (b, g, s) and the summary advantage by loops over summaries.
    Coupled arms with A > 1 train all of the last budget's summaries (docs/algorithm.md)."""
    budgets = list(s.budgets)
    m, a = len(budgets), s.summary.group_size
    p = budget_prior(s.thinking.prior, budgets, s.thinking.probs).tolist()
    pp = budget_prior(s.summary.prior, budgets, s.summary.probs).tolist()
    lam = s.thinking.lam
    n = len(trees)
    cuts = [[min(b, t.think_len) for b in budgets] for t in trees]
    split = [[sorted(set(c)).index(c[j]) for j in range(m) for _ in range(a)] for c in cuts]
    scores = [[r for row in t.rewards for r in row] for t in trees]  # [N][m*A]
    mode, alpha = s.reward.length_penalty, s.reward.alpha
    if mode != "none":
        shaped = [list(x) for x in scores]
        for q in set(questions):
            for j in range(m):
                cells = [(i, j * a + k) for i in range(n) if questions[i] == q for k in range(a)]
                ok = [(i, c) for i, c in cells if scores[i][c] > 0.5]
                lens = [cuts[i][j] for i, _ in ok]
                mean = sum(lens) / len(lens) if lens else 0.0
                std = (sum((x - mean) ** 2 for x in lens) / len(lens)) ** 0.5 if lens else 0.0
                for i, c in cells:
                    if scores[i][c] <= 0.5:
                        shaped[i][c] = 0.0
                    elif mode == "v1":
                        shaped[i][c] = 1 - alpha * cuts[i][j] / budgets[-1]
                    else:
                        z = (cuts[i][j] - mean) / (std + 1e-6)
                        shaped[i][c] = 1 - alpha / (1 + math.exp(-z))
        scores = shaped
    block = [[sum(scores[i][j * a:(j + 1) * a]) / a for j in range(m)] for i in range(n)]
    out = []
    for i in range(n):
        group = [k for k in range(n) if questions[k] == questions[i]]
        seg = []
        for k in range(m):
            ret = sum(block[i][j] * p[j] for j in range(k, m))
            avg = sum(sum(block[g][j] * p[j] for j in range(k, m)) for g in group) / len(group)
            last = 0.0
            if k > 0:
                w = [(1 / lam) ** j for j in range(k)]
                last = sum(block[i][j] * w[j] for j in range(k)) / sum(w) * sum(p[k:])
            base = {"brpo": (k * last + (m - k) * avg) / m, "v1": last, "v2": avg, "none": 0.0}[s.thinking.baseline]
            seg.append(ret - base)
        think = [seg[min(j for j in range(m) if budgets[j] >= t)] for t in range(1, trees[i].think_len + 1)]
        summ = [[0.0] * a for _ in range(m)]
        for c in range(m * a):
            j = c // a
            if a == 1:
                baseline = sum(scores[g][c] for g in group) / len(group)
            else:
                same = [scores[i][d] for d in range(m * a) if split[i][d] == split[i][c]]
                baseline = sum(same) / len(same)
            if s.summary.decoupled:
                w = 1.0 if s.summary.weighting == "authors" else pp[j]
                summ[j][c % a] = w * (scores[i][c] - baseline)
            elif j == m - 1:
                summ[j][c % a] = scores[i][c] - sum(block[g][m - 1] for g in group) / len(group)
        out.append((think, summ, seg))
    return out


@st.composite
def tree_batches(draw):
    m = draw(st.integers(1, 4))
    budgets = sorted(draw(st.sets(st.integers(1, 12), min_size=m, max_size=m)))
    a = draw(st.integers(1, 3))
    n_q = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 4)) for _ in range(n_q)]
    questions = [q for q, g in enumerate(sizes) for _ in range(g)]
    trees = []
    for _ in questions:
        t = draw(st.sampled_from([draw(st.integers(0, budgets[-1]))] + budgets))  # often exactly at a budget
        rewards = tuple(tuple(float(draw(st.integers(0, 1))) for _ in range(a)) for _ in range(m))
        trees.append(Tree(t, rewards))
    s = objective(
        budgets,
        prior=draw(st.sampled_from(["base", "uniform", "linear"])),
        baseline=draw(st.sampled_from(["brpo", "v1", "v2", "none"])),
        lam=draw(st.sampled_from([0.25, 0.5, 0.9])),
        decoupled=draw(st.booleans()),
        a=a,
        weighting=draw(st.sampled_from(["authors", "paper"])),
        length_penalty=draw(st.sampled_from(["none", "v1", "v2"])),
        summary_prior=draw(st.sampled_from(["uniform", "linear"])),
    )
    return trees, questions, s


@settings(max_examples=200, deadline=None)
@given(tree_batches())
def test_tree_advantages_match_the_authors_loops(batch):
    trees, questions, s = batch
    got = tree_advantages(trees, questions, s)
    want = authors_reference(trees, questions, s)
    for g, (think, summ, seg) in zip(got, want, strict=True):  # a dropped tree fails
        assert g.thinking.tolist() == pytest.approx(think, abs=1e-9)
        assert g.summaries.tolist() == [pytest.approx(row, abs=1e-9) for row in summ]
        assert g.segments.tolist() == pytest.approx(seg, abs=1e-9)
