import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from arctl.algo.metrics import (
    accuracy_per_budget,
    anytime_accuracy,
    baseline_correlations,
    final_accuracy,
    normalized_variances,
    score_curve_area,
)
from arctl.algo.objective import anytime_objective
from arctl.algo.priors import budget_prior

F64 = torch.float64


def test_anytime_objective_by_hand():
    # two samples, budgets 1..3: per-budget means 0.5, 0.5, 1.0; P = 0.2, 0.3, 0.5
    # J_anytime = 0.1 + 0.15 + 0.5 = 0.75; J = mean final = 1.0
    s = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]], dtype=F64)
    p = torch.tensor([0.2, 0.3, 0.5], dtype=F64)
    assert anytime_objective(s, p).item() == pytest.approx(0.75, abs=1e-15)
    assert final_accuracy(s).item() == 1.0
    # base prior gives back the standard objective
    assert anytime_objective(s, budget_prior("base", [1, 2, 3])).item() == 1.0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.sampled_from(["uniform", "linear", "base"]), st.integers(0, 2**31 - 1))
def test_bounds_on_monotone_score_tables(n, m, prior, seed):
    # App. B: with scores non-decreasing in the budget, J_anytime <= J <= J_anytime / P_m
    gen = torch.Generator().manual_seed(seed)
    s = torch.rand(n, 2, m, generator=gen, dtype=F64).cumsum(-1) / m  # monotone in j, in [0, 1]
    p = budget_prior(prior, [100 * (j + 1) for j in range(m)])
    ja, j = anytime_objective(s, p).item(), final_accuracy(s).item()
    assert ja <= j + 1e-12
    assert j <= ja / p[-1].item() + 1e-12


def test_objective_shape_error():
    with pytest.raises(ValueError, match="probs must have shape"):
        anytime_objective(torch.zeros(2, 3), [0.5, 0.5])


def test_accuracy_metrics_by_hand():
    s = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1]], dtype=F64)
    assert accuracy_per_budget(s).tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert anytime_accuracy(s).item() == pytest.approx(0.5)
    assert final_accuracy(s).item() == 1.0
    # one sample's row [m] is a table of one row; a table of no budgets is refused (from a mutation hunt: a check
    # reading the row count, shape[-2], for the budget count passed; a row raised IndexError, [3, 0] passed it)
    assert accuracy_per_budget(torch.tensor([0.0, 1.0, 1.0, 1.0])).tolist() == [0, 1, 1, 1]
    assert final_accuracy(torch.tensor([0.2, 0.8], dtype=F64)).item() == 0.8
    for empty in (torch.zeros(3, 0), torch.zeros(())):
        with pytest.raises(ValueError, match="scores must be"):
            accuracy_per_budget(empty)
    # trapezoids over budgets 1000..4000: (0+1/3)/2 + (1/3+2/3)/2 + (2/3+1)/2 = 3/2, width 3 -> 1/2
    assert score_curve_area(accuracy_per_budget(s), [1000, 2000, 3000, 4000]).item() == pytest.approx(0.5)
    # uneven spacing: acc 0 at 0-ish budget 1, 1 at 2 and 10: (0.5*1 + 1*8)/9
    assert score_curve_area([0.0, 1.0, 1.0], [1, 2, 10]).item() == pytest.approx(8.5 / 9)
    assert score_curve_area([0.4], [8000]).item() == pytest.approx(0.4)


def test_variance_diagnostics_by_hand():
    # B=1, G=2, m=2, uniform; sample 0 scores [0, 1], sample 1 [1, 1]
    # R = [[1/2, 1/2], [1, 1/2]]; V2 = [3/4, 1/2]; V1 = [0, 0] and [0, 1/2] (k=1: s_0 * P_2)
    # budget 0: Var R = 1/16; BRPO = GRPO = V2 -> Var(R-V2) = 1/16 -> 1; V1 = 0 -> Var R -> 1
    # budget 1: Var R = 0 -> nan
    s = torch.tensor([[[0.0, 1.0], [1.0, 1.0]]], dtype=F64)
    p = budget_prior("uniform", [1, 2])
    nv = normalized_variances(s, p, 0.5)
    assert nv["grpo"][0].item() == pytest.approx(1.0) and nv["brpo"][0].item() == pytest.approx(1.0)
    assert nv["v1"][0].item() == pytest.approx(1.0)
    assert all(math.isnan(nv[k][1].item()) for k in nv)
    corr = baseline_correlations(s, p, 0.5)
    assert math.isnan(corr["v1"][0].item())  # V1 is constant (0) at the first budget
    assert math.isnan(corr["v2"][0].item())  # V2 is constant within the single question


