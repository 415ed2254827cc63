"""`arctl report --claims`: the statistics on synthetic runs with known answers (a claim that holds,
one that fails, one that is inconclusive, a missing run), the bound, the claims file, the HTML's
structure, and the command on a workspace of real offline W&B runs."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.claims import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    ClaimsSpec,
    RunView,
    Stat,
    Test,
    check_claims,
    evaluate_test,
    interval_verdict,
    load_claims,
    run_stat,
    seeds_needed,
)
from arctl.report.stats import chi2_quantile, holm, sd_interval, t975, t_cdf, t_quantile, t_test_power

runner = CliRunner()
GRID = [10, 20, 30, 40]


def view(arm: str, seed: int, anytime: float, *, final: float | None = None, think: float = 30.0,
         evals: dict | None = None, acc: dict | None = None) -> RunView:
    fin = {"eval/toy/grid_anytime_acc": anytime, "eval/toy/final_acc": anytime + 0.1 if final is None else final,
           "eval/toy/think_len": think}
    for b, v in (acc or {}).items():
        fin[f"eval/toy/acc@{b}"] = v
    return RunView(f"exp_{arm}_s{seed}_abc", "exp", arm, seed, fin, evals or {}, 4, len(GRID))


STATS = {
    "anytime": Stat("anytime", "final", key="eval/{dataset}/grid_anytime_acc", label="anytime"),
    "think_len": Stat("think_len", "final", key="eval/{dataset}/think_len"),
    "acc_low": Stat("acc_low", "band", key="eval/{dataset}/acc@{budget}", band="low", fraction=0.25),
    "acc_high": Stat("acc_high", "band", key="eval/{dataset}/acc@{budget}", band="high", fraction=0.25),
}


def spec_with(*tests: Test) -> ClaimsSpec:
    from pathlib import Path

    from arctl.report.claims import Claim

    return ClaimsSpec(Path("claims.yaml"), ("paper",), STATS, (Claim("1", "t", "", tuple(tests)),))


def no_command(arm: str, seeds=None) -> str:
    return f"arctl sweep paper  # {arm} {seeds}"


def test_the_interval_is_the_paired_t_interval_worked_by_hand():
    # per-seed differences 0.1, 0.2, 0.3: mean 0.2, sd 0.1, half-width t_{.975,2} * 0.1 / sqrt(3) = 4.302653 * 0.057735
    # = 0.248414 (at 2 degrees of freedom t_p = (2p - 1) sqrt(2 / (4p(1 - p))): 0.95 * sqrt(2 / 0.0975))
    mean, lo, hi, verdict, need = interval_verdict([0.1, 0.2, 0.3], "greater")
    assert mean == pytest.approx(0.2) and lo == pytest.approx(0.2 - 0.248414, abs=1e-6)
    assert hi == pytest.approx(0.2 + 0.248414, abs=1e-6) and verdict == INCONCLUSIVE
    # seeds for 80% power at an effect of mean / sd = 2 (the interval alone would exclude 0 at n = 4,
    # a test that then succeeds only about half the time)
    assert need == 5 and t_test_power(2.0, 5) >= 0.8 > t_test_power(2.0, 4)
    assert interval_verdict([0.1, 0.11, 0.12], "greater")[3] == HOLDS
    assert interval_verdict([0.1, 0.11, 0.12], "less")[3] == FAILS
    assert interval_verdict([-0.1, -0.11, -0.12], "less")[3] == HOLDS
    assert interval_verdict([0.3], "greater")[3] == INCONCLUSIVE  # one seed: no interval
    assert interval_verdict([], "greater")[3] == INCONCLUSIVE


@pytest.mark.parametrize("effect, n", [(0.5, 34), (0.8, 15), (1.0, 10), (0.2, 199)])
def test_seeds_for_80_percent_power_match_the_published_tables(effect, n):
    """One-sample (paired) t-test, two-sided alpha 0.05, power 0.8 (Cohen 1988; G*Power)."""
    assert seeds_needed(effect, 1.0) == n
    assert seeds_needed(-effect * 0.03, 0.03) == n  # the sign and the scale do not matter


@settings(max_examples=25, deadline=None)
@given(st.floats(0.3, 3.0), st.integers(2, 12))
def test_the_power_against_a_simulated_t_test(effect, n):
    """Against a slow reference: 20,000 simulated experiments of n normal seeds, t-tested."""
    rng = np.random.default_rng(0)
    x = rng.normal(effect, 1.0, size=(20_000, n))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(n))
    simulated = float(np.mean(np.abs(t) > t_quantile(0.975, n - 1)))
    assert t_test_power(effect, n) == pytest.approx(simulated, abs=0.015)


T975_TABLE = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
              2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
              2.052, 2.048, 2.045, 2.042]  # a printed table of t_{0.975, df}, df = 1..30, to 3 decimals


def test_student_t_and_chi_square_quantiles_match_the_tables():
    for df, printed in enumerate(T975_TABLE, start=1):  # the interval's quantile is the exact one, not the table
        assert t975(df) == pytest.approx(printed, abs=5e-4 + 1e-12)
        assert t_cdf(t975(df), df) == pytest.approx(0.975, abs=1e-9)
    assert chi2_quantile(0.95, 1) == pytest.approx(3.8415, abs=1e-4)
    assert chi2_quantile(0.05, 10) == pytest.approx(3.9403, abs=1e-4)
    assert chi2_quantile(0.5, 2) == pytest.approx(2 * math.log(2), abs=1e-9)  # exponential median
    lo, hi = sd_interval(1.0, 3, 0.8)  # 2 degrees of freedom: an sd known to a factor ~0.66..3.1 (80%)
    assert lo == pytest.approx(math.sqrt(2 / chi2_quantile(0.9, 2))) and hi == pytest.approx(math.sqrt(2 / chi2_quantile(0.1, 2)))
    assert 0.65 < lo < 0.67 and 3.0 < hi < 3.2


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 of k = 3: 3 x .01 = .03, max(.03, 2 x .03) = .06, max(.06, 1 x .04) = .06
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(holm([0.01, float("nan")])[1]) and holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_holm_within_a_claim_turns_marginal_tests_inconclusive_and_says_how_many_seeds():
    # two tests that each hold alone (differences 2, 3, 4 sd-units apart: t = 5.2, p = 0.035 over 3
    # seeds) but not together: Holm multiplies the smaller p by 2 (0.07)
    runs = [view("grpo", s, 0.40, think=40.0) for s in range(3)]
    runs += [view("ar", s, 0.40 + [0.04, 0.06, 0.08][s], think=40.0 - [4.0, 6.0, 8.0][s]) for s in range(3)]
    acc = Test("compare", a="ar", b="grpo", stat="anytime")
    short = Test("compare", a="ar", b="grpo", stat="think_len", direction="less")
    for test in (acc, short):
        alone = evaluate_test(test, spec_with(), runs, no_command)
        assert alone.verdict == HOLDS and alone.p_value == pytest.approx(0.0351, abs=5e-4)
        (single,) = check_claims(spec_with(test), runs, no_command)
        assert single.verdict == HOLDS  # one test: Holm changes nothing
    (result,) = check_claims(spec_with(acc, short), runs, no_command)
    assert result.verdict == INCONCLUSIVE
    for t in result.tests:
        assert t.verdict == INCONCLUSIVE and t.p_holm == pytest.approx(2 * t.p_value)
        assert t.seeds_needed == seeds_needed(t.mean, t.sd, 2) and "underpowered" in t.note
        assert t.seeds_range[0] <= t.seeds_needed <= t.seeds_range[1]
        assert t_test_power(abs(t.mean) / t.sd, t.seeds_needed, 0.025) >= 0.8


def test_a_mean_near_zero_on_the_wrong_side_is_no_evidence_either_way():
    runs = [view("grpo", s, 0.40) for s in range(3)] + [view("ar", s, 0.40 + [0.01, -0.012, 0.0013][s]) for s in range(3)]
    (result,) = check_claims(spec_with(Test("compare", a="ar", b="grpo", stat="anytime")), runs, no_command)
    (t,) = result.tests
    assert t.mean < 0 and t.verdict == INCONCLUSIVE and "no evidence either way" in t.note
    assert "would not make it hold" not in t.note


def test_the_start_of_training_is_the_first_evaluation_not_each_metrics_first_value():
    """A precondition reads the run's first evaluation. The final 32-budget grid logs budgets the
    periodic evaluations never do, so their first value is the last step's: read per metric, the
    start of training would mix in the end of it (what 8 AR-uniform runs showed: corr(V1, R) per
    seed where step 0 is the same for every seed)."""
    import pandas as pd

    from arctl.report.claims import run_views

    rows = [("r0", 0, "eval/toy/corr_v1@96", 0.2), ("r0", 0, "eval/toy/corr_v1@192", 0.3),
            ("r0", 0, "train/loss", 1.0), ("r0", 1, "train/loss", 0.5),
            ("r0", 2, "eval/toy/corr_v1@96", 0.6), ("r0", 2, "eval/toy/corr_v1@192", 0.7),
            ("r0", 2, "eval/toy/corr_v1@186", -0.9)]  # a grid budget: the last step only
    history = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    runs = pd.DataFrame([{"run_id": "r0", "seed": 0, "arm": "ar", "experiment": "exp"}])
    (v,) = run_views(history, runs)
    assert v.first == {"eval/toy/corr_v1@96": 0.2, "eval/toy/corr_v1@192": 0.3}
    assert v.final["eval/toy/corr_v1@186"] == -0.9 and v.final["eval/toy/corr_v1@96"] == 0.6


def test_diagnostics_a_final_evaluation_computed_over_its_grid_are_read_from_the_last_one_at_the_eval_budgets():
    """Until 2026-12-05 the tiny backend's final evaluation computed the variance diagnostics over its 32-budget grid,
    another estimator under the same keys (from a hunt: claim 7 read +.061, inconclusive, from 8 committed runs whose
    evaluations at eval.budgets read -.17 on every seed). Such a run's claims read its last evaluation at
    eval.budgets, said in one warning; a run whose last evaluation is at eval.budgets is read as it is."""
    import pandas as pd

    from arctl.report.claims import run_views

    def rows(rid, last_budgets):
        out = [(rid, 0, "eval/toy/nvar/grpo@96", 0.1), (rid, 0, "eval/toy/nvar/grpo@192", 0.2),
               (rid, 2, "eval/toy/nvar/grpo@96", 0.3), (rid, 2, "eval/toy/nvar/grpo@192", 0.4),
               (rid, 2, "eval/toy/acc@192", 0.5), (rid, 4, "eval/toy/acc@192", 0.6)]
        return out + [(rid, 4, f"eval/toy/nvar/grpo@{b}", b / 1000) for b in last_budgets]

    history = pd.DataFrame(rows("old", [48, 96, 144, 192]) + rows("new", [96, 192]),
                           columns=["run_id", "step", "metric", "value"])
    runs = pd.DataFrame([{"run_id": r, "seed": i, "arm": "ar", "experiment": "exp", "config.eval.budgets": "[96, 192]"}
                         for i, r in enumerate(["old", "new"])])
    said: list[str] = []
    views = {v.run_id: v for v in run_views(history, runs, warnings=said)}
    assert {k: v for k, v in views["old"].final.items() if "nvar" in k} == {"eval/toy/nvar/grpo@96": 0.3,
                                                                           "eval/toy/nvar/grpo@192": 0.4}
    assert views["old"].final["eval/toy/acc@192"] == 0.6  # only the diagnostics are read elsewhere
    assert {k: v for k, v in views["new"].final.items() if "nvar" in k} == {"eval/toy/nvar/grpo@96": 0.096,
                                                                           "eval/toy/nvar/grpo@192": 0.192}
    (warning,) = said
    assert warning.startswith("1 run(s) logged their last evaluation's variance diagnostics (corr_v*, nvar/*) over more "
                              "budgets than eval.budgets") and "step 2 of old" in warning


def test_a_claim_whose_precondition_fails_is_not_testable_here():
    """Claim 7's kind of precondition: corr(V1, R) > 0 at the start of training, read from each run's
    first evaluation; measured below 0 -> the claim is not testable on these runs (its tests are
    still shown)."""
    from pathlib import Path

    from arctl.report.claims import Claim

    stats = {**STATS, "corr": Stat("corr", "band", key="eval/{dataset}/corr_v1@{budget}", band="high", fraction=0.5)}
    test = Test("compare", a="ar", b="grpo", stat="anytime")
    pre = Test("sign", arms=("ar",), stat="corr")

    def runs(first_corr, per_seed=0.0):
        out = [view("grpo", s, 0.40) for s in range(3)] + [view("ar", s, 0.45 + 0.01 * s) for s in range(3)]
        for r in out:
            c = first_corr + per_seed * r.seed
            r.first = {"eval/toy/corr_v1@30": c, "eval/toy/corr_v1@40": c + 0.01}
        return out

    spec = ClaimsSpec(Path("c.yaml"), (), stats, (Claim("7", "t", "", (test,), (pre,)),))
    (bad,) = check_claims(spec, runs(-0.2), no_command)
    assert bad.verdict == NOT_TESTABLE and bad.tests[0].kind == "precondition" and bad.tests[0].verdict == FAILS
    assert bad.tests[0].mean == pytest.approx(-0.19)  # the later half of 30, 40: budget 40 and "not testable here" in bad.tests[1].note
    assert "measured -0.19 over 3 seed(s)" in bad.tests[1].note
    (good,) = check_claims(spec, runs(0.3), no_command)
    assert good.verdict == HOLDS and good.tests[0].verdict == HOLDS
    # one shared warm-up evaluated on the same problems: every seed the same number, said so
    assert good.tests[0].note.endswith("(the same number on every seed: one measurement, not independent ones)")
    (varied,) = check_claims(spec, runs(0.3, per_seed=0.01), no_command)
    assert varied.tests[0].verdict == HOLDS and "the same number" not in varied.tests[0].note
    assert varied.tests[0].ci_low > 0 and "95% interval [" in varied.tests[0].note
    # independent seeds whose mean is on the claimed side but whose interval reaches 0: not established,
    # so the claim is not testable here (before: the point estimate passed it)
    (shaky,) = check_claims(spec, runs(-0.05, per_seed=0.06), no_command)  # seeds -0.04, 0.02, 0.08: mean +0.02
    assert shaky.tests[0].mean == pytest.approx(0.02) and shaky.tests[0].ci_low < 0 < shaky.tests[0].ci_high
    assert shaky.tests[0].verdict == INCONCLUSIVE and shaky.verdict == NOT_TESTABLE
    assert "is not established" in shaky.tests[1].note and "the interval reaches 0" in shaky.tests[1].note
    # on the wrong side but across 0: not established, not "fails"; beyond 0 on the wrong side: fails
    (across,) = check_claims(spec, runs(-0.09, per_seed=0.06), no_command)  # -0.08, -0.02, 0.04: mean -0.02
    assert across.tests[0].verdict == INCONCLUSIVE and across.verdict == NOT_TESTABLE
    (below,) = check_claims(spec, runs(-0.3, per_seed=0.01), no_command)
    assert below.tests[0].verdict == FAILS and "fails" in below.tests[1].note
    # one seed is one measurement, and a seed without a value is named (a review: 1 of 3 seeds passed it silently)
    lone = runs(0.01)
    for r in lone:
        if r.arm == "ar" and r.seed > 0:
            r.first = {}
    (one,) = check_claims(spec, lone, no_command)
    assert one.tests[0].n == 1 and "(one seed: one measurement)" in one.tests[0].note
    assert "seed(s) 1,2 left out" in one.tests[0].note
    # runs that never measured it at their first evaluation: unchecked is not passed (a review)
    unmeasured = runs(0.3)
    for r in unmeasured:
        r.first = {}
    (unknown,) = check_claims(spec, unmeasured, no_command)
    assert unknown.verdict == NOT_TESTABLE and unknown.tests[0].mean is None
    assert "cannot be checked: no run logged it at its first evaluation" in unknown.tests[1].note


def test_a_claim_that_holds_one_that_fails_one_inconclusive_and_a_missing_run():
    runs = [view("grpo", s, 0.40 + 0.01 * s, think=40.0) for s in range(3)]
    runs += [view("ar", s, 0.45 + 0.01 * s + 0.002 * s * s, think=35.0 + s) for s in range(3)]  # +0.05..+0.054
    runs += [view("worse", s, 0.30 + 0.01 * s + [0.0, 0.004, -0.004][s]) for s in range(3)]  # -0.10 +- 0.004
    runs += [view("noisy", s, 0.40 + [0.05, -0.06, 0.02][s]) for s in range(3)]
    spec = spec_with()
    holds = evaluate_test(Test("compare", a="ar", b="grpo", stat="anytime"), spec, runs, no_command)
    assert holds.verdict == HOLDS and holds.n == 3 and holds.ci_low > 0
    assert [holds.per_seed[s]["value"] for s in range(3)] == pytest.approx([0.05, 0.052, 0.058])
    fails = evaluate_test(Test("compare", a="worse", b="grpo", stat="anytime"), spec, runs, no_command)
    assert fails.verdict == FAILS and fails.mean == pytest.approx(-0.10) and fails.ci_high < 0
    noisy = evaluate_test(Test("compare", a="noisy", b="grpo", stat="anytime"), spec, runs, no_command)
    assert noisy.verdict == INCONCLUSIVE and noisy.ci_low < 0 < noisy.ci_high
    shorter = evaluate_test(Test("compare", a="ar", b="grpo", stat="think_len", direction="less"), spec, runs, no_command)
    assert shorter.verdict == HOLDS
    missing = evaluate_test(Test("compare", a="ar-linear", b="grpo", stat="anytime"), spec, runs, no_command)
    assert missing.verdict == INCONCLUSIVE and missing.missing == ["ar-linear"]
    assert missing.commands == ["arctl sweep paper  # ar-linear [0, 1, 2]"] and missing.n == 0  # grpo's seeds


def test_pairing_by_seed_uses_only_the_seeds_both_arms_have():
    runs = [view("grpo", s, 0.40) for s in (0, 1, 2)] + [view("ar", s, 0.45) for s in (1, 2, 3)]
    r = evaluate_test(Test("compare", a="ar", b="grpo", stat="anytime"), spec_with(), runs, no_command)
    assert sorted(r.per_seed) == [1, 2] and r.n == 2
    # each arm is told the seeds it lacks of those the other has, with the command that adds them
    assert r.missing == ["ar (seeds 0)", "grpo (seeds 3)"]
    assert r.commands == ["arctl sweep paper  # ar [0]", "arctl sweep paper  # grpo [3]"]


def test_the_command_for_missing_runs_names_the_seeds_the_other_arms_have():
    from arctl.report.claims_render import missing_command_for

    runs = [view("grpo", s, 0.40) for s in range(8)] + [view("ar-base", s, 0.45) for s in range(4)]
    sweeps = {"priors": ["main-ar-base", "main-grpo"], "ablations": ["ablation-dense", "ablation-vr"]}
    command = missing_command_for(sweeps, "tiny", sharing=["priors"])
    r = evaluate_test(Test("compare", a="ar-base", b="grpo", stat="anytime"), spec_with(), runs, command)
    assert r.n == 4 and r.missing == ["ar-base (seeds 4-7)"]
    assert r.commands == ["arctl sweep priors --scale tiny --seeds 4-7"]  # a sharing sweep: it trains only what is missing
    lone = evaluate_test(Test("compare", a="grpo-dense", b="grpo", stat="anytime"), spec_with(), runs, command)
    # ablations does not share arms: the sweep would train GRPO again in each experiment, so the arm alone
    assert lone.missing == ["grpo-dense"] and lone.commands == ["arctl run ablation-dense --arm grpo-dense --scale tiny --seeds 0-7"]
    assert command("grpo-dense") == "arctl run ablation-dense --arm grpo-dense --scale tiny"  # no seeds known: the spec's own
    assert command("grpo", [1]) == "arctl sweep priors --scale tiny --seeds 1"
    apart = missing_command_for(sweeps, "tiny")  # no sweep shares: the first of the sweeps' experiments with the arm
    assert apart("grpo", [1]) == "arctl run main-grpo --arm grpo --scale tiny --seeds 1"
    # in none of the sweeps read: a run of another experiment would never be read (from a hunt: `arctl run ctx-16k
    # --arm ar-uniform`, named again once it had run); a sweep that has it, and that the report must read it too
    assert apart("ar-linear", [1]) == ("arctl sweep paper --scale tiny --seeds 1 && arctl report --claims priors "
                                       "ablations paper --scale tiny")
    assert missing_command_for({}, "tiny")("ar-linear") == "arctl run main-ar-linear --arm ar-linear --scale tiny"


def test_a_claim_is_decided_by_its_tests():
    runs = [view("grpo", s, 0.40 + 0.01 * s) for s in range(3)] + [view("ar", s, 0.45 + 0.011 * s) for s in range(3)]
    good = Test("compare", a="ar", b="grpo", stat="anytime")
    bad = Test("compare", a="ar", b="grpo", stat="anytime", direction="less")
    unknown = Test("compare", a="ar-base", b="grpo", stat="anytime")
    assert check_claims(spec_with(good), runs, no_command)[0].verdict == HOLDS
    assert check_claims(spec_with(good, bad), runs, no_command)[0].verdict == FAILS
    assert check_claims(spec_with(good, unknown), runs, no_command)[0].verdict == INCONCLUSIVE


def test_band_and_converge_statistics_by_hand():
    acc = {10: 0.1, 20: 0.2, 30: 0.3, 40: 0.4}
    assert run_stat(STATS["acc_low"], view("a", 0, 0.5, acc=acc).final) == pytest.approx(0.1)
    assert run_stat(STATS["acc_high"], view("a", 0, 0.5, acc=acc).final) == pytest.approx(0.4)
    assert math.isnan(run_stat(STATS["acc_low"], view("a", 0, 0.5).final))  # not logged
    # three priors: far apart at the smallest budget, together at the largest
    runs = []
    for s in range(3):
        for i, arm in enumerate(("base", "linear", "uniform")):
            runs.append(view(arm, s, 0.5, acc={10: 0.1 + 0.05 * i * (1 + 0.1 * s), 40: 0.6 + 0.001 * i}))
    r = evaluate_test(Test("converge", a="uniform", arms=("base", "linear"), low="acc_low", high="acc_high"),
                      spec_with(), runs, no_command)
    # uniform's lead per seed: mean of (0.10, 0.05) x (1 + 0.1 s) at the smallest budget, (0.002, 0.001) at the largest
    assert r.verdict == HOLDS and r.mean == pytest.approx(0.075 * 1.1 - 0.0015)


def test_converge_is_unbiased_where_the_arms_are_equal_and_the_bands_differ_in_noise():
    """From a review: the spread (max - min over the arms) grows with the noise, and the largest budgets'
    evaluations are noisier: with equal arms everywhere it said "fails" (the arms spread apart) in most
    sets of 8 seeds. The signed lead is 0 in expectation: over many sets it says "fails" about as often
    as chance allows."""
    rng = np.random.default_rng(0)
    said = []
    for _ in range(200):
        runs = []
        for s in range(8):
            for arm in ("base", "linear", "uniform"):
                runs.append(view(arm, s, 0.5, acc={10: 0.3 + rng.normal(0, 0.0024), 40: 0.8 + rng.normal(0, 0.0146)}))
        r = evaluate_test(Test("converge", a="uniform", arms=("base", "linear"), low="acc_low", high="acc_high"),
                          spec_with(), runs, no_command)
        said.append(r.verdict)
    assert said.count(FAILS) <= 12, said.count(FAILS)  # a 5% two-sided test: ~5 of 200 on this side


def test_a_band_above_chance_leaves_out_the_budgets_where_the_test_s_runs_are_at_chance(tmp_path):
    chance = Stat("low_above", "band", key="eval/{dataset}/acc@{budget}", band="low", fraction=0.5, above_chance=0.05)
    spec = ClaimsSpec(spec_with().path, ("paper",), {**STATS, "low_above": chance}, spec_with().claims)

    def run(arm, seed, acc):
        v = view(arm, seed, 0.5, acc=acc)
        v.final["eval/toy/chance_acc"] = 0.1
        return v

    # budget 10: both arms at chance (0.1; "a" is 0.14, "b" 0.1: pooled 0.12 < 0.1 + 0.05); 20 and 30
    # above it pooled, although "b" alone is at chance at 20; the band is the lower half of {20, 30, 40}
    # rounded up: {20, 30}, the same budgets for both arms
    accs = {"a": {10: 0.14, 20: 0.3, 30: 0.5, 40: 0.7}, "b": {10: 0.10, 20: 0.1, 30: 0.4, 40: 0.7}}
    runs = [run(arm, s, {b: v + 0.01 * s + (0.003 * s * s if arm == "a" else 0.0) for b, v in acc.items()})
            for s in range(3) for arm, acc in accs.items()]
    r = evaluate_test(Test("compare", a="a", b="b", stat="low_above"), spec, runs, no_command)
    # per seed: a (0.3 + 0.5) / 2 = 0.4, b (0.1 + 0.4) / 2 = 0.25: 0.15 (budget 10 would have cut it),
    # + 0.003 s^2 (0 / 0.003 / 0.012): mean 0.155
    assert r.mean == pytest.approx(0.155) and r.verdict == HOLDS
    assert r.per_seed[0]["a"] == pytest.approx(0.4) and r.per_seed[0]["b"] == pytest.approx(0.25)
    assert "budgets 20, 30 of the 3 above chance + 0.05" in r.note
    # without a logged chance it is 0: every budget counts, the band is {10, 20}
    for v in runs:
        del v.final["eval/toy/chance_acc"]
    r0 = evaluate_test(Test("compare", a="a", b="b", stat="low_above"), spec, runs, no_command)
    assert r0.mean == pytest.approx((0.14 + 0.3) / 2 - (0.1 + 0.1) / 2 + 0.005)
    # every budget at chance: not testable here, said plainly; the claim is not decided by it
    flat = [run(arm, s, {10: 0.1, 20: 0.11, 30: 0.12, 40: 0.1}) for s in range(3) for arm in ("a", "b")]
    r = evaluate_test(Test("compare", a="a", b="b", stat="low_above"), spec, flat, no_command)
    assert r.verdict == NOT_TESTABLE and "not testable here" in r.note and "above chance" in r.note
    # a margin outside [0, 1), or on a statistic that is not a band, is refused by the claims file
    from arctl.report.errors import ReportError

    for field in ("{kind: band, key: 'eval/{dataset}/k@{budget}', above_chance: 2}",
                  "{kind: final, key: 'eval/{dataset}/k', above_chance: 0.1}"):
        path = tmp_path / "claims.yaml"
        path.write_text(f"kind: claims\nstatistics: {{x: {field}}}\nclaims: [{{title: t, tests: [{{kind: sign, arms: [a], stat: x}}]}}]\n")
        with pytest.raises(ReportError, match="above_chance"):
            load_claims(path)


def test_the_bound_is_checked_at_every_evaluation():
    ok = {10: {"eval/toy/anytime_acc": 0.4, "eval/toy/final_acc": 0.5}, 20: {"eval/toy/anytime_acc": 0.5,
                                                                              "eval/toy/final_acc": 0.6}}
    runs = [view("grpo", 0, 0.5, evals=ok), view("grpo", 1, 0.5, evals=ok)]
    test = Test("bound", arms=("grpo",))
    r = evaluate_test(test, spec_with(), runs, no_command)
    assert r.verdict == HOLDS and r.n == 4 and r.mean == 0
    # J_anytime above J (a summary policy that does worse with more thinking) at one evaluation
    bad = {**ok, 30: {"eval/toy/anytime_acc": 0.6, "eval/toy/final_acc": 0.55}}
    r = evaluate_test(test, spec_with(), [view("grpo", 0, 0.5, evals=bad)], no_command)
    assert r.verdict == FAILS and r.mean == 1 and r.per_seed[0] == {"checked": 3, "violations": 1}
    # J above J_anytime / P_m (impossible with r >= 0: a logging bug) also fails
    worse = {10: {"eval/toy/anytime_acc": 0.1, "eval/toy/final_acc": 0.5}}  # 0.1 * 4 < 0.5
    assert evaluate_test(test, spec_with(), [view("grpo", 0, 0.5, evals=worse)], no_command).verdict == FAILS


def test_the_bound_leaves_out_a_budget_forced_evaluation():
    """From a hunt: claim 8 "failed" on the baselines sweep's runs, 69 of 308 evaluations, every one of them
    `eval/<ds>-forced` (s1 budget forcing, not monotone in the budget: its final accuracy may sit below its
    mean over the budgets). That is another kind of evaluation, left out of every statistic and of the bound."""
    forced = {step: {"eval/toy/anytime_acc": 0.4, "eval/toy/final_acc": 0.5, "eval/toy/grid_anytime_acc": 0.4,
                     "eval/toy-forced/anytime_acc": 0.6, "eval/toy-forced/final_acc": 0.45,
                     "eval/toy-forced/grid_anytime_acc": 0.6} for step in (10, 20)}
    r = evaluate_test(Test("bound", arms=("grpo",)), spec_with(), [view("grpo", 0, 0.5, evals=forced)], no_command)
    assert r.verdict == HOLDS and r.per_seed[0] == {"checked": 4, "violations": 0}, r.note  # toy's two, twice
    assert "4 evaluations checked, 0 violate it" in r.note


def test_the_project_claims_file_states_the_eight_claims():
    spec = load_claims()
    assert any(c.preconditions for c in spec.claims)  # claim 7 needs corr(V1, R) > 0 at the start
    assert [c.id for c in spec.claims] == [str(i) for i in range(1, 9)]
    arms = {a for c in spec.claims for t in c.tests for a in t.all_arms()}
    from arctl.compose.experiment import list_experiments, load_experiment

    defined = {a for e in list_experiments() for a in load_experiment(e).arms}
    assert arms <= defined, arms - defined  # every arm a claim needs is an arm of some experiment
    from arctl.compose.sweep import load_sweep

    swept = {a for s in spec.sweeps for e in load_sweep(s).experiments for a in load_experiment(e).arms}
    assert arms <= swept, arms - swept  # and the default sweep produces all of them


def test_a_broken_claims_file_is_one_error(tmp_path):
    from arctl.report.errors import ReportError

    path = tmp_path / "claims.yaml"
    path.write_text("kind: claims\nstatistics: {x: {kind: final, key: 'eval/{dataset}/k'}}\n"
                    "claims: [{title: t, tests: [{kind: compare, a: x, b: y, stat: nope}]}]\n")
    with pytest.raises(ReportError, match="unknown statistic 'nope'"):
        load_claims(path)
    # a top-level setting the claims do not read (the level is fixed: 95% intervals, Holm at 5%) is
    # refused, not silently ignored
    path.write_text("kind: claims\nconfidence: 0.9\nstatistics: {x: {kind: final, key: 'eval/{dataset}/k'}}\n"
                    "claims: [{title: t, tests: [{kind: sign, arms: [a], stat: x}]}]\n")
    with pytest.raises(ReportError, match=r"top level: unknown field\(s\) \['confidence'\]"):
        load_claims(path)
    # an arm compared with itself (a difference of 0 by construction), and two claims of one id (a report names a
    # claim by its id), from a hunt: both were accepted
    stat = "statistics: {x: {kind: final, key: 'eval/{dataset}/anytime_acc'}}\n"
    path.write_text("kind: claims\n" + stat + "claims: [{title: t, tests: [{kind: compare, a: g, b: g, stat: x}]}]\n")
    with pytest.raises(ReportError, match=r"claims\[0\]\.tests\[0\]: compares arm 'g' with itself"):
        load_claims(path)
    path.write_text("kind: claims\n" + stat + "claims: [{id: 2, title: t, tests: [{kind: sign, arms: [a], stat: x}]},"
                    " {id: 2, title: u, tests: [{kind: sign, arms: [b], stat: x}]}]\n")
    with pytest.raises(ReportError, match=r"claims\[1\]\.id: id '2' is another claim's too"):
        load_claims(path)


class _Structure(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.sections, self.tests, self.imgs, self.external = set(), [], [], [], []
        self.seed_tables, self.cells = [], []  # each test's per-seed table (rows of cell texts); the rows' cells
        self._in_seeds = self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("class") == "seeds":
            self._in_seeds = []
            self.seed_tables.append(self._in_seeds)
        elif tag == "tr" and self._in_seeds is not None:
            self._row = []
            self._in_seeds.append(self._row)
        elif tag in ("td", "th") and self._in_seeds is not None:
            self._cell = []
            self._row.append(self._cell)
        elif tag == "td" and self.tests and self._in_seeds is None:
            self._cell = []
            self.cells.append(self._cell)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "section":
            self.sections.append(a)
        if tag == "tr" and a.get("class") == "test":
            self.tests.append(a["data-verdict"])
        if tag == "img":
            self.imgs.append(a["src"])
        for key in ("src", "href"):
            v = a.get(key)
            if v and not (v.startswith("#") or v.startswith("data:image/png;base64,")):
                self.external.append(v)
        if tag in ("script", "link"):
            self.external.append(tag)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag == "table" and self._in_seeds is not None:
            for row in self._in_seeds:
                row[:] = ["".join(c) for c in row]
            self._in_seeds = None
        elif tag in ("td", "th"):
            self._cell = None


def test_the_command_on_a_workspace_of_real_runs(workspace, tmp_path):
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", "--claims", "priors", "ablations", "--scale", "tiny", "--workdir",
                              str(workspace), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    claims = {c["id"]: c for c in doc["claims"]}
    # the fixture's accuracies: arm base + 0.01 * seed + ...: AR-uniform is 0.06 above GRPO on both seeds
    uniform = next(t for t in claims["1"]["tests"] if t["label"].startswith("AR-uniform > GRPO: anytime"))
    # two seeds that agree to the last bit decide nothing (a t statistic of mean / 0); the sign test
    # over the claim's 6 tests needs 8 seeds on one side
    assert uniform["verdict"] == INCONCLUSIVE and uniform["n"] == 2 and uniform["mean"] == pytest.approx(0.06, abs=1e-6)
    assert "exact sign test" in uniform["note"] and uniform["seeds_needed"] == 8
    base = claims["3"]["tests"][0]
    assert base["verdict"] == INCONCLUSIVE and base["n"] == 1 and "at least 3" in base["note"]
    lp = next(t for t in claims["4"]["tests"] if "length_penalty_v1" in t["label"])
    assert lp["missing"] == ["grpo-lp-v1"] and lp["commands"] == [f"arctl run ablation-dense --arm grpo-lp-v1 --scale tiny --seeds 0,1 --workdir {workspace}"]
    assert base["missing"] == ["ar-base (seeds 1)"] and base["commands"] == [f"arctl run main-ar-base --arm ar-base --scale tiny --seeds 1 --workdir {workspace}"]
    assert claims["8"]["verdict"] == HOLDS  # accuracy rises with the budget in the fixture
    assert "sanity check of the logged numbers, not evidence" in claims["8"]["tests"][0]["note"]
    html_text = (out / "claims.html").read_text()
    parser = _Structure()
    parser.feed(html_text)
    assert {"meta", "summary", "claims", "runs", "curves"} <= parser.ids
    for arm, curve in doc["curves"].items():  # every run's final accuracy per budget and its training curve
        assert curve["budget"] and all(seed_curve and all(0 <= a <= 1 for a in seed_curve.values())
                                       for seed_curve in curve["budget"].values()), arm
        assert all(list(map(int, c)) == sorted(map(int, c)) for c in curve["train"].values()), arm
    assert [s["id"] for s in parser.sections] == [f"claim-{i}" for i in range(1, 9)]
    assert [s["data-verdict"] for s in parser.sections] == [c["verdict"] for c in doc["claims"]]
    assert len(parser.tests) == sum(len(c["tests"]) for c in doc["claims"])
    # each test's seeds, one line each: a compare test's two arms by name and their difference
    tests = [t for c in doc["claims"] for t in c["tests"]]
    assert len(parser.seed_tables) == sum(bool(t["per_seed"]) for t in tests)
    shown = parser.seed_tables[[t for t in tests if t["per_seed"]].index(uniform)]
    assert shown == [["seed", "AR-uniform", "GRPO", "diff"]] + [
        [f"s{s}", f"{v['a']:.3f}", f"{v['b']:.3f}", f"{v['value']:+.3f}"] for s, v in sorted(uniform["per_seed"].items())]
    notes = [n for n in map("".join, parser.cells) if "grpo-lp-v1" in n]
    assert notes and notes[0].startswith("Missing runs: grpo-lp-v1 — run arctl run ablation-dense")  # said once
    partly = [n for n in map("".join, parser.cells) if "Missing runs: ar-base (seeds 1)" in n]
    assert partly and not any(n.startswith("Missing runs") for n in partly)  # a seed missing: its note stays
    assert parser.imgs and not parser.external  # self-contained: figures inline, nothing fetched
    assert doc["meta"]["load_average"] and doc["meta"]["code_version"].startswith("arctl ")
    assert all(r["config_hash"] for r in doc["runs"])
    table = runner.invoke(app, ["report", "--claims", "priors", "ablations", "--workdir", str(workspace),
                                "--out", str(out)])
    assert table.exit_code == 0 and "holds" in table.stdout and "inconclusive" in table.stdout


def test_claims_usage_mistakes_are_one_error_line(workspace):
    for args in (["report", "--claims", "nosuch"], ["report", "--claims", "--figure", "score_curve"],
                 ["report", "priors"], ["report", "--claims", "priors", "--scale", "huge"]):
        res = runner.invoke(app, [*args, "--workdir", str(workspace)])
        assert res.exit_code == 2 and "Traceback" not in res.output, (args, res.output)
        assert res.output.count("error:") == 1, res.output


def test_numbers_are_nan_safe():
    """A NaN seed is left out, not counted as 0 (from a review: the old check accepted either verdict): the two
    others, .10 and .12, give mean .11 and the 95% t-interval .11 +- 12.7062 * .014142 / sqrt(2) = +-.127062."""
    mean, lo, hi, verdict, _ = interval_verdict([float("nan"), 0.1, 0.12], "greater")
    assert mean == pytest.approx(0.11) and verdict == INCONCLUSIVE
    assert (lo, hi) == (pytest.approx(0.11 - 0.12706, abs=1e-5), pytest.approx(0.11 + 0.12706, abs=1e-5))
    assert seeds_needed(0.0, 0.1) is None and seeds_needed(float("nan"), 0.1) is None
    # three equal values: no spread, judged by the sign test, which needs 6 seeds at 5% (2 * 0.5^6 < 0.05)
    mean, _, _, verdict, needed = interval_verdict([0.1, 0.1, 0.1], "greater")
    assert mean == pytest.approx(0.1) and verdict == INCONCLUSIVE and needed == 6


def test_a_seed_without_a_finite_value_is_left_out_and_said():
    """From a review: a seed whose run logged NaN left the seed count silently (8 seeds run, 7 counted)."""
    runs = [view("grpo", s, 0.40) for s in range(4)]
    runs += [view("ar", s, float("nan") if s == 2 else 0.45 + 0.01 * s) for s in range(4)]
    (claim,) = check_claims(spec_with(Test("compare", a="ar", b="grpo", stat="anytime")), runs, no_command)
    (t,) = claim.tests
    assert t.n == 3 and "seed(s) 2 left out: a run of theirs has no finite value of the statistic" in t.note, t.note
    (claim,) = check_claims(spec_with(Test("compare", a="ar", b="grpo", stat="anytime")),
                            [r for r in runs if r.seed != 2], no_command)
    assert "left out" not in claim.tests[0].note  # nothing to say where every seed counts


def test_two_arm_names_for_one_config_are_one_piece_of_evidence():
    """AR-base and GRPO+BRPO+decoupled are the same config: a second test on the same pair of
    configs and statistic says so and points at the first (counted once), whatever its verdict."""
    from pathlib import Path

    from arctl.report.claims import Claim

    runs = [view("grpo", s, 0.40) for s in range(3)]
    runs += [view("ar-base", s, 0.45 + 0.01 * s) for s in range(3)] + [view("vr-dec", s, 0.45 + 0.01 * s) for s in range(3)]
    for r in runs:
        r.compute_key = "k-grpo" if r.arm == "grpo" else "k-same"
    first, second = (Test("compare", a=a, b="grpo", stat="anytime") for a in ("ar-base", "vr-dec"))
    spec = ClaimsSpec(Path("c.yaml"), (), STATS, (Claim("3", "t", "", (first,)), Claim("6", "t", "", (second,))))
    three, six = check_claims(spec, runs, no_command)
    assert three.tests[0].same_as is None and six.tests[0].same_as == f"3: {three.tests[0].label}"
    assert "counted once" in six.tests[0].note and six.verdict == three.verdict == HOLDS
    # its claim may judge it at another Holm level than the first's: the first's verdict is said beside it
    assert f"holds, Holm-adjusted p = {three.tests[0].p_holm:.3g} there" in six.tests[0].note, six.tests[0].note
    # the summary says claim 6 is no independent verdict
    from arctl.report.claims import repeated_claims
    from arctl.report.claims_render import _repeats_said

    assert repeated_claims([three, six]) == {"6": ["3"]}
    assert _repeats_said([three, six]) == (" Claim 6 (holds) repeats the evidence of claim 3 (the same configs and "
                                           "statistic): not an independent verdict.")
    # written the other way round ("grpo < vr-dec" is "vr-dec > grpo"): the same evidence (from a review: missed)
    flipped = Test("compare", a="grpo", b="vr-dec", stat="anytime", direction="less")
    spec_flipped = ClaimsSpec(Path("c.yaml"), (), STATS, (Claim("3", "t", "", (first,)), Claim("6", "t", "", (flipped,))))
    assert check_claims(spec_flipped, runs, no_command)[1].tests[0].same_as == f"3: {three.tests[0].label}"
    # the other way round but in the same direction ("grpo > vr-dec") is the opposite claim, not a repeat
    opposite = Test("compare", a="grpo", b="vr-dec", stat="anytime", direction="greater")
    spec_opposite = ClaimsSpec(Path("c.yaml"), (), STATS, (Claim("3", "t", "", (first,)), Claim("6", "t", "", (opposite,))))
    assert check_claims(spec_opposite, runs, no_command)[1].tests[0].same_as is None
    for r in runs:  # another config under one of the names: separate evidence
        if r.arm == "vr-dec":
            r.compute_key = "k-other"
    assert check_claims(spec, runs, no_command)[1].tests[0].same_as is None


def test_a_run_shared_with_an_arm_of_another_name_is_that_arm_s_run_too_and_checked_once():
    """`arctl sweep paper` trains AR-base once and it serves ablation-vr's grpo-vr-decouple (one
    config, two names; ``serves`` in the runs table): both arms' tests read it, the bound checks
    each evaluation once."""
    import json

    import pandas as pd

    from arctl.report.claims import run_views

    rows = [(rid, step, metric, value) for rid, acc in (("base0", 0.5), ("vr0", 0.4)) for step in (0, 10)
            for metric, value in (("eval/toy/grid_anytime_acc", acc), ("eval/toy/final_acc", 0.6))]
    history = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    runs = pd.DataFrame([
        {"run_id": "base0", "seed": 0, "arm": "ar-base", "experiment": "main-ar-base", "config.eval.grid": "[10, 20]",
         "serves": json.dumps([["ablation-vr", "grpo-vr-decouple"]])},
        {"run_id": "vr0", "seed": 0, "arm": "grpo-vr", "experiment": "ablation-vr", "config.eval.grid": "[10, 20]",
         "serves": ""}])
    views = run_views(history, runs)
    assert sorted((v.run_id, v.experiment, v.arm) for v in views) == [
        ("base0", "ablation-vr", "grpo-vr-decouple"), ("base0", "main-ar-base", "ar-base"),
        ("vr0", "ablation-vr", "grpo-vr")]
    alias = next(v for v in views if v.arm == "grpo-vr-decouple")
    assert alias.final == next(v for v in views if v.arm == "ar-base").final and alias.seed == 0
    vr = evaluate_test(Test("compare", a="grpo-vr-decouple", b="grpo-vr", stat="anytime"), spec_with(), views,
                       no_command)
    assert vr.missing == [] and vr.per_seed[0]["value"] == pytest.approx(0.1)
    bound = evaluate_test(Test("bound", arms=("ar-base", "grpo-vr-decouple", "grpo-vr")), spec_with(), views,
                          no_command)
    assert bound.n == 4 and bound.per_seed[0] == {"checked": 4, "violations": 0}  # 2 runs x 2 evaluations
    for broken in ("", float("nan"), "{not json", json.dumps([["only-one"]])):  # serves nothing
        runs.loc[0, "serves"] = broken
        assert sorted(v.arm for v in run_views(history, runs)) == ["ar-base", "grpo-vr"]
    # a shared.json that says more than the config (stale, edited): the cell it names is composed and
    # compared; where the run is not that cell, it is said and not read (from a review of the statistics)
    runs.loc[0, "serves"] = json.dumps([["ablation-vr", "grpo-vr-decouple"], ["ablation-vr", "grpo-vr"]])
    runs["config.summary.decoupled"] = [True, False]
    cells = {("ablation-vr", "grpo-vr-decouple"): {"arm": "grpo-vr-decouple", "summary.decoupled": True},
             ("main-ar-base", "ar-base"): {"arm": "ar-base", "summary.decoupled": True},
             ("ablation-vr", "grpo-vr"): {"arm": "grpo-vr", "summary.decoupled": False}}
    said: list[str] = []
    views = run_views(history, runs, compose=lambda e, a, seed, scale: cells[(e, a)], warnings=said)
    assert sorted((v.run_id, v.arm) for v in views) == [("base0", "ar-base"), ("base0", "grpo-vr-decouple"),
                                                        ("vr0", "grpo-vr")]
    assert said == ["run base0: its shared.json says it serves ablation-vr/grpo-vr, but its config differs from that "
                    "cell's in summary.decoupled: not read as that arm's run (run `arctl sweep` to train the cell)"]


def test_the_claim_figure_has_one_panel_per_unit_and_shades_the_claimed_side():
    """Claim 4's tests mix accuracy and token differences: each unit gets its own panel (a token
    difference of 20 no longer flattens an accuracy difference of .02), and the claimed side of 0
    is shaded per test (greater: right of 0; less: left)."""
    from arctl.report.claims import ClaimResult, TestResult
    from arctl.report.claims_render import claim_figure

    def test(label, unit, direction, values):
        mean = float(np.mean(values))
        return TestResult("compare", label, ["a", "b"], "s", direction, {i: {"value": v} for i, v in enumerate(values)},
                          len(values), mean, mean - 0.01, mean + 0.01, HOLDS, unit=unit)

    result = ClaimResult("4", "t", "p", HOLDS, [
        test("dense > GRPO: anytime", "accuracy", "greater", [0.02, 0.03]),
        test("dense < GRPO: thinking", "thinking tokens", "less", [-20.0, -25.0]),
        test("lp < GRPO: final", "accuracy", "less", [-0.01, -0.02]),
    ])
    fig = claim_figure(result)
    try:
        acc, tokens = fig.axes
        # each dot is a paired difference a - b, not an accuracy (from a hunt: the axis read "accuracy: per seed")
        assert acc.get_xlabel().startswith("difference A − B (accuracy)\nper seed (dots), mean (diamond)")
        assert tokens.get_xlabel().startswith("difference A − B (thinking tokens)\n")
        assert [t.get_text() for t in acc.get_yticklabels()] == ["lp < GRPO: final", "dense > GRPO: anytime"]
        assert acc.get_xlim()[1] < 1 and tokens.get_xlim()[0] < -25  # each axis sized to its own numbers
        from matplotlib.collections import PathCollection, PolyCollection

        bands = [c.get_paths()[0].vertices for c in acc.collections
                 if isinstance(c, PolyCollection) and not isinstance(c, PathCollection)]
        shaded = {round(float(np.mean(v[:, 1]))): v[:, 0] for v in bands}  # row (y) -> the band's x extent
        assert len(bands) == 2 and min(shaded[1]) >= 0 < max(shaded[1]) and max(shaded[0]) <= 0 > min(shaded[0])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert claim_figure(ClaimResult("8", "t", "p", HOLDS, [])) is None


def test_a_claim_figure_says_what_each_dot_is_and_cuts_a_label_with_an_ellipsis():
    """From a hunt: a test's label was cut at 3 lines without a mark (claim 2's converge test lost "of the
    budgets"), and the axis called every dot an accuracy. Every label of the project's claims file is shown
    whole; a longer one ends with "…"; the axis says per kind what a seed's number is."""
    from arctl.report.claims import ClaimResult, TestResult, _test_label
    from arctl.report.claims_render import TICK_LINES, axis_label, claim_figure, tick_label

    spec = load_claims()
    labels = [_test_label(t, spec) for c in spec.claims for t in c.tests if t.kind != "bound"]
    converge = next(_test_label(t, spec) for c in spec.claims for t in c.tests if t.kind == "converge")
    assert converge.endswith("of the budgets")
    for label in labels:
        shown = tick_label(label)
        assert " ".join(shown.split("\n")) == label and "…" not in shown, shown
    long = "lead of A over B: " + " ".join(f"word{i}" for i in range(60))
    cut = tick_label(long).split("\n")
    assert len(cut) == TICK_LINES and cut[-1].endswith(" …") and long.startswith(" ".join(cut)[:-2])
    assert axis_label(["compare", "compare", "converge"], "accuracy").split("\n")[0] == (
        "difference A − B; lead at the first statistic − lead at the second (accuracy)")
    assert axis_label(["sign"], "correlation").startswith("the statistic (correlation)\n")
    assert axis_label(["compare"], "").startswith("difference A − B (the tested number)\n")
    result = ClaimResult("2", "t", "p", HOLDS, [TestResult("converge", long, ["a", "b"], None, "greater",
                                                           {0: {"value": 0.1}, 1: {"value": 0.2}}, 2, 0.15, 0.1,
                                                           0.2, HOLDS, unit="accuracy")])
    fig = claim_figure(result)
    try:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.get_yticklabels()] == [tick_label(long)]
        assert ax.get_xlabel() == axis_label(["converge"], "accuracy")
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_the_curves_draw_one_config_under_two_names_once_and_label_what_they_plot():
    """From a hunt: the training curve plots ``anytime_acc`` (the mean over eval.budgets) under "anytime accuracy",
    beside tests that read the 32-budget grid's; and AR-base and GRPO+BRPO+decoupled (one config: the same runs)
    were two lines, one hidden under the other. The arms the claims count as one config are drawn once."""
    from arctl.report.claims import CURVE_AXES, arm_curves
    from arctl.report.claims_render import curve_arms, curves_figure
    from arctl.report.specs import arm_label

    def run(arm, seed, a, key):
        v = view(arm, seed, 0.5, acc={8: a, 16: a + 0.1}, evals={0: {"eval/toy/anytime_acc": a}})
        v.compute_key = key
        return v

    views = [run("ar-base", s, 0.3 + 0.01 * s, "k-same") for s in (0, 1)]
    views += [run("grpo-vr-decouple", s, 0.3 + 0.01 * s, "k-same") for s in (0, 1)]
    views += [run("grpo", s, 0.2, "k-grpo") for s in (0, 1)] + [run("grpo-vr", 0, 0.25, "k-vr")]
    curves = arm_curves(views)
    assert curves["grpo-vr-decouple"]["same_config_as"] == "ar-base"
    assert all("same_config_as" not in curves[a] for a in ("ar-base", "grpo", "grpo-vr"))
    assert curve_arms(curves) == {"ar-base": ["ar-base", "grpo-vr-decouple"], "grpo": ["grpo"], "grpo-vr": ["grpo-vr"]}
    fig = curves_figure(curves)
    try:
        by_budget, train = fig.axes
        assert train.get_ylabel() == CURVE_AXES["train"][1] and "eval.budgets" in train.get_ylabel()
        assert by_budget.get_ylabel() == CURVE_AXES["budget"][1]
        # 3 lines (one config once): per line its seeds (2, 2, 1) and a mean
        assert len(train.get_lines()) == (2 + 1) + (2 + 1) + (1 + 1)
        legend = [t.get_text() for t in train.get_legend().get_texts()]
        assert legend == [f"{arm_label('ar-base')} = {arm_label('grpo-vr-decouple')} (one config, 2 seeds)",
                          f"{arm_label('grpo')} (2 seeds)", f"{arm_label('grpo-vr')} (1 seed)"]
        # each arm in its colour of every figure (labels.yaml's colors), not the order it comes in here
        from matplotlib.colors import to_hex

        from arctl.report.style import arm_color

        thick = [ln for ln in train.get_lines() if ln.get_linewidth() > 2]
        assert [to_hex(ln.get_color()) for ln in thick] == [arm_color(a).lower() for a in ("ar-base", "grpo", "grpo-vr")]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    for v in views:  # another config under one of the names: two lines
        if v.arm == "grpo-vr-decouple":
            v.compute_key = "k-other"
    assert "same_config_as" not in arm_curves(views)["grpo-vr-decouple"]


