"""The thinking decoder the tiny backend's shrinking batch replaced: every row stays in the batch,
one token per step, until the last row ends (rows that ended decode padding). The reference that
:func:`arctl.backends.tiny.rollout.generate_thinking` is tested against: the same tokens, the same
lengths and the same cached keys/values in every column a row wrote, to the bit. It calls
``rollout.forward_step`` as the decoder does (a test may wrap it)."""

from __future__ import annotations

import torch

from arctl.backends.tiny import rollout
from arctl.backends.tiny.prefix_attention import shared_prefix
from arctl.backends.tiny.rollout import Thinking, buffer_cache, left_pad, sample


@torch.no_grad()
def lockstep_thinking(model, prompts: list[list[int]], max_tokens: int, temperature: float,
                      generator: torch.Generator | None, think_end: int, pad_id: int) -> Thinking:
    ids, valid = left_pad(prompts, pad_id)
    n = ids.shape[0]
    positions = (valid.long().cumsum(1) - 1).clamp_min(0)
    cache = buffer_cache(model, ids.shape[1] + max_tokens)
    key_valid = valid.clone()
    think = torch.full((n, max_tokens), pad_id, dtype=torch.long)
    active = torch.ones(n, dtype=torch.bool)
    finished = torch.zeros(n, dtype=torch.bool)
    with shared_prefix(model, None):
        logits = rollout.forward_step(model, ids, positions, key_valid, cache)[:, -1]
        next_pos = valid.sum(1)
        for t in range(max_tokens):
            tok = torch.where(active, sample(logits, temperature, generator), torch.full_like(next_pos, pad_id))
            think[:, t] = tok
            col = active.clone()
            ended = active & (tok == think_end)
            key_valid = torch.cat([key_valid, col[:, None]], dim=1)
            logits = rollout.forward_step(model, tok[:, None], next_pos[:, None], key_valid, cache)[:, -1]
            next_pos = next_pos + col.long()
            finished |= ended
            active &= ~ended
            if not active.any():
                break
    think_len = key_valid[:, ids.shape[1]:].sum(1)
    return Thinking(ids, valid, think, think_len, finished, cache)


def written_columns(th: Thinking, row: int) -> torch.Tensor:
    """[S] bool: the cache columns ``row`` wrote (its prompt tokens and its thinking tokens)."""
    s = th.cache.layers[0].keys.shape[2]
    p = th.prompt_ids.shape[1]
    return torch.cat([th.prompt_valid[row], torch.arange(s - p) < th.think_len[row]])
