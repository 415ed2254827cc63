"""The ``search`` toy task (arctl/backends/tiny/search.py): hand-worked problems and traces, the
generator, slips and checks, the reading of a thinking prefix, the reference summary, the verifier,
and the partial-progress property: a trace cut after more eliminations scores higher in expectation,
exactly (1 - q)/(K - e) + q/K."""

from __future__ import annotations

import numpy as np
import pytest

from arctl.backends.tiny import search as S
from arctl.backends.tiny.tasks import toy_task

P = S.Problem(k=7, c=4, t=9, digits=(3, 8, 5, 2))  # (d*7 + 4) % 10 == 9  <=>  d = 5: item c


def think(problem, rng, slip, check, filler, check_yes=None, check_slip=None, order="sequential"):
    """The reference thinking; a 'yes' checked like a 'no' and checks slipping like tests unless set."""
    return S.thinking_words(problem, rng, slip, check, filler, order=order,
                            check_yes_prob=check if check_yes is None else check_yes,
                            check_slip_prob=slip if check_slip is None else check_slip)


def test_hand_worked_problem_and_trace():
    assert P.answer == "c" and P.passes(5) and not any(P.passes(d) for d in (3, 8, 2))
    assert S.prompt_words(P) == ["mul7", "add4", "tgt9", "a", "3", "b", "8", "c", "5", "d", "2", "?", "<think>"]
    assert S.prompt_words(P, "2")[-3:] == ["?", "2", "<think>"]
    rng = np.random.default_rng(0)
    assert think(P, rng, 0.0, 0.0, 0.0) == [
        "a", "3", "3*7", "1", "1+4", "5", "no",
        "b", "8", "8*7", "6", "6+4", "0", "no",
        "c", "5", "5*7", "5", "5+4", "9", "yes", "</think>",
    ]
    # every test checked, every test followed by filler
    words = think(P, rng, 0.0, 1.0, 1.0)
    assert words[:15] == ["a", "3", "3*7", "1", "1+4", "5", "no", "chk", "3*7", "1", "1+4", "5", "no", "hmm", "b"]
    assert words[-2:] == ["hmm", "</think>"] and words.count("chk") == 3


def test_every_word_is_in_the_vocabulary_and_every_step_a_lookup():
    vocab = set(S.vocabulary())
    rng = np.random.default_rng(3)
    for p in S.make_problems(rng, 200, 2, S.MAX_ITEMS):
        words = S.prompt_words(p) + think(p, rng, 0.0, 0.3, 0.2)
        assert set(words) <= vocab
        for i, w in enumerate(words):
            if "*" in w:
                d, k = map(int, w.split("*"))
                assert int(words[i + 1]) == d * k % 10 and k == p.k
            if "+" in w:
                q, c = map(int, w.split("+"))
                assert int(words[i + 1]) == (q + c) % 10 and c == p.c
        state = S.read_state(p, words)
        assert state.finished and state.found == p.answer  # without slips the search finds the answer
        assert state.tested == S.LABELS[: p.answer_index + 1]


def test_generator_is_seeded_with_one_passing_item_at_a_uniform_position():
    a = S.make_problems(np.random.default_rng(5), 3000, 4, 8)
    assert a == S.make_problems(np.random.default_rng(5), 3000, 4, 8)
    assert {p.size for p in a} == set(range(4, 9))
    for p in a[:300]:
        assert sum(p.passes(d) for d in p.digits) == 1 and p.k in S.MULTIPLIERS
    fourth = [p.answer_index / (p.size - 1) for p in a]
    assert abs(np.mean(fourth) - 0.5) < 0.02  # uniform over positions: mean relative position 1/2
    with pytest.raises(ValueError, match="min_items"):
        S.make_problems(np.random.default_rng(0), 1, 5, 4)
    with pytest.raises(ValueError, match="min_items"):
        S.make_problems(np.random.default_rng(0), 1, 2, S.MAX_ITEMS + 1)


