"""The toy task: generator, reference traces, truncation bookkeeping, verifier (hand-worked)."""

import numpy as np
import pytest

from arctl.backends.tiny import task


def test_hand_worked_problem():
    p = task.Problem((3, 7, 2))
    assert p.answer == 2 and p.prefix_sums == (3, 0, 2)
    assert task.prompt_words(p) == ["a3", "b7", "c2", "?", "<think>"]
    assert task.thinking_words(p, np.random.default_rng(0), 0.0) == [
        "a", "0+3", "3", "b", "3+7", "0", "c", "0+2", "2", "</think>",
    ]
    # every step re-checked when filler_prob = 1
    assert task.thinking_words(p, np.random.default_rng(0), 1.0)[:7] == ["a", "0+3", "3", "chk", "a", "0+3", "3"]


def test_generator_is_seeded_and_difficulty_is_the_number_of_terms():
    a = task.make_problems(np.random.default_rng(5), 200, 2, 9)
    b = task.make_problems(np.random.default_rng(5), 200, 2, 9)
    assert a == b
    assert {len(p.digits) for p in a} == set(range(2, 10))
    with pytest.raises(ValueError, match="min_terms"):
        task.make_problems(np.random.default_rng(0), 1, 3, 2)


def test_every_reference_step_is_a_lookup_of_the_previous_sum():
    rng = np.random.default_rng(1)
    for p in task.make_problems(rng, 50, 2, 20):
        words = task.thinking_words(p, rng, 0.3)
        steps = [w for w in words if "+" in w]
        sums = [int(words[i + 1]) for i, w in enumerate(words) if "+" in w]
        for pair, s in zip(steps, sums):
            prev, digit = map(int, pair.split("+"))
            assert (prev + digit) % 10 == s
        assert sums[-1] == p.answer and words[-1] == "</think>"


def test_steps_done_counts_complete_steps_of_a_prefix():
    p = task.Problem((3, 7, 2))
    words = ["a", "0+3", "3", "chk", "a", "0+3", "3", "b", "3+7", "0", "c", "0+2", "2", "</think>"]
    assert [task.steps_done(p, words[:k]) for k in range(len(words) + 1)] == [
        0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3,
    ]


def test_summary_finishes_remaining_terms_then_answers():
    p = task.Problem((3, 7, 2, 5))
    assert task.summary_words(p, 4, 2) == ["\\boxed{7}", "<eos>"]
    assert task.summary_words(p, 2, 2) == ["c", "0+2", "2", "d", "2+5", "7", "\\boxed{7}", "<eos>"]
    assert task.summary_words(p, 1, 2) == ["b", "3+7", "0", "c", "0+2", "2", "\\boxed{7}", "<eos>"]
    assert task.summary_words(p, 1, 0) == ["\\boxed{7}", "<eos>"]


@pytest.mark.parametrize(
    "summary, score",
    [
        (["\\boxed{2}", "<eos>"], 1.0),
        (["\\boxed{3}", "<eos>"], 0.0),
        (["c", "0+2", "2", "\\boxed{2}"], 1.0),
        (["\\boxed{2}", "\\boxed{5}", "<eos>"], 0.0),  # the last answer wins
        (["\\boxed{5}", "\\boxed{2}"], 1.0),
        (["</think>", "\\boxed{2}"], 0.0),  # a second end of thinking
        ([], 0.0),
        (["<unk>", None, 3], 0.0),  # garbage never raises
    ],
)
def test_verify(summary, score):
    assert task.verify(summary, 2) == score


def test_vocabulary_has_no_duplicates():
    words = task.vocabulary()
    assert len(words) == len(set(words))
