"""The word-level tokenizer: one id per task word, the inserted prompt text, save/load round trip."""

import numpy as np

from arctl.algo.prompts import FINAL_ANSWER_TEXT, TRUNCATED_TEXT, InsertedTokens
from arctl.backends.tiny import task
from arctl.backends.tiny.tokenizer import build_tokenizer, decode_words, encode_words, load_tokenizer


def test_words_round_trip_one_id_each(tmp_path):
    tok = build_tokenizer(task.vocabulary())
    p = task.make_problems(np.random.default_rng(0), 1, 20, 20)[0]
    words = task.prompt_words(p) + task.thinking_words(p, np.random.default_rng(0), 0.3) + task.summary_words(p, 20, 2)
    ids = encode_words(tok, words)
    assert len(ids) == len(words) and decode_words(tok, ids) == words
    assert tok(" ".join(words), add_special_tokens=False)["input_ids"] == ids
    tok.save_pretrained(str(tmp_path))
    again = load_tokenizer(tmp_path)
    assert encode_words(again, words) == ids and len(again) == len(tok)


def test_inserted_text_of_the_summary_prompt_is_in_the_vocabulary():
    tok = build_tokenizer(task.vocabulary())
    ins = InsertedTokens.from_tokenizer(tok)
    assert decode_words(tok, ins.truncated) == ["...", "...", "</think>", "**Final", "Answer**"]
    assert decode_words(tok, ins.finished) == ["**Final", "Answer**"]
    assert tok.unk_token_id not in tok(TRUNCATED_TEXT + FINAL_ANSWER_TEXT)["input_ids"]