def test_slips_write_wrong_digits_and_a_check_replaces_the_verdict():
    rng = np.random.default_rng(1)
    test = S.computation_words(P, 2, rng, 1.0)  # item c, every result slips
    assert test[0] == "5*7" and test[1] != "5"  # d*k written wrong
    assert test[2] == f"{test[1]}+4" and test[3] != str((int(test[1]) + 4) % 10)  # carried, then wrong again
    assert test[4] == ("yes" if test[3] == "9" else "no")  # the verdict follows what was written
    # a slip that drops the answer, then a check that catches it: the check's verdict stands
    prefix = ["a", "3", "3*7", "1", "1+4", "5", "no", "b", "8", "8*7", "6", "6+4", "0", "no",
              "c", "5", "5*7", "5", "5+4", "3", "no", "chk", "5*7", "5", "5+4", "9", "yes"]
    assert S.read_state(P, prefix[:21]) == S.State(("a", "b", "c"), None, False)
    assert S.read_state(P, prefix) == S.State(("a", "b", "c"), "c", False)
    assert S.read_state(P, prefix + ["</think>", "d"]) == S.State(("a", "b", "c"), "c", True)


@pytest.mark.parametrize("cut,tested", [(0, ()), (6, ()), (7, ("a",)), (13, ("a",)), (14, ("a", "b"))])
def test_a_test_counts_once_its_verdict_is_written(cut, tested):
    words = think(P, np.random.default_rng(0), 0.0, 0.0, 0.0)
    assert S.read_state(P, words[:cut]).tested == tested


def test_the_reference_summary_reads_the_partial_state():
    rng = np.random.default_rng(0)
    found = S.State(("a", "b", "c"), "c", True)
    assert S.summary_words(P, found, rng, 1.0, "sequential") == ["\\boxed{c}", "<eos>"]  # a found item, lazy or not
    midway = S.State(("a",), None, False)
    assert S.summary_words(P, midway, rng, 0.0, "sequential") == ["\\boxed{b}", "<eos>"]  # the first item not yet tested
    lazy = {S.summary_words(P, midway, rng, 1.0, "sequential")[0] for _ in range(200)}
    assert lazy == {S.answer_word(lab) for lab in "abcd"}  # a guess among all items
    done = S.State(("a", "b", "c", "d"), None, True)  # every item out (a slip dropped the answer)
    assert {S.summary_words(P, done, rng, 0.0, "sequential")[0] for _ in range(200)} == {S.answer_word(lab) for lab in "abcd"}


def test_random_order_tests_each_item_once_in_a_seeded_permutation():
    rng = np.random.default_rng(7)
    orders = set()
    for p in S.make_problems(rng, 300, 4, 12):
        seed = int(rng.integers(1 << 30))
        words = think(p, np.random.default_rng(seed), 0.0, 0.0, 0.0, order="random")
        assert words == think(p, np.random.default_rng(seed), 0.0, 0.0, 0.0, order="random")  # seeded
        state = S.read_state(p, words)
        assert state.found == p.answer and state.tested[-1] == p.answer  # ends at the answer, no slips
        assert len(set(state.tested)) == len(state.tested)  # never re-tests an item
        labels = [w for w in words if w in S.LABELS[: p.size]]
        assert labels == list(state.tested)
        if p.size == 12:
            orders.add(state.tested[0])
    assert len(orders) > 6  # the first item tested varies (sequential always starts at 'a')
    with pytest.raises(ValueError, match="search order"):
        think(P, np.random.default_rng(0), 0.0, 0.0, 0.0, order="backwards")


def test_the_answer_is_found_at_a_uniform_place_of_a_random_order_whatever_its_position():
    """Sequential order finds the answer after answer_index + 1 tests on every trace; random order
    after a uniform number in 1..K on each trace, for the same problem (the within-prompt spread
    that makes an earlier budget's score predict a later one's)."""
    p = S.Problem(k=1, c=0, t=5, digits=(5, 0, 1, 2, 3, 4, 6, 7))  # the answer listed first
    tests = [len(S.read_state(p, think(p, np.random.default_rng(i), 0.0, 0.0, 0.0, order="random")).tested)
             for i in range(4000)]
    assert len(S.read_state(p, think(p, np.random.default_rng(0), 0.0, 0.0, 0.0)).tested) == 1
    counts = np.bincount(tests, minlength=9)[1:]
    assert set(tests) == set(range(1, 9)) and np.allclose(counts / 4000, 1 / 8, atol=0.025)


