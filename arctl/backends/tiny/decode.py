"""The tiny model's inference forward for decoding: Hugging Face's Qwen2 forward, op for op, without
its per-call machinery.

A decoding step of the tiny model is a handful of small matmuls; Hugging Face's forward wraps them in
output capturing, mask preparation, kwargs merging and a dozen module calls per layer (measured side
by side with ``python benchmarks/bench_tiny.py forward``: 1.17x on the tiny scale's thinking pass,
1.12x on an AR-uniform step, ~1.0x at the tests' micro shape; docs/benchmarks.md). This
module reads the same parameters and calls the same torch operations in the same order on the same
shapes (embedding; per layer: RMSNorm in float32, q/k/v projections, rotary embedding, the cache
update, :func:`arctl.backends.tiny.prefix_attention.shared_prefix_attention`, the output projection,
the residual, RMSNorm, the SiLU-gated MLP; the final norm; the LM head on every position), so its
logits are bit-identical to ``model(...).logits`` (tests/tiny/test_decode.py checks that on random
models, prompts, paddings and prefixes). It serves inference only: no dropout, no gradients, no
sliding window, the default rotary embedding; :func:`supports` says when a model qualifies, and
:func:`arctl.backends.tiny.rollout.forward_step` falls back to the model's own forward otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arctl.backends.tiny.prefix_attention import shared_prefix_attention


def supports(model) -> bool:
    """True when :func:`logits` computes exactly what ``model`` does: a Qwen2 causal LM in eval mode
    with the default rotary embedding, no sliding window and the SiLU MLP."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) != "qwen2" or model.training:
        return False
    rope = getattr(config, "rope_parameters", None) or {}
    return (rope.get("rope_type", "default") == "default" and not getattr(config, "use_sliding_window", False)
            and config.hidden_act == "silu" and not getattr(config, "attention_dropout", 0.0)
            and "sliding_attention" not in (getattr(config, "layer_types", None) or []))


def _rms_norm(norm, x: torch.Tensor) -> torch.Tensor:
    """``Qwen2RMSNorm.forward``."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * h.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@torch.no_grad()
def logits(model, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache) -> torch.Tensor:
    """``model(input_ids=ids, position_ids=positions, attention_mask=mask, past_key_values=cache,
    use_cache=True).logits`` under the active :func:`~arctl.backends.tiny.prefix_attention.shared_prefix`:
    ``ids``/``positions`` [N, k], ``mask`` [N, 1, k, S] additive over the cache's S columns after the
    update; returns [N, k, V]."""
    base = model.model
    x = base.embed_tokens(ids)
    rotary = base.rotary_emb
    inv = rotary.inv_freq[None, :, None].float().expand(positions.shape[0], -1, 1)
    freqs = (inv.float() @ positions[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * rotary.attention_scaling).to(x.dtype).unsqueeze(1)
    sin = (emb.sin() * rotary.attention_scaling).to(x.dtype).unsqueeze(1)
    for layer in base.layers[: model.config.num_hidden_layers]:
        attn = layer.self_attn
        shape = (*ids.shape, -1, attn.head_dim)
        h = _rms_norm(layer.input_layernorm, x)
        q = F.linear(h, attn.q_proj.weight, attn.q_proj.bias).view(shape).transpose(1, 2)
        k = F.linear(h, attn.k_proj.weight, attn.k_proj.bias).view(shape).transpose(1, 2)
        v = F.linear(h, attn.v_proj.weight, attn.v_proj.bias).view(shape).transpose(1, 2)
        q = (q * cos) + (_rotate_half(q) * sin)
        k = (k * cos) + (_rotate_half(k) * sin)
        k, v = cache.update(k, v, attn.layer_idx)
        out, _ = shared_prefix_attention(attn, q, k, v, mask, scaling=attn.scaling)
        x = x + F.linear(out.reshape(*ids.shape, -1).contiguous(), attn.o_proj.weight, attn.o_proj.bias)
        mlp = layer.mlp
        h = _rms_norm(layer.post_attention_layernorm, x)
        gated = mlp.act_fn(F.linear(h, mlp.gate_proj.weight)) * F.linear(h, mlp.up_proj.weight)
        x = x + F.linear(gated, mlp.down_proj.weight)
    x = _rms_norm(base.norm, x)
    return F.linear(x, model.lm_head.weight, model.lm_head.bias)
