"""The trainer's advantage step on rollout trees: :mod:`arctl.algo.tree_loss` does the maths, this
module moves its results onto verl's response rows.

Each thinking sample's tree travels from the agent loop to the trainer as a plain dict in the
rollout row's ``extra_fields["arctl"]`` (a :class:`TreeRecord`): the thinking length, the
rewards of the ``A`` summaries of every budget (``[m][A]``; budgets that share a prefix were given
``A`` summaries each, as the authors sample them) and where each summary sits in the packed
response. :func:`record_advantages` turns a batch of records into
:class:`arctl.algo.tree_loss.TreeAdvantages`; :func:`response_advantages` lays one tree's
advantages onto one rollout row (packed tree, thinking row or branch row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arctl.algo.methods import control as bc
from arctl.algo.settings import BudgetControl, Objective
from arctl.algo.tree_loss import Tree, TreeAdvantages, batch_stats, summary_trained, tree_advantages
from arctl.track import metrics_schema as ms

RECORD_KEY = "arctl"
VALIDATE_KEY = "arctl_validate"
"""The field arctl's trainer gives every row it sends to the agent loop: True in verl's validation pass,
False in training (verl 0.9.1 drops its own ``validate`` flag before the agent loop sees a row)."""
FORCED_PREFIX = "forced_"
"""Prefix of the validation infos of the budget-forcing pass (the agent loop writes
``forced_score@{b}`` and ``forced_think_len``; the trainer logs them under ``eval/{ds}-forced/``)."""


@dataclass(frozen=True)
class TreeRecord:
    """One thinking sample's tree as the agent loop reports it (JSON-able via :meth:`to_dict`).

    ``budgets`` [m]; ``think_len`` thinking tokens; ``rewards`` [m][A] the verifier rewards of the
    A summaries of each budget (in {0, 1}); ``finished`` the thinking ended with ``</think>``;
    ``eos`` it ended with EOS instead (its summaries score 0 by the authors' rule); ``spans`` [m*A]
    ``(start, summary_start, end)`` of every summary in the packed response, budget-major (summary
    k is ``(j, a) = divmod(k, A)``; empty for validation rows); ``row`` the rollout row's role
    (``tree``, ``thinking`` or ``branch``) and ``leaf`` the ``(j, a)`` of a branch row; ``target``
    the L1 target length in the question's prompt (``budget_control.method=l1``).
    """

    budgets: tuple[int, ...]
    think_len: int
    rewards: tuple[tuple[float, ...], ...]
    finished: bool = False
    eos: bool = False
    spans: tuple[tuple[int, int, int], ...] = ()
    row: str = "tree"
    leaf: tuple[int, int] | None = None
    layout: str = "flex"
    target: int | None = None

    @property
    def group_size(self) -> int:
        return len(self.rewards[0]) if self.rewards else 0

    @property
    def cuts(self) -> list[int]:
        """Thinking tokens each budget's summaries saw: ``min(b_j, think_len)``."""
        return [min(int(b), int(self.think_len)) for b in self.budgets]

    def tree(self) -> Tree:
        return Tree(int(self.think_len), tuple(tuple(float(r) for r in row) for row in self.rewards))

    def summary_lens(self) -> list[list[int]]:
        """Tokens of every summary [m][A], from the spans."""
        a = self.group_size
        lens = [end - start for _s, start, end in self.spans]
        return [lens[j * a : (j + 1) * a] for j in range(len(self.budgets))]

    def shaped_tree(self, control: BudgetControl | None, limit: int | None = None) -> Tree:
        """The tree with the compared method's rewards (:func:`arctl.algo.methods.control.shape_rewards`;
        the verifier's without a method); ``limit``: ThinkPrune's limit at the step."""
        if control is None or not bc.shapes_rewards(control):
            return self.tree()
        rewards = bc.shape_rewards(control, self.rewards, self.cuts, self.summary_lens(), int(self.think_len),
                                   bool(self.finished), limit=limit, target=self.target)
        return Tree(int(self.think_len), rewards, self.tree().rewards)  # the verifier's, for the scores

    def to_dict(self) -> dict[str, Any]:
        return {
            "budgets": list(self.budgets),
            "think_len": int(self.think_len),
            "rewards": [list(r) for r in self.rewards],
            "finished": bool(self.finished),
            "eos": bool(self.eos),
            "spans": [list(s) for s in self.spans],
            "row": self.row,
            "leaf": list(self.leaf) if self.leaf is not None else None,
            "layout": self.layout,
            "target": self.target,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TreeRecord:
        return cls(
            budgets=tuple(int(b) for b in d["budgets"]),
            think_len=int(d["think_len"]),
            rewards=tuple(tuple(float(r) for r in row) for row in d["rewards"]),
            finished=bool(d.get("finished", False)),
            eos=bool(d.get("eos", False)),
            spans=tuple(tuple(int(x) for x in s) for s in d.get("spans") or ()),
            row=str(d.get("row", "tree")),
            leaf=tuple(int(x) for x in d["leaf"]) if d.get("leaf") is not None else None,
            layout=str(d.get("layout", "flex")),
            target=int(d["target"]) if d.get("target") is not None else None,
        )


def objective_of(arctl: Any) -> Objective:
    """The run's :class:`~arctl.algo.settings.Objective` from the config's ``arctl`` node (written
    by :func:`arctl.backends.verl.overrides.arctl_settings`)."""
    node = arctl.get("objective") if hasattr(arctl, "get") else None
    if node is None:
        raise ValueError("the verl config has no arctl.objective node; build the overrides with "
                         "arctl.backends.verl.overrides.verl_overrides")
    return Objective.from_dict(node)


def control_of(arctl: Any) -> BudgetControl:
    """The run's :class:`~arctl.algo.settings.BudgetControl` from the config's ``arctl`` node
    (inactive when the node has none)."""
    return BudgetControl.from_config(arctl if hasattr(arctl, "get") else {})


def record_advantages(records: Sequence[TreeRecord], uids: Sequence[Any], objective: Objective,
                      control: BudgetControl | None = None, limit: int | None = None) -> list[TreeAdvantages]:
    """:func:`arctl.algo.tree_loss.tree_advantages` of a batch of records; ``uids`` [N] name each
    tree's question (its thinking group). ``control``: the compared method whose rewards replace
    the verifier's first (``limit``: ThinkPrune's at the step), as the tiny trainer does."""
    for rec in records:
        if tuple(rec.budgets) != objective.budgets:
            raise ValueError(f"tree budgets {list(rec.budgets)} differ from the config's {list(objective.budgets)}")
        if rec.group_size != objective.summary.group_size:
            raise ValueError(f"a tree holds {rec.group_size} summaries per budget where the config's "
                             f"summary.group_size is {objective.summary.group_size}")
    return tree_advantages([rec.shaped_tree(control, limit) for rec in records], list(uids), objective)


def response_advantages(rec: TreeRecord, adv: TreeAdvantages, response_len: int) -> torch.Tensor:
    """Per-response-token advantages of one rollout row, for its layout and role: [response_len] float64.

    ``tree`` row (packed): thinking tokens, then every summary's span (inserted tokens 0, summary
    tokens its advantage). ``thinking`` row: the thinking tokens. ``branch`` row
    ``thinking[:cut] + inserted + summary``: only the summary tokens (the thinking is trained once,
    in its own row), found from the summary's span length.
    """
    out = torch.zeros(response_len, dtype=torch.float64)
    t = min(rec.think_len, response_len)
    if rec.row in ("tree", "thinking"):
        out[:t] = adv.thinking[:t]
    if rec.row == "tree":
        for k, (_start, summary_start, end) in enumerate(rec.spans):
            j, a = divmod(k, rec.group_size)
            out[summary_start:end] = adv.summaries[j, a]
    elif rec.row == "branch":
        if rec.leaf is None:
            raise ValueError("a branch row needs its leaf (budget, index)")
        j, a = rec.leaf
        _start, summary_start, end = rec.spans[j * rec.group_size + a]
        n_summary = end - summary_start
        if n_summary:
            out[response_len - n_summary :] = adv.summaries[j, a]
    return out


def trained_tokens(rec: TreeRecord | None, trained: Sequence[bool], response_len: int) -> torch.Tensor:
    """The tokens of one rollout row that enter the loss: [response_len] bool, where
    :func:`response_advantages` puts an advantage that training uses. The thinking tokens (``tree`` and
    ``thinking`` rows) and the summary tokens of the budgets whose summaries are ``trained``
    (:func:`arctl.algo.tree_loss.summary_trained`: all when decoupled, the largest budget's when
    coupled); never the inserted tokens, nothing of a padding row (``rec`` None). The rows' response
    mask is 1 on the same tokens (:func:`arctl.backends.verl.agent_loop.packed_response`; verl's padding
    rows have a mask of 0)."""
    out = torch.zeros(response_len, dtype=torch.bool)
    if rec is None:
        return out
    if rec.row in ("tree", "thinking"):
        out[: min(rec.think_len, response_len)] = True
    if rec.row == "tree":
        for k, (_start, summary_start, end) in enumerate(rec.spans):
            if trained[k // rec.group_size]:
                out[summary_start:end] = True
    elif rec.row == "branch" and rec.leaf is not None:
        j, a = rec.leaf
        _start, summary_start, end = rec.spans[j * rec.group_size + a]
        if trained[j] and end > summary_start:
            out[response_len - (end - summary_start) :] = True
    return out


def trained_mask(records: Sequence[TreeRecord | None], response_lens: Sequence[int], objective: Objective) -> torch.Tensor:
    """:func:`trained_tokens` of every rollout row, concatenated in row order (the layout of a jagged
    tensor's ``values()``): [sum(response_lens)] bool."""
    trained = summary_trained(objective)
    parts = [trained_tokens(rec, trained, int(n)) for rec, n in zip(records, response_lens)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)


def trained_token_mean(values: Sequence[torch.Tensor], records: Sequence[TreeRecord | None],
                       objective: Objective) -> float:
    """Mean of per-token ``values`` (one [response_len] tensor per rollout row) over the tokens that
    enter the loss (:func:`trained_tokens`): ``train/entropy`` over the tokens the tiny backend trains."""
    if not len(values):
        return 0.0
    mask = trained_mask(records, [int(v.shape[0]) for v in values], objective)
    return float(torch.cat([v.double() for v in values])[mask].sum() / max(int(mask.sum()), 1))


def batch_metrics(records: Sequence[TreeRecord], uids: Sequence[Any], advs: Sequence[TreeAdvantages],
                  objective: Objective, control: BudgetControl | None = None, limit: int | None = None) -> dict[str, float]:
    """arctl's training metrics of one batch of trees (metric schema, docs/metrics.md), on the
    rewards the advantages saw (the compared method's, if any)."""
    if not records:
        return {}
    trees = [rec.shaped_tree(control, limit) for rec in records]
    out = ms.train_metrics(batch_stats(trees, list(uids), advs, objective, ms.ADV_VAR_KINDS))
    if limit is not None:
        out[ms.TRAIN_THINK_LIMIT] = float(limit)
    return out
