"""Verdicts of the rule-based verifier on cases stated by hand (from a mutation hunt of arctl/algo/verify.py and
arctl/algo/deepscaler_grader.py: each case here got the wrong verdict from a mutant that every other test passed).

Each case is (the summary or answer, the gold answer, the verdict). Verdicts of the ``deepscaler`` grader are the
authors' (``math_utils.py`` of AnytimeReasoner, read and run on the same input: see the module docstring of
tests/algo/test_deepscaler_grader.py); verdicts of ``math-verify`` are the mathematics."""

from __future__ import annotations

import pytest
from threads import in_worker_thread  # tests/support/threads.py

from arctl.algo.verify import (
    DEEPSCALER,
    FINAL_ANSWER,
    MATH_VERIFY,
    SOLUTION,
    answer_at,
    answers_equivalent,
    grade,
    score_response,
    verify_answer,
)

HEADER = "**Final Answer**\n"



# ------------------------------------------------------------------ math-verify (verl.grader=math-verify)
@pytest.mark.timeout(120)
def test_in_a_worker_thread_a_small_integer_power_is_evaluated():
    """2^{10} = 1024: a power of a number with a small integer exponent is no explosive expression (only exponents
    above 10^4, towers and huge factorials are refused unevaluated)."""
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{2^{10}}", "1024", timeout_s=1) == 1
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{2^{11}}", "1024", timeout_s=1) == 0


@pytest.mark.timeout(120)
def test_an_answer_of_several_ordered_pairs_is_not_too_deep_to_compare():
    """Seven ordered pairs side by side nest 3 brackets deep, not 14: (1/2, 1), ... equals (0.5, 1), ..."""
    pairs = ", ".join(f"({a}, {a + 1})" for a in range(2, 14, 2))
    assert answers_equivalent("(\\frac{1}{2}, 1), " + pairs, "(0.5, 1), " + pairs, timeout_s=30) is True
    assert answers_equivalent("(\\frac{1}{3}, 1), " + pairs, "(0.5, 1), " + pairs, timeout_s=30) is False


@pytest.mark.timeout(120)
def test_in_a_worker_thread_an_answer_too_long_to_parse_still_matches_itself_written_with_other_spaces():
    """x^{11} + ... + x^{1} (11 carets: compared as text only off the main thread) is right when written without
    spaces; the same polynomial with one coefficient changed is not."""
    gold = " + ".join(f"x^{{{k}}}" for k in range(11, 0, -1))
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{" + gold.replace(" ", "") + "}", gold, timeout_s=1) == 1
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{2" + gold.replace(" ", "") + "}", gold, timeout_s=1) == 0


@pytest.mark.timeout(120)
def test_in_a_worker_thread_an_answer_of_ten_powers_is_still_parsed():
    """At most 10 carets are parsed off the main thread: x^{10} + ... + x^{1} in the other order is the same sum."""
    gold = " + ".join(f"x^{{{k}}}" for k in range(10, 0, -1))
    given = " + ".join(f"x^{{{k}}}" for k in range(1, 11))
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{" + given + "}", gold, timeout_s=1) == 1
    assert in_worker_thread(verify_answer, HEADER + "\\boxed{" + given + " + 1}", gold, timeout_s=1) == 0


def test_a_comparison_that_fails_on_an_answer_scores_0_not_a_negative_reward():
    """Malformed input scores 0 (the module's contract): a comparison that raises on one answer gives reward 0."""
    def broken(pred, gold):
        raise ZeroDivisionError

    text = "thinking</think>\n\n" + HEADER + "\\boxed{3}"
    assert score_response(text, "3", grader=MATH_VERIFY, equivalent=broken) == 0
    assert score_response(text, "3", grader=MATH_VERIFY) == 1


# ------------------------------------------------------------------ where the answer is read
@pytest.mark.parametrize("grader", [DEEPSCALER, MATH_VERIFY])
def test_a_long_solution_is_graded_by_its_last_box(grader):
    """``at=solution`` (Elastic Reasoning's reward on the text after </think>): the last \\boxed{} of a solution
    longer than 20,000 characters, written at its end, is its answer; an early box of a wrong answer is not."""
    text = "First guess \\boxed{4}. " + "Checking the cases one by one. " * 800 + "So the answer is \\boxed{5}."
    assert len(text) > 20_000
    assert grade(text, "5", grader, at=SOLUTION) == 1
    assert grade(text, "4", grader, at=SOLUTION) == 0


