"""Policy update: the loss of :mod:`arctl.algo.tree_loss` on tree-packed sequences.

One packed sequence per thinking sample (``arctl.algo.tree.pack_tree``: prompt + thinking, then every
trained summary branch), run once through the model with the dense tree mask and the tree's position
ids (SDPA), so the shared thinking is encoded once however many branches it has. The per-token
PPO-clip loss and the Dr. GRPO constant (``trees x optim.loss_norm_len``) are
:func:`arctl.algo.tree_loss.policy_loss`'s, the KL term (``optim.kl_coef``) is
:func:`arctl.algo.tree_loss.kl_loss`'s; this module only computes log-probs and steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from arctl.algo.settings import Objective
from arctl.algo.tree import PackedTree, dense_tree_mask, stack_trees
from arctl.algo.tree_loss import kl_loss as tree_kl_loss
from arctl.algo.tree_loss import kl_mean
from arctl.algo.tree_loss import policy_loss as tree_policy_loss
from arctl.backends.tiny.model import additive_mask


@dataclass
class PackedBatch:
    """[B, L] tensors of stacked right-padded sequences, their [B, 1, L, L] attention mask, the old
    log-probs (None: on-policy, the current log-probs detached), the reference model's log-probs
    (None: no KL term) and the unpadded ``lengths`` [B]."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    old_logp: torch.Tensor | None = None
    lengths: torch.Tensor | None = None
    predecessor: torch.Tensor | None = None  # [B, L] (None: the previous column)
    ref_logp: torch.Tensor | None = None  # [B, L] the reference model's log-probs of the trained tokens

    def select(self, idx: torch.Tensor) -> PackedBatch:
        """Rows ``idx``, cut to the longest of them (the padding columns of shorter rows dropped)."""
        width = self.input_ids.shape[1] if self.lengths is None else int(self.lengths[idx].max())

        def pick(name: str):
            t = getattr(self, name)
            if t is None or name == "lengths":
                return None if t is None else t[idx]
            t = t[idx]
            return t[:, :, :width, :width] if name == "attention_mask" else t[:, :width]

        return PackedBatch(*(pick(k) for k in self.__dataclass_fields__))


def tree_batch(trees: Sequence[PackedTree], pad_id: int) -> PackedBatch:
    """Stack packed trees with their dense tree masks. A branch without inserted tokens (Elastic's
    answer after a finished thinking) is scored like any other: its first token is read at its
    ``predecessor``, the thinking's last token."""
    s = stack_trees(trees, pad_id=pad_id)
    mask = dense_tree_mask(s["cut"], s["branch_start"], s["shared_start"], s["shared_end"])[:, None]
    lengths = torch.tensor([tree.length for tree in trees])
    return PackedBatch(s["input_ids"], s["position_ids"], mask, s["loss_mask"], s["advantages"], lengths=lengths,
                       predecessor=s["predecessor"])


def duplicated_batch(trees: Sequence[PackedTree], pad_id: int) -> PackedBatch:
    """The same tokens as separate sequences (what tree packing avoids): per tree, the trunk
    (prompt + thinking, thinking trained) and one sequence per branch (prompt + thinking[:cut] +
    inserted + summary, summary trained). Used by tests and benchmarks as the reference."""
    seqs = []
    for tree in trees:
        trunk = tree.trunk_indices()
        think_only = tree.loss_mask.clone()
        think_only[tree.trunk_len :] = False
        seqs.append((tree, trunk, think_only))
        for i in range(len(tree.branches)):
            idx = tree.branch_indices(i)
            only = torch.zeros_like(tree.loss_mask)
            span = tree.branches[i]
            only[span.summary_start : span.end] = tree.loss_mask[span.summary_start : span.end]
            seqs.append((tree, idx, only))
    width = max(len(idx) for _, idx, _ in seqs)
    n = len(seqs)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n, width), dtype=torch.long)
    valid = torch.zeros((n, width), dtype=torch.bool)
    lmask = torch.zeros((n, width), dtype=torch.bool)
    adv = torch.zeros((n, width), dtype=trees[0].advantages.dtype)
    for r, (tree, idx, only) in enumerate(seqs):
        k = len(idx)
        ids[r, :k] = tree.input_ids[idx]
        pos[r, :k] = torch.arange(k)
        valid[r, :k] = True
        lmask[r, :k] = only[idx]
        adv[r, :k] = tree.advantages[idx]
    cols = torch.arange(width)
    causal = cols[None, :] <= cols[:, None]
    mask = (causal[None] & valid[:, None, :]) | torch.eye(width, dtype=torch.bool)[None]
    return PackedBatch(ids, pos, mask[:, None], lmask, adv, lengths=valid.sum(1))


