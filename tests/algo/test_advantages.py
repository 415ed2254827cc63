"""BRPO / GRPO advantages: hand-worked cases from paper Eqs. 6-9 and a slow loop reference."""

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from arctl.algo.advantages import (
    baseline_v1,
    baseline_v2,
    budget_returns,
    grpo_advantages,
    summary_advantages,
    thinking_advantages,
    token_advantages,
)
from arctl.algo.priors import budget_prior

F64 = torch.float64


# ---------------------------------------------------------------- slow, obviously-correct reference
def reference_thinking_advantages(scores, probs, lam, baseline):
    """Eqs. 6-9 written as loops over b, g, k and j (segment k 0-based, j_t = k + 1 in the paper)."""
    B, G, m = len(scores), len(scores[0]), len(probs)

    def R(b, g, k):
        return sum(probs[j] * scores[b][g][j] for j in range(k, m))

    def V1(b, g, k):
        if k == 0:
            return 0.0
        num = sum(lam ** (k - j) * scores[b][g][j] for j in range(k))
        den = sum(lam ** (k - j) for j in range(k))
        return num / den * sum(probs[j] for j in range(k, m))

    def V2(b, k):
        return sum(R(b, i, k) for i in range(G)) / G

    out = [[[0.0] * m for _ in range(G)] for _ in range(B)]
    for b in range(B):
        for g in range(G):
            for k in range(m):
                jt = k + 1  # paper's 1-based nearest budget
                if baseline == "none":
                    v = 0.0
                elif baseline == "v1":
                    v = V1(b, g, k)
                elif baseline == "v2":
                    v = V2(b, k)
                else:  # paper Eq. 9: (j_t - 1)/m V1 + (m - j_t + 1)/m V2
                    v = (jt - 1) / m * V1(b, g, k) + (m - jt + 1) / m * V2(b, k)
                out[b][g][k] = R(b, g, k) - v
    return out


@st.composite
def advantage_cases(draw):
    B = draw(st.integers(1, 3))
    G = draw(st.integers(1, 5))
    m = draw(st.integers(1, 6))
    lam = draw(st.floats(0.05, 2.0))
    kind = draw(st.sampled_from(["base", "uniform", "linear", "custom"]))
    budgets = sorted(draw(st.sets(st.integers(1, 10_000), min_size=m, max_size=m)))
    probs = None
    if kind == "custom":
        raw = draw(st.lists(st.floats(0.0, 1.0), min_size=m, max_size=m))
        total = sum(raw)
        probs = [x / total for x in raw] if total > 0 else [1.0 / m] * m
    binary = draw(st.booleans())
    elems = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) if binary else st.floats(-3.0, 3.0)
    scores = draw(st.lists(st.lists(st.lists(elems, min_size=m, max_size=m), min_size=G, max_size=G),
                           min_size=B, max_size=B))
    baseline = draw(st.sampled_from(["brpo", "v1", "v2", "none"]))
    return scores, budget_prior(kind, budgets, probs), lam, baseline


@settings(max_examples=150, deadline=None)
@given(advantage_cases())
def test_vectorised_matches_loop_reference(case):
    scores, probs, lam, baseline = case
    got = thinking_advantages(torch.tensor(scores, dtype=F64), probs, lam=lam, baseline=baseline)
    want = torch.tensor(reference_thinking_advantages(scores, probs.tolist(), lam, baseline), dtype=F64)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=1e-9)


# ---------------------------------------------------------------- hand-worked examples
# One question (B=1), two thinking samples (G=2), four budgets, uniform prior P_j = 1/4, lam = 1/2.
#   sample 0: scores [0, 1, 1, 1]     sample 1: scores [1, 1, 0, 1]
SCORES = torch.tensor([[[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]]], dtype=F64)
UNIFORM = torch.full((4,), 0.25, dtype=F64)


def test_returns_by_hand():
    # R(k) = sum_{j>=k} P_j r_j:
    #   sample 0: (0+1+1+1)/4 = 3/4, (1+1+1)/4 = 3/4, (1+1)/4 = 1/2, 1/4
    #   sample 1: (1+1+0+1)/4 = 3/4, (1+0+1)/4 = 1/2, (0+1)/4 = 1/4, 1/4
    want = [[[0.75, 0.75, 0.5, 0.25], [0.75, 0.5, 0.25, 0.25]]]
    assert budget_returns(SCORES, UNIFORM).tolist() == want