def test_the_curves_beside_the_claims_are_per_arm_and_seed_without_the_forced_evaluation():
    from arctl.report.claims import arm_curves
    from arctl.report.claims_render import curves_figure

    a0 = view("grpo", 0, 0.4, acc={8: 0.2, 16: 0.5}, evals={0: {"eval/toy/anytime_acc": 0.3}, 10: {"eval/toy/anytime_acc": 0.4}})
    a0.final["eval/toy-forced/acc@8"] = 0.9  # s1's forced evaluation: another evaluation, not drawn here
    a0.final["eval/math/acc@8"] = 0.4  # a second dataset: the mean over datasets
    a1 = view("grpo", 1, 0.5, acc={8: 0.3, 16: 0.6}, evals={0: {"eval/toy/anytime_acc": 0.35}})
    b0 = view("ar-uniform", 0, 0.6, acc={8: 0.4, 16: 0.7})
    curves = arm_curves([b0, a1, a0])
    assert list(curves) == ["ar-uniform", "grpo"]
    assert curves["grpo"]["budget"] == {0: {8: pytest.approx(0.3), 16: 0.5}, 1: {8: 0.3, 16: 0.6}}
    assert curves["grpo"]["train"] == {0: {0: 0.3, 10: 0.4}, 1: {0: 0.35}} and curves["ar-uniform"]["train"] == {0: {}}
    fig = curves_figure(curves)
    try:
        by_budget, train = fig.axes
        # per arm: one thin line per seed with data and one thick mean line
        assert len(by_budget.get_lines()) == (1 + 1) + (2 + 1) and len(train.get_lines()) == 2 + 1
        thick = [ln for ln in by_budget.get_lines() if ln.get_linewidth() > 2]
        assert [list(ln.get_ydata()) for ln in thick] == [[0.4, 0.7], [pytest.approx(0.3), pytest.approx(0.55)]]
        assert "2 seeds" in " ".join(t.get_text() for t in train.get_legend().get_texts())
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert curves_figure({"grpo": {"budget": {0: {}}, "train": {0: {}}}}) is None