def test_a_yes_and_a_no_are_checked_with_their_own_probability_and_checks_slip_with_theirs():
    rng = np.random.default_rng(0)
    yes_only = think(P, rng, 0.0, 0.0, 0.0, check_yes=1.0)  # only the 'yes' of item c is re-done
    assert yes_only == ["a", "3", "3*7", "1", "1+4", "5", "no", "b", "8", "8*7", "6", "6+4", "0", "no",
                        "c", "5", "5*7", "5", "5+4", "9", "yes", "chk", "5*7", "5", "5+4", "9", "yes", "</think>"]
    assert think(P, rng, 0.0, 1.0, 0.0, check_yes=0.0).count("chk") == 2  # the two 'no's only
    # a check that slips on every digit: it overturns the right 'yes' (9 -> never 9 after a slip)
    # and the search goes on past the answer
    words = think(P, rng, 0.0, 0.0, 0.0, check_yes=1.0, check_slip=1.0)
    state = S.read_state(P, words)
    assert "c" in state.tested and state.found != "c" and words[21] == "chk"
    # a careful check (no slips) after a careless test: every wrong 'yes' is caught
    wrong_yes = right_after = 0
    for i in range(3000):
        p = S.make_problems(np.random.default_rng(i), 1, 8, 8)[0]
        w = think(p, np.random.default_rng(i), 0.3, 0.0, 0.0, check_yes=1.0, check_slip=0.0)
        st = S.read_state(p, w)
        wrong_yes += st.found is not None and st.found != p.answer
        right_after += st.found == p.answer
    assert wrong_yes == 0 and right_after > 0


def test_the_random_order_summary_answers_a_uniform_untested_item():
    rng = np.random.default_rng(0)
    midway = S.State(("c", "a"), None, False)
    picks = [S.summary_words(P, midway, rng, 0.0, "random")[0] for _ in range(400)]
    assert set(picks) == {S.answer_word("b"), S.answer_word("d")}  # never a tested item
    assert 150 < picks.count(S.answer_word("b")) < 250
    assert S.summary_words(P, S.State(("c",), "c", False), rng, 0.0, "random") == ["\\boxed{c}", "<eos>"]


@pytest.mark.parametrize("size", [5, 12])
def test_partial_progress_in_random_order(size):
    """A random-order trace cut after e tests: the reference summary (not lazy) is right with
    probability 1/(K - e) when the answer is not yet found, so the expected score of a cut rises
    with e; estimated over seeded traces of one problem."""
    p = S.Problem(k=1, c=0, t=5, digits=tuple(5 if i == 2 else (i % 5) for i in range(size)))
    rate = []
    for e in range(size - 1):
        hits = n = 0
        for seed in range(1500):
            words = think(p, np.random.default_rng(seed), 0.0, 0.0, 0.0, order="random")
            state = S.read_state(p, words[: 7 * e])
            if state.found is None and len(state.tested) == e:
                n += 1
                hits += S.verify(S.summary_words(p, state, np.random.default_rng(seed), 0.0, "random"), p)
        rate.append(hits / n)
        assert rate[-1] == pytest.approx(1 / (size - e), abs=4 * (1 / (size - e) / n) ** 0.5 + 0.01)
    assert rate[-1] > rate[0]


@pytest.mark.parametrize("summary,score", [
    (["\\boxed{c}", "<eos>"], 1.0),
    (["\\boxed{a}", "\\boxed{c}"], 1.0),  # the last answer wins
    (["\\boxed{c}", "\\boxed{a}", "<eos>"], 0.0),
    (["\\boxed{b}", "<eos>"], 0.0),
    (["c", "<eos>"], 0.0),  # no answer word
    (["</think>", "\\boxed{c}"], 0.0),
    ([], 0.0),
    ([None, 3], 0.0),  # malformed input scores 0, never raises
])
def test_verifier(summary, score):
    assert S.verify(summary, P) == score


