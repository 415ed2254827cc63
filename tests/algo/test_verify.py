"""Answer extraction, math-verify equivalence (bounded in time, never raising) and the formatting rule."""

import signal

import pytest
from threads import in_worker_thread  # tests/support/threads.py

from arctl.algo.verify import (
    GRADERS,
    answers_equivalent,
    extract_answer,
    format_ok,
    format_ok_ids,
    ground_truth_answer,
    last_boxed,
    score_response,
    stop_eos_ids,
    verify_answer,
)

HEADER = "\n\n**Final Answer**\n"


@pytest.mark.parametrize(
    ("summary", "answer"),
    [
        (HEADER + "\\boxed{3}", "3"),
        (HEADER + "The answer is $\\boxed{ 3 }$.", "3"),
        (HEADER + "\\boxed{1} or rather \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # last box wins
        (HEADER + "\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # nested braces
        ("**Final Answer**\n\\boxed{x^{2}}\n\nlater \\boxed{7}", "x^{2}"),  # only the first paragraph
        ("\\boxed{5}" + HEADER + "no box here", None),  # box outside the paragraph does not count
        ("no header at all \\boxed{5}", None),  # missing header
        (HEADER + "\\boxed{3", None),  # unclosed brace
        (HEADER + "\\boxed 4$", "4"),
        (HEADER + "\\fbox{6}", "6"),
        (None, None),
    ],
)
def test_extract_answer(summary, answer):
    assert extract_answer(summary) == answer


def test_last_boxed_and_ground_truth():
    assert last_boxed("a \\boxed{1} b \\boxed{{2}}") == "{2}"
    assert ground_truth_answer("\\boxed{12}") == "12"
    assert ground_truth_answer(12) == "12"
    assert ground_truth_answer(" $\\frac12$ ") == "\\frac12"
    assert ground_truth_answer(None) is None


@pytest.mark.parametrize(
    ("pred", "gold", "same"),
    [
        ("\\frac{1}{2}", "0.5", True),
        ("0.5", "\\frac{1}{2}", True),
        (" 3 ", "3", True),
        ("\\dfrac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", True),
        ("(1,2)", "(1, 2)", True),
        ("3", "4", False),
        ("\\frac{1}{3}", "0.5", False),
        ("", "3", False),
        (None, "3", False),
        # a percent sign is no part of the answer (the authors' grader removes it): MATH500's "by what
        # percent" problems have gold 10
        ("10\\%", "10", True),
        ("10", "10\\%", True),
        ("10%", "10", True),
        ("11\\%", "10", False),
        ("50\\%", "0.5", False),
    ],
)
def test_answers_equivalent(pred, gold, same):
    assert answers_equivalent(pred, gold) is same


def test_a_list_of_golds_is_a_list_of_acceptable_answers():
    """Minerva's ['0.01', '0.02'] (the authors' grader matches any element)."""
    assert verify_answer(HEADER + "\\boxed{0.01}", ["0.01", "0.02"]) == 1
    assert verify_answer(HEADER + "\\boxed{0.02}", ("0.01", "0.02")) == 1
    assert verify_answer(HEADER + "\\boxed{0.03}", ["0.01", "0.02"]) == 0
    assert verify_answer(HEADER + "\\boxed{4.4 \\times 10^7}", ["4.4e7", "4.4 \\times 10^7"]) == 1
    assert verify_answer(HEADER + "\\boxed{1}", []) == 0


def test_verify_answer_end_to_end():
    assert verify_answer(HEADER + "So $\\boxed{\\frac{1}{2}}$.", "0.5") == 1
    assert verify_answer(HEADER + "\\boxed{ 3 }", "\\boxed{3}") == 1
    assert verify_answer(HEADER + "\\boxed{2}", "3") == 0
    assert verify_answer("\\boxed{3}", "3") == 0  # missing header
    assert verify_answer(HEADER + "\\boxed{2} no wait \\boxed{3}", "3") == 1  # last box wins
    assert verify_answer(HEADER + "\\boxed{3} no wait \\boxed{2}", "3") == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "summary",
    [
        HEADER + "\\boxed{" + "{" * 5000 + "}",  # garbage braces
        HEADER + "\\boxed{9^{9^{9^{9}}}}",  # hangs a naive sympy comparison
        HEADER + "\\boxed{99999999999999999999!}",
        HEADER + "\\boxed{" + "x^" * 2000 + "x}",  # longer than the answer cap
        "\x00\xff" * 100_000 + HEADER + "\\boxed{\x00}",  # binary garbage
        ("lorem ipsum " * 200_000) + HEADER + "\\boxed{2}",  # huge response (2.4 MB)
    ],
)
def test_garbage_and_huge_inputs_score_zero_in_bounded_time(summary):
    assert verify_answer(summary, "1", timeout_s=1) == 0


@pytest.mark.timeout(60)
def test_slow_to_parse_answer_returns_within_the_time_limit():
    # (((...(1)...))) is 1, but 64 levels keep math-verify's parser ~120 s in calls its alarm did not
    # cut (CI timed out on it twice): deeper than 12 levels is compared as a string, in every thread
    summary = HEADER + "\\boxed{" + "(" * 64 + "1" + ")" * 64 + "}"
    assert verify_answer(summary, "1", timeout_s=1) == 0
    assert verify_answer(summary, "2", timeout_s=1) == 0  # never right for a wrong gold answer
    # a shallow nest is parsed (a limit no loaded machine reaches: a cold parse is what this worker may do first)
    assert verify_answer(HEADER + "\\boxed{(((1)))}", "1", timeout_s=30) == 1
    assert verify_answer(summary, "(" * 64 + "1" + ")" * 64) == 1  # the same string still matches



@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("summary", "gold", "score"),
    [
        (HEADER + "\\boxed{\\frac{1}{2}}", "0.5", 1),  # math-verify still works off the main thread
        (HEADER + "\\boxed{0.25}", "\\frac14", 1),
        (HEADER + "\\boxed{2}", "3", 0),
        (HEADER + "\\boxed{9^{9^{9^{9}}}}", "1", 0),  # numeric tower: never evaluated
        (HEADER + "\\boxed{99999999999999999999!}", "1", 0),  # huge factorial: never evaluated
        (HEADER + "\\boxed{9^{99999}}", "1", 0),  # huge integer power
        (HEADER + "\\boxed{" + "(" * 64 + "1" + ")" * 64 + "}", "1", 0),  # too deep to parse quickly
        (HEADER + "\\boxed{" + "x^" * 40 + "x}", "1", 0),  # too many powers
        (HEADER + "\\boxed{" + "1+" * 150 + "1}", "151", 0),  # longer than the no-signal cap
        (HEADER + "\\boxed{ 7 }", "7", 1),  # exact match needs no parsing
    ],
)
def test_worker_threads_run_without_signals_on_bounded_input(summary, gold, score):
    assert in_worker_thread(verify_answer, summary, gold, timeout_s=1) == score