def test_every_run_shows_its_warm_up_and_machine_where_it_recorded_them(tmp_path):
    """#27: the evidence shows, per run, the warm-up it started from (weights sha256, accuracy at b_m)
    and the kind of machine it trained on, beside its code version; "not recorded" where a run has none."""
    import os

    from wandb_workspace import _write_run

    from arctl.report.claims_render import build_claims_report

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    kind = "AMD EPYC | AVX512 | torch 2.13.0+cpu"
    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-uniform", "ar-uniform")):
        for seed in (0, 1):
            recorded = {"warmup": {"weights_sha256": "24fa32dc" + "0" * 56, "accuracy": 0.73046875},
                        "machine": kind} if seed == 0 else None
            _write_run(ws, experiment, arm, seed, list(range(21)), recorded=recorded)
    report = build_claims_report(sweeps=["priors"], workdir=ws, out_dir=tmp_path / "out", progress=False, processes=1)
    runs = {(u["arm"], u["seed"]): u for u in report.to_json()["runs"]}
    assert runs[("grpo", 0)]["warmup_sha256"].startswith("24fa32dc") and runs[("grpo", 0)]["machine"] == kind
    assert runs[("grpo", 0)]["warmup_accuracy"] == 0.73046875
    assert runs[("ar-uniform", 1)]["warmup_sha256"] is None and runs[("ar-uniform", 1)]["machine"] is None
    md = (tmp_path / "out" / "claims.md").read_text()
    cell = kind.replace("|", "\\|")  # the kind's own bars escaped: one Markdown cell
    assert f"| 24fa32dc0000 (acc 0.730 at b_m) | {cell} |" in md and md.count("| not recorded | not recorded |") == 2
    assert all(line.count("|") - line.count("\\|") == 7 for line in md.splitlines() if line.startswith("| `"))
    page = (tmp_path / "out" / "claims.html").read_text()
    assert "<th>warm-up</th><th>machine</th>" in page and f"<td>{kind}</td>" in page


