"""The verl trainer's L1 rewards on a tree of several budgets and summaries (``budget_control.method=l1`` with
``algo=anytime``: a config validation accepts), by hand from the paper's Eqs. 1-2, and the advantages
``arctl.algo.tree_loss`` gives those rewards. Every shipped L1 arm trains one budget with one summary, where a
summary's length is found at ``spans[j]`` whatever the slicing: from a mutation hunt, reading budget j's summary
lengths from ``spans[j:]`` instead of ``spans[j*A:]`` passed every verl test. Also ``train/entropy`` (the mean over
the trained tokens) of a batch that trains a single token."""

from __future__ import annotations

import pytest
import torch

from arctl.algo.settings import BudgetControl, Objective, Summary, Thinking
from arctl.algo.tree_loss import Tree, tree_advantages
from arctl.backends.verl.advantage import TreeRecord, record_advantages, trained_token_mean

BUDGETS, A, TARGET, ALPHA, DELTA = (2, 4), 2, 6, 0.1, 0.5


def _record(think_len: int, rewards, summary_lens) -> TreeRecord:
    """A packed tree: the thinking, then each summary (budget-major) as 2 inserted tokens and its tokens."""
    spans, at = [], think_len
    for n in summary_lens:
        spans.append((at, at + 2, at + 2 + n))
        at += 2 + n
    return TreeRecord(BUDGETS, think_len, tuple(tuple(float(r) for r in row) for row in rewards),
                      spans=tuple(spans), target=TARGET)


# two trees of one question: (think_len, verifier rewards [m][A], summary lengths budget-major [m*A])
TREES = [(4, [[1, 0], [1, 1]], [3, 1, 2, 5]),  # cuts 2, 4
         (3, [[0, 1], [1, 0]], [4, 2, 1, 3])]  # cuts 2, 3
# n_used = cut_j + the summary's length: tree 1 [[5, 3], [6, 9]], tree 2 [[6, 4], [4, 6]]
# Eq. 1 (exact): 1[correct] - alpha |target - n_used|; Eq. 2 (max): 1[correct] clip(alpha (target - n_used) + delta, 0, 1)
BY_HAND = {
    "exact": [[[0.9, -0.3], [1.0, 0.7]], [[0.0, 0.8], [0.8, 0.0]]],
    "max": [[[0.6, 0.0], [0.5, 0.2]], [[0.0, 0.7], [0.7, 0.0]]],
}


@pytest.mark.parametrize("mode", sorted(BY_HAND))
def test_l1_scores_each_summary_of_each_budget_by_its_own_length(mode):
    control = BudgetControl(method="l1", l1_mode=mode, l1_alpha=ALPHA, l1_delta=DELTA)
    records = [_record(*tree) for tree in TREES]
    for rec, want in zip(records, BY_HAND[mode]):
        got = rec.shaped_tree(control)
        assert [list(row) for row in got.rewards] == [pytest.approx(row) for row in want]
        assert got.verifier == rec.rewards  # the scores still report the verifier's

    objective = Objective(Thinking(budgets=BUDGETS, prior="uniform", baseline="brpo", lam=0.5),
                          Summary(decoupled=True, group_size=A))
    got = record_advantages(records, ["q", "q"], objective, control)
    want = tree_advantages([Tree(t, tuple(map(tuple, r)), rec.rewards) for (t, _, _), r, rec in
                            zip(TREES, BY_HAND[mode], records)], ["q", "q"], objective)
    for g, w in zip(got, want):
        for field in ("thinking", "summaries", "scores", "segments"):
            assert torch.allclose(getattr(g, field), getattr(w, field)), field
    assert any(bool(g.summaries.abs().sum() > 0) for g in got)  # the premise: advantages that could differ


@pytest.mark.parametrize("think_len,want", [(1, 0.75), (2, 0.5)])
def test_train_entropy_is_the_mean_over_the_trained_tokens_even_of_one(think_len, want):
    """A thinking row trains its thinking tokens: one (0.75) or two (0.75, 0.25); the third token is not trained."""
    objective = Objective(Thinking(budgets=(4,), prior="base", baseline="grpo", lam=0.5),
                          Summary(decoupled=False, group_size=1))
    rec = TreeRecord((4,), think_len, ((1.0,),), row="thinking")
    assert trained_token_mean([torch.tensor([0.75, 0.25, 9.0])], [rec], objective) == pytest.approx(want)
