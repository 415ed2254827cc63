import pytest

from arctl.track import metrics_schema as ms


def test_builders_follow_the_schema():
    assert ms.STEP_KEY == "trainer/global_step"
    assert ms.train_score(8000) == "train/score@8000"
    assert ms.train_adv_var("brpo") == "train/adv_var/brpo"
    assert ms.eval_acc("aime24", 2000) == "eval/aime24/acc@2000"
    assert ms.eval_anytime_acc("amc22") == "eval/amc22/anytime_acc"
    assert ms.eval_final_acc("amc22") == "eval/amc22/final_acc"
    assert ms.eval_think_len("math500") == "eval/math500/think_len"
    assert ms.eval_corr("v2", "aime24", 1000) == "eval/aime24/corr_v2@1000"
    assert ms.eval_nvar("grpo", "aime24", 1000) == "eval/aime24/nvar/grpo@1000"
    assert ms.eval_curve_auc("aime24") == "eval/aime24/curve_auc"
    assert ms.eval_acc_at_frac("aime24", 0.5) == "eval/aime24/acc_at_frac/50"
    assert ms.eval_acc_at_frac("aime24", 0.07) == "eval/aime24/acc_at_frac/7"  # 0.07 * 100 = 7.000000000000001
    assert ms.eval_acc_at_frac("aime24", 1) == "eval/aime24/acc_at_frac/100"


@pytest.mark.parametrize(
    "key, parsed",
    [
        ("eval/aime24/acc@2000", ms.MetricKey("eval", "acc", "aime24", 2000)),
        ("eval/aime24/nvar/brpo@8000", ms.MetricKey("eval", "nvar/brpo", "aime24", 8000)),
        ("eval/amc22/anytime_acc", ms.MetricKey("eval", "anytime_acc", "amc22", None)),
        ("eval/amc22/curve_auc", ms.MetricKey("eval", "curve_auc", "amc22", None)),
        ("eval/amc22/acc_at_frac/25", ms.MetricKey("eval", "acc_at_frac/25", "amc22", None)),
        ("train/score@4000", ms.MetricKey("train", "score", None, 4000)),
        ("train/think_len/mean", ms.MetricKey("train", "think_len/mean", None, None)),
        ("_runtime", None),
    ],
)
def test_parse_metric(key, parsed):
    assert ms.parse_metric(key) == parsed


def test_builders_round_trip_through_the_parser():
    assert ms.parse_metric(ms.eval_corr("v1", "olympiadbench", 250)) == ms.MetricKey(
        "eval", "corr_v1", "olympiadbench", 250
    )
    # no budget: a fraction of the largest budget is not a token count
    assert ms.parse_metric(ms.eval_acc_at_frac("toy", 0.25)) == ms.MetricKey("eval", "acc_at_frac/25", "toy", None)
    assert ms.parse_metric(ms.eval_curve_auc("toy")) == ms.MetricKey("eval", ms.NAME_CURVE_AUC, "toy", None)


@pytest.mark.parametrize(
    "call",
    [
        lambda: ms.train_score(1.5),
        lambda: ms.train_score(-1),
        lambda: ms.eval_acc("aime/24", 100),
        lambda: ms.train_adv_var("gae"),
        lambda: ms.eval_nvar("v2", "aime24", 100),
        lambda: ms.eval_curve_auc("aime/24"),
        lambda: ms.eval_acc_at_frac("aime24", 0.0),
        lambda: ms.eval_acc_at_frac("aime24", 1.5),
        lambda: ms.eval_acc_at_frac("aime24", 0.333),  # not a whole percent: 0.333 and 0.334 would share a key
        lambda: ms.eval_acc_at_frac("aime24", float("nan")),
        lambda: ms.eval_acc_at_frac("aime24", True),
        lambda: ms.eval_acc_at_frac("aime24", "0.5"),
    ],
)
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_datasets_and_budgets_of_keys():
    keys = ["eval/b/acc@200", "eval/a/acc@100", "eval/b/acc@100", "eval/b/final_acc", "train/loss"]
    assert ms.eval_datasets(keys) == ["b", "a"]
    assert ms.budgets_of(keys, "b", "acc") == [100, 200]