def test_a_run_that_has_not_finished_is_left_out_and_named(tmp_path):
    """A running (or killed) run's last values are an earlier evaluation's, not the final one's: the
    report leaves it out, says so in a warning, and counts its seed as missing; with only such runs it
    is one error naming them."""
    import os
    import shutil

    import wandb
    from wandb_workspace import _write_run, run_id

    from arctl.report.claims_render import build_claims_report
    from arctl.report.errors import ReportError

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-uniform", "ar-uniform")):
        for seed in (0, 1):
            if (arm, seed) == ("ar-uniform", 1):  # at step 12 of 20, no exit record: still running
                run_dir = _write_run(ws, experiment, arm, seed, list(range(13)), final=False)
                wandb.teardown()
                (path,) = run_dir.rglob("run-*.wandb")
                path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
            else:
                _write_run(ws, experiment, arm, seed, list(range(21)))
    wandb.teardown()
    report = build_claims_report(sweeps=["priors"], workdir=ws, out_dir=tmp_path / "out", progress=False, processes=1)
    doc = report.to_json()
    assert {(u["arm"], u["seed"]) for u in doc["runs"]} == {("grpo", 0), ("grpo", 1), ("ar-uniform", 0)}
    left = [w for w in doc["warnings"] if w.startswith("left out 1 run(s) that have not finished")]
    unfinished_id = run_id("main-ar-uniform", "ar-uniform", 1)
    from arctl.launch.workspace import workdir_arg  # the status command names the workspace the claims read

    assert left and left[0].endswith(f"`arctl status{workdir_arg(ws)}`): {unfinished_id} (running or killed at step 7)")
    uniform = next(t for c in doc["claims"] for t in c["tests"] if t["label"].startswith("AR-uniform > GRPO: anytime"))
    assert uniform["n"] == 1 and uniform["missing"] == ["ar-uniform (seeds 1)"]
    for done in ws.glob("runs/*"):  # only the unfinished run left
        if done.name != unfinished_id:
            shutil.rmtree(done)
    with pytest.raises(ReportError, match=rf"no finished runs of priors .* \(1 not finished: {unfinished_id} "):
        build_claims_report(sweeps=["priors"], workdir=ws, out_dir=tmp_path / "out2", progress=False, processes=1)
    assert not (tmp_path / "out2").exists()