@pytest.mark.parametrize("size", [4, 9, 26])
@pytest.mark.parametrize("lazy", [0.0, 0.5, 1.0])
def test_partial_progress_a_cut_after_more_eliminations_scores_higher(size, lazy):
    """Hand-built traces: every position of the answer among ``size`` items, the reference thinking
    (no slips, checks or filler) cut after e tests, the reference summary's expected score computed
    exactly (the lazy guess averaged over its K choices): (1 - q)/(K - e) + q/K when the answer is
    not yet found, rising with e."""
    expected = []
    for e in range(size):
        scores = []
        for j in range(e, size):  # the answer not among the first e items
            p = S.Problem(k=1, c=0, t=5, digits=tuple(5 if i == j else (i % 5) for i in range(size)))
            words = think(p, np.random.default_rng(0), 0.0, 0.0, 0.0)
            state = S.read_state(p, words[: 7 * e])
            assert len(state.tested) == e and state.found is None
            sharp = S.verify(S.summary_words(p, state, np.random.default_rng(0), 0.0, "sequential"), p)
            guess = np.mean([S.verify([S.answer_word(lab)], p) for lab in S.LABELS[:size]])
            scores.append((1 - lazy) * sharp + lazy * guess)
        expected.append(float(np.mean(scores)))
        assert expected[-1] == pytest.approx((1 - lazy) / (size - e) + lazy / size)
    if lazy < 1:
        assert all(b > a for a, b in zip(expected, expected[1:]))


def test_the_task_is_chosen_by_name_with_its_knobs():
    knobs = dict(min_items=4, max_items=8, order="sequential", slip_prob=0.0, check_prob=0.0, check_yes_prob=0.0,
                 check_slip_prob=0.0, filler_prob=0.0, lazy_summary_prob=0.0)
    other = dict(min_terms=2, max_terms=6, filler_prob=0.3, summary_finish_steps=2, summary_continue_prob=0.5)
    toy = toy_task({"name": "search", "search": knobs, "running_sum": other})
    rng = np.random.default_rng(0)
    (p,) = toy.make_problems(rng, 1)
    words = toy.reference_thinking(p, rng)
    assert toy.reference_summary(p, words, True, rng) == [S.answer_word(p.answer), "<eos>"]
    assert toy.verify([S.answer_word(p.answer)], p) == 1.0
    assert toy_task({"name": "running_sum", "search": knobs, "running_sum": other}).name == "running_sum"
    with pytest.raises(ValueError, match="tiny.task.name='sudoku' is not a toy task"):
        toy_task({"name": "sudoku"})
    with pytest.raises(ValueError, match="tiny.task.search.max_terms is not a knob of the 'search' task"):
        toy_task({"name": "search", "search": {**knobs, "max_terms": 3}})
    with pytest.raises(ValueError, match="needs tiny.task.search.slip_prob"):
        toy_task({"name": "search", "search": {k: v for k, v in knobs.items() if k != "slip_prob"}})
    with pytest.raises(ValueError, match="tiny.task.min_items is neither"):
        toy_task({"name": "search", "min_items": 3, "search": knobs})


def test_chance_is_the_accuracy_of_a_uniform_guess_among_a_problem_s_answers():
    knobs = dict(min_items=4, max_items=8, order="sequential", slip_prob=0.0, check_prob=0.0, check_yes_prob=0.0,
                 check_slip_prob=0.0, filler_prob=0.0, lazy_summary_prob=0.0)
    other = dict(min_terms=2, max_terms=6, filler_prob=0.3, summary_finish_steps=2, summary_continue_prob=0.5)
    # by hand: K uniform in {4, ..., 8}: (1/4 + 1/5 + 1/6 + 1/7 + 1/8) / 5 = 0.177
    search = toy_task({"name": "search", "search": knobs, "running_sum": other})
    assert search.chance_accuracy() == pytest.approx((1 / 4 + 1 / 5 + 1 / 6 + 1 / 7 + 1 / 8) / 5)
    running = toy_task({"name": "running_sum", "search": knobs, "running_sum": other})
    assert running.chance_accuracy() == pytest.approx(0.1)
    # and by simulation: the verifier scores a guess among the problem's items (resp. digits)
    rng = np.random.default_rng(7)
    for toy, answers in ((search, lambda p: [S.answer_word(S.LABELS[i]) for i in range(p.size)]),
                         (running, lambda p: [f"\\boxed{{{d}}}" for d in range(10)])):
        problems = toy.make_problems(rng, 20000)
        hits = [toy.verify([str(rng.choice(answers(p))), "<eos>"], p) for p in problems]
        c = toy.chance_accuracy()
        assert abs(np.mean(hits) - c) < 4 * np.sqrt(c * (1 - c) / len(hits)), (toy.name, np.mean(hits), c)
