"""arctl's policy loss in verl (``loss_mode: arctl_drgrpo``, and ``arctl_drgrpo_dual`` with dual clip).

The loss is :func:`arctl.algo.tree_loss.policy_loss_sum` (the PPO-clip token loss the tiny backend
uses too) divided by the Dr. GRPO constant ``C = trees per mini-batch x optim.loss_norm_len``
(:func:`arctl.algo.tree_loss.loss_normaliser`), which arctl's overrides store in
``actor.loss_scale_factor``: the same constant in every arm and every tree layout. Like verl's
``token-sum`` aggregation, each rank's sum is multiplied by ``dp_size`` (data-parallel gradient
averaging then gives the global token sum). Clip ranges come from ``actor.clip_ratio_low`` /
``clip_ratio_high``; ``arctl_drgrpo_dual`` caps negative-advantage tokens at ``actor.clip_ratio_c``
(``optim.dual_clip``), ``arctl_drgrpo`` does not (the authors' loss).
"""

from __future__ import annotations

from typing import Any

from arctl.algo.settings import Loss
from arctl.algo.tree_loss import clip_stats, policy_loss_sum


def loss_settings(config: Any, dual: bool) -> Loss:
    """The loss settings verl's actor config carries (arctl's overrides wrote them from the spec)."""
    low, high = config.clip_ratio_low, config.clip_ratio_high
    clip = float(config.clip_ratio if low is None else low)
    return Loss(clip_ratio=clip, clip_ratio_high=float(clip if high is None else high),
                dual_clip=float(config.clip_ratio_c) if dual else None)


def _loss(old_log_prob, log_prob, advantages, response_mask, config: Any, rollout_is_weights, dual: bool):
    if config is None or not getattr(config, "loss_scale_factor", None):
        raise ValueError(
            "policy loss arctl_drgrpo needs actor_rollout_ref.actor.loss_scale_factor "
            "(trees per mini-batch x optim.loss_norm_len); arctl's overrides set it"
        )
    if rollout_is_weights is not None:
        raise ValueError("policy loss arctl_drgrpo does not take rollout importance weights (arctl trains on-policy)")
    loss = loss_settings(config, dual)
    dp_size = int((getattr(config, "global_batch_info", None) or {}).get("dp_size") or 1)
    total = policy_loss_sum(log_prob, old_log_prob, advantages, response_mask, loss)
    stats = clip_stats(log_prob, old_log_prob, advantages, response_mask, loss)
    metrics = {
        "actor/pg_clipfrac": stats["clipfrac"],
        "actor/ppo_kl": stats["approx_kl"],
        "actor/pg_clipfrac_lower": stats["clipfrac_lower"],
    }
    return total * dp_size / float(config.loss_scale_factor), metrics


def compute_policy_loss_drgrpo(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode: str = "token-sum",
                               config: Any = None, rollout_is_weights=None):
    """PPO clip (clip-higher as configured) summed over tokens, divided by C (verl policy-loss signature)."""
    return _loss(old_log_prob, log_prob, advantages, response_mask, config, rollout_is_weights, dual=False)


def compute_policy_loss_drgrpo_dual(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode: str = "token-sum",
                                    config: Any = None, rollout_is_weights=None):
    """As :func:`compute_policy_loss_drgrpo`, with dual clip at ``actor.clip_ratio_c`` on A < 0."""
    return _loss(old_log_prob, log_prob, advantages, response_mask, config, rollout_is_weights, dual=True)