def test_seeds_that_do_not_spread_are_judged_by_the_sign_test_not_by_t_equals_infinity():
    """Tied differences (an accuracy grid at 2-3 seeds, one run under two names) make the t statistic
    mean / 0: never a verdict from 2 seeds; the exact sign test's 2 * 0.5^n instead."""
    from arctl.report.claims import p_value, sign_test_seeds

    def claim_of(n: int, diff: float, *tests: Test):
        runs = [view("grpo", s, 0.40 + 0.01 * s) for s in range(n)] + [view("ar", s, 0.40 + 0.01 * s + diff) for s in range(n)]
        return check_claims(spec_with(Test("compare", a="ar", b="grpo", stat="anytime"), *tests), runs, no_command)[0]

    two = claim_of(2, 0.06)
    t = two.tests[0]
    assert t.verdict == INCONCLUSIVE and two.verdict == INCONCLUSIVE  # was "holds" (p = 0)
    assert t.p_value == pytest.approx(0.5) and "exact sign test" in t.note and t.seeds_needed == 6
    # 6 seeds all on the claimed side: p = 2 / 64 = 0.031 < 0.05 (one test); the other way: fails
    assert claim_of(6, 0.06).verdict == HOLDS and claim_of(6, -0.06).verdict == FAILS
    # in a claim of two tests the first needs p < 0.025: 6 seeds are not enough, 7 are (2 / 128)
    other = Test("compare", a="ar", b="grpo", stat="think_len", direction="less")
    assert claim_of(6, 0.06, other).tests[0].verdict == INCONCLUSIVE and sign_test_seeds(2) == 7
    assert claim_of(7, 0.06, other).tests[0].verdict == HOLDS
    # rounding noise is no spread either: (0.3 - 0.2) and (0.4 - 0.3) differ in the last bit
    assert (0.3 - 0.2) != (0.4 - 0.3) and p_value([0.3 - 0.2, 0.4 - 0.3]) == pytest.approx(0.5)
    # all zeros: p = 1, and the note says the mean is 0 (not "on the other side")
    zero = claim_of(3, 0.0).tests[0]
    assert zero.verdict == INCONCLUSIVE and zero.p_value == 1.0 and "observed mean is 0" in zero.note


