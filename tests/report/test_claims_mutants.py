"""Claims numbers a mutation hunt (mutation4) found unguarded, each worked by hand: a band's size where
len(budgets) x fraction is not whole (a verdict flipped), "no spread" for a statistic larger than 1 (tokens), and
the seeds for 80% power at the claim's Holm level with their range over the sd's 80% interval."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from arctl.report.claims import (
    FAILS,
    INCONCLUSIVE,
    Claim,
    ClaimsSpec,
    RunView,
    Stat,
    check_claims,
    evaluate_test,
    run_stat,
    seeds_needed,
)
from arctl.report.claims import Test as Check  # (as Test, pytest would try to collect it)
from arctl.report.stats import t_quantile, t_test_power

ACC = "eval/{dataset}/acc@{budget}"


def view(arm: str, seed: int, final: dict) -> RunView:
    return RunView(f"exp_{arm}_s{seed}_abc", "exp", arm, seed, final, {}, 4, 4)


def spec(stats: dict, *tests: Check) -> ClaimsSpec:
    return ClaimsSpec(Path("claims.yaml"), ("paper",), stats, (Claim("1", "t", "", tuple(tests)),))


def no_command(arm: str, seeds=None) -> str:
    return f"arctl sweep paper  # {arm} {seeds}"


# ---------------------------------------------------------------------------------------------
# 1. a band's size: ceil(len x fraction), at least 1
def _band(band: str, fraction: float, **kw) -> Stat:
    return Stat("b", "band", key=ACC, band=band, fraction=fraction, **kw)


# each budget's value a power of two apart: every subset has its own mean
VALUES = {100: 1.0, 200: 2.0, 300: 4.0, 400: 8.0, 500: 16.0, 600: 32.0, 700: 64.0, 800: 128.0, 900: 256.0,
          1000: 512.0}


def _final(n_budgets: int) -> dict:
    return {f"eval/toy/acc@{b}": v for b, v in list(VALUES.items())[:n_budgets]}


@pytest.mark.parametrize("band, fraction, n_budgets, budgets", [
    ("low", 0.25, 5, [100, 200]),  # 1.25 -> 2 (round: 1)
    ("low", 0.25, 6, [100, 200]),  # 1.5 -> 2 (floor: 1)
    ("high", 0.25, 5, [400, 500]),
    ("high", 0.5, 5, [300, 400, 500]),  # 2.5 -> 3 (round, to even: 2)
    ("low", 0.25, 10, [100, 200, 300]),  # 2.5 -> 3
    ("low", 0.25, 4, [100]),  # whole: 1
    ("low", 0.1, 3, [100]),  # 0.3 -> 1 (at least one budget)
])
def test_a_band_reads_len_times_fraction_budgets_rounded_up(band, fraction, n_budgets, budgets):
    expected = sum(VALUES[b] for b in budgets) / len(budgets)
    assert run_stat(_band(band, fraction), _final(n_budgets)) == expected


def test_a_band_above_chance_over_five_budgets_reads_two_and_its_note_names_them():
    """claims.yaml's acc_low (band low, fraction 0.25, above_chance 0.05): the budgets left above chance are any number
    (here 5 of 8); ceil(5 x 0.25) = 2 of them. With one (400 alone) the verdict flips from fails to holds."""
    stat = _band("low", 0.25, above_chance=0.05, label="acc_low")
    budgets = [100, 200, 300, 400, 500, 600, 700, 800]
    a = [0.1, 0.1, 0.1, 0.40, 0.30, 0.6, 0.7, 0.8]  # 100-300 at chance (0.1) for both arms
    b = [0.1, 0.1, 0.1, 0.30, 0.60, 0.6, 0.7, 0.8]
    eps = [0.0, 0.02, -0.02, 0.01]
    runs = []
    for s, e in enumerate(eps):
        runs.append(view("a", s, {**{f"eval/toy/acc@{x}": v + e for x, v in zip(budgets, a)}, "eval/toy/chance_acc": 0.1}))
        runs.append(view("b", s, {**{f"eval/toy/acc@{x}": v for x, v in zip(budgets, b)}, "eval/toy/chance_acc": 0.1}))
    r = evaluate_test(Check("compare", a="a", b="b", stat="x"), spec({"x": stat}), runs, no_command)
    # per seed: a (0.40 + 0.30) / 2 + e = 0.35 + e, b (0.30 + 0.60) / 2 = 0.45: -0.1 + e; mean of e = 0.0025
    assert r.per_seed[0]["a"] == pytest.approx(0.35) and r.per_seed[0]["b"] == pytest.approx(0.45)
    assert r.mean == pytest.approx(-0.0975)
    # sd of e: sqrt(((-.0025)^2 + .0175^2 + (-.0225)^2 + .0075^2) / 3) = 0.0170783; half = 3.182446 x sd / 2
    assert r.ci_low == pytest.approx(-0.0975 - 0.027175, abs=1e-5) and r.ci_high == pytest.approx(-0.0975 + 0.027175, abs=1e-5)
    assert r.verdict == FAILS
    assert "acc_low (toy): budgets 400, 500 of the 5 above chance + 0.05" in r.note, r.note


# ---------------------------------------------------------------------------------------------
# 2. no spread, to the rounding of the statistic's size
def test_token_differences_tied_to_float_rounding_are_judged_by_the_sign_test():
    """A token statistic (~700 vs 1000 tokens): per-seed differences equal up to the last bits of the floats
    (sd ~ 1e-13, far below 1e-12 x 300) are one value: the exact sign test's 2 x 0.5^3 = 0.25 at 3 seeds, not a
    t statistic of rounding noise (t ~ 1e15, p = 0, "holds")."""
    stat = Stat("len", "final", key="eval/{dataset}/response_length", label="tokens", unit="tokens")
    runs = []
    for s, d in enumerate([-300.0, -300.0 + 2.3e-13, -300.0 - 1.1e-13]):
        runs.append(view("a", s, {"eval/toy/response_length": 1000.0 + d}))
        runs.append(view("b", s, {"eval/toy/response_length": 1000.0}))
    (claim,) = check_claims(spec({"len": stat}, Check("compare", a="a", b="b", stat="len", direction="less")),
                            runs, no_command)
    (t,) = claim.tests
    assert 0 < t.sd < 1e-12 * 300  # spread to rounding only (the float values differ)
    assert t.mean == pytest.approx(-300.0)
    assert t.verdict == INCONCLUSIVE and claim.verdict == INCONCLUSIVE
    assert t.p_value == 0.25 and t.p_holm == 0.25
    assert t.seeds_needed == 6  # 2 x 0.5^5 = 0.0625, 2 x 0.5^6 = 0.031 < 0.05
    assert "the seeds do not spread" in t.note and "0 of 3 seeds above 0, 3 below" in t.note, t.note


# ---------------------------------------------------------------------------------------------
# 4, 5. seeds for 80% power at the Holm level of the claim's first test (alpha / k), and their range
def _three_tests_claim():
    """Three tests in one claim over 4 seeds; the first (a > b) has per-seed differences 0.05, 0.02, 0.08, 0.01:
    mean 0.04, sd sqrt((.01^2 + .02^2 + .04^2 + .03^2) / 3) = sqrt(0.001) = 0.0316228, effect 1.2649."""
    stats = {"acc": Stat("acc", "final", key="eval/{dataset}/grid_anytime_acc", label="anytime")}
    runs = []
    for s, d in enumerate([0.05, 0.02, 0.08, 0.01]):
        runs += [view("a", s, {"eval/toy/grid_anytime_acc": 0.5 + d}), view("b", s, {"eval/toy/grid_anytime_acc": 0.5}),
                 view("c", s, {"eval/toy/grid_anytime_acc": 0.5 + 0.01 * s})]
    tests = (Check("compare", a="a", b="b", stat="acc"), Check("compare", a="a", b="c", stat="acc"),
             Check("compare", a="c", b="b", stat="acc"))
    (claim,) = check_claims(spec(stats, *tests), runs, no_command)
    return claim


def _simulated_power(effect: float, n: int, alpha: float) -> float:
    """The share of 20,000 simulated experiments of n normal seeds whose two-sided paired t-test rejects at alpha."""
    x = np.random.default_rng(0).normal(effect, 1.0, size=(20_000, n))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(n))
    return float(np.mean(np.abs(t) > t_quantile(1 - alpha / 2, n - 1)))


def test_seeds_needed_are_counted_at_the_holm_level_of_the_claim():
    claim = _three_tests_claim()
    first = claim.tests[0]
    assert first.mean == pytest.approx(0.04) and first.sd == pytest.approx(math.sqrt(0.001))
    assert first.verdict == INCONCLUSIVE and first.p_holm > 0.05
    effect, level = 0.04 / math.sqrt(0.001), 0.05 / 3
    # 80% power at alpha / 3 = 0.0167: 9 seeds give ~0.76, 10 ~0.83; at alpha 0.05 8 would do (~0.86; 7: ~0.80-)
    assert _simulated_power(effect, 9, level) < 0.8 <= _simulated_power(effect, 10, level)
    assert _simulated_power(effect, 8, 0.05) >= 0.8
    assert first.seeds_needed == 10
    assert t_test_power(effect, 10, level) >= 0.8 > t_test_power(effect, 9, level)
    assert "about 10 seeds would give 80% power" in first.note, first.note


def test_the_seeds_range_is_the_seeds_needed_at_the_ends_of_the_sd_s_80_percent_interval():
    """The sd of 4 seeds lies in [sd sqrt(3 / chi2_.90,3), sd sqrt(3 / chi2_.10,3)] = [sd sqrt(3 / 6.251),
    sd sqrt(3 / 0.584)] with 80% confidence (chi-square tables): effects 0.04 / 0.02191 = 1.826 and
    0.04 / 0.07165 = 0.558, each at the Holm level alpha / 3."""
    first = _three_tests_claim().tests[0]
    sd = math.sqrt(0.001)
    lo_sd, hi_sd = sd * math.sqrt(3 / 6.251), sd * math.sqrt(3 / 0.584)
    assert first.seeds_range == [seeds_needed(0.04, lo_sd, 3), seeds_needed(0.04, hi_sd, 3)] == [7, 37]
    level = 0.05 / 3
    assert t_test_power(0.04 / lo_sd, 7, level) >= 0.8 > t_test_power(0.04 / lo_sd, 6, level)
    assert t_test_power(0.04 / hi_sd, 37, level) >= 0.8 > t_test_power(0.04 / hi_sd, 36, level)
    assert "(7-37 over the sd's 80% interval)" in first.note, first.note
