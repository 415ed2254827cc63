import pytest

from arctl.algo.prompts import (
    FINAL_ANSWER_TEXT,
    TRUNCATED_TEXT,
    InsertedTokens,
    distinct_cuts,
    summary_cap,
    summary_prompt,
    think_end_id,
)

# word-level toy vocabulary, as the tiny backend uses: inserted ids precomputed by the caller
TOY = InsertedTokens.from_ids(ellipsis=[90], think_end=91, header=[92, 93])


def test_inserted_texts_are_the_authors():
    assert TRUNCATED_TEXT == "...\n\n...\n\n</think>"
    assert FINAL_ANSWER_TEXT == "\n\n**Final Answer**\n"


def test_truncated_prompt_by_hand():
    # question [1, 2], thinking [10, 11, 12, 13] cut at 2 -> [1, 2, 10, 11] + ellipsis, </think>, header
    p = summary_prompt([1, 2], [10, 11, 12, 13], 2, TOY)
    assert p.input_ids == (1, 2, 10, 11, 90, 91, 92, 93)
    assert p.trainable == (False, False, True, True, False, False, False, False)
    assert (p.question_len, p.cut, p.inserted_len, p.finished) == (2, 2, 4, False)
    assert p.inserted == (90, 91, 92, 93)


def test_finished_prompt_by_hand():
    # thinking ends with </think> (91) within the budget: header only
    p = summary_prompt([1], [10, 11, 91], 5, TOY)
    assert p.input_ids == (1, 10, 11, 91, 92, 93)
    assert p.trainable == (False, True, True, True, False, False)
    assert p.finished and p.cut == 3


def test_thinking_without_think_end_is_truncated_even_within_budget():
    # stopped at EOS (or the length limit) without </think>: the authors insert the ellipsis + </think>
    p = summary_prompt([1], [10, 11, 99], 8, TOY)
    assert p.input_ids == (1, 10, 11, 99, 90, 91, 92, 93)
    assert not p.finished


def test_cut_exactly_at_think_end_is_finished():
    p = summary_prompt([], [10, 91], 2, TOY)
    assert p.finished and p.input_ids == (10, 91, 92, 93)


def test_errors():
    with pytest.raises(ValueError, match="must contain the </think> id 7"):
        InsertedTokens(truncated=(1, 2), finished=(2,), think_end=7)
    with pytest.raises(ValueError, match="cut must be >= 0"):
        summary_prompt([1], [2], -1, TOY)


def test_hf_tokenizer_lookup_and_round_trip(bpe_tokenizer):
    tok = bpe_tokenizer
    end = think_end_id(tok)
    assert end == tok.convert_tokens_to_ids("</think>")
    ins = InsertedTokens.from_tokenizer(tok)
    assert ins.think_end == end
    assert tok.decode(list(ins.truncated)) == TRUNCATED_TEXT + FINAL_ANSWER_TEXT
    assert tok.decode(list(ins.finished)) == FINAL_ANSWER_TEXT
    assert ins.truncated.count(end) == 1
    q = tok.encode("1 + 2 =", add_special_tokens=False)
    z = tok.encode("Let me think.", add_special_tokens=False)
    p = summary_prompt(q, z, 2, ins)
    assert tok.decode(list(p.input_ids)) == tok.decode(q + z[:2]) + TRUNCATED_TEXT + FINAL_ANSWER_TEXT


def test_elastic_style_inserts_think_end_alone(bpe_tokenizer):
    """summary.inserted=think_end (Elastic Reasoning's E1, arXiv 2505.05315 Sec. 3): a cut thinking is
    closed by </think> alone, a finished one gets nothing; the summary follows at once."""
    tok = bpe_tokenizer
    end = think_end_id(tok)
    ins = InsertedTokens.from_tokenizer(tok, "think_end")
    assert (ins.truncated, ins.finished, ins.think_end) == ((end,), (), end)
    q = tok.encode("1 + 2 =", add_special_tokens=False)
    z = tok.encode("Let me think.", add_special_tokens=False) + [end]
    cut = summary_prompt(q, z, 2, ins)
    assert list(cut.input_ids) == q + z[:2] + [end] and cut.inserted_len == 1 and not cut.finished
    done = summary_prompt(q, z, len(z), ins)
    assert list(done.input_ids) == q + z and done.inserted_len == 0 and done.finished
    assert summary_cap(24, done.inserted_len) == 24 and summary_cap(24, cut.inserted_len) == 23
    with pytest.raises(ValueError, match="summary.inserted='e1' is not one of anytime, think_end"):
        InsertedTokens.from_tokenizer(tok, "e1")


def test_tokenizer_without_think_end_is_a_clear_error(bpe_tokenizer):
    with pytest.raises(ValueError, match="tokenizer has no '<think_end>' token"):
        think_end_id(bpe_tokenizer, "<think_end>")


def test_distinct_cuts_merge_budgets_past_the_end():
    # thinking of 1500 tokens, budgets 1000..4000: budgets 2000, 3000, 4000 share the full thinking
    assert distinct_cuts(1500, [1000, 2000, 3000, 4000]) == [(1000, [0]), (1500, [1, 2, 3])]
    assert distinct_cuts(5000, [1000, 2000]) == [(1000, [0]), (2000, [1])]
    assert distinct_cuts(2000, [1000, 2000]) == [(1000, [0]), (2000, [1])]


def test_the_summary_cap_counts_the_inserted_tokens():
    """summary.max_tokens caps a branch's inserted and summary tokens together (the authors': 128 in
    all), at least one summary token: both backends size their summaries with it."""
    from arctl.algo.prompts import summary_cap

    assert summary_cap(128, 14) == 114 and summary_cap(8, 5) == 3 and summary_cap(8, 2) == 6
    assert summary_cap(5, 5) == 1 and summary_cap(3, 9) == 1
