"""The R1-shaped test model (tests/support/r1_like.py) keeps the odds that make verl's CPU loop train:
whatever the context, the two answers are likely and the two tokens that void a reward (EOS in the
thinking, a second </think> in a summary) are rare, so a step's advantages are almost never all zero."""

import pytest

pytest.importorskip("transformers")


def test_the_favourites_take_the_mass_and_the_reward_voiding_tokens_stay_rare():
    import r1_like  # tests/support/r1_like.py

    tok = r1_like.build_tokenizer()
    model = r1_like.build_model(tok)
    for question in ("What is 1 + 0?", "What is 1 + 1?"):
        probs = r1_like.next_token_probs(tok, model, question, " think think")
        p = {t: float(probs[tok.convert_tokens_to_ids(t)]) for t in (*r1_like.ANSWERS, "</think>", r1_like.EOS)}
        assert all(0.15 < p[a] < 0.25 for a in r1_like.ANSWERS), p
        assert p["</think>"] + p[r1_like.EOS] < 0.02, p
        assert p["</think>"] > 0.002 and p[r1_like.EOS] > 0.002, p  # some thinkings still end on their own
