"""The compared budget-control methods (docs/baselines.md), their maths as pure functions.

(``thinking.baseline`` / ``arctl.algo.settings.BASELINES`` are something else: the variance-reduction
terms V1/V2 of the BRPO advantage.)

- ``thinkprune``: ThinkPrune (Hou et al., 2025, arXiv 2504.01296): 0 reward past a hard token limit,
  limits tightened in rounds (e.g. 4000 -> 3000 -> 2000)
- ``l1``: L1 / LCPO (Aggarwal & Welleck, 2025, arXiv 2503.04697): L1-Exact and L1-Max rewards and the
  per-question target-length sampling
- ``elastic``: Elastic Reasoning (Xu et al., 2025, arXiv 2505.05315): separate thinking / solution
  budgets (budget-constrained rollout), correctness reward trained with the existing GRPO advantage
- ``budget_forcing``: s1 budget forcing (Muennighoff et al., 2025, arXiv 2501.19393), a per-token
  decoding rule for evaluation
- ``curve``: summary metrics of an accuracy-vs-budget curve (area normalised by the largest budget,
  accuracy at a fraction of the largest budget)
"""

from arctl.algo.methods.budget_forcing import (
    BudgetForcing,
    ForcingState,
    ForcingStep,
    budget_forcing_generate,
    budget_forcing_step,
    force_token_logits,
)
from arctl.algo.methods.curve import accuracy_at_fraction, curve_auc
from arctl.algo.methods.elastic import (
    ElasticBudget,
    ElasticCut,
    elastic_advantages,
    elastic_cut,
    elastic_response,
    elastic_reward,
)
from arctl.algo.methods.l1 import (
    L1_ALPHA,
    L1_DELTA,
    L1_MODES,
    L1_TARGET_RANGE,
    l1_exact_reward,
    l1_max_reward,
    l1_reward,
    sample_l1_targets,
)
from arctl.algo.methods.thinkprune import check_thinkprune_schedule, thinkprune_limit, thinkprune_reward

__all__ = [
    "BudgetForcing",
    "ElasticBudget",
    "ElasticCut",
    "ForcingState",
    "ForcingStep",
    "L1_ALPHA",
    "L1_DELTA",
    "L1_MODES",
    "L1_TARGET_RANGE",
    "accuracy_at_fraction",
    "budget_forcing_generate",
    "budget_forcing_step",
    "check_thinkprune_schedule",
    "curve_auc",
    "elastic_advantages",
    "elastic_cut",
    "elastic_response",
    "elastic_reward",
    "force_token_logits",
    "l1_exact_reward",
    "l1_max_reward",
    "l1_reward",
    "sample_l1_targets",
    "thinkprune_limit",
    "thinkprune_reward",
]
