"""Per-leaf reward: the authors' formatting rule through arctl.algo.verify, under both graders."""

from __future__ import annotations

import pytest

from arctl.algo.prompts import InsertedTokens
from arctl.algo.verify import GRADERS
from arctl.backends.verl.reward import compute_score, ground_truth_of, leaf_reward


@pytest.fixture(params=GRADERS)
def grader(request):
    return request.param


@pytest.fixture(scope="module")
def parts(tokenizer):
    ins = InsertedTokens.from_tokenizer(tokenizer)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    return tokenizer, ins, enc


def test_correct_summary_after_truncated_thinking_scores_1(parts, grader):
    tok, ins, enc = parts
    r = leaf_reward(enc("Let me think. 1 + 2"), ins.truncated, enc("\\boxed{3}") + [tok.eos_token_id], "3", tok,
                    ins.think_end, tok.eos_token_id, grader=grader)
    assert r == 1.0


def test_wrong_answer_scores_0(parts, grader):
    tok, ins, enc = parts
    assert leaf_reward(enc("Let me think."), ins.truncated, enc("\\boxed{2}"), "3", tok, ins.think_end,
                       tok.eos_token_id, grader=grader) == 0.0


def test_finished_thinking_uses_its_own_think_end(parts, grader):
    tok, ins, enc = parts
    thinking = enc("Let me think. 1 + 2 = 3.") + [ins.think_end]
    assert leaf_reward(thinking, ins.finished, enc("\\boxed{3}"), "3", tok, ins.think_end, tok.eos_token_id, grader=grader) == 1.0


def test_a_second_think_end_scores_0(parts, grader):
    tok, ins, enc = parts
    summary = enc("\\boxed{3}") + [ins.think_end]
    assert leaf_reward(enc("Let me think."), ins.truncated, summary, "3", tok, ins.think_end, tok.eos_token_id, grader=grader) == 0.0


def test_thinking_that_ended_with_eos_scores_0(parts, grader):
    tok, ins, enc = parts
    thinking = enc("Let me think.") + [tok.eos_token_id]
    assert leaf_reward(thinking, ins.truncated, enc("\\boxed{3}"), "3", tok, ins.think_end, tok.eos_token_id, grader=grader) == 0.0


def test_missing_header_or_garbage_never_raises(parts, grader):
    tok, ins, enc = parts
    assert leaf_reward(enc("x"), [ins.think_end], enc("\\boxed{3}"), "3", tok, ins.think_end, None, grader=grader) == 0.0
    assert leaf_reward([10**9], ins.truncated, [10**9], "3", tok, ins.think_end, None, grader=grader) == 0.0
    for bad in ([-1], [2**64], [1.5], ["a"], [None]):  # not token ids: the tokenizer or int() refuses them
        assert leaf_reward(enc("x"), ins.truncated, bad, "3", tok, ins.think_end, None, grader=grader) == 0.0


def test_a_tokenizer_that_fails_fails_the_leaf_instead_of_scoring_it_0(parts, grader):
    """A tokenizer error that is not about the ids (e.g. the fast tokenizer's "Already borrowed" when
    another thread holds it) is raised: the tree fails in one line, no wrong reward is trained on."""
    tok, ins, enc = parts

    class Busy:
        def decode(self, ids, skip_special_tokens=False):
            raise RuntimeError("Already borrowed")

    with pytest.raises(RuntimeError, match="Already borrowed"):
        leaf_reward(enc("x"), ins.truncated, enc("\\boxed{3}"), "3", Busy(), ins.think_end, None, grader=grader)


def test_text_rule_for_verls_reward_path(grader):
    text = "Let me think.</think>\n\n**Final Answer**\n\\boxed{\\frac{1}{2}}"
    assert compute_score("aime24", text, "0.5", grader=grader) == 1.0
    assert compute_score("aime24", text.replace("</think>", "</think></think>"), "0.5", grader=grader) == 0.0
    assert ground_truth_of({"style": "rule", "ground_truth": "7"}) == "7" and ground_truth_of(None) is None


def test_an_unknown_grader_is_an_error_not_a_zero(parts):
    tok, ins, enc = parts
    with pytest.raises(ValueError, match="unknown grader 'sympy'"):
        leaf_reward(enc("x"), ins.truncated, enc("\\boxed{3}"), "3", tok, ins.think_end, None, grader="sympy")
    with pytest.raises(ValueError, match="unknown grader"):
        compute_score("aime24", "x</think>", "3", grader="")