def test_variance_diagnostics_show_v1_helps_late_budgets():
    # monotone 0/1 scores (once correct, stays correct): V1 knows the earlier answer, so at late
    # budgets it explains R far better than the group mean V2.
    gen = torch.Generator().manual_seed(0)
    B, G, m = 64, 8, 8
    first_correct = torch.randint(0, m + 3, (B, G, 1), generator=gen)
    s = (torch.arange(m).view(1, 1, m) >= first_correct).to(F64)
    p = budget_prior("uniform", list(range(1, m + 1)))
    nv = normalized_variances(s, p, 0.5)
    corr = baseline_correlations(s, p, 0.5)
    assert nv["brpo"][-1] < nv["grpo"][-1]
    assert nv["v1"][-1] < nv["grpo"][-1]
    assert corr["v1"][-1] > corr["v2"][-1]
    # by Eq. 9 the first budget uses only V2
    assert nv["brpo"][0].item() == pytest.approx(nv["grpo"][0].item())


def test_variance_diagnostics_at_a_later_budget_by_hand_with_a_sample_that_did_not_reach_it():
    """From a review: the case above checks budget 0 (every ratio 1 whatever the code does) and a budget where
    Var R = 0 (nan): a Pearson that forgot to centre y, and a mask ignored, passed. Here, worked by hand:
    B=1, G=4, m=2, uniform P = (1/2, 1/2), lam = 1/2; scores g0 (0,1), g1 (1,1), g2 (0,0), g3 (1,0); g3's thinking
    ended at b_1 (think_len 2 of budgets (2, 4)), so it has no segment 1.
    R = (1/2,1/2), (1,1/2), (0,0), (1/2,0); V2 = (1/2, 1/4) over all four (Eq. 8);
    V1 at k=1 = s_0 * P_2 = 0, 1/2, 0, 1/2; BRPO at k=1 = V1/2 + V2/2 = 1/8, 3/8, 1/8, 3/8.
    Budget 1 over g0..g2: R = (1/2, 1/2, 0), Var R = 1/18; R - V2 = (1/4, 1/4, -1/4): 1/18 -> 1;
    R - V1 = (1/2, 0, 0): 1/18 -> 1; R - BRPO = (3/8, 1/8, -1/8): 1/24 -> 3/4.
    corr(V1, R) over g0..g2: V1 (0, 1/2, 0) against R: cov 1/12 / sqrt(1/6 * 1/6) = 1/2 (over all four it is 0).
    Budget 0: R = (1/2, 1, 0, 1/2), V2 = 1/2 = BRPO, V1 = 0: every ratio 1."""
    from arctl.algo.metrics import eval_diagnostics

    s = torch.tensor([[[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]]], dtype=F64)
    d = eval_diagnostics(s, torch.tensor([[4, 4, 4, 2]]), [2, 4], 0.5)
    assert d.nvar["grpo"] == pytest.approx([1.0, 1.0]) and d.nvar["v1"] == pytest.approx([1.0, 1.0])
    assert d.nvar["brpo"] == pytest.approx([1.0, 0.75])
    assert math.isnan(d.corr["v1"][0]) and d.corr["v1"][1] == pytest.approx(0.5)
    assert math.isnan(d.corr["v2"][1])  # V2 is one value within the single question
    everyone = baseline_correlations(s, budget_prior("uniform", [2, 4]), 0.5)  # no mask: g3 counts
    assert everyone["v1"][1].item() == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), b=st.integers(1, 3), g=st.integers(2, 6), m=st.integers(1, 4),
       lam=st.sampled_from([0.25, 0.5, 0.9]), prior=st.sampled_from(["uniform", "linear", "base"]))
