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
