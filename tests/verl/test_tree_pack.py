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
    groups = [
        LeafGroup(4, [0], [], [90, 91, 92], [[70, 71], [72]], [1.0, 0.0]),
        LeafGroup(8, [1], [], [90, 91, 92], [[73], [74, 75, 76]], [0.0, 0.0]),
        LeafGroup(12, [2, 3], [], [93], [[77, 78], [79]], [1.0, 1.0]),
    ]
    return TreeRollout(prompt, thinking, [4, 8, 16, 20], groups, finished=True, eos=False)


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
        cut = rec.group_cuts[k // 2]
        # branch positions continue from its cut point; its tokens are what the agent loop produced
        assert pos[p + start : p + end] == list(range(p + cut, p + cut + end - start))
        grp = tree.groups[k // 2]
        assert row["response_ids"][start:sstart] == grp.inserted
        assert row["response_ids"][sstart:end] == grp.summaries[k % 2]
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
    for row, (start, _sstart, end) in zip(dup[1:], rec.spans):
        g, a = row["record"].leaf
        cut = rec.group_cuts[g]
        assert row["response_ids"] == tree.thinking[:cut] + packed["response_ids"][start:end]


def test_record_that_does_not_match_the_row_is_rejected():
    tree = _tree()
    row = output_rows(tree, "flex")[0]
    rec = TreeRecord.from_dict(row["record"].to_dict())
    bad = TreeRecord.from_dict({**rec.to_dict(), "think_len": rec.think_len - 1})
    with pytest.raises(ValueError):
        tree_tensors(row["prompt_ids"], row["response_ids"], bad)