def test_the_sign_test_counts_the_seeds_on_each_side_and_rounding_noise_is_on_neither():
    """Found by a review: where seeds did not spread, any nonzero mean got p = 2 * 0.5^n, as if every
    seed were on its side: rounding noise on both sides of 0 (one run under two names, sums in another
    order) held a claim, and tied seeds on the wrong side were told how many more seeds would pass."""
    from arctl.report.claims import p_value, sign_test_p

    noise = [1e-13, -1e-13, 2e-13, 1e-13, 1e-13, -1e-13]
    assert p_value(noise) == 1.0  # was 2 / 64 = 0.031: "holds"
    # the exact two-sided binomial test, by hand: 5 above, 1 below of 6: 2 * (1 + 6) / 64
    assert sign_test_p(5, 1) == pytest.approx(14 / 64) and sign_test_p(6) == pytest.approx(2 / 64)
    assert sign_test_p(3, 3) == 1.0 and sign_test_p(0, 0) == 1.0
    # tied values to rounding, most above 0 and one below: the test counts them
    tied = [2e-12] * 9 + [-1.1e-12]
    assert p_value(tied) == pytest.approx(2 * (1 + 10) / 2 ** 10)

    def claim_of(values, direction="greater"):
        runs = [view("grpo", s, 0.40) for s in range(len(values))]
        runs += [view("ar", s, 0.40 + v) for s, v in enumerate(values)]
        return check_claims(spec_with(Test("compare", a="ar", b="grpo", stat="anytime", direction=direction)),
                            runs, no_command)[0].tests[0]

    rounding = claim_of([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert rounding.verdict == INCONCLUSIVE and rounding.seeds_needed is None and "observed mean is 0" in rounding.note
    # three tied seeds on the wrong side: inconclusive, and no "6 seeds would pass" (6 would fail it)
    wrong = claim_of([-0.06] * 3)
    assert wrong.verdict == INCONCLUSIVE and wrong.seeds_needed is None and "other side of 0" in wrong.note, wrong.note
    assert "3 of 3 seeds above 0" not in wrong.note and "0 of 3 seeds above 0, 3 below" in wrong.note
    right = claim_of([0.06] * 3)
    assert right.verdict == INCONCLUSIVE and right.seeds_needed == 6 and "3 of 3 seeds above 0, 0 below" in right.note
    assert claim_of([-0.06] * 6).verdict == FAILS and claim_of([0.06] * 6).verdict == HOLDS


def test_a_sign_test_over_several_arms_waits_for_every_arm():
    """Found by a review: a sign test over arms [a1, a2] averaged whichever arms had runs, so it was judged
    (and held) with a2 missing; a seed only some arms have averaged another set of arms."""
    test = Test("sign", arms=("a1", "a2"), stat="anytime")
    only_a1 = [view("a1", s, 0.5 + 0.01 * s) for s in range(6)]
    r = check_claims(spec_with(test), only_a1, no_command)[0]
    assert r.verdict == INCONCLUSIVE and r.tests[0].n == 0 and r.tests[0].verdict != HOLDS
    both = only_a1 + [view("a2", s, 0.3) for s in range(4)]  # a2 has seeds 0-3 only
    t = evaluate_test(test, spec_with(test), both, no_command)
    assert sorted(t.per_seed) == [0, 1, 2, 3] and t.per_seed[1]["value"] == pytest.approx((0.51 + 0.3) / 2)
    assert any(m.startswith("a2 (seeds ") for m in t.missing), t.missing


def test_holm_counts_every_declared_test_even_one_without_runs():
    """A claim of 3 tests of which 2 lack runs judges the third at 0.05 / 3, not 0.05."""
    runs = [view("grpo", s, 0.40) for s in range(4)]
    runs += [view("ar", s, 0.40 + [0.05, 0.03, 0.06, 0.02][s]) for s in range(4)]
    one = Test("compare", a="ar", b="grpo", stat="anytime")
    alone = check_claims(spec_with(one), runs, no_command)[0].tests[0]
    assert 0.0167 < alone.p_value < 0.05 and alone.verdict == HOLDS  # p = 0.021
    lacking = [Test("compare", a="ar-linear", b="grpo", stat="anytime"), Test("compare", a="ar-base", b="grpo", stat="anytime")]
    res = check_claims(spec_with(one, *lacking), runs, no_command)[0]
    assert res.tests[0].p_holm == pytest.approx(3 * alone.p_value) and res.tests[0].verdict == INCONCLUSIVE
    assert "over the claim's 3 test(s)" in res.tests[0].note and res.verdict == INCONCLUSIVE


def test_converge_drops_a_seed_where_any_arm_lacks_the_statistic_wherever_it_is_listed():
    """max/min over a list with NaN depend on where the NaN is: the seed is dropped for every position."""
    for gap in ("base", "linear", "uniform"):
        runs = []
        for s in range(3):
            for i, arm in enumerate(("base", "linear", "uniform")):
                acc = {10: 0.1 + 0.05 * i * (1 + 0.1 * s), 40: 0.6 + 0.001 * i}
                runs.append(view(arm, s, 0.5, acc={} if (arm == gap and s == 2) else acc))
        r = evaluate_test(Test("converge", a="uniform", arms=("base", "linear"), low="acc_low", high="acc_high"),
                          spec_with(), runs, no_command)
        assert sorted(r.per_seed) == [0, 1] and r.n == 2, gap
        assert r.mean == pytest.approx(0.075 * (1 + 1.1) / 2 - 0.0015), gap


def test_a_claim_whose_every_test_is_not_testable_is_not_testable():
    from arctl.report.claims import TestResult, claim_verdict

    def result(verdict):
        return TestResult("compare", "t", ("a", "b"), "x", "greater", {}, 0, None, None, None, verdict, None)

    assert claim_verdict([result(NOT_TESTABLE), result(NOT_TESTABLE)]) == NOT_TESTABLE
    assert claim_verdict([result(NOT_TESTABLE), result(INCONCLUSIVE)]) == INCONCLUSIVE
    assert claim_verdict([result(NOT_TESTABLE), result(FAILS)]) == FAILS


def test_a_test_is_significant_exactly_when_its_interval_leaves_zero_out():
    """From a review: the interval took a 3-decimal table of t_{0.975} and the p-value the exact t, so at 8 seeds
    a t between 2.36462 and 2.365 read p < .05 ("holds" or "fails") beside an interval that crossed 0."""
    from arctl.report.claims import p_value
    from arctl.report.stats import mean_ci95

    rng = np.random.default_rng(7)
    base = rng.normal(0.0, 1.0, size=8)
    base = (base - base.mean()) / base.std(ddof=1)  # mean 0, sd 1: t = mean * sqrt(8) / sd
    for t in (2.3646, 2.36465, 2.3648, 2.3649, 2.36499):  # between the exact quantile (2.36462) and the table's
        values = list(base + t / math.sqrt(8))
        mean, half, _ = mean_ci95(values)
        assert (p_value(values) < 0.05) == (abs(float(mean)) > float(half)), t
    for n in range(2, 40):  # and on random samples at every seed count
        for _ in range(20):
            values = list(rng.normal(0.3, 1.0, size=n))
            mean, half, _ = mean_ci95(values)
            p = p_value(values)
            if abs(p - 0.05) > 1e-9:
                assert (p < 0.05) == (abs(float(mean)) > float(half)), (n, values)


def test_the_95_percent_quantile_beyond_the_table_is_exact():
    assert t975(31) == pytest.approx(2.0395, abs=1e-4) and t975(60) == pytest.approx(2.0003, abs=1e-4)
    for df in (31, 45, 120, 1000):
        assert t_cdf(t975(df), df) == pytest.approx(0.975, abs=1e-9)


def test_a_budget_forced_evaluation_is_not_averaged_into_a_statistic():
    """From a review: a run of the baselines sweep (budget forcing on) logs eval/toy-forced/... beside
    eval/toy/...; the claims averaged both, so one arm mixed two kinds of evaluation."""
    final = {"eval/toy/grid_anytime_acc": 0.5, "eval/toy-forced/grid_anytime_acc": 0.7,
             "eval/toy/acc@10": 0.2, "eval/toy-forced/acc@10": 0.9}
    assert run_stat(STATS["anytime"], final) == pytest.approx(0.5)
    assert run_stat(STATS["acc_low"], final) == pytest.approx(0.2)


def test_a_value_undefined_in_the_final_evaluation_leaves_its_budget_out():
    """The run reader now keeps a logged NaN (a diagnostic undefined at a budget: a constant column), where
    it used to give an earlier evaluation's value: a band over the budgets is over the final evaluation's
    defined values, neither NaN nor a stale one."""
    final = {"eval/toy/acc@10": math.nan, "eval/toy/acc@20": 0.2, "eval/toy/acc@30": 0.3, "eval/toy/acc@40": 0.4}
    assert run_stat(STATS["acc_low"], final) == pytest.approx(0.2)  # was NaN: the band was budget 10 alone


def test_seeds_needed_is_not_counted_for_a_mean_on_the_other_side():
    """From a review: claims.json gave 116 seeds for a test whose mean was on the other side of 0, the seeds
    to detect the opposite effect."""
    from arctl.report.claims import check_claims

    runs = [view(arm, s, 0.5 + d) for s, d in enumerate((0.01, -0.03, 0.005, -0.02)) for arm in ("a",)]
    runs += [view("b", s, 0.5) for s in range(4)]
    (result,) = check_claims(spec_with(Test("compare", a="a", b="b", stat="anytime", direction="greater")), runs,
                             no_command)
    (t,) = result.tests
    assert t.mean < 0 and t.verdict == INCONCLUSIVE and t.seeds_needed is None and t.seeds_range is None
    assert "on the other side of 0" in t.note


def test_runs_of_other_configs_at_one_arm_and_seed_are_one_error_not_one_dropped():
    """Found by a review: the tests pair runs by arm and seed and kept the first run id of each, so a
    second config under the same arm and seed (a grid's point, a rerun with an override) was dropped
    without a word. One config run in several experiments is still one run."""
    from arctl.report.claims import one_config_per_arm_seed
    from arctl.report.errors import ReportError

    same = [view("grpo", 0, 0.4), view("grpo", 0, 0.4)]
    same[1].run_id = "other-experiment_grpo_s0_abc"
    for v in same:
        v.compute_key = "k1"
    one_config_per_arm_seed(same)
    same[1].compute_key = "k2"
    with pytest.raises(ReportError, match=r"^arm 'grpo' has 2 runs of other configs at seed 0 .*--where KEY=VALUE$"):
        one_config_per_arm_seed(same)


def test_trend_and_gap_by_hand():
    """From a review: flipping the sign of either statistic passed every test here (only the committed
    evidence, made by this code, noticed). Worked by hand from the definitions in docs/claims.md."""
    acc = {10: 0.1, 20: 0.2, 30: 0.3, 40: 0.4}
    final = {f"eval/toy/acc@{b}": v for b, v in acc.items()}
    final |= {f"eval/toy/forced_acc@{b}": 0.4 for b in acc}
    final |= {f"eval/other/acc@{b}": 2 * v for b, v in acc.items()}  # a second dataset: the mean over both
    trend = Stat("trend", "trend", key="eval/{dataset}/acc@{budget}", fraction=0.25)
    # toy: the highest quarter (40) minus the lowest (10) = .3; other: .8 - .2 = .6; mean .45
    assert run_stat(trend, final) == pytest.approx(0.45)
    gap = Stat("gap", "gap", key_a="eval/{dataset}/acc@{budget}", key_b="eval/{dataset}/forced_acc@{budget}",
               band="high", fraction=0.5)
    # toy only (other has no forced_acc): the highest half {30, 40}: (.3 - .4 + .4 - .4) / 2 = -.05
    assert run_stat(gap, final) == pytest.approx(-0.05)
    assert run_stat(trend, final, {"toy": [10, 20]}) == pytest.approx(0.1)  # toy's band left to 10 and 20


def test_the_chance_level_is_the_highest_any_runs_logged():
    """From a review: every run of the test above logs one chance level, so taking the lowest passed too."""
    from arctl.report.claims import chance_budgets

    stat = Stat("low_above", "band", key="eval/{dataset}/acc@{budget}", band="low", fraction=0.5, above_chance=0.05)
    runs = []
    for arm, chance in (("a", 0.1), ("b", 0.3)):
        for s in range(3):
            v = view(arm, s, 0.5, acc={10: 0.2, 20: 0.4, 30: 0.6})
            v.final["eval/toy/chance_acc"] = chance
            runs.append(v)
    # above max(0.1, 0.3) + 0.05 = 0.35: budgets 20 and 30 (with the lowest level, 0.15: 10 as well)
    assert chance_budgets(stat, runs) == {"toy": [20, 30]}


def test_the_summary_counts_independent_evidence_and_names_repeats_and_sanity_checks():
    """The headline counts each piece of evidence once: a claim whose tests repeat an earlier claim's (the same
    configs under other arm names) and a claim of bound tests only (claim 8: holds of any correct evaluation)
    are named with their verdicts, not counted (a leftover of the 2026-12-04 review: they were counted)."""
    from arctl.report.claims import ClaimResult, TestResult
    from arctl.report.claims_render import summary, summary_text

    def test(kind, verdict, same_as=None):
        return TestResult(kind, "t", ["a", "b"], "anytime", "greater", {}, 3, 0.01, 0.0, 0.02, verdict, same_as=same_as)

    results = [ClaimResult("1", "one", "", HOLDS, [test("compare", HOLDS)]),
               ClaimResult("3", "three", "", HOLDS, [test("compare", HOLDS, same_as="1: t")]),
               ClaimResult("4", "four", "", FAILS, [test("compare", FAILS), test("bound", HOLDS)]),
               ClaimResult("7", "seven", "", INCONCLUSIVE, [test("sign", INCONCLUSIVE)]),
               ClaimResult("8", "eight", "", HOLDS, [test("bound", HOLDS)])]
    s = summary(results)
    assert s["counts"] == {HOLDS: 1, FAILS: 1, INCONCLUSIVE: 1, NOT_TESTABLE: 0}
    assert s["claims_counted"] == ["1", "4", "7"] and s["repeats"] == {"3": ["1"]} and s["sanity_checks"] == {"8": HOLDS}
    text = summary_text(results, 12)
    assert text.startswith("1 hold, 1 fail, 1 inconclusive, 0 not testable here (of 3 independent claims; 12 runs).")
    assert "Claim 3 (holds) repeats the evidence of claim 1" in text and "Claim 8 is a check of the evaluation" in text
    assert f"{HOLDS}, not counted." in text and "Check first" not in text
    # a check that does not hold is read first (from a review: its left side is a statement about the model)
    results[-1] = ClaimResult("8", "eight", "", FAILS, [test("bound", FAILS)])
    assert summary_text(results, 12).startswith("Check first: claim 8, the bound J_anytime <= J <= J_anytime / P_m, ")
    # a claim with a precondition is still recognised as a repeat (a review: preconditions never repeat)
    pre = TestResult("precondition", "p", ["a"], "corr", "greater", {}, 1, 0.3, None, None, HOLDS)
    results[1] = ClaimResult("3", "three", "", HOLDS, [pre, test("compare", HOLDS, same_as="1: t")])
    assert summary(results)["repeats"] == {"3": ["1"]}


def test_a_benchmark_one_run_of_a_seed_lacks_is_left_out_of_both_sides_of_its_difference():
    """From a read-only audit: a run that logged NaN for one benchmark was averaged over the other two, and its
    seed's difference set two benchmarks against three (AR-linear vs GRPO: s1 -0.046 where the same benchmarks
    give +0.067). Worked by hand: per seed the mean over the benchmarks BOTH runs have."""
    def two(arm, seed, toy, other):
        v = view(arm, seed, toy)
        v.final.update({"eval/math/final_acc": other})
        return v

    runs = [two("a", 0, 0.5, 0.9), two("b", 0, 0.4, 0.7),  # s0: (0.6 + 0.9) / 2 - (0.5 + 0.7) / 2 = 0.15
            two("a", 1, 0.5, math.nan), two("b", 1, 0.4, 0.1)]  # s1: toy alone, 0.6 - 0.5 = 0.1 (was 0.6 - 0.3)
    stat = Stat("final", "final", key="eval/{dataset}/final_acc")
    spec = ClaimsSpec(spec_with().path, ("paper",), {**STATS, "final": stat}, spec_with().claims)
    r = evaluate_test(Test("compare", a="a", b="b", stat="final"), spec, runs, no_command)
    assert r.per_seed[0]["value"] == pytest.approx(0.15) and r.per_seed[1]["value"] == pytest.approx(0.1)
    assert r.per_seed[1]["b"] == pytest.approx(0.5) and r.n == 2
    assert "seed(s) 1 compared on the benchmarks and budgets every run of the seed has" in r.note
    # a band: a budget one run lacks moves neither run's band (both over 20, 30, 40's lowest quarter: 20)
    acc_a = {10: math.nan, 20: 0.2, 30: 0.3, 40: 0.4}
    acc_b = {10: 0.05, 20: 0.1, 30: 0.2, 40: 0.3}
    band = [view("a", 0, 0.5, acc=acc_a), view("b", 0, 0.5, acc=acc_b)]
    r = evaluate_test(Test("compare", a="a", b="b", stat="acc_low"), spec_with(), band, no_command)
    assert r.per_seed[0]["a"] == pytest.approx(0.2) and r.per_seed[0]["b"] == pytest.approx(0.1)  # b: was 0.05
    assert "compared on the benchmarks and budgets" in r.note


def test_four_leftovers_of_a_review_of_the_statistics(tmp_path):
    """From a review against scipy/statsmodels: (1) a trend over a dataset defined at one budget was high
    minus low of the same budget, 0, averaged with the other datasets (a trend of 0.4 read 0.2); a trend's
    fraction above 0.5 made every trend 0; (2) an infinite value counted as support, so a pair compared one
    run's two datasets with the other's one; (3) one seed gave 'seeds needed: 3', which is not a power
    computation (and said of a mean on the wrong side)."""
    from arctl.report.claims import paired_stats

    trend = Stat("t", "trend", key="eval/{dataset}/corr_v1@{budget}", fraction=0.25)
    rising = {f"eval/a/corr_v1@{b}": 0.1 * i for i, b in enumerate(range(100, 900, 100))}  # 8 budgets, +0.7 overall
    lone = {"eval/b/corr_v1@256": 0.3, **{f"eval/b/corr_v1@{b}": float("nan") for b in (512, 768)}}
    hi, lo = np.mean([0.6, 0.7]), np.mean([0.0, 0.1])
    assert run_stat(trend, rising) == pytest.approx(hi - lo)
    assert run_stat(trend, {**rising, **lone}) == pytest.approx(hi - lo)  # b has no trend: not a 0 beside a's
    assert math.isnan(run_stat(trend, lone))

    final = Stat("f", "final", key="eval/{dataset}/final_acc")
    values, narrowed = paired_stats(final, [{"eval/d1/final_acc": 0.5, "eval/d2/final_acc": float("inf")},
                                            {"eval/d1/final_acc": 0.4, "eval/d2/final_acc": 0.6}])
    assert values == [pytest.approx(0.5), pytest.approx(0.4)] and narrowed  # d1 only, and said

    assert interval_verdict([0.2], "less") == (0.2, None, None, INCONCLUSIVE, None)
    assert interval_verdict([0.2], "greater")[-1] is None

    path = tmp_path / "claims.yaml"
    for fraction in (0.6, 0.5):  # at 0.5 the bands meet wherever the budgets are odd in number (31: no trend)
        path.write_text("kind: claims\nsweeps: [paper]\nstatistics:\n  t: {kind: trend, key: "
                        f"'eval/{{dataset}}/corr_v1@{{budget}}', fraction: {fraction}}}\nclaims: []\n")
        with pytest.raises(Exception, match=f"a trend's fraction is below 0.5: with {fraction:g} its high and low"):
            load_claims(path)


def test_runs_of_one_config_on_two_machine_kinds_are_one_config_to_the_claims():
    """From a review: the shared-config digest read what a job records about itself in W&B beside its config.yaml
    (the machine kind, the warm-up's time; in verl runs verl's own config with the run's names): two runs of one
    config under two experiments were refused as 'other configs' with no key named."""
    from arctl.report.claims import _compute_key

    base = {"run_id": "x", "config.experiment": "main-grpo", "config.arm": "grpo", "config.seed": 0,
            "config.thinking.lam": 0.5, "config.cluster.mem_gb": 4, "config.scale.mem_gb": 4}
    a = {**base, "recorded": "arctl,machine,warmup", "config.machine": "avx2", "config.warmup.seconds": 180.0,
         "config.arctl.experiment": "main-grpo"}
    b = {**base, "config.experiment": "ablation-dense", "recorded": "arctl,machine,warmup", "config.machine": "avx512",
         "config.warmup.seconds": 200.0, "config.arctl.experiment": "ablation-dense", "config.scale.mem_gb": 8}
    assert _compute_key(a) == _compute_key(b) is not None
    assert _compute_key({**b, "config.thinking.lam": 0.75}) != _compute_key(a)  # what it computes differs
    # without the record of what the job added (a run read from a W&B project, without its config.yaml), the machine
    # does not count either: it is no key of arctl's run config (from a review: such runs were refused)
    assert _compute_key({**a, "recorded": ""}) == _compute_key({**b, "recorded": ""})
