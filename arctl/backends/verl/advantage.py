"""The trainer's advantage step on rollout trees (maths from :mod:`arctl.algo`, glue only here).

Each thinking sample's tree travels from the agent loop to the trainer as a plain dict in the
rollout row's ``extra_fields["arctl"]`` (a :class:`TreeRecord`): the thinking length, the cut of
every budget, the distinct-cut *leaf groups* (one summary group of ``summary.group_size`` leaves
per distinct prefix) and every leaf's reward. This module turns a batch of records into
per-token advantages:

- per-budget score ``r_j`` = mean reward of the leaf group of budget j (budgets past a finished
  thinking share one group, so their ``r_j`` is the full-thinking score);
- thinking: ``arctl.algo.advantages.thinking_advantages`` on ``scores [B, G, m]`` (BRPO / V1 / V2 /
  none, prior ``thinking.prior``), spread on tokens with ``token_advantages``; the outcome-GRPO arm
  (one budget, V2 baseline) uses ``grpo_advantages`` on the final score;
- summaries, decoupled: ``summary_advantages`` inside each leaf group (Dr. GRPO), weighted by
  ``m * sum_{j in group} P'_j`` (Eq. 10: each budget's summaries weigh ``P'_j``; 1 under the
  uniform ``p'_B``); coupled: the leaves of the final budget's group get the thinking advantage of
  the last segment, the others 0 (not trained);
- length penalties (``reward.length_penalty`` v1/v2) via ``arctl.algo.rewards.length_penalty``
  on each leaf with the thinking length it saw.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arctl.algo.advantages import (
    grpo_advantages,
    summary_advantages,
    thinking_advantages,
    token_advantages,
)
from arctl.algo.priors import budget_prior
from arctl.algo.rewards import length_penalty

RECORD_KEY = "arctl"


@dataclass(frozen=True)
class TreeRecord:
    """One thinking sample's tree as the agent loop reports it (JSON-able via :meth:`to_dict`).

    ``budgets`` [m]; ``think_len`` thinking tokens; ``group_cuts`` [n] distinct cut of each leaf
    group (increasing); ``group_of_budget`` [m] leaf group of each budget; ``leaf_rewards`` [n][A]
    rewards in {0, 1} (or shaped); ``finished`` the thinking ended with ``</think>``; ``eos`` it ended
    with EOS instead (its leaves past the EOS score 0 by the authors' rule); ``spans`` [n*A] ``(start, summary_start, end)``
    of each leaf in the packed response (group-major); ``row`` the rollout row's role
    (``tree``, ``thinking`` or ``branch``) and ``leaf`` the ``(group, a)`` of a branch row.
    """

    budgets: tuple[int, ...]
    think_len: int
    group_cuts: tuple[int, ...]
    group_of_budget: tuple[int, ...]
    leaf_rewards: tuple[tuple[float, ...], ...]
    finished: bool = False
    eos: bool = False
    spans: tuple[tuple[int, int, int], ...] = ()
    row: str = "tree"
    leaf: tuple[int, int] | None = None
    layout: str = "flex"

    @property
    def group_size(self) -> int:
        return len(self.leaf_rewards[0]) if self.leaf_rewards else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "budgets": list(self.budgets),
            "think_len": int(self.think_len),
            "group_cuts": list(self.group_cuts),
            "group_of_budget": list(self.group_of_budget),
            "leaf_rewards": [list(r) for r in self.leaf_rewards],
            "finished": bool(self.finished),
            "eos": bool(self.eos),
            "spans": [list(s) for s in self.spans],
            "row": self.row,
            "leaf": list(self.leaf) if self.leaf is not None else None,
            "layout": self.layout,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TreeRecord:
        return cls(
            budgets=tuple(int(b) for b in d["budgets"]),
            think_len=int(d["think_len"]),
            group_cuts=tuple(int(c) for c in d["group_cuts"]),
            group_of_budget=tuple(int(g) for g in d["group_of_budget"]),
            leaf_rewards=tuple(tuple(float(r) for r in row) for row in d["leaf_rewards"]),
            finished=bool(d.get("finished", False)),
            eos=bool(d.get("eos", False)),
            spans=tuple(tuple(int(x) for x in s) for s in d.get("spans") or ()),
            row=str(d.get("row", "tree")),
            leaf=tuple(int(x) for x in d["leaf"]) if d.get("leaf") is not None else None,
            layout=str(d.get("layout", "flex")),
        )


@dataclass(frozen=True)
class AdvantageSettings:
    """The spec toggles the advantage step needs (from the config's ``arctl`` node)."""

    budgets: tuple[int, ...]
    prior: str = "uniform"
    probs: tuple[float, ...] | None = None
    baseline: str = "brpo"
    lam: float = 0.5
    summary_decoupled: bool = True
    summary_prior: str = "uniform"
    summary_probs: tuple[float, ...] | None = None
    length_penalty: str = "none"
    alpha: float = 0.2

    @classmethod
    def from_config(cls, arctl: Any) -> AdvantageSettings:
        get = arctl.get if hasattr(arctl, "get") else lambda k, d=None: getattr(arctl, k, d)
        probs, sprobs = get("probs", None), get("summary_probs", None)
        return cls(
            budgets=tuple(int(b) for b in get("budgets")),
            prior=str(get("prior", "uniform")),
            probs=tuple(float(p) for p in probs) if probs is not None else None,
            baseline=str(get("baseline", "brpo")),
            lam=float(get("lam", 0.5)),
            summary_decoupled=bool(get("summary_decoupled", True)),
            summary_prior=str(get("summary_prior", "uniform")),
            summary_probs=tuple(float(p) for p in sprobs) if sprobs is not None else None,
            length_penalty=str(get("length_penalty", "none")),
            alpha=float(get("alpha", 0.2)),
        )

    def thinking_probs(self) -> torch.Tensor:
        return budget_prior(self.prior, self.budgets, self.probs)

    def summary_probs_tensor(self) -> torch.Tensor:
        return budget_prior(self.summary_prior, self.budgets, self.summary_probs)

    @property
    def outcome_grpo(self) -> bool:
        """The GRPO arm: one budget, V2 baseline, coupled summary = outcome-reward GRPO."""
        return len(self.budgets) == 1 and self.baseline == "v2" and not self.summary_decoupled


@dataclass
class TreeAdvantages:
    """Result of :func:`tree_advantages` for one tree (float64)."""

    thinking: torch.Tensor  # [think_len] per-token thinking advantages
    leaves: torch.Tensor  # [n_groups, A] per-leaf summary advantages
    scores: torch.Tensor  # [m] per-budget scores r_j
    segments: torch.Tensor  # [m] segment advantages A_k


def leaf_rewards_shaped(records: Sequence[TreeRecord], uids: Sequence[Any], s: AdvantageSettings) -> list[torch.Tensor]:
    """Leaf rewards (already scored with the authors' formatting rule by the agent loop) after the
    optional length penalty: [n, A] per tree."""
    out = [torch.tensor(rec.leaf_rewards, dtype=torch.float64) for rec in records]
    if s.length_penalty == "none" or not records:
        return out
    correct, lens, index, where = [], [], [], []
    for i, (rec, uid) in enumerate(zip(records, uids)):
        for g, cut in enumerate(rec.group_cuts):
            for a in range(rec.group_size):
                correct.append(bool(out[i][g, a] > 0.5))
                lens.append(int(cut))
                index.append(f"{uid}|{cut if cut < rec.think_len else 'full'}")
                where.append((i, g, a))
    shaped = length_penalty(
        torch.tensor(correct), torch.tensor(lens), max(s.budgets), s.length_penalty, s.alpha, index=index
    ).to(torch.float64)
    for (i, g, a), v in zip(where, shaped.tolist()):
        out[i][g, a] = v
    return out


def tree_advantages(
    records: Sequence[TreeRecord], uids: Sequence[Any], settings: AdvantageSettings
) -> list[TreeAdvantages]:
    """Advantages of every tree of a batch; ``uids`` [N] name each tree's question (its group)."""
    if len(records) != len(uids):
        raise ValueError(f"{len(records)} tree records but {len(uids)} uids")
    s = settings
    m = len(s.budgets)
    for rec in records:
        if tuple(rec.budgets) != tuple(s.budgets):
            raise ValueError(f"tree budgets {list(rec.budgets)} differ from the config's {list(s.budgets)}")
    leaf = leaf_rewards_shaped(records, uids, s)
    # per-budget scores r_j = mean over the budget's leaf group
    scores = torch.stack(
        [lr.mean(-1)[torch.tensor(rec.group_of_budget)] for lr, rec in zip(leaf, records)]
    ) if records else torch.zeros(0, m, dtype=torch.float64)

    # thinking segment advantages [N, m]: group trees by question -> [B, G, m]
    segments = torch.zeros_like(scores)
    if s.outcome_grpo:
        segments[:, -1] = grpo_advantages(scores[:, -1], list(uids))
    else:
        by_uid: dict[Any, list[int]] = defaultdict(list)
        for i, u in enumerate(uids):
            by_uid[u].append(i)
        probs = s.thinking_probs()
        sizes = {len(v) for v in by_uid.values()}
        if len(sizes) == 1:  # the usual case: G trees per question -> one vectorised call
            idx = torch.tensor(list(by_uid.values()))  # [B, G]
            segments[idx] = thinking_advantages(scores[idx], probs, s.lam, s.baseline)
        else:  # some sessions failed: each question on its own
            for rows in by_uid.values():
                idx = torch.tensor(rows)[None]
                segments[idx] = thinking_advantages(scores[idx], probs, s.lam, s.baseline)

    lens = torch.tensor([rec.think_len for rec in records], dtype=torch.long)
    think_tok = token_advantages(segments, lens, s.budgets) if records else torch.zeros(0, 0)

    # summary (leaf) advantages
    out = []
    pp = s.summary_probs_tensor()
    for i, rec in enumerate(records):
        n_groups = len(rec.group_cuts)
        if s.summary_decoupled:
            adv = summary_advantages(leaf[i])
            weight = torch.zeros(n_groups, dtype=torch.float64)
            weight.index_add_(0, torch.tensor(rec.group_of_budget), pp)
            adv = adv * (m * weight)[:, None]
        else:
            adv = torch.zeros_like(leaf[i])
            adv[rec.group_of_budget[-1]] = segments[i, -1]
        out.append(
            TreeAdvantages(
                thinking=think_tok[i, : rec.think_len].clone(),
                leaves=adv,
                scores=scores[i],
                segments=segments[i],
            )
        )
    return out


def response_advantages(rec: TreeRecord, adv: TreeAdvantages, response_len: int) -> torch.Tensor:
    """Per-response-token advantages of one rollout row, for its layout and role: [response_len].

    ``tree`` row (packed): thinking tokens, then every leaf's span (inserted tokens 0, summary
    tokens the leaf's advantage). ``thinking`` row: the thinking tokens. ``branch`` row
    ``thinking[:cut] + inserted + summary``: only the summary tokens (the thinking is trained once,
    in its own row), found from the leaf's span length.
    """
    out = torch.zeros(response_len, dtype=torch.float64)
    t = min(rec.think_len, response_len)
    if rec.row in ("tree", "thinking"):
        out[:t] = adv.thinking[:t]
    if rec.row == "tree":
        a_count = rec.group_size
        for k, (_start, summary_start, end) in enumerate(rec.spans):
            g, a = divmod(k, a_count)
            out[summary_start:end] = adv.leaves[g, a]
    elif rec.row == "branch":
        if rec.leaf is None:
            raise ValueError("a branch row needs its leaf (group, index)")
        g, a = rec.leaf
        _start, summary_start, end = rec.spans[g * rec.group_size + a]
        n_summary = end - summary_start
        if n_summary:
            out[response_len - n_summary :] = adv.leaves[g, a]
    return out


def batch_metrics(records: Sequence[TreeRecord], uids: Sequence[Any], advs: Sequence[TreeAdvantages],
                  settings: AdvantageSettings) -> dict[str, float]:
    """arctl's training metrics of one batch of trees (metric schema, docs/metrics.md)."""
    from arctl.algo.objective import anytime_objective, final_score
    from arctl.track import metrics_schema as ms

    if not records:
        return {}
    scores = torch.stack([a.scores for a in advs])  # [N, m]
    metrics: dict[str, float] = {
        ms.TRAIN_THINK_LEN_MEAN: float(torch.tensor([r.think_len for r in records], dtype=torch.float64).mean()),
        ms.TRAIN_ANYTIME_SCORE: float(anytime_objective(scores, settings.thinking_probs())),
        ms.TRAIN_FINAL_SCORE: float(final_score(scores)),
        ms.TRAIN_REWARD_MEAN: float(torch.cat([torch.tensor(r.leaf_rewards).flatten() for r in records]).mean()),
    }
    for j, b in enumerate(settings.budgets):
        metrics[ms.train_score(int(b))] = float(scores[:, j].mean())
    # variance of the thinking advantages under each baseline (same scores, same prior)
    by_uid: dict[Any, list[int]] = defaultdict(list)
    for i, u in enumerate(uids):
        by_uid[u].append(i)
    sizes = {len(v) for v in by_uid.values()}
    if len(sizes) == 1:
        idx = torch.tensor(list(by_uid.values()))
        for kind in ms.ADV_VAR_KINDS:
            a = thinking_advantages(scores[idx], settings.thinking_probs(), settings.lam, kind)
            metrics[ms.train_adv_var(kind)] = float(a.var(unbiased=False))
    return metrics
