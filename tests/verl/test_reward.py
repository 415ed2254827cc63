"""Per-leaf reward: the authors' formatting rule through arctl.algo.verify."""

from __future__ import annotations

import pytest

from arctl.algo.prompts import InsertedTokens
from arctl.backends.verl.reward import compute_score, ground_truth_of, leaf_reward


@pytest.fixture(scope="module")
def parts(tokenizer):
    ins = InsertedTokens.from_tokenizer(tokenizer)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    return tokenizer, ins, enc


def test_correct_summary_after_truncated_thinking_scores_1(parts):
    tok, ins, enc = parts
    r = leaf_reward(enc("Let me think. 1 + 2"), ins.truncated, enc("\\boxed{3}") + [tok.eos_token_id], "3", tok,
                    ins.think_end, tok.eos_token_id)
    assert r == 1.0


def test_wrong_answer_scores_0(parts):
    tok, ins, enc = parts
    assert leaf_reward(enc("Let me think."), ins.truncated, enc("\\boxed{2}"), "3", tok, ins.think_end,
                       tok.eos_token_id) == 0.0


def test_finished_thinking_uses_its_own_think_end(parts):
    tok, ins, enc = parts
    thinking = enc("Let me think. 1 + 2 = 3.") + [ins.think_end]
    assert leaf_reward(thinking, ins.finished, enc("\\boxed{3}"), "3", tok, ins.think_end, tok.eos_token_id) == 1.0


def test_a_second_think_end_scores_0(parts):
    tok, ins, enc = parts
    summary = enc("\\boxed{3}") + [ins.think_end]
    assert leaf_reward(enc("Let me think."), ins.truncated, summary, "3", tok, ins.think_end, tok.eos_token_id) == 0.0


def test_thinking_that_ended_with_eos_scores_0(parts):
    tok, ins, enc = parts
    thinking = enc("Let me think.") + [tok.eos_token_id]
    assert leaf_reward(thinking, ins.truncated, enc("\\boxed{3}"), "3", tok, ins.think_end, tok.eos_token_id) == 0.0


def test_missing_header_or_garbage_never_raises(parts):
    tok, ins, enc = parts
    assert leaf_reward(enc("x"), [ins.think_end], enc("\\boxed{3}"), "3", tok, ins.think_end, None) == 0.0
    assert leaf_reward([10**9], ins.truncated, [10**9], "3", tok, ins.think_end, None) == 0.0


def test_text_rule_for_verls_reward_path():
    text = "Let me think.</think>\n\n**Final Answer**\n\\boxed{\\frac{1}{2}}"
    assert compute_score("aime24", text, "0.5") == 1.0
    assert compute_score("aime24", text.replace("</think>", "</think></think>"), "0.5") == 0.0
    assert ground_truth_of({"style": "rule", "ground_truth": "7"}) == "7" and ground_truth_of(None) is None
