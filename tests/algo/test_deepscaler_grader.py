"""The authors' grader (arctl.algo.deepscaler_grader) against verdicts read off the authors' code.

Every expected value below was produced by the authors' ``math_utils.py`` (AnytimeReasoner's copy of
DeepScaleR's grader) and ``brpo.py``'s ``match_answer_with_ground_truth``, run on the same inputs; arctl
imports none of that code. A local side-by-side run on 24,641 answer pairs (MATH-style answers crossed,
plus random LaTeX fragments) and 6,000 random summaries agreed on every normal form and verdict
(docs/algorithm.md, "The verifier").
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.algo import deepscaler_grader as dg
from arctl.algo.verify import DEEPSCALER, MATH_VERIFY, grade

# (given, gold, the authors' verdict, the stage that gives it)
PAIRS = [
    ('\\frac12', '\\frac{1}{2}', True, 'hendrycks'),
    ('0.5', '\\frac{1}{2}', True, 'hendrycks'),
    ('3/4', '\\frac{3}{4}', True, 'hendrycks'),
    ('\\dfrac{3}{4}', '\\frac34', True, 'hendrycks'),
    ('x=2', '2', True, 'hendrycks'),
    ('y = 2x+1', '2x+1', True, 'hendrycks'),
    ('45^\\circ', '45', True, 'hendrycks'),
    ('10\\%', '10', True, 'hendrycks'),
    ('10%', '10', True, 'sympy'),
    ('5\\text{ cm}', '5', True, 'hendrycks'),
    ('\\text{(A)}', '(A)', True, 'hendrycks'),
    ('\\left( 1, 2 \\right)', '(1,2)', True, 'hendrycks'),
    ('\\sqrt3', '\\sqrt{3}', True, 'hendrycks'),
    ('\\frac{2}{4}', '\\frac{1}{2}', False, 'sympy'),
    ('0.3333333', '\\frac{1}{3}', False, 'sympy'),
    ('2, 1', '1, 2', False, 'sympy'),
    ('\\pm 2', '2, -2', False, 'sympy'),
    ('1,000', '1000', True, 'sympy'),
    ('3 million', '3000000', False, 'sympy'),
    ('2\\sqrt{2}', '\\sqrt{8}', True, 'sympy'),
    ('\\frac{\\sqrt{3}}{2}', '\\frac{\\sqrt3}{2}', True, 'hendrycks'),
    ('\\pi/2', '\\frac{\\pi}{2}', True, 'sympy'),
    ('x^2+1', 'x^{2}+1', True, 'sympy'),
    ('2^{10}', '1024', False, 'sympy'),
    ('(1,2)', '[1,2]', False, 'sympy'),
    ('(1, 2]', '(1,2]', True, 'hendrycks'),
    ('Odd', '\\text{odd}', True, 'sympy'),
    ('12.5\\%', '12.5', True, 'hendrycks'),
    ('5.0', '5', True, 'sympy'),
    ('05', '5', True, 'sympy'),
    ('7 3/4', '\\frac{31}{4}', True, 'sympy'),
    ('2x+1', '1+2x', True, 'sympy'),
    ('x+y+z', 'z+y+x', False, 'sympy'),
    ('\\$5', '5', True, 'hendrycks'),
    ('5 \\text{ dollars}', '5', True, 'hendrycks'),
    ('1/2', '0.50', True, 'sympy'),
    ('6', '2\\cdot 3', False, 'sympy'),
    ('10^{20}', '100000000000000000000', False, 'sympy'),
    ('-\\frac{1}{3}', '-1/3', True, 'sympy'),
    ('\\frac{1}{\\sqrt{2}}', '\\frac{\\sqrt{2}}{2}', True, 'sympy'),
    ('1.5', '\\frac{3}{2}', True, 'sympy'),
    ('e^{2}', 'e^2', True, 'sympy'),
]


@pytest.mark.parametrize(("given_answer", "gold", "verdict", "stage"), PAIRS)
def test_each_pair_gets_the_authors_verdict_from_the_same_stage(given_answer, gold, verdict, stage):
    assert dg.equal_after_hendrycks(given_answer, gold) is (stage == "hendrycks")
    if stage == "sympy":
        assert dg.sympy_equal(given_answer, gold) is verdict


@pytest.mark.parametrize(("answer", "normal"), [
    ("  \\dfrac12 ", "\\frac{1}{2}"), ("k = 3", "3"), (".5", "\\frac{1}{2}"), ("\\left(3\\right)", "(3)"),
    ("3/4", "\\frac{3}{4}"), ("03/4", "03/4"), ("\\text{ 7}", "7"),
    ("10%", "10%"),  # only \\% goes
    ("\\\\\\%%", ""),  # \\% removed twice: the first pass leaves a new one
    ("x\\frac", "x\\frac"), ("\\sqrt", "\\sqrt"),  # a bare \\frac / \\sqrt at the end: given up, as it was
    ("5\\text{ cm}\\text{ m}", "5\\text{ cm}\\text{ m}"),  # two \\text{ } units: given up
])
def test_hendrycks_normal_form(answer, normal):
    assert dg.hendrycks_normal_form(answer) == normal


@pytest.mark.parametrize(("answer", "normal"), [
    ("3 million", "3*10^6"), ("\\text{Odd}", "odd"), ("1,234,567", "1234567"), ("12 hours", "12"),
    ("45^\\circ", "45"), ("\\frac{1}{2}", "1/2"), ("7 3/4", "7+3/4"), ("\\$1.50", "1.50"), ("{5}", "5"),
    ("2.0", "2"), ("1,\\!000", "1000"), ("x = 1 and y = 2", "x=1,y=2"),
])
def test_sympy_normal_form(answer, normal):
    assert dg.sympy_normal_form(answer) == normal


HEAD = "...\n\n...\n\n</think>\n\n"


@pytest.mark.parametrize(("summary", "gold", "authors", "math_verify"), [
    ("**Final Answer**\n\\boxed{5}", "5", 1, 1),
    ("**Final Answer**\nSo \\boxed{4} and then \\boxed{5}", "5", 1, 1),  # the last box
    ("**Final Answer**\n\\boxed{4}\n\n**Final Answer**\n\\boxed{5}", "5", 0, 0),  # the first paragraph
    (" **Final Answer**\n\\boxed{5}", "5", 0, 1),  # the authors do not strip the paragraph
    ("**Final Answer**: \\boxed{5}", "5", 0, 1),  # the header must end its line
    ("**Final Answer**\n\\fbox{5}", "5", 0, 1),
    ("**Final Answer**\n\\boxed 5", "5", 0, 1),
    ("**Final Answer**\n\\boxed {5}", "5", 0, 1),
    ("**Final Answer**\n\\boxed{5", "5", 0, 0),
    ("**Final Answer**\n\\boxed{0.02}", ["0.01", "0.02"], 1, 1),  # alternatives
    ("**Final Answer**\n\\boxed{5}", "\\boxed{5}", 1, 1),  # a boxed gold is unboxed
    ("**Final Answer**\n\\boxed{\\frac12}", 0.5, 1, 1),  # a float gold
    ("**Final Answer**\n\\boxed{5}", " 5 ", 1, 1),
    ("**Final Answer**\n\\boxed{5}", None, 0, 0),
    ("**Final Answer**\n\\boxed{5}", [], 0, 0),
    ("**Final Answer**\n\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", 0, 1),
    ("The answer is \\boxed{5}", "5", 0, 0),
])
def test_whole_summaries_under_both_graders(summary, gold, authors, math_verify):
    text = (HEAD + summary).split("</think>", 1)[1]
    assert grade(text, gold, DEEPSCALER) == authors
    assert grade(text, gold, MATH_VERIFY) == math_verify


def test_stage_two_runs_only_when_stage_one_fails_and_decides_then():
    calls = []

    def stage(given_answer, gold):
        calls.append((given_answer, gold))
        return gold == "b"

    text = "\n\n**Final Answer**\n\\boxed{x}"
    assert dg.grade(text, ["x"], stage) == 1 and calls == []
    assert dg.grade(text, ["a", "b"], stage) == 1 and calls == [("x", "a"), ("x", "b")]
    assert dg.grade(text, ["a"], lambda *_: 1 / 0) == 0  # a stage that fails on an answer scores 0 (the authors')

    def unavailable(*_):
        raise dg.StageUnavailable("no worker")

    with pytest.raises(dg.StageUnavailable):  # a stage that cannot run at all is the machine's error
        dg.grade(text, ["a"], unavailable)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="\\{}()[]^,.=%$ 0123456789abxyzfracsqrtboxed*\nFinal", max_size=60),
       st.text(alphabet="\\{}()[]^,.=%$ 0123456789xfracsqrt", max_size=20))
def test_never_raises_and_says_zero_or_one(noise, gold):
    assert dg.grade("**Final Answer**\n\\boxed{" + noise + "}", gold) in (0, 1)
    assert dg.grade(noise, gold) in (0, 1)
