"""Dr. GRPO constant loss normalisation as a verl policy loss (``loss_mode: arctl_drgrpo``).

The paper's code sums one PPO-clip loss over all trained tokens (thinking and summaries) and
divides by a constant, not by the number of valid tokens (Dr. GRPO, Liu et al. 2025):

    L = - 1/C * sum_{trees in mini-batch} sum_{trained tokens t} min(rho_t A_t, clip(rho_t) A_t)

with ``C = trees per mini-batch x max_response_length``. verl's ``seq-mean-token-sum-norm`` divides
by the number of *sequences*, which differs between the packed-tree layout (one sequence per tree)
and the duplicated-branch layout (1 + m*A sequences per tree); this loss divides by the constant
``actor.loss_scale_factor`` (set by :mod:`arctl.backends.verl.overrides`) in both layouts.
"""

from __future__ import annotations

from typing import Any


def compute_policy_loss_drgrpo(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode: str = "token-sum",
    config: Any = None,
    rollout_is_weights=None,
):
    """PPO-clip (dual-clip, clip-higher as configured) summed over tokens, divided by C."""
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla

    if config is None or not getattr(config, "loss_scale_factor", None):
        raise ValueError(
            "policy loss arctl_drgrpo needs actor_rollout_ref.actor.loss_scale_factor "
            "(trees per mini-batch x max_response_length); arctl's overrides set it"
        )
    pg_loss, metrics = compute_policy_loss_vanilla(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode="token-sum",
        config=config,
        rollout_is_weights=rollout_is_weights,
    )
    return pg_loss / float(config.loss_scale_factor), metrics