@pytest.mark.parametrize("grader", [DEEPSCALER, MATH_VERIFY])
def test_the_solution_place_reads_a_box_without_a_final_answer_header(grader):
    """E1's inserted text is ``</think>`` alone (answer place ``solution``): its summary, with no **Final Answer**
    paragraph, is graded by its last box; at ``final_answer`` it has no answer."""
    summary = "\n\nThe sum is 2 + 3, so the answer is $\\boxed{5}$."
    assert answer_at("think_end") == SOLUTION
    assert grade(summary, "5", grader, at=answer_at("think_end")) == 1
    assert grade(summary, "5", grader, at=FINAL_ANSWER) == 0
    response = "thinking</think>" + summary
    assert score_response(response, "5", grader=grader, at=answer_at("think_end")) == 1


# ------------------------------------------------------------------ the authors' grader (verl.grader=deepscaler)
# (the boxed answer, the gold answer, the authors' verdict): each decided by their second stage (sympy), after the
# Hendrycks normaliser found the two different
AUTHORS_STAGE_TWO = [
    # units written as words are dropped (PRM800K's normaliser: degree, day, yard, ... with their plurals)
    ("30 degrees", "30", 1), ("3 days", "3", 1), ("5 yards", "5", 1), ("12 feet", "12", 1), ("31 degrees", "30", 0),
    # an expanded polynomial equals the factored gold (simplify(gold - given) == 0)
    ("x^2+2x+1", "(x+1)^2", 1), ("x^2+2x", "(x+1)^2", 0),
    # LaTeX symbols read as their names: \pi as pi, \cdot and \times as *, \infty as inf
    ("pi/2", "\\frac{\\pi}{2}", 1), ("pi/3", "\\frac{\\pi}{2}", 0),
    ("2\\cdot\\sqrt{3}", "2\\sqrt{3}", 1), ("2 \\times \\sqrt{3}", "2\\sqrt{3}", 1), ("3\\cdot\\sqrt{3}", "2\\sqrt{3}", 0),
    ("-inf", "-\\infty", 1), ("inf", "-\\infty", 0),
    # a mixed number: 2 1/2 is 5/2, however its fraction is written
    ("2\\frac{1}{2}", "\\frac{5}{2}", 1), ("2\\dfrac{1}{2}", "\\frac{5}{2}", 1), ("2\\frac{1}{3}", "\\frac{5}{2}", 0),
    # an interval's brackets are part of it: [1, 2] is not (1, 2]
    ("[1,2]", "(1,2]", 0), ("[1, 2]", "(1, 2]", 0), ("(1,2)", "(1,2]", 0),
    # a tuple is compared element by element: (1/2, 1) is (0.5, 1)
    ("(\\frac{1}{2}, 1)", "(0.5, 1)", 1), ("(\\frac{1}{3}, 1)", "(0.5, 1)", 0),
]


@pytest.mark.parametrize(("given", "gold", "verdict"), AUTHORS_STAGE_TWO)
def test_the_authors_grader_decides_these_in_its_sympy_stage(given, gold, verdict):
    assert grade("\n\n" + HEADER + "\\boxed{" + given + "}", gold, DEEPSCALER) == verdict


@pytest.mark.parametrize("grader", [DEEPSCALER, MATH_VERIFY])
def test_the_solution_place_reads_the_whole_text_under_both_graders(grader):
    """At ``solution`` a **Final Answer** paragraph is no boundary: the last box of the whole text is the answer."""
    text = "\n\n" + HEADER + "\\boxed{4}\n\nWait, I made an error: it is \\boxed{5}."
    assert grade(text, "5", grader, at=SOLUTION) == 1
    assert grade(text, "4", grader, at=SOLUTION) == 0
    assert grade(text, "4", grader, at=FINAL_ANSWER) == 1


# (the boxed answer, the gold answer, the authors' verdict): decided by the Hendrycks normaliser alone (their sympy
# stage finds each pair different)
AUTHORS_STAGE_ONE = [
    # a decimal written without its leading zero, inside braces: {.5 is {0.5
    ("\\{.5, 1\\}", "\\{0.5, 1\\}", 1), ("\\{.5, 2\\}", "\\{0.5, 1\\}", 0),
    # a whole \text{...} answer is unwrapped and stripped before "x = " is dropped
    ("\\text{ x = 3}", "3", 1), ("\\text{ x = 4}", "3", 0),
]


@pytest.mark.parametrize(("given", "gold", "verdict"), AUTHORS_STAGE_ONE)
def test_the_authors_grader_decides_these_in_its_hendrycks_stage(given, gold, verdict):
    def no_stage_two(given_answer, gold_answer):
        return False

    summary = "\n\n" + HEADER + "\\boxed{" + given + "}"
    assert grade(summary, gold, DEEPSCALER, sympy_stage=no_stage_two) == verdict
    assert grade(summary, gold, DEEPSCALER) == verdict
