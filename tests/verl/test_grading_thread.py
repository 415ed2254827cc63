"""The agent loop grades on its own thread: a grade that waits (the sympy stage may take its whole
10 s) holds no other tree's generation, the rewards are those of ``leaf_reward``, and a grader that
cannot run still fails the tree."""

from __future__ import annotations

import asyncio
import threading

import pytest

from arctl.algo.deepscaler_grader import StageUnavailable
from arctl.algo.prompts import InsertedTokens
from arctl.algo.verify import GRADERS
from arctl.backends.verl import reward
from arctl.backends.verl.agent_loop import leaf_scorer, rollout_tree

PARAMS = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}


@pytest.fixture(scope="module")
def parts(tokenizer):
    ins = InsertedTokens.from_tokenizer(tokenizer)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    return tokenizer, ins, enc


def _tree(generate, prompt, score, ins, eos):
    return rollout_tree(generate, prompt, [4, 9], 2, 32, ins, eos, dict(PARAMS), score)


def test_a_grade_that_waits_leaves_the_event_loop_serving_another_tree(parts, monkeypatch):
    tok, ins, enc = parts
    prompt_a, prompt_b = enc("Question A:"), enc("Question B:")
    a_grading: asyncio.Event | None = None
    b_served = threading.Event()
    waited: list[bool] = []
    real_grade = reward.grade_leaf

    def grade(text, ground_truth, *, grader, at):
        if ground_truth == "3" and not waited:  # tree A's first grade waits until tree B's thinking is served
            loop.call_soon_threadsafe(a_grading.set)
            waited.append(b_served.wait(timeout=10))
        return real_grade(text, ground_truth, grader=grader, at=at)

    monkeypatch.setattr(reward, "grade_leaf", grade)

    async def generate(prompt, params):
        await asyncio.sleep(0)
        if "stop_token_ids" in params:  # a thinking request
            if prompt == prompt_b:  # B thinks only once A is being graded
                await a_grading.wait()
                b_served.set()
            return enc("Let me think. 1 + 2 is")
        return enc("\\boxed{3}") + [tok.eos_token_id]

    async def main():
        nonlocal loop, a_grading
        loop, a_grading = asyncio.get_running_loop(), asyncio.Event()
        score_a = leaf_scorer(tok, ins.think_end, tok.eos_token_id, "3", "deepscaler")
        score_b = leaf_scorer(tok, ins.think_end, tok.eos_token_id, "4", "deepscaler")
        return await asyncio.gather(_tree(generate, prompt_a, score_a, ins, tok.eos_token_id),
                                    _tree(generate, prompt_b, score_b, ins, tok.eos_token_id))

    loop = None
    tree_a, tree_b = asyncio.run(main())
    assert waited == [True]  # on the event loop's thread it would have waited its 10 s in vain
    assert tree_a.budget_rewards() == [[1.0, 1.0], [1.0, 1.0]]
    assert tree_b.budget_rewards() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("grader", GRADERS)
def test_the_scorer_gives_what_leaf_reward_gives(parts, grader):
    tok, ins, enc = parts
    thinking = enc("Let me think. 1 + 2")
    leaves = [
        (thinking, ins.truncated, enc("\\boxed{3}") + [tok.eos_token_id]),
        (thinking, ins.truncated, enc("\\boxed{4}")),
        (thinking, ins.truncated, enc("</think> \\boxed{3}")),  # a second </think>: 0
        (thinking + [tok.eos_token_id], ins.truncated, enc("\\boxed{3}")),  # cut on EOS: 0
        (thinking, ins.truncated, [10**9]),  # ids that do not decode: 0
        (thinking, ins.truncated, enc("\\boxed{\\frac{6}{2}}")),  # the sympy stage's case
    ]
    score = leaf_scorer(tok, ins.think_end, tok.eos_token_id, "3", grader)

    async def all_of():
        return [await score(*leaf) for leaf in leaves]

    got = asyncio.run(all_of())
    want = [reward.leaf_reward(*leaf, "3", tok, ins.think_end, tok.eos_token_id, grader=grader) for leaf in leaves]
    assert got == want
    assert got[:5] == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_a_grader_that_cannot_run_fails_the_tree_from_the_grading_thread(parts, monkeypatch):
    tok, ins, enc = parts

    def grade(text, ground_truth, *, grader, at):
        assert threading.current_thread() is not threading.main_thread()
        raise StageUnavailable("the authors' grader's sympy stage could not start a worker process")

    monkeypatch.setattr(reward, "grade_leaf", grade)

    async def generate(prompt, params):
        return enc("Let me think.") if "stop_token_ids" in params else enc("\\boxed{3}")

    score = leaf_scorer(tok, ins.think_end, tok.eos_token_id, "3", "deepscaler")
    with pytest.raises(StageUnavailable, match="could not start"):
        asyncio.run(_tree(generate, enc("Q:"), score, ins, tok.eos_token_id))


def test_an_unknown_grader_is_refused_before_anything_is_generated(parts):
    tok, ins, _ = parts
    with pytest.raises(ValueError, match="sympy"):
        leaf_scorer(tok, ins.think_end, tok.eos_token_id, "3", "sympy")