def test_variance_diagnostics_match_plain_loops(seed, b, g, m, lam, prior):
    """Against numpy's variance and correlation of the rows each budget keeps, one budget at a time (R and the
    baselines from arctl.algo.advantages, which tests/algo/test_advantages.py checks against the authors' loops)."""
    import numpy as np

    from arctl.algo.advantages import budget_returns, segments_reached, thinking_baseline
    from arctl.algo.metrics import ROUNDING

    def spread(x):  # values that differ by more than rounding (two sums of the same numbers can differ by an ulp)
        return len(x) > 0 and np.ptp(x) > ROUNDING * max(1.0, float(np.abs(x).max()))

    gen = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 2, (b, g, m), generator=gen).to(F64)
    budgets = [4 * (k + 1) for k in range(m)]
    think = torch.randint(1, 4 * m + 1, (b, g), generator=gen)
    p = budget_prior(prior, budgets)
    reached = segments_reached(think, budgets)
    nv = normalized_variances(s, p, lam, reached)
    corr = baseline_correlations(s, p, lam, reached)
    r = budget_returns(s, p).numpy().reshape(-1, m)
    keep = reached.numpy().reshape(-1, m)
    for k in range(m):
        rows = keep[:, k]
        rk = r[rows, k]
        for key, name in (("brpo", "brpo"), ("grpo", "v2"), ("v1", "v1")):
            v = thinking_baseline(s, p, lam, name).numpy().reshape(-1, m)[rows, k]
            want = np.var(rk - v) / np.var(rk) if rows.any() and spread(rk) else math.nan  # R not constant
            got = nv[key][k].item()
            assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want, abs=1e-9), (key, k)
        for key in ("v1", "v2"):
            v = thinking_baseline(s, p, lam, key).numpy().reshape(-1, m)[rows, k]
            got = corr[key][k].item()
            ok = rows.sum() > 1 and spread(v) and spread(rk)  # a constant column: undefined
            want = float(np.corrcoef(v, rk)[0, 1]) if ok else math.nan
            assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want, abs=1e-9), (key, k)


def test_a_constant_return_has_no_correlation_and_no_normalised_variance():
    """By hand: one budget whose return R is the same for all three samples (R = 0.1 each). Var(R) = 0, so
    the correlations with V1/V2 and Var(R - V)/Var(R) are undefined (nan). Their centred sums had been of
    the mean's rounding (three 0.1s sum to 0.30000000000000004): a correlation of ~1e-17 and a variance
    of ~1e-33 (a normalised variance of 3e30), which hypothesis found."""
    from arctl.algo.metrics import _masked_var, _pearson

    r = torch.full((3, 1), 0.1, dtype=F64)
    w = torch.ones(3, 1, dtype=F64)
    v = torch.tensor([[0.0], [0.3], [0.7]], dtype=F64)
    assert float(((r - (r * w).sum(0) / 3) ** 2).sum()) > 0  # the rounding the old code read as spread
    assert math.isnan(_pearson(v, r, w).item()) and math.isnan(_pearson(r, v, w).item())
    assert _masked_var(r, w).item() == 0.0
    assert _pearson(v, 2 * v, w).item() == pytest.approx(1.0)  # a column that varies still correlates
    # two groups' mean returns, equal but summed in another order (an ulp apart): no spread either (hypothesis
    # found a V2 "correlated" .43 / .85 with R here)
    ulp = torch.tensor([[0.36], [0.36 + 2 ** -54 * 4], [0.36]], dtype=F64)
    assert ulp[1, 0] != ulp[0, 0] and math.isnan(_pearson(ulp, v, w).item())
    kept = torch.tensor([[1.0], [1.0], [0.0], [0.0], [1.0]], dtype=F64)  # the rows kept: the three 0.1s
    assert _masked_var(torch.tensor([[0.1], [0.1], [5.0], [7.0], [0.1]], dtype=F64), kept).item() == 0.0
