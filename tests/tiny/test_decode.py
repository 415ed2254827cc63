"""The lean decoding forward (arctl/backends/tiny/decode.py) gives Hugging Face's logits to the bit.

Whole rollouts on random tiny Qwen2 models (grouped-query or not, one to three layers, biases
perturbed so that none is zero), left-padded prompts of different lengths: the thinking (sampled
at temperature 1, so a single flipped bit would change a token and everything after it), then
summaries branching off every cut on the shared prefix, with the logits of every summary token.
Run once through the lean forward and once through ``model(...)``: every thinking token, every
summary and every logit identical (``torch.equal``, not a tolerance)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny import decode
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.rollout import generate_summaries, generate_thinking, plan_branches

VOCAB, PAD, EOS, THINK_END = 40, 0, 1, 2


def _model(layers: int, heads: int, kv_heads: int, head_dim: int, seed: int):
    model = build_model(model_config({"hidden_size": heads * head_dim, "num_layers": layers, "num_heads": heads,
                                      "num_kv_heads": kv_heads, "intermediate_size": 3 * heads * head_dim,
                                      "tie_embeddings": True, "max_position_embeddings": 256}, VOCAB, PAD, EOS), seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # random norms and biases too (they start at 1 and 0)
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model.eval()


def _rollout(model, prompts, think_tokens, seed):
    g = torch.Generator().manual_seed(seed)
    thinking = generate_thinking(model, prompts, think_tokens, 1.0, g, THINK_END, PAD)
    inserted = InsertedTokens(truncated=(5, THINK_END, 6), finished=(6,), think_end=THINK_END)
    branches = plan_branches(thinking, [3, think_tokens // 2, think_tokens], inserted, per_budget=False)
    logits = generate_summaries(model, thinking, branches, 2, 6, 1.0, g, EOS, PAD, max_rows=7, return_logits=True)
    return thinking, [b.summaries for b in branches], logits


@settings(max_examples=12, deadline=None)
@given(layers=st.integers(1, 3), heads=st.sampled_from([2, 4]), grouped=st.booleans(), head_dim=st.sampled_from([4, 8]),
       lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5), think_tokens=st.integers(4, 14),
       seed=st.integers(0, 10_000))
def test_rollouts_through_the_lean_forward_equal_hugging_faces_bit_for_bit(layers, heads, grouped, head_dim, lengths,
                                                                           think_tokens, seed):
    model = _model(layers, heads, heads // 2 if grouped else heads, head_dim, seed)
    assert decode.supports(model)
    g = torch.Generator().manual_seed(seed + 1)
    prompts = [torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in lengths for _ in range(2)]  # G = 2

    lean = _rollout(model, prompts, think_tokens, seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(decode, "supports", lambda model: False)  # Hugging Face's forward
        hf = _rollout(model, prompts, think_tokens, seed)

    (t1, s1, l1), (t2, s2, l2) = lean, hf
    assert torch.equal(t1.think_ids, t2.think_ids) and torch.equal(t1.think_len, t2.think_len)
    for layer1, layer2 in zip(t1.cache.layers, t2.cache.layers, strict=True):  # the cached keys and values too
        assert torch.equal(layer1.keys, layer2.keys) and torch.equal(layer1.values, layer2.values)
    assert s1 == s2
    assert len(l1) == len(l2) and all(torch.equal(a, b) for a, b in zip(l1, l2, strict=True))


def test_only_an_inference_qwen2_with_the_default_rotary_embedding_qualifies():
    model = _model(1, 2, 1, 4, 0)
    assert decode.supports(model)
    assert not decode.supports(model.train())  # dropout and training: the model's own forward
    model.eval()
    model.config.rope_parameters = {**model.config.rope_parameters, "rope_type": "linear"}
    assert not decode.supports(model)
    assert not decode.supports(torch.nn.Linear(2, 2))
