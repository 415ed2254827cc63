"""Tree packing round-trips: agent-loop rows -> arctl.algo.tree packing -> the same tokens, positions
continuing from each cut, and the branches recovered."""

from __future__ import annotations

import pytest

from arctl.algo.tree import dense_tree_mask
from arctl.backends.verl.advantage import TreeRecord
from arctl.backends.verl.agent_loop import LeafGroup, TreeRollout, output_rows


def tree_tensors(*args):
    from arctl.backends.verl.trainer_v1 import tree_tensors as impl  # imports verl

    return impl(*args)


def _tree():
    prompt, thinking = [1, 2, 3], list(range(10, 22))  # 12 thinking tokens
    groups = [  # A = 2 summaries per budget; budgets 16 and 20 share the full thinking (2 x 2 summaries)
        LeafGroup(4, [0], [], [90, 91, 92], [[70, 71], [72]], [1.0, 0.0]),
        LeafGroup(8, [1], [], [90, 91, 92], [[73], [74, 75, 76]], [0.0, 0.0]),
        LeafGroup(12, [2, 3], [], [93], [[77, 78], [79], [80], [81, 82]], [1.0, 1.0, 0.0, 1.0]),
    ]
    return TreeRollout(prompt, thinking, [4, 8, 16, 20], groups, finished=True, eos=False, group_size=2)


def _leaf(tree, k):
    """(group, summary) of packed summary k (groups in order, summaries in order)."""
    for grp in tree.groups:
        if k < len(grp.summaries):
            return grp, grp.summaries[k]
        k -= len(grp.summaries)
    raise IndexError(k)


def test_record_holds_a_rewards_row_per_budget():
    rec = output_rows(_tree(), "flex")[0]["record"]
    assert rec.rewards == ((1.0, 0.0), (0.0, 0.0), (1.0, 1.0), (0.0, 1.0))
    assert rec.cuts == [4, 8, 12, 12] and len(rec.spans) == 8


def test_packed_row_round_trips_through_arctl_algo_tree():
    tree = _tree()
    row = output_rows(tree, "flex")[0]
    rec = TreeRecord.from_dict(row["record"].to_dict())
    assert TreeRecord.from_dict(rec.to_dict()) == rec
    tt = tree_tensors(row["prompt_ids"], row["response_ids"], rec)
    p, t = 3, 12
    pos = tt["position_ids"].tolist()
    assert pos[: p + t] == list(range(p + t))
    for k, (start, sstart, end) in enumerate(rec.spans):
        cut = rec.cuts[k // 2]
        # branch positions continue from its cut point; its tokens are what the agent loop produced
        assert pos[p + start : p + end] == list(range(p + cut, p + cut + end - start))
        grp, summary = _leaf(tree, k)
        assert row["response_ids"][start:sstart] == grp.inserted
        assert row["response_ids"][sstart:end] == summary
        mask = dense_tree_mask(tt["tree_cut"], tt["tree_branch_start"])
        q = p + end - 1  # last token of the branch
        seen = mask[q].nonzero().flatten().tolist()
        assert seen == list(range(p + cut)) + list(range(p + start, p + end))


def test_duplicate_rows_hold_the_same_tree():
    tree = _tree()
    packed = output_rows(tree, "flex")[0]
    dup = output_rows(tree, "duplicate")
    assert dup[0]["response_ids"] == tree.thinking
    rec = TreeRecord.from_dict(packed["record"].to_dict())
    assert len(dup) == 1 + len(rec.spans)
    for k, (row, (start, _sstart, end)) in enumerate(zip(dup[1:], rec.spans)):
        j, a = row["record"].leaf
        assert (j, a) == divmod(k, 2)  # budget-major
        cut = rec.cuts[j]
        assert row["response_ids"] == tree.thinking[:cut] + packed["response_ids"][start:end]


def test_record_that_does_not_match_the_row_is_rejected():
    tree = _tree()
    row = output_rows(tree, "flex")[0]
    rec = TreeRecord.from_dict(row["record"].to_dict())
    bad = TreeRecord.from_dict({**rec.to_dict(), "think_len": rec.think_len - 1})
    with pytest.raises(ValueError):
        tree_tensors(row["prompt_ids"], row["response_ids"], bad)