def test_anytime_eval_metrics_by_hand():
    acc = {250: 0.1, 500: 0.2, 2000: 0.4, 4000: 0.6, 8000: 0.8}
    out = ms.anytime_eval_metrics("aime24", acc, [2000, 4000, 8000], [250, 500, 2000, 4000, 8000])
    assert out["eval/aime24/anytime_acc"] == pytest.approx((0.4 + 0.6 + 0.8) / 3)
    assert out["eval/aime24/grid_anytime_acc"] == pytest.approx(2.1 / 5)
    assert out["eval/aime24/final_acc"] == 0.8
    # a training-time evaluation that does not cover the grid logs no grid metric
    part = ms.anytime_eval_metrics("aime24", {2000: 0.4, 8000: 0.8}, [2000, 8000], [250, 2000, 8000])
    assert "eval/aime24/grid_anytime_acc" not in part and part["eval/aime24/anytime_acc"] == pytest.approx(0.6)
    # none of the eval budgets evaluated: every evaluated budget counts
    assert ms.anytime_eval_metrics("x", {1: 0.0, 2: 1.0}, [5], None)["eval/x/anytime_acc"] == 0.5
    assert ms.anytime_eval_metrics("x", {}, [1], [1]) == {}
    # only some of them evaluated (a grid of 10 up to 8000 holds 4000 and 8000, not 2000 or 6000): no
    # anytime_acc, rather than a mean over part of the budgets under the same key (found by a review: .75
    # where the four budgets give .625)
    some = ms.anytime_eval_metrics("x", {800 * k: 0.5 if k < 5 else 1.0 for k in range(1, 11)}, [2000, 4000, 6000, 8000],
                                   [800 * k for k in range(1, 11)])
    assert "eval/x/anytime_acc" not in some and some["eval/x/final_acc"] == 1.0 and "eval/x/grid_anytime_acc" in some


def test_curve_summaries_by_hand():
    """curve_auc and acc_at_frac over the grid (arctl.algo.methods.curve: flat at acc(b_1) on
    [0, b_1], trapezoids between grid budgets, area divided by b_m)."""
    acc = {250: 0.1, 500: 0.2, 2000: 0.4, 4000: 0.6, 8000: 0.8}
    grid = [250, 500, 2000, 4000, 8000]
    out = ms.anytime_eval_metrics("aime24", acc, [2000, 4000, 8000], grid, [0.1, 0.25, 0.5, 1.0])
    # 250 * 0.1 + 250 * 0.15 + 1500 * 0.3 + 2000 * 0.5 + 4000 * 0.7 = 25 + 37.5 + 450 + 1000 + 2800
    assert out["eval/aime24/curve_auc"] == pytest.approx(4312.5 / 8000, abs=1e-15)
    assert out["eval/aime24/acc_at_frac/10"] == pytest.approx(0.24, abs=1e-15)  # 800: 0.2 + 300/1500 * 0.2
    assert out["eval/aime24/acc_at_frac/25"] == pytest.approx(0.4, abs=1e-15)  # 2000, a grid budget
    assert out["eval/aime24/acc_at_frac/50"] == pytest.approx(0.6, abs=1e-15)
    assert out["eval/aime24/acc_at_frac/100"] == pytest.approx(0.8, abs=1e-15)
    assert {k for k in out if "acc_at_frac" in k} == {f"eval/aime24/acc_at_frac/{p}" for p in (10, 25, 50, 100)}
    # over the grid only, not every evaluated budget: an extra budget off the grid changes nothing
    extra = ms.anytime_eval_metrics("aime24", {**acc, 1000: 0.0}, [2000, 4000, 8000], grid, [0.1])
    assert extra["eval/aime24/curve_auc"] == out["eval/aime24/curve_auc"]
    assert extra["eval/aime24/acc_at_frac/10"] == out["eval/aime24/acc_at_frac/10"]
    # an evaluation that does not cover the grid logs neither (like grid_anytime_acc)
    part = ms.anytime_eval_metrics("aime24", {2000: 0.4, 8000: 0.8}, [2000, 8000], [250, 2000, 8000], [0.5])
    assert not any(k.endswith("curve_auc") or "acc_at_frac" in k for k in part)
    # no grid: the curve over eval_budgets; (1000 * 0.2 + 1000 * 0.35 + 2000 * 0.65) / 4000
    no_grid = ms.anytime_eval_metrics("x", {1000: 0.2, 2000: 0.5, 4000: 0.8}, [1000, 2000, 4000], None, [0.5])
    assert no_grid["eval/x/curve_auc"] == pytest.approx(1850 / 4000, abs=1e-15)
    assert no_grid["eval/x/acc_at_frac/50"] == pytest.approx(0.5, abs=1e-15)
    # no fractions: the AUC alone; by default the fractions of ACC_FRACTIONS
    assert [k for k in ms.anytime_eval_metrics("x", acc, None, grid, ()) if "curve" in k or "frac" in k] == [
        "eval/x/curve_auc"]
    assert ms.ACC_FRACTIONS == (0.25, 0.5)
    assert sorted(k for k in ms.anytime_eval_metrics("x", acc, None, grid) if "frac" in k) == [
        "eval/x/acc_at_frac/25", "eval/x/acc_at_frac/50"]
    # a constant curve scores its constant
    flat = ms.anytime_eval_metrics("x", dict.fromkeys(grid, 0.3), None, grid, [0.25])
    assert flat["eval/x/curve_auc"] == pytest.approx(0.3) and flat["eval/x/acc_at_frac/25"] == pytest.approx(0.3)
