"""A tiny Qwen2 causal LM built from the run config's ``model`` section, random init (no hub)."""

from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def model_config(model: dict, vocab_size: int, pad_id: int, eos_id: int) -> Qwen2Config:
    """Qwen2 config of ``model`` = ``{hidden_size, num_layers, num_heads, num_kv_heads,
    intermediate_size, tie_embeddings, max_position_embeddings}``; SDPA attention."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=int(model["hidden_size"]),
        num_hidden_layers=int(model["num_layers"]),
        num_attention_heads=int(model["num_heads"]),
        num_key_value_heads=int(model["num_kv_heads"]),
        intermediate_size=int(model["intermediate_size"]),
        tie_word_embeddings=bool(model["tie_embeddings"]),
        max_position_embeddings=int(model["max_position_embeddings"]),
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        bos_token_id=None,
        attn_implementation="sdpa",
    )


def build_model(config: Qwen2Config, init_seed: int) -> Qwen2ForCausalLM:
    """Random-init model; the init depends on ``init_seed`` only (global RNG restored after)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(init_seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    return model


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Boolean attention mask (True = attend) -> additive 0 / -inf mask of ``dtype`` (SDPA on CPU is
    faster with an additive mask than with a boolean one)."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, float("-inf"))


def num_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
