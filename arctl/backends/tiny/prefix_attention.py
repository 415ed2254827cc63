"""Attention of summary rows against a shared thinking prefix, without copying the prefix per row.

Summary decoding branches every thinking row into up to ``m x group_size`` rows (one per budget cut
and summary sample). Copying the thinking's keys/values into each row makes decoding memory-bound
(the same prefix is read ``m x group_size`` times per step). Here a summary row ``i`` of thinking
row ``t(i)`` attends to

    softmax([q_i K_{t(i)}^T * s + M_prefix(i),  q_i K_i^T * s + M_suffix(i)]) @ [V_{t(i)}; V_i]

where ``K_t, V_t`` are the thinking's cached keys/values (read once per thinking row: the queries of
all rows branching off row t are stacked into one matmul), ``M_prefix(i)`` masks the prompt padding
and the columns at or past the row's cut, and ``K_i, V_i`` are the row's own tokens (inserted
prompt + summary so far) held in a small per-row cache. That is exactly attention over the
concatenated sequence ``question + thinking[:cut] + own tokens`` (one softmax over both parts).

Used through Hugging Face's attention registry: ``with shared_prefix(model, prefix): model(...)``
switches the model to this function for the duration; outside such a block nothing changes.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch
from transformers import AttentionInterface

from arctl.backends.tiny.model import additive_mask

NAME = "arctl_shared_prefix"


@dataclass
class SharedPrefix:
    """Per layer, the prefix keys/values [U, Hkv, S, d] of the U distinct thinking rows a batch of
    N summary rows branches off; ``row_of[i]`` in [0, U) and ``slot[i]`` (rank among the rows of
    the same thinking) place row i in the stacked [U, slots] layout; ``mask`` [N, 1, 1, S] is
    additive (0 / -inf) over the prefix columns."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    row_of: torch.Tensor
    slot: torch.Tensor
    slots: int
    mask: torch.Tensor

    @classmethod
    def build(cls, layers_kv: list[tuple[torch.Tensor, torch.Tensor]], rows: torch.Tensor, prefix_valid: torch.Tensor,
              dtype: torch.dtype) -> SharedPrefix:
        """``layers_kv``: per layer the thinking cache's (keys, values) [R, Hkv, >=S, d]; ``rows`` [N]
        the thinking row of each summary row; ``prefix_valid`` [N, S] the prefix columns it sees."""
        uniq, row_of, counts = torch.unique(rows, return_inverse=True, return_counts=True)
        order = torch.argsort(row_of, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.empty_like(row_of)
        slot[order] = torch.arange(len(rows)) - starts[row_of[order]]
        width = prefix_valid.shape[1]
        keys = [k[uniq, :, :width] for k, _ in layers_kv]
        values = [v[uniq, :, :width] for _, v in layers_kv]
        mask = additive_mask(prefix_valid, dtype)[:, None, None]
        return cls(keys, values, row_of, slot, int(counts.max()), mask)

    def expand(self, repeats: int) -> SharedPrefix:
        """The same prefix for every row repeated ``repeats`` times in place (row i -> rows
        i*repeats .. i*repeats + repeats - 1)."""
        slot = (self.slot * repeats)[:, None] + torch.arange(repeats)[None]
        return SharedPrefix(self.keys, self.values, self.row_of.repeat_interleave(repeats), slot.reshape(-1),
                            self.slots * repeats, self.mask.repeat_interleave(repeats, dim=0))

    def keep_rows(self, rows: torch.Tensor) -> None:
        """Keep only summary rows ``rows`` (in place; e.g. drop the rows that finished decoding)."""
        self.row_of, self.slot, self.mask = self.row_of[rows], self.slot[rows], self.mask[rows]

    def stack(self, x: torch.Tensor) -> torch.Tensor:
        """[N, H, q, c] per summary row -> [U, H, slots * q, c] stacked per thinking row (zeros in unused slots)."""
        n, h, q, c = x.shape
        out = x.new_zeros(self.keys[0].shape[0], self.slots, h, q, c)
        out[self.row_of, self.slot] = x
        return out.permute(0, 2, 1, 3, 4).reshape(out.shape[0], h, self.slots * q, c)

    def unstack(self, x: torch.Tensor, q: int) -> torch.Tensor:
        """Inverse of :meth:`stack`: [U, H, slots * q, c] -> [N, H, q, c]."""
        u, h, _, c = x.shape
        return x.reshape(u, h, self.slots, q, c).permute(0, 2, 1, 3, 4)[self.row_of, self.slot]


_ACTIVE: contextvars.ContextVar[SharedPrefix | None] = contextvars.ContextVar("arctl_shared_prefix", default=None)


def grouped_matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x`` [B, H, L, c] @ ``y`` [B, Hkv, c, M] -> [B, H, L, M], query head ``h`` against kv head
    ``h // (H / Hkv)`` (grouped-query attention, as ``repeat_interleave`` of the kv heads would pair
    them) without copying ``y`` per query head: the H / Hkv query heads of one kv head are stacked
    along L into one matmul."""
    b, h, length, c = x.shape
    hk = y.shape[1]
    if hk == h:
        return x @ y
    return (x.reshape(b, hk, (h // hk) * length, c) @ y).view(b, h, length, y.shape[-1])


def shared_prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """Hugging Face attention function: ``query`` [N, H, q, d]; ``key``/``value`` [N, Hkv, k, d] the
    rows' own tokens (from the cache); ``attention_mask`` [N, 1, q, k] additive, over own tokens.
    Without an active prefix (``shared_prefix(model, None)``) it is plain attention over own tokens."""
    prefix = _ACTIVE.get()
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    q = query.shape[2]
    scores_s = grouped_matmul(query, key.transpose(-1, -2)) * scale
    if attention_mask is not None:
        scores_s = scores_s + attention_mask
    if prefix is None:
        weights = torch.softmax(scores_s.float(), dim=-1).to(query.dtype)
        return grouped_matmul(weights, value).transpose(1, 2).contiguous(), None
    kp, vp = prefix.keys[module.layer_idx], prefix.values[module.layer_idx]
    scores_p = prefix.unstack(grouped_matmul(prefix.stack(query), kp.transpose(-1, -2)), q) * scale + prefix.mask
    weights = torch.softmax(torch.cat([scores_p, scores_s], dim=-1).float(), dim=-1).to(query.dtype)
    s = scores_p.shape[-1]
    out = prefix.unstack(grouped_matmul(prefix.stack(weights[..., :s]), vp), q) + grouped_matmul(weights[..., s:], value)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, shared_prefix_attention)


@contextlib.contextmanager
def shared_prefix(model, prefix: SharedPrefix | None):
    """Run ``model`` with :func:`shared_prefix_attention` over ``prefix`` inside the block (None: own
    tokens only; plain matmul attention, faster than CPU SDPA for one-token decoding steps)."""
    token = _ACTIVE.set(prefix)
    before = model.config._attn_implementation
    model.set_attn_implementation(NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
        _ACTIVE.reset(token)