def test_v1_by_hand():
    # tail mass sum_{j>=k} P_j = 1, 3/4, 1/2, 1/4; weights lam^(k-j) for j < k.
    # sample 0: k=0 -> 0
    #           k=1 -> (1/2*0)/(1/2) * 3/4 = 0
    #           k=2 -> (1/4*0 + 1/2*1)/(3/4) * 1/2 = 1/3
    #           k=3 -> (1/8*0 + 1/4*1 + 1/2*1)/(7/8) * 1/4 = 6/7 * 1/4 = 3/14
    # sample 1: k=1 -> 1 * 3/4 = 3/4
    #           k=2 -> (1/4 + 1/2)/(3/4) * 1/2 = 1/2
    #           k=3 -> (1/8 + 1/4 + 0)/(7/8) * 1/4 = 3/7 * 1/4 = 3/28
    want = torch.tensor([[[0, 0, 1 / 3, 3 / 14], [0, 3 / 4, 1 / 2, 3 / 28]]], dtype=F64)
    torch.testing.assert_close(baseline_v1(SCORES, UNIFORM, lam=0.5), want, rtol=0, atol=1e-15)


def test_v2_by_hand():
    # mean over the two samples of R: (3/4+3/4)/2, (3/4+1/2)/2, (1/2+1/4)/2, (1/4+1/4)/2
    v2 = baseline_v2(budget_returns(SCORES, UNIFORM))
    want = torch.tensor([0.75, 0.625, 0.375, 0.25], dtype=F64).expand(1, 2, 4)
    torch.testing.assert_close(v2, want, rtol=0, atol=1e-15)


def test_brpo_by_hand():
    # V = (k/4) V1 + ((4-k)/4) V2, A = R - V.
    # sample 0: k=0: 3/4 - 3/4                      = 0
    #           k=1: 3/4 - (1/4*0 + 3/4*5/8)       = 3/4 - 15/32          = 9/32
    #           k=2: 1/2 - (1/2*1/3 + 1/2*3/8)     = 1/2 - 17/48          = 7/48
    #           k=3: 1/4 - (3/4*3/14 + 1/4*1/4)    = 1/4 - (9/56 + 1/16)  = 3/112
    # sample 1: k=0: 0
    #           k=1: 1/2 - (1/4*3/4 + 3/4*5/8)     = 1/2 - 21/32          = -5/32
    #           k=2: 1/4 - (1/2*1/2 + 1/2*3/8)     = 1/4 - 7/16           = -3/16
    #           k=3: 1/4 - (3/4*3/28 + 1/4*1/4)    = 1/4 - (9/112 + 7/112) = 3/28
    want = torch.tensor([[[0, 9 / 32, 7 / 48, 3 / 112], [0, -5 / 32, -3 / 16, 3 / 28]]], dtype=F64)
    torch.testing.assert_close(thinking_advantages(SCORES, UNIFORM, lam=0.5, baseline="brpo"), want, rtol=0, atol=1e-15)


def test_v1_and_none_baselines_by_hand():
    v1_adv = thinking_advantages(SCORES, UNIFORM, lam=0.5, baseline="v1")
    want = torch.tensor([[[0.75, 0.75, 0.5 - 1 / 3, 0.25 - 3 / 14], [0.75, -0.25, -0.25, 0.25 - 3 / 28]]], dtype=F64)
    torch.testing.assert_close(v1_adv, want, rtol=0, atol=1e-15)
    assert thinking_advantages(SCORES, UNIFORM, lam=0.5, baseline="none").tolist() == budget_returns(SCORES, UNIFORM).tolist()


