"""Tree packing of one thinking sample and its summary branches (paper App. C, Figure 7).

One sequence per thinking sample: ``prompt + thinking`` (the *trunk*), then every summary branch
``inserted tokens + summary`` appended after it. A branch cut at ``c`` thinking tokens continues the
position ids from its cut point and attends to the trunk up to the cut and to itself only.

Attention is encoded per token by 1-D tensors, as the authors did:
``cut[q]`` (the token sees trunk tokens ``k < cut[q]``) and ``branch_start[q]`` (and the tokens
``k >= branch_start[q]`` of its own branch), so

    mask(q, k) = k <= q  and  (k < cut[q]  or  k >= branch_start[q]).

Trunk tokens have ``branch_start = 0`` (plain causal); padding tokens see only themselves.

With ``share_inserted``, the summaries of one group (same cut, same inserted tokens) share one copy
of the inserted tokens: ``[inserted | summary_1 | summary_2 | ...]``, and summary tokens also see
the shared segment ``shared_start[q] <= k < shared_end[q]`` (empty, ``0..0``, everywhere else):

    mask(q, k) = k <= q  and  (k < cut[q]  or  shared_start[q] <= k < shared_end[q]  or  k >= branch_start[q]).

Every branch still computes exactly ``prompt + thinking[:cut] + inserted + summary``; the group's
inserted tokens are encoded once instead of once per summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arctl.algo.settings import DEFAULT_BLOCK_SIZE  # re-exported: the mask's block


@dataclass(frozen=True)
class SummaryBranch:
    """Input of :func:`pack_tree`: a summary sampled after cutting the thinking at ``cut`` tokens.

    ``inserted`` ids are never trained; ``summary`` tokens get ``advantage``.
    """

    cut: int
    inserted: Sequence[int]
    summary: Sequence[int]
    advantage: float = 0.0


@dataclass(frozen=True)
class BranchSpan:
    """Where branch i lives in the packed sequence: its inserted tokens at ``[start, inserted_end)``
    (shared with the other summaries of its group when packed with ``share_inserted``; None means
    ``summary_start``), its summary tokens at ``[summary_start, end)``; it sees trunk indices
    ``[0, trunk_cut)``."""

    trunk_cut: int
    start: int
    summary_start: int
    end: int
    inserted_end: int | None = None

    @property
    def inserted_stop(self) -> int:
        return self.summary_start if self.inserted_end is None else self.inserted_end


@dataclass(frozen=True)
class PackedTree:
    """A packed tree: all tensors are 1-D of length L (= valid length + padding)."""

    input_ids: torch.Tensor  # long [L]
    position_ids: torch.Tensor  # long [L]
    loss_mask: torch.Tensor  # bool [L]: thinking and summary tokens
    advantages: torch.Tensor  # float [L]: 0 where loss_mask is False
    cut: torch.Tensor  # long [L]: sees trunk tokens k < cut[q]
    branch_start: torch.Tensor  # long [L]: and tokens k >= branch_start[q] (causally)
    shared_start: torch.Tensor  # long [L]: and tokens shared_start[q] <= k < shared_end[q]
    shared_end: torch.Tensor  # long [L]  (0..0: no shared segment)
    predecessor: torch.Tensor  # long [L]: the previous token of the sequence this token belongs to
    # (its output predicts this token): q - 1 inside a segment, trunk_cut - 1 at a branch's first
    # token, the group's last inserted token at a shared group member's first summary token; -1 first
    prompt_len: int
    thinking_len: int
    branches: tuple[BranchSpan, ...]
    valid_len: int  # tokens before padding

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def trunk_len(self) -> int:
        return self.prompt_len + self.thinking_len

    def branch_indices(self, i: int) -> torch.Tensor:
        """Packed indices that, in order, form branch i as its own sequence:
        ``prompt + thinking[:cut] + inserted + summary``."""
        span = self.branches[i]
        return torch.cat([torch.arange(span.trunk_cut), torch.arange(span.start, span.inserted_stop),
                          torch.arange(span.summary_start, span.end)])

    def trunk_indices(self) -> torch.Tensor:
        """Packed indices of ``prompt + thinking``."""
        return torch.arange(self.trunk_len)


def _ids(seq: Sequence[int] | torch.Tensor) -> list[int]:
    return [int(t) for t in (seq.tolist() if torch.is_tensor(seq) else seq)]


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple if multiple > 1 else n


def pack_tree(
    prompt_ids: Sequence[int] | torch.Tensor,
    thinking_ids: Sequence[int] | torch.Tensor,
    branches: Sequence[SummaryBranch],
    thinking_advantages: torch.Tensor | Sequence[float] | None = None,
    pad_to_multiple: int | None = None,
    pad_id: int = 0,
    dtype: torch.dtype = torch.float32,
    share_inserted: bool = False,
) -> PackedTree:
    """Pack ``prompt + thinking`` and every branch ``inserted + summary`` into one sequence.

    ``thinking_advantages`` [T] are the per-token thinking advantages (e.g. one row of
    :func:`arctl.algo.advantages.token_advantages`); None means 0. The prompt and inserted tokens are
    outside the loss. ``pad_to_multiple`` pads the sequence (e.g. to FlexAttention's block size 128).
    ``share_inserted``: consecutive branches with the same cut and inserted tokens (a summary group)
    share one copy of the inserted tokens (module docstring).
    """
    prompt, thinking = _ids(prompt_ids), _ids(thinking_ids)
    p, t = len(prompt), len(thinking)
    ids = prompt + thinking
    pos = list(range(p + t))
    cut = [0] * (p + t)
    bstart = [0] * (p + t)
    sstart = [0] * (p + t)
    send = [0] * (p + t)
    loss = [False] * p + [True] * t
    if thinking_advantages is None:
        adv = [0.0] * (p + t)
    else:
        ta = [float(a) for a in (thinking_advantages.tolist() if torch.is_tensor(thinking_advantages) else thinking_advantages)]
        if len(ta) != t:
            raise ValueError(f"thinking_advantages has {len(ta)} entries but the thinking has {t} tokens")
        adv = [0.0] * p + ta

    def append(tokens: list[int], first_pos: int, trunk_cut: int, seg_start: int, shared: tuple[int, int],
               trained: bool, advantage: float) -> None:
        """Append one segment: positions from ``first_pos``; it sees the trunk below ``trunk_cut``,
        the ``shared`` segment and itself (from ``seg_start``)."""
        k = len(tokens)
        ids.extend(tokens)
        pos.extend(range(first_pos, first_pos + k))
        cut.extend([trunk_cut] * k)
        bstart.extend([seg_start] * k)
        sstart.extend([shared[0]] * k)
        send.extend([shared[1]] * k)
        loss.extend([trained] * k)
        adv.extend([advantage if trained else 0.0] * k)

    spans = []
    group = None  # (cut, inserted, start, end) of the inserted segment the current group shares
    for i, br in enumerate(branches):
        c = int(br.cut)
        if not 0 <= c <= t:
            raise ValueError(f"branch {i}: cut {c} is outside the thinking (0..{t} tokens)")
        inserted, summary = _ids(br.inserted), _ids(br.summary)
        start = len(ids)
        if not inserted and not summary:
            raise ValueError(f"branch {i} is empty (no inserted and no summary tokens)")
        if share_inserted and inserted:
            if group is None or group[:2] != (c, inserted):
                append(inserted, p + c, p + c, start, (0, 0), False, 0.0)
                group = (c, inserted, start, len(ids))
            s0 = len(ids)
            append(summary, p + c + len(inserted), p + c, s0, group[2:], True, float(br.advantage))
            spans.append(BranchSpan(p + c, group[2], s0, len(ids), inserted_end=group[3]))
            continue
        group = None
        append(inserted, p + c, p + c, start, (0, 0), False, 0.0)
        append(summary, p + c + len(inserted), p + c, start, (0, 0), True, float(br.advantage))
        spans.append(BranchSpan(p + c, start, start + len(inserted), len(ids)))
    valid = len(ids)
    prev = list(range(-1, valid - 1))  # each token's previous token in its own sequence
    for span in spans:
        if span.inserted_stop > span.start:
            prev[span.start] = span.trunk_cut - 1
        if span.end > span.summary_start:
            prev[span.summary_start] = (span.inserted_stop if span.inserted_stop > span.start else span.trunk_cut) - 1
    packed = PackedTree(
        input_ids=torch.tensor(ids, dtype=torch.long),
        position_ids=torch.tensor(pos, dtype=torch.long),
        loss_mask=torch.tensor(loss, dtype=torch.bool),
        advantages=torch.tensor(adv, dtype=dtype),
        cut=torch.tensor(cut, dtype=torch.long),
        branch_start=torch.tensor(bstart, dtype=torch.long),
        shared_start=torch.tensor(sstart, dtype=torch.long),
        shared_end=torch.tensor(send, dtype=torch.long),
        predecessor=torch.tensor(prev, dtype=torch.long),
        prompt_len=p,
        thinking_len=t,
        branches=tuple(spans),
        valid_len=valid,
    )
    # padding as stack_trees pads (one home: pad_tree)
    return pad_tree(packed, round_up(valid, pad_to_multiple), pad_id) if pad_to_multiple else packed


def pad_tree(tree: PackedTree, length: int, pad_id: int = 0) -> PackedTree:
    """Pad ``tree`` to ``length`` tokens (padding sees only itself, is outside the loss)."""
    extra = length - tree.length
    if extra < 0:
        raise ValueError(f"cannot pad a tree of {tree.length} tokens to {length}")
    if extra == 0:
        return tree

    def cat(x: torch.Tensor, fill: Any) -> torch.Tensor:
        return torch.cat([x, torch.full((extra,), fill, dtype=x.dtype)])

    return PackedTree(
        input_ids=cat(tree.input_ids, pad_id),
        position_ids=cat(tree.position_ids, 0),
        loss_mask=cat(tree.loss_mask, False),
        advantages=cat(tree.advantages, 0),
        cut=cat(tree.cut, 0),
        branch_start=torch.cat([tree.branch_start, torch.arange(tree.length, length)]),
        shared_start=cat(tree.shared_start, 0),
        shared_end=cat(tree.shared_end, 0),
        predecessor=torch.cat([tree.predecessor, torch.arange(tree.length - 1, length - 1)]),
        prompt_len=tree.prompt_len,
        thinking_len=tree.thinking_len,
        branches=tree.branches,
        valid_len=tree.valid_len,
    )


def stack_trees(trees: Sequence[PackedTree], pad_id: int = 0, pad_to_multiple: int | None = None) -> dict[str, torch.Tensor]:
    """Right-pad trees to one length and stack: ``input_ids, position_ids, loss_mask, advantages,
    cut, branch_start, shared_start, shared_end, predecessor`` as [B, L] tensors."""
    if not trees:
        raise ValueError("stack_trees needs at least one tree")
    length = max(t.length for t in trees)
    if pad_to_multiple:
        length = round_up(length, pad_to_multiple)
    padded = [pad_tree(t, length, pad_id) for t in trees]
    keys = ("input_ids", "position_ids", "loss_mask", "advantages", "cut", "branch_start", "shared_start", "shared_end",
            "predecessor")
    return {k: torch.stack([getattr(t, k) for t in padded]) for k in keys}


def unpack(tree: PackedTree, values: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Split per-token ``values`` [L, ...] of a packed tree into the thinking part [T, ...] and each
    branch's summary part (inserted tokens dropped) — e.g. log-probs or entropies."""
    p, t = tree.prompt_len, tree.thinking_len
    return values[p : p + t], [values[s.summary_start : s.end] for s in tree.branches]


# ------------------------------------------------------------------------------------- masks
def dense_tree_mask(
    cut: torch.Tensor, branch_start: torch.Tensor, shared_start: torch.Tensor | None = None,
    shared_end: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense boolean tree mask (True = attend) from the 1-D encoding: [L, L], or [B, L, L] for [B, L]
    inputs (``shared_*``: the shared inserted segments of a ``share_inserted`` tree, if any). For
    SDPA/transformers use ``mask[:, None]`` ([B, 1, L, L])."""
    length = cut.shape[-1]
    q = torch.arange(length, device=cut.device)
    k = q
    causal = k[None, :] <= q[:, None]
    tree = (k < cut[..., :, None]) | (k >= branch_start[..., :, None])
    if shared_start is not None:
        tree |= (k >= shared_start[..., :, None]) & (k < shared_end[..., :, None])
    return causal & tree


def dense_tree_masks(trees: Sequence[PackedTree], pad_to_multiple: int | None = None) -> torch.Tensor:
    """Batched dense masks [B, 1, L, L] of right-padded trees (matches :func:`stack_trees`)."""
    batch = stack_trees(trees, pad_to_multiple=pad_to_multiple)
    return dense_tree_mask(batch["cut"], batch["branch_start"], batch["shared_start"], batch["shared_end"])[:, None]


def tree_mask_mod(cut: torch.Tensor, branch_start: torch.Tensor, shared_start: torch.Tensor | None = None,
                  shared_end: torch.Tensor | None = None):
    """FlexAttention ``mask_mod(b, h, q_idx, kv_idx)`` over the 1-D ([L]) or batched ([B, L])
    encoding (with the shared segments of a ``share_inserted`` tree, if given); no [L, L] tensor
    is built."""
    if cut.dim() not in (1, 2):
        raise ValueError(f"cut must be [L] or [B, L], got {tuple(cut.shape)}")
    if shared_start is not None:
        if cut.dim() == 1:
            cut, branch_start, shared_start, shared_end = cut[None], branch_start[None], shared_start[None], shared_end[None]

        def shared_mask_mod(b, h, q_idx, kv_idx):
            r = b if cut.shape[0] > 1 else 0
            shared = (kv_idx >= shared_start[r, q_idx]) & (kv_idx < shared_end[r, q_idx])
            return (kv_idx <= q_idx) & ((kv_idx < cut[r, q_idx]) | shared | (kv_idx >= branch_start[r, q_idx]))

        return shared_mask_mod
    if cut.dim() == 1:

        def mask_mod(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & ((kv_idx < cut[q_idx]) | (kv_idx >= branch_start[q_idx]))

    else:

        def mask_mod(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & ((kv_idx < cut[b, q_idx]) | (kv_idx >= branch_start[b, q_idx]))

    return mask_mod


def _overlap(lo: torch.Tensor, hi: torch.Tensor, c0: torch.Tensor, c1: torch.Tensor) -> torch.Tensor:
    return (torch.minimum(hi, c1) - torch.maximum(lo, c0)).clamp_min(0)


def tree_block_counts(cut: torch.Tensor, branch_start: torch.Tensor, block_size: int = DEFAULT_BLOCK_SIZE,
                      shared_start: torch.Tensor | None = None, shared_end: torch.Tensor | None = None) -> torch.Tensor:
    """Number of attended (q, k) pairs in every (q-block, kv-block): [B, nQ, nKV].

    Row q attends to the intervals ``[0, min(cut[q], q+1))``, ``[branch_start[q], q+1)`` and the
    shared segment ``[shared_start[q], min(shared_end[q], q+1))`` (disjoint from the other two by
    construction), so counts come from interval overlaps in O(L * L / block_size) memory, never O(L^2).
    """
    if cut.dim() == 1:
        cut, branch_start = cut[None], branch_start[None]
        if shared_start is not None:
            shared_start, shared_end = shared_start[None], shared_end[None]
    b, length = cut.shape
    nblk = -(-length // block_size)
    q = torch.arange(length, device=cut.device)[None, :, None]
    c0 = (torch.arange(nblk, device=cut.device) * block_size)[None, None, :]
    c1 = (c0 + block_size).clamp_max(length)
    a = torch.minimum(cut[..., None], q + 1)
    s = branch_start[..., None]
    zero = torch.zeros_like(a)
    rows = _overlap(zero, a, c0, c1) + _overlap(s, q + 1, c0, c1) - _overlap(s, a, c0, c1)  # [B, L, nKV]
    if shared_start is not None:
        rows = rows + _overlap(shared_start[..., None], torch.minimum(shared_end[..., None], q + 1), c0, c1)
    pad_rows = nblk * block_size - length
    rows = torch.nn.functional.pad(rows, (0, 0, 0, pad_rows))
    return rows.view(b, nblk, block_size, nblk).sum(2)


def _ordered(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    num = dense.sum(-1, dtype=torch.int32)
    idx = torch.argsort(dense.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    return num, idx


def tree_block_mask(
    cut: torch.Tensor,
    branch_start: torch.Tensor,
    device: Any = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    via_create_block_mask: bool = False,
    shared_start: torch.Tensor | None = None,
    shared_end: torch.Tensor | None = None,
):
    """FlexAttention BlockMask of the tree mask from the 1-D ([L]) or batched ([B, L]) encoding.

    By default the block tables are computed from interval overlaps (:func:`tree_block_counts`), which
    never materialises [L, L] and equals ``create_block_mask(tree_mask_mod(...))`` exactly. With
    ``via_create_block_mask=True`` it calls ``torch.compile(create_block_mask)`` (the eager
    create_block_mask builds the dense [B, 1, L, L] mask, the compiled one does not).
    """
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask

    device = torch.device(device) if device is not None else cut.device
    cut, branch_start = cut.to(device), branch_start.to(device)
    if shared_start is not None:
        shared_start, shared_end = shared_start.to(device), shared_end.to(device)
    mask_mod = tree_mask_mod(cut, branch_start, shared_start, shared_end)
    length = cut.shape[-1]
    batch = cut.shape[0] if cut.dim() == 2 else None
    if via_create_block_mask:
        return torch.compile(create_block_mask)(mask_mod, batch, None, length, length, device, block_size)
    counts = tree_block_counts(cut, branch_start, block_size, shared_start, shared_end)  # [B, nQ, nKV]
    nblk = counts.shape[-1]
    q0 = torch.arange(nblk, device=device) * block_size
    sizes = (torch.minimum(q0 + block_size, torch.tensor(length, device=device)) - q0)
    # a block is "full" only if it is a whole block_size x block_size tile (as create_block_mask does)
    full = (counts == block_size * block_size) & (sizes[:, None] == block_size) & (sizes[None, :] == block_size)
    partial = (counts > 0) & ~full
    kv_num, kv_idx = _ordered(partial[:, None])
    full_num, full_idx = _ordered(full[:, None])
    return BlockMask.from_kv_blocks(
        kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block_size, mask_mod=mask_mod, seq_lengths=(length, length)
    )