def test_the_graders_differ_where_docs_algorithm_md_says(parts):
    """math-verify reads an unreduced fraction and 1/3 to 7 digits as right; the authors' grader does not."""
    tok, ins, enc = parts
    for given, gold in (("\\frac{2}{4}", "\\frac{1}{2}"), ("0.3333333", "\\frac{1}{3}"), ("2, 1", "1, 2")):
        scores = {g: leaf_reward(enc("t"), ins.truncated, enc(f"\\boxed{{{given}}}"), gold, tok, ins.think_end,
                                 tok.eos_token_id, grader=g) for g in GRADERS}
        assert scores == {"math-verify": 1.0, "deepscaler": 0.0}, (given, gold)


ELASTIC_ANSWERS = {  # R1-style solutions after a cut thinking and E1's `</think>`: (text, right under E1's reward)
    "Thus, the answer is \\(\\boxed{5}\\).": 1.0,
    "The sum is 5.\n\n\\[\n\\boxed{5}\n\\]": 1.0,
    "**Final Answer:** \\boxed{5}": 1.0,
    "### Final Answer\n\\boxed{5}": 1.0,
    "**Final Answer**\n\\boxed{5}": 1.0,
    "first \\boxed{5}, then I changed my mind: \\boxed{4}": 0.0,  # the last box is the answer
    "no box at all: 5": 0.0,
}


@pytest.mark.parametrize("text", ELASTIC_ANSWERS, ids=range(len(ELASTIC_ANSWERS)))
def test_an_elastic_solution_is_graded_where_its_reward_reads_the_answer(parts, grader, text):
    """From a review of the data path: with `summary.inserted=think_end` (Elastic's E1 layout) nothing
    inserts the `**Final Answer**` header, and both graders read the answer only in a paragraph starting
    with it: a right `\\boxed{5}` in a solution written any other way scored 0 in training and evaluation.
    DeepScaleR's reward, which E1 trains with, takes the last `\\boxed{}` after `</think>`: so does arctl now
    for that layout (`answer_at`), while the AnytimeReasoner layout keeps the authors' header rule."""
    from arctl.algo.verify import SOLUTION, answer_at

    tok, ins, enc = parts
    e1 = InsertedTokens.from_tokenizer(tok, style="think_end")
    thinking = enc("Let me think. 2 + 3")
    args = (thinking, e1.truncated, enc(text) + [tok.eos_token_id], "5", tok, e1.think_end, tok.eos_token_id)
    assert leaf_reward(*args, grader=grader, at=answer_at("think_end")) == ELASTIC_ANSWERS[text]
    if text != "**Final Answer**\n\\boxed{5}":
        assert leaf_reward(*args, grader=grader) == 0.0  # the header rule, as before
    assert compute_score("x", tok.decode(thinking + list(e1.truncated) + enc(text)), "5", grader=grader,
                         answer_at=SOLUTION) == ELASTIC_ANSWERS[text]


def test_an_unknown_answer_place_is_the_callers_error_not_a_leaf_scored_0(parts, grader):
    tok, ins, enc = parts
    with pytest.raises(ValueError, match="answer place 'boxed' is not one of"):
        leaf_reward(enc("x"), ins.truncated, enc("\\boxed{3}"), "3", tok, ins.think_end, None, grader=grader, at="boxed")
    with pytest.raises(ValueError, match="answer place"):
        compute_score("x", "x</think>\\boxed{3}", "3", grader=grader, answer_at="boxed")


def test_the_elastic_arm_reads_its_answers_as_its_reward_does():
    from arctl.algo.verify import FINAL_ANSWER, SOLUTION
    from arctl.backends.verl.overrides import arctl_settings, verl_overrides
    from arctl.compose import resolve_experiment

    (elastic,) = resolve_experiment("baselines-elastic", scale="paper", seeds=[0])
    (ar,) = resolve_experiment("main-ar-uniform", scale="paper", seeds=[0])
    assert arctl_settings(elastic.config)["answer_at"] == SOLUTION and arctl_settings(ar.config)["answer_at"] == FINAL_ANSWER
    assert f"+reward.custom_reward_function.reward_kwargs.answer_at={SOLUTION}" in verl_overrides(elastic.config)


def test_a_grader_that_fails_on_a_leaf_scores_it_0(monkeypatch):
    """An answer the grader cannot read scores 0 (grade_leaf's promise), whatever the grader raised short of a machine
    that cannot run it. Found by mutation: that path returning 1 passed every test (a wrong answer rewarded)."""
    import arctl.algo.verify as verify
    from arctl.backends.verl.reward import grade_leaf

    def broken(*_args, **_kwargs):
        raise RecursionError("maximum recursion depth exceeded while parsing")

    for grader in GRADERS:
        assert grade_leaf("**Final Answer**\n\\boxed{4}", "4", grader=grader) == 1.0  # the grader as it is
    monkeypatch.setattr(verify, "grade", broken)
    for grader in GRADERS:
        assert grade_leaf("**Final Answer**\n\\boxed{4}", "4", grader=grader) == 0.0