def test_lambda_weights_recent_budgets_more():
    # one sample, scores [1, 0, x]: at k=2, V1 = (lam^2*1 + lam*0)/(lam^2+lam) * P_3 = lam/(1+lam) * P_3
    s = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=F64)
    p = torch.tensor([0.2, 0.3, 0.5], dtype=F64)
    for lam in (0.5, 1.0, 2.0):
        assert baseline_v1(s, p, lam)[0, 0, 2].item() == pytest.approx(lam / (1 + lam) * 0.5, abs=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("lam", [1e-45, 1e-300, 5e-324])
def test_a_tiny_lambda_gives_the_nearest_earlier_score_not_zero(dtype, lam):
    """lim lam->0 of V1[k] is scores[k-1] * P(B >= b_k). lam^(k-j) underflowed to 0 in every weight (float32 below
    ~1e-38, float64 at 5e-324 for k-j >= 2), so V1 was 0: the weight of the nearest budget is now 1."""
    s = torch.tensor([[[1.0, 0.0, 1.0, 1.0]]], dtype=dtype)
    v1 = baseline_v1(s, UNIFORM, lam)
    want = torch.tensor([[[0.0, 1.0 * 3 / 4, 0.0 * 2 / 4, 1.0 * 1 / 4]]], dtype=dtype)
    torch.testing.assert_close(v1, want, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("lam", [0.75, 0.9, 0.3, 1e-30])
def test_v1_is_bit_for_bit_the_weighted_mean_runs_were_trained_with(dtype, lam):
    """The underflow guard above changes nothing else: lam^(k-j) weights over their sum, the sums of before (a
    review found lam^(k-j-1) everywhere moved V1 by up to 1.8e-7 in float32 at lam = 0.75, the lambda sweep's)."""
    s = torch.rand(3, 4, 8, dtype=dtype, generator=torch.Generator().manual_seed(1))
    k = torch.arange(8)
    dist = (k[:, None] - k[None, :]).to(dtype)
    w = torch.where(dist > 0, torch.as_tensor(lam, dtype=dtype) ** dist, 0.0)
    norm = w.sum(-1)
    tail = torch.tensor([1 - j / 8 for j in range(8)], dtype=dtype)
    want = torch.where(norm > 0, (s @ w.T) / norm.clamp_min(torch.finfo(dtype).tiny), 0.0) * tail
    assert torch.equal(baseline_v1(s, [1 / 8] * 8, lam), want)


# ---------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(2, 6), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_base_prior_with_v2_equals_grpo_on_final_score(B, G, m, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 2, (B, G, m), generator=gen).to(F64)
    probs = budget_prior("base", list(range(1, m + 1)))
    adv = thinking_advantages(scores, probs, lam=0.5, baseline="v2")
    final = scores[..., -1].reshape(-1)
    grpo = grpo_advantages(final, torch.arange(B).repeat_interleave(G)).view(B, G, 1)
    torch.testing.assert_close(adv, grpo.expand(B, G, m), rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(advantage_cases())
def test_v2_advantages_sum_to_zero_over_group(case):
    scores, probs, lam, _ = case
    adv = thinking_advantages(torch.tensor(scores, dtype=F64), probs, lam=lam, baseline="v2")
    torch.testing.assert_close(adv.sum(dim=1), torch.zeros_like(adv.sum(dim=1)), rtol=0, atol=1e-9)


def test_brpo_first_segment_is_pure_v2_and_float32_works():
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(4, 8, 4, generator=gen)
    p = budget_prior("uniform", [1, 2, 3, 4])
    brpo = thinking_advantages(scores, p, 0.5, "brpo")
    v2 = thinking_advantages(scores, p, 0.5, "v2")
    assert brpo.dtype == torch.float32
    torch.testing.assert_close(brpo[..., 0], v2[..., 0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(scores=torch.zeros(2, 3)), r"\[B, G, m\]"),
        (dict(probs=torch.ones(3) / 3), r"probs must have shape \[m\] = \[4\]"),
        (dict(baseline="gae"), "unknown thinking baseline 'gae'"),
        (dict(lam=0.0), "lam must be > 0"),
        (dict(scores=torch.zeros(1, 2, 4, dtype=torch.long)), "floating"),
    ],
)
def test_thinking_advantages_errors(kwargs, match):
    args = dict(scores=torch.zeros(1, 2, 4, dtype=F64), probs=UNIFORM, lam=0.5, baseline="brpo") | kwargs
    with pytest.raises(ValueError, match=match):
        thinking_advantages(**args)


# ---------------------------------------------------------------- token spreading
def test_token_advantages_by_hand():
    # budgets 2, 4, 6: tokens 1-2 -> segment 0, 3-4 -> 1, 5-6 -> 2.
    seg = torch.tensor([[10.0, 20.0, 30.0], [-1.0, -2.0, -3.0]])
    out = token_advantages(seg, [5, 2], [2, 4, 6])
    assert out.tolist() == [[10, 10, 20, 20, 30], [-1, -1, 0, 0, 0]]
    wide = token_advantages(seg, torch.tensor([6, 0]), torch.tensor([2, 4, 6]), max_len=8)
    assert wide.tolist() == [[10, 10, 20, 20, 30, 30, 0, 0], [0] * 8]


def test_token_advantages_rejects_overlong_thinking():
    with pytest.raises(ValueError, match="more than the largest budget 4"):
        token_advantages(torch.zeros(1, 2), [5], [2, 4])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=5, unique=True), st.data())
