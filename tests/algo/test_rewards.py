import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from arctl.algo.rewards import length_penalty


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_none_is_plain_correctness():
    out = length_penalty(torch.tensor([True, False, True]), torch.tensor([10, 20, 30]), 100, "none", 0.2)
    assert out.tolist() == [1.0, 0.0, 1.0]


def test_v1_by_hand():
    # correct: 1 - 0.2 * len / 8000; wrong: 0
    out = length_penalty(torch.tensor([1.0, 1.0, 0.0]), torch.tensor([0, 4000, 8000]), 8000, "v1", alpha=0.2)
    assert out.dtype == torch.float32
    assert out.tolist() == pytest.approx([1.0, 0.9, 0.0])


def test_v2_by_hand_within_groups():
    # group a: correct lengths 10 and 30 -> mean 20, population std 10 -> z = -1, +1; wrong -> 0
    # group b: a single correct response -> z = 0 -> 1 - alpha/2
    correct = torch.tensor([True, True, False, True, False])
    lens = torch.tensor([10, 30, 5, 7, 100])
    out = length_penalty(correct, lens, 8000, "v2", alpha=0.2, index=["a", "a", "a", "b", "b"])
    want = [1 - 0.2 * sigmoid(-1), 1 - 0.2 * sigmoid(1), 0.0, 0.9, 0.0]
    assert out.tolist() == pytest.approx(want, abs=1e-6)


def test_v2_shorter_correct_answers_get_more_reward_and_groups_are_independent():
    correct = torch.ones(6, dtype=torch.bool)
    lens = torch.tensor([1, 2, 3, 100, 200, 300])
    out = length_penalty(correct, lens, 1000, "v2", 0.2, index=torch.tensor([0, 0, 0, 1, 1, 1]))
    assert out[0] > out[1] > out[2]
    # same z-scores in both groups -> same rewards (scale invariance within a group)
    assert out[:3].tolist() == pytest.approx(out[3:].tolist(), abs=1e-6)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([True], [1], 10, "l2"), "unknown length penalty 'l2'"),
        (([True, False], [1], 10, "v1"), "both be \\[N\\]"),
        (([True], [1], 0, "v1"), "max_budget > 0"),
    ],
)
def test_errors(args, match):
    correct, lens, mb, mode = args
    with pytest.raises(ValueError, match=match):
        length_penalty(torch.tensor(correct), torch.tensor(lens), mb, mode, 0.2)


# ------------------------------------------------------------------ slow loop reference


def reference_length_penalty(correct, lens, max_budget, mode, alpha, index):
    out = []
    for i, (ok, n) in enumerate(zip(correct, lens)):
        if not ok:
            out.append(0.0)
        elif mode == "none":
            out.append(1.0)
        elif mode == "v1":
            out.append(1 - alpha * n / max_budget)
        else:
            group = [lens[j] for j in range(len(lens)) if index[j] == index[i] and correct[j]]
            mean = sum(group) / len(group)
            std = (sum((x - mean) ** 2 for x in group) / len(group)) ** 0.5
            out.append(1 - alpha * sigmoid((n - mean) / (std + 1e-6)))
    return out


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_length_penalty_matches_loop_reference(data):
    n = data.draw(st.integers(1, 12))
    correct = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    lens = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    index = data.draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    mode = data.draw(st.sampled_from(["none", "v1", "v2"]))
    alpha = data.draw(st.floats(0.0, 1.0))
    got = length_penalty(torch.tensor(correct, dtype=torch.float64), torch.tensor(lens), 1000, mode, alpha, index)
    want = reference_length_penalty(correct, lens, 1000, mode, alpha, index)
    assert got.tolist() == pytest.approx(want, abs=1e-9)
