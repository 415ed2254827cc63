"""Actor forward on packed trees: FlexAttention BlockMask (GPU), dense 4-D mask, or duplicated rows.

A packed tree row is ``prompt + thinking + (inserted + summary) * n`` with tree position ids and the
1-D mask encoding ``cut`` / ``branch_start`` of :mod:`arctl.algo.tree`. verl's next-token log-prob
computation works on it unchanged: the token after a branch boundary is always an *inserted* token
(never trained), so the one cross-branch "label" it shifts in is masked out of the loss. Only the
attention mask and the position ids differ from a plain causal row:

- ``flex`` (GPU): ``attn_implementation=flex_attention`` and the BlockMask from
  :func:`arctl.algo.tree.tree_block_mask` (no [L, L] tensor, O(L^2 / 128^2) block tables);
- ``dense``: ``attn_implementation=sdpa`` with a boolean [B, 1, L, L] mask (CPU / debugging);
- ``duplicate``: no tree at all; the agent loop emits one row per branch (``thinking[:cut] +
  inserted + summary``, only the summary trained) plus one thinking row, and verl trains them as
  ordinary sequences (remove-padding on). Correct and slower (the thinking is re-encoded per branch).

:func:`patch_fsdp_engine` makes verl's FSDP language-model engine use the tree mask whenever a
micro-batch carries ``tree_cut`` / ``tree_branch_start`` (written by the arctl trainer); the plugin
applies it when verl imports its FSDP engine module, in every worker.
"""

from __future__ import annotations

from typing import Any

import torch

from arctl.algo.tree import DEFAULT_BLOCK_SIZE, dense_tree_mask, tree_block_mask


def padded_tree_encoding(cut: torch.Tensor, branch_start: torch.Tensor, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Nested [B, j] ``cut`` / ``branch_start`` -> padded [B, max_len]; padding sees only itself."""
    b = cut.size(0)
    c = torch.nested.to_padded_tensor(cut, padding=0, output_size=(b, max_len))
    s = torch.nested.to_padded_tensor(branch_start, padding=-1, output_size=(b, max_len))
    pos = torch.arange(max_len, device=s.device).expand(b, max_len)
    s = torch.where(s < 0, pos, s)
    return c, s


def tree_attention_mask(cut: torch.Tensor, branch_start: torch.Tensor, attn_implementation: str,
                        block_size: int = DEFAULT_BLOCK_SIZE) -> Any:
    """The attention mask a transformers model takes for trees ``[B, L]``: a BlockMask for
    ``flex_attention``, else a boolean [B, 1, L, L] mask (True = attend)."""
    if attn_implementation == "flex_attention":
        return tree_block_mask(cut, branch_start, device=cut.device, block_size=block_size)
    return dense_tree_mask(cut, branch_start)[:, None]


def tree_log_probs(model, input_ids: torch.Tensor, position_ids: torch.Tensor, cut: torch.Tensor,
                   branch_start: torch.Tensor, attn_implementation: str | None = None) -> torch.Tensor:
    """log p(token_t | tree context) for t >= 1 of packed trees ``[B, L]`` -> [B, L - 1] (float32),
    the quantity verl's actor computes (logits at t-1, label t)."""
    impl = attn_implementation or getattr(model.config, "_attn_implementation", "sdpa")
    mask = tree_attention_mask(cut, branch_start, impl)
    logits = model(input_ids=input_ids, position_ids=position_ids, attention_mask=mask).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, input_ids[:, 1:, None])[..., 0]


def sequence_log_probs(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Plain causal log-probs of one sequence [L] -> [L - 1] (the duplicated-branch reference)."""
    logits = model(input_ids=input_ids[None]).logits.float()[0]
    logp = torch.log_softmax(logits[:-1], dim=-1)
    return logp.gather(-1, input_ids[1:, None])[:, 0]


_PATCHED = "_arctl_tree_patched"


def patch_fsdp_engine(module) -> None:
    """Wrap ``FSDPEngineWithLMHead.prepare_model_inputs`` of verl's FSDP engine ``module`` so that a
    micro-batch with ``tree_cut`` / ``tree_branch_start`` gets the tree attention mask (idempotent)."""
    cls = getattr(module, "FSDPEngineWithLMHead", None)
    if cls is None or getattr(cls.prepare_model_inputs, _PATCHED, False):
        return
    original = cls.prepare_model_inputs

    def prepare_model_inputs(self, micro_batch):
        model_inputs, output_args = original(self, micro_batch)
        if "tree_cut" not in micro_batch.keys():
            return model_inputs, output_args
        if model_inputs.get("attention_mask") is None:
            raise RuntimeError(
                "arctl packed trees need actor_rollout_ref.model.use_remove_padding=false "
                "(arctl's overrides set it for verl.tree_attention=flex|dense)"
            )
        input_ids = model_inputs["input_ids"]
        cut, bstart = padded_tree_encoding(
            micro_batch["tree_cut"], micro_batch["tree_branch_start"], input_ids.shape[-1]
        )
        model = getattr(self, "module", None)
        config = getattr(model, "config", None)
        impl = getattr(config, "_attn_implementation", None) or "sdpa"
        model_inputs["attention_mask"] = tree_attention_mask(cut.to(input_ids.device), bstart.to(input_ids.device), impl)
        return model_inputs, output_args

    setattr(prepare_model_inputs, _PATCHED, True)
    cls.prepare_model_inputs = prepare_model_inputs