def test_token_advantages_matches_argmin_definition(budgets, data):
    budgets = sorted(budgets)
    n = data.draw(st.integers(1, 4))
    lens = data.draw(st.lists(st.integers(0, budgets[-1]), min_size=n, max_size=n))
    seg = torch.randn(n, len(budgets), dtype=F64)
    out = token_advantages(seg, lens, budgets)
    for i in range(n):
        for t in range(1, out.shape[1] + 1):
            jt = min(j for j, b in enumerate(budgets) if b >= t)
            want = seg[i, jt].item() if t <= lens[i] else 0.0
            assert out[i, t - 1].item() == want


# ---------------------------------------------------------------- summaries and GRPO
def test_summary_advantages_by_hand():
    # two prefixes, 3 summaries each: means 2/3 and 0
    r = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    want = torch.tensor([[1 / 3, 1 / 3, -2 / 3], [0, 0, 0]], dtype=F64)
    torch.testing.assert_close(summary_advantages(r), want, rtol=0, atol=1e-15)


def test_summary_groups_merge_rows_sharing_a_prefix():
    # thinking finished before budgets 3 and 4: rows 2 and 3 share one prefix -> one group of 4
    r = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.0]], dtype=F64)
    out = summary_advantages(r, group_ids=torch.tensor([0, 1, 2, 2]))
    # group 2 mean = (1+1+1+0)/4 = 3/4
    want = torch.tensor([[0.5, -0.5], [0, 0], [0.25, 0.25], [0.25, -0.75]], dtype=F64)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-15)
    # string labels (verl uids) give the same result
    torch.testing.assert_close(summary_advantages(r, group_ids=["a", "b", "c", "c"]), want, rtol=0, atol=1e-15)


def test_summary_mask_drops_invalid_summaries():
    r = torch.tensor([[1.0, 0.0, 5.0]], dtype=F64)
    out = summary_advantages(r, mask=torch.tensor([[True, True, False]]))
    assert out.tolist() == [[0.5, -0.5, 0.0]]


def test_grpo_by_hand_without_std():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], dtype=F64)
    # groups a: [1,0,0] mean 1/3; b: [0,1,1] mean 2/3
    out = grpo_advantages(r, ["a", "a", "a", "b", "b", "b"])
    want = torch.tensor([2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3], dtype=F64)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-15)
    assert not math.isclose(out.std().item(), 1.0)  # no std normalisation


def test_grpo_interleaved_numpy_index():
    np = pytest.importorskip("numpy")
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    out = grpo_advantages(r, np.array(["x", "y", "x", "y"], dtype=object))
    assert out.tolist() == [0.5, -0.5, -0.5, 0.5]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_summary_and_grpo_advantages_match_loop_reference(data):
    n = data.draw(st.integers(1, 8))
    a = data.draw(st.integers(1, 5))
    rewards = data.draw(st.lists(st.lists(st.floats(-2, 2), min_size=a, max_size=a), min_size=n, max_size=n))
    groups = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    mask = data.draw(st.lists(st.lists(st.booleans(), min_size=a, max_size=a), min_size=n, max_size=n))
    want = []
    for i in range(n):
        pool = [rewards[j][c] for j in range(n) if groups[j] == groups[i] for c in range(a) if mask[j][c]]
        mean = sum(pool) / len(pool) if pool else 0.0
        want.append([(rewards[i][c] - mean) if mask[i][c] else 0.0 for c in range(a)])
    got = summary_advantages(torch.tensor(rewards, dtype=F64), torch.tensor(groups), torch.tensor(mask))
    torch.testing.assert_close(got, torch.tensor(want, dtype=F64), rtol=0, atol=1e-9)
    flat = [r[0] for r in rewards]
    means = {g: sum(f for f, h in zip(flat, groups) if h == g) / groups.count(g) for g in set(groups)}
    got_grpo = grpo_advantages(torch.tensor(flat, dtype=F64), groups)
    torch.testing.assert_close(got_grpo, torch.tensor([f - means[g] for f, g in zip(flat, groups)], dtype=F64), rtol=0, atol=1e-9)
