"""Shared stand-ins of the verl evaluation tests: a deterministic fake policy whose thinking length depends on the
prompted target (tests/verl/test_l1_eval_diagnostics.py, test_eval_only_diagnostics.py), and one evaluation's
variance-diagnostic row of a logged run (tests/report/test_report_outputs.py, test_cov_variance_eval_only.py)."""

from __future__ import annotations

import random


def policy(q: int, g: int, target: int | None, top: int) -> tuple[int, int]:
    """(thinking length, tokens needed to be right) of sample ``g`` of question ``q`` prompted with ``target`` (none:
    ``top``, the largest budget), a length at most ``top``: right at a cut iff the cut reaches what it needs."""
    r = random.Random(q * 1_000_003 + g * 1009 + int(target or 0))
    length = min(top, max(1, int((target or top) * r.uniform(0.6, 1.2))))
    need = random.Random(q * 1_000_003 + g * 1009).randint(500, 9000)
    return length, need


def diag_row(budgets, base: float, step: int = 0) -> dict:
    """One evaluation at ``step`` of every variance diagnostic at ``budgets``: corr_v1 = base + b/1e5, the others
    from it."""
    row = {"trainer/global_step": step}
    for b in budgets:
        row[f"eval/aime24/corr_v1@{b}"] = base + b / 1e5
        row[f"eval/aime24/corr_v2@{b}"] = base - b / 1e5
        for kind in ("brpo", "grpo", "v1"):
            row[f"eval/aime24/nvar/{kind}@{b}"] = base
    return row


def sampler(q: int, g: int, calls: list, top: int, clamp: bool = False, record_forcing: bool = False):
    """``sample_tree`` of the agent loop on :func:`policy` for sample ``g`` of question ``q`` (the prompt's first id
    is the target, 0 for none: :func:`build_prompt`); records (target, budgets[, forced]) per tree in ``calls``;
    ``clamp``: the thinking runs at most to the tree's largest budget."""
    from arctl.backends.verl.agent_loop import LeafGroup, TreeRollout

    async def sample_tree(prompt_ids, group, per_budget, forcing):
        target = prompt_ids[0] or None
        calls.append((target, list(group), forcing is not None) if record_forcing else (target, list(group)))
        length, need = policy(q, g, target, top)
        length = min(length, max(group)) if clamp else length
        groups = [LeafGroup(min(b, length), [j], [], [], [[1]], [1.0 if min(b, length) >= need else 0.0])
                  for j, b in enumerate(group)]
        return TreeRollout([target or 0], [7] * length, list(group), groups, False, False, 1, False)

    return sample_tree


async def build_prompt(target):
    return [int(target or 0)]
