"""Fixtures of the algo tests: a tiny byte-level BPE tokenizer (HF PreTrainedTokenizerFast) and a
tiny random-init Qwen2 model, both built locally (no hub)."""

import pytest
import torch


@pytest.fixture(scope="session")
def bpe_tokenizer(make_bpe_tokenizer):
    corpus = ["Let me think. 1 + 2 = 3.\n\nSo the answer is 3.", "...\n\n...\n\n", "\n\n**Final Answer**\n\\boxed{3}"] * 20
    return make_bpe_tokenizer(corpus, 400)


@pytest.fixture(scope="session")
def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    return Qwen2ForCausalLM(cfg).eval()
