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


@pytest.mark.parametrize(
    "key, parsed",
    [
        ("eval/aime24/acc@2000", ms.MetricKey("eval", "acc", "aime24", 2000)),
        ("eval/aime24/nvar/brpo@8000", ms.MetricKey("eval", "nvar/brpo", "aime24", 8000)),
        ("eval/amc22/anytime_acc", ms.MetricKey("eval", "anytime_acc", "amc22", None)),
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


@pytest.mark.parametrize(
    "call",
    [
        lambda: ms.train_score(1.5),
        lambda: ms.train_score(-1),
        lambda: ms.eval_acc("aime/24", 100),
        lambda: ms.train_adv_var("gae"),
        lambda: ms.eval_nvar("v2", "aime24", 100),
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