def test_main_thread_handles_what_worker_threads_refuse():
    # the long sum is refused off the main thread but fine with signal timeouts
    assert verify_answer(HEADER + "\\boxed{" + "1+" * 150 + "1}", "151", timeout_s=30) == 1


def test_main_thread_keeps_an_outer_alarm():
    fired = []
    def handler(*args):
        fired.append(1)

    old_handler = signal.signal(signal.SIGALRM, handler)
    old_timer = signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        assert answers_equivalent("\\frac{1}{2}", "0.5", timeout_s=30)  # its own alarm, shorter than the outer
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 90 < remaining <= 100
        assert signal.getsignal(signal.SIGALRM) is handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, *old_timer)
        signal.signal(signal.SIGALRM, old_handler)
    assert not fired


# ------------------------------------------------------------------ formatting rule
def test_format_rule_on_text():
    truncated = "Let me think...\n\n...\n\n</think>" + HEADER + "\\boxed{3}"
    finished = "Let me think.</think>" + HEADER + "\\boxed{3}"
    assert format_ok(truncated) and format_ok(finished)
    assert not format_ok(finished + "</think>")  # a second </think> in the summary
    assert not format_ok("no end of thinking" + HEADER + "\\boxed{3}")
    assert not format_ok("thinking<eos>...\n\n...\n\n</think>" + HEADER + "\\boxed{3}", eos="<eos>")
    assert format_ok(finished + "<eos>", eos="<eos>")  # EOS ending the summary is fine
    for grader in GRADERS:
        assert score_response(truncated, "3", grader=grader) == 1
        assert score_response(finished + "</think>", "3", grader=grader) == 0
        bad = "thinking<eos>...\n\n...\n\n</think>" + HEADER + "\\boxed{3}"
        assert score_response(bad, "3", grader=grader, eos="<eos>") == 0
        assert score_response(None, "3", grader=grader) == 0


def test_format_rule_on_ids():
    END, EOS = 7, 2
    # truncated: thinking has no </think>, the inserted tokens add exactly one
    assert format_ok_ids([5, 6], [9, END, 8, 4], END, EOS)
    # finished: thinking ends with </think>, the summary must not add another
    assert format_ok_ids([5, END], [8, 4], END, EOS)
    assert not format_ok_ids([5, END], [8, END], END, EOS)
    # thinking ended with EOS: scores 0 whatever follows
    assert not format_ok_ids([5, EOS], [9, END, 8], END, EOS)
    # a model with several EOS ids (its generation config's beside the tokenizer's): each one counts
    eos = stop_eos_ids([2, 11], 13)
    assert eos == {2, 11, 13} and stop_eos_ids(11, 13) == {11, 13} and stop_eos_ids(None, 13) == {13}
    assert stop_eos_ids(None, None) == frozenset()
    assert not format_ok_ids([5, 11], [9, END, 8], END, eos) and not format_ok_ids([5, 13], [9, END, 8], END, eos)
    assert format_ok_ids([5, 11], [9, END, 8], END, EOS)  # one id: only it
