"""The compared budget-control methods (docs/baselines.md), their maths as pure functions.

(``thinking.baseline`` / ``arctl.algo.settings.BASELINES`` are something else: the variance-reduction
terms V1/V2 of the BRPO advantage.)

- ``thinkprune``: ThinkPrune (Hou et al., 2025, arXiv 2504.01296): 0 reward past a hard token limit,
  limits tightened in rounds (e.g. 4000 -> 3000 -> 2000)
- ``l1``: L1 / LCPO (Aggarwal & Welleck, 2025, arXiv 2503.04697): L1-Exact and L1-Max rewards and the
  per-question target-length sampling
- ``budget_forcing``: s1 budget forcing (Muennighoff et al., 2025, arXiv 2501.19393), a per-token
  decoding rule for evaluation
- ``registry``: the methods by name (``budget_control.method``), each one object of hooks
  (:class:`registry.ControlMethod`); ``control`` is what both backends call
- Elastic Reasoning (Xu et al., 2025, arXiv 2505.05315) needs no module: GRPO at one thinking budget
  t with the summary cap s (``experiments/baselines-elastic.yaml``), cut by
  :func:`arctl.algo.prompts.summary_prompt` like every arm's thinking
- ``curve``: summary metrics of an accuracy-vs-budget curve (area normalised by the largest budget,
  accuracy at a fraction of the largest budget)

Import the submodules themselves (``from arctl.algo.methods.l1 import l1_reward``): this package
imports nothing, so choosing a method by name (the registry) does not import torch.
"""