def token_logprobs(model, batch: PackedBatch, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob [B, L] of every trained token (``loss_mask``) given the tokens before it in its own
    sequence (read at its ``predecessor``'s output), and the entropy [B, L] of the distribution that
    produced it (no grad); 0 elsewhere. The output layer runs only at those positions."""
    mask = batch.attention_mask
    if mask.dtype == torch.bool:
        mask = additive_mask(mask, model.dtype)
    hidden = model.model(
        input_ids=batch.input_ids, position_ids=batch.position_ids, attention_mask=mask, use_cache=False
    ).last_hidden_state
    rows, cols = batch.loss_mask.nonzero(as_tuple=True)
    source = cols - 1 if batch.predecessor is None else batch.predecessor[rows, cols]
    logits = model.lm_head(hidden[rows, source]).float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.input_ids[rows, cols][:, None])[:, 0]
    with torch.no_grad():
        ent = -(logp_all.exp() * logp_all).sum(-1)
    shape = batch.input_ids.shape
    return logp.new_zeros(shape).index_put((rows, cols), logp), ent.new_zeros(shape).index_put((rows, cols), ent)


def policy_loss(model, batch: PackedBatch, objective: Objective, n_trees: int, temperature: float = 1.0):
    """(loss, mean entropy of trained tokens, KL term) of ``batch``, a part of a mini-batch of
    ``n_trees`` trees: the loss is :func:`arctl.algo.tree_loss.policy_loss` plus, with
    ``optim.kl_coef > 0``, the KL term :func:`arctl.algo.tree_loss.kl_loss` against
    ``batch.ref_logp`` (returned detached as the third value; 0 without)."""
    logp, ent = token_logprobs(model, batch, temperature)
    old = logp.detach() if batch.old_logp is None else batch.old_logp
    loss = tree_policy_loss(logp, old, batch.advantages, batch.loss_mask, n_trees, objective)
    kl = logp.new_zeros(())
    if objective.loss.kl_coef:
        if batch.ref_logp is None:
            raise ValueError("optim.kl_coef > 0 needs the reference model's log-probs (ppo_update's reference)")
        kl = tree_kl_loss(logp, batch.ref_logp, batch.loss_mask, n_trees, objective)
    m = batch.loss_mask
    entropy = (ent * m).sum() / m.sum().clamp_min(1)
    return loss + kl, entropy, kl.detach()


def micro_batches(batch: PackedBatch, idx: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``idx`` split into groups of at most ``size`` rows of similar length (longest first), so
    each micro-batch pads to its own longest row; any split gives the same summed loss."""
    if batch.lengths is not None:
        idx = idx[torch.argsort(batch.lengths[idx], descending=True, stable=True)]
    return list(idx.split(max(1, int(size))))


def _all_logprobs(model, batch: PackedBatch, micro_batch: int, temperature: float) -> tuple[torch.Tensor, float]:
    """Log-probs [B, L] of every trained token of ``batch`` under ``model``, no grad, by micro-batch, and the
    mean entropy of those tokens."""
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    ent_sum, n_tok = 0.0, 0
    with torch.no_grad():
        for part in micro_batches(batch, torch.arange(batch.input_ids.shape[0]), micro_batch):
            mb = batch.select(part)
            logp, ent = token_logprobs(model, mb, temperature)
            out[part, : logp.shape[1]] = logp
            m = mb.loss_mask.to(ent.dtype)
            ent_sum, n_tok = ent_sum + float((ent * m).sum()), n_tok + int(mb.loss_mask.sum())
    return out, ent_sum / max(n_tok, 1)


def ppo_update(
    model,
    optimizer: torch.optim.Optimizer,
    batch: PackedBatch,
    groups: torch.Tensor,
    mini_groups: int,
    epochs: int,
    objective: Objective,
    grad_clip: float,
    temperature: float,
    micro_batch: int,
    reference: torch.nn.Module | None = None,
) -> dict:
    """PPO epochs over mini-batches of whole prompt groups (``groups`` [B]: prompt index of every
    sequence; ``mini_groups`` prompts per optimizer step). Old log-probs are recomputed before the
    first step when there is more than one optimizer step. Each mini-batch runs in micro-batches
    of ``micro_batch`` sequences of similar length with gradient accumulation (exact: the loss is a
    sum over tokens divided by a constant, :func:`arctl.algo.tree_loss.loss_normaliser` of the
    mini-batch's trees). With ``optim.kl_coef > 0``, ``reference`` (the weights RL started from)
    gives every trained token's reference log-prob once, before the first step.

    An optimizer step whose gradient norm is not finite (NaN, inf) is skipped, its gradients dropped, as
    verl 0.9.1's engines do (``optimizer_step`` in ``verl/workers/engine/fsdp/transformer_impl.py``): one
    bad batch does not turn every weight into NaN in one backend and leave the other's as they were.

    Returns the mean policy loss (``loss``, without the KL term, as verl's ``actor/pg_loss``), the
    mean entropy of the trained tokens under the policy that sampled them (before any step, as verl's), ``skipped``: the optimizer steps skipped of ``steps``, and with a KL term its mean (``kl_loss``)
    and ``kl``: the mean per-token KL estimate of the policy that sampled the batch against the
    reference (:func:`arctl.algo.tree_loss.kl_mean`)."""
    n_groups = int(groups.max()) + 1
    minis = [torch.nonzero((groups >= s) & (groups < s + mini_groups))[:, 0] for s in range(0, n_groups, mini_groups)]
    entropy = None  # the mean entropy of the trained tokens under the policy that sampled them (verl's, from its
    # old-log-prob pass): a mean of the mini-batches' means, some after an update, was not (from a hunt)
    if epochs * len(minis) > 1:
        batch.old_logp, entropy = _all_logprobs(model, batch, micro_batch, temperature)
    out = {}
    if objective.loss.kl_coef:
        if reference is None:
            raise ValueError("optim.kl_coef > 0 needs the reference model (ppo_update's reference)")
        batch.ref_logp = _all_logprobs(reference, batch, micro_batch, temperature)[0]
        sampled = batch.old_logp if batch.old_logp is not None else _all_logprobs(model, batch, micro_batch,
                                                                                   temperature)[0]
        out["kl"] = kl_mean(sampled, batch.ref_logp, batch.loss_mask, objective.loss.kl_type)
    losses, kls, ents, skipped = [], [], [], 0
    for _ in range(epochs):
        for idx in minis:
            optimizer.zero_grad(set_to_none=True)
            total, kl_total, ent_sum, n_tok = 0.0, 0.0, 0.0, 0
            for part in micro_batches(batch, idx, micro_batch):
                mb = batch.select(part)
                loss, ent, kl = policy_loss(model, mb, objective, len(idx), temperature)
                loss.backward()
                k = int(mb.loss_mask.sum())
                total, kl_total = total + float(loss.detach()), kl_total + float(kl)
                ent_sum, n_tok = ent_sum + float(ent) * k, n_tok + k
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else float("inf"))
            if torch.isfinite(norm):
                optimizer.step()
            else:  # verl's rule: skip the step, drop the gradients
                optimizer.zero_grad(set_to_none=True)
                skipped += 1
            losses.append(total - kl_total)
            kls.append(kl_total)
            ents.append(ent_sum / max(n_tok, 1))
    out.update({"loss": sum(losses) / len(losses), "entropy": ents[0] if entropy is None else entropy,
                "skipped": skipped, "steps": len(losses)})
    if objective.loss.kl_coef:
        out["kl_loss"] = sum(kls) / len(kls)
    return out
