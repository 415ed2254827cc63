"""Tree packing (paper App. C): layout by hand, mask semantics, and equivalence with running every
branch as its own sequence through a tiny Qwen2."""

import hypothesis.strategies as st
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from arctl.algo.tree import (
    SummaryBranch,
    dense_tree_mask,
    dense_tree_masks,
    pack_tree,
    pad_tree,
    stack_trees,
    tree_block_counts,
    tree_block_mask,
    tree_mask_mod,
    unpack,
)


def small_tree(**kw):
    # prompt [1, 2]; thinking [10, 11, 12]; branch A cut after 1 thinking token: inserted [90], summary [20, 21]
    # branch B at the full thinking: inserted [91], summary [22]
    return pack_tree(
        [1, 2],
        [10, 11, 12],
        [SummaryBranch(1, [90], [20, 21], advantage=0.5), SummaryBranch(3, [91], [22], advantage=-1.0)],
        thinking_advantages=[0.1, 0.2, 0.3],
        **kw,
    )


def test_layout_by_hand():
    t = small_tree()
    #            prompt  thinking     branch A      branch B
    assert t.input_ids.tolist() == [1, 2, 10, 11, 12, 90, 20, 21, 91, 22]
    # branch A continues from its cut: prompt 2 + 1 thinking token -> positions 3, 4, 5
    assert t.position_ids.tolist() == [0, 1, 2, 3, 4, 3, 4, 5, 5, 6]
    assert t.loss_mask.tolist() == [False, False, True, True, True, False, True, True, False, True]
    assert t.advantages.tolist() == pytest.approx([0, 0, 0.1, 0.2, 0.3, 0, 0.5, 0.5, 0, -1.0])
    assert t.cut.tolist() == [0, 0, 0, 0, 0, 3, 3, 3, 5, 5]
    assert t.branch_start.tolist() == [0, 0, 0, 0, 0, 5, 5, 5, 8, 8]
    assert t.valid_len == t.length == 10
    assert t.predecessor.tolist() == [-1, 0, 1, 2, 3, 2, 5, 6, 4, 8]
    assert t.branch_indices(0).tolist() == [0, 1, 2, 5, 6, 7]
    assert t.branch_indices(1).tolist() == [0, 1, 2, 3, 4, 8, 9]


def test_dense_mask_by_hand():
    m = dense_tree_mask(small_tree().cut, small_tree().branch_start).int()
    want = [
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # prompt
        [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],  # thinking
        [1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 1, 0, 0, 0, 0],  # branch A: prompt + 1 thinking token + itself
        [1, 1, 1, 0, 0, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0, 1, 0],  # branch B: whole trunk, not branch A
        [1, 1, 1, 1, 1, 0, 0, 0, 1, 1],
    ]
    assert m.tolist() == want


def test_padding_sees_itself_only_and_is_outside_the_loss():
    t = small_tree(pad_to_multiple=8)
    assert t.length == 16 and t.valid_len == 10
    m = dense_tree_mask(t.cut, t.branch_start)
    assert torch.equal(m[10:, :], torch.eye(16, dtype=torch.bool)[10:])
    assert not t.loss_mask[10:].any() and (t.advantages[10:] == 0).all()
    assert torch.equal(m[:10, :10], dense_tree_mask(small_tree().cut, small_tree().branch_start))
    # every per-token tensor is padded to the same length (stack_trees stacks them), and a padding token's
    # predecessor is the token before it, as pad_tree (stack_trees' padding) gives it (from a mutation hunt: the
    # padding's predecessor went unchecked: 2 entries short, stacking the tree with another raised)
    fields = ("input_ids", "position_ids", "loss_mask", "advantages", "cut", "branch_start", "shared_start",
              "shared_end", "predecessor")
    assert {f: getattr(t, f).shape for f in fields} == {f: (16,) for f in fields}
    assert t.predecessor[10:].tolist() == [9, 10, 11, 12, 13, 14]
    assert torch.equal(t.predecessor[:10], small_tree().predecessor)
    same = pad_tree(small_tree(), 16)
    assert all(torch.equal(getattr(t, f), getattr(same, f)) for f in fields)


def test_unpack_round_trip():
    t = small_tree(pad_to_multiple=4)
    thinking, summaries = unpack(t, t.input_ids)
    assert thinking.tolist() == [10, 11, 12]
    assert [s.tolist() for s in summaries] == [[20, 21], [22]]
    thinking_adv, summary_adv = unpack(t, t.advantages)
    assert thinking_adv.tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert [s.tolist() for s in summary_adv] == [[0.5, 0.5], [-1.0]]


def test_stack_and_batched_masks():
    a, b = small_tree(), pack_tree([1], [5, 6], [SummaryBranch(0, [7], [8])])
    batch = stack_trees([a, b], pad_to_multiple=4)
    assert batch["input_ids"].shape == (2, 12)
    masks = dense_tree_masks([a, b], pad_to_multiple=4)
    assert masks.shape == (2, 1, 12, 12)
    assert torch.equal(masks[1, 0, :5, :5], dense_tree_mask(b.cut, b.branch_start))
    assert torch.equal(masks[1, 0, 5:], torch.eye(12, dtype=torch.bool)[5:])


def test_pack_errors():
    with pytest.raises(ValueError, match="cut 4 is outside the thinking"):
        pack_tree([1], [2, 3], [SummaryBranch(4, [9], [9])])
    with pytest.raises(ValueError, match="thinking_advantages has 1 entries but the thinking has 2"):
        pack_tree([1], [2, 3], [], thinking_advantages=[0.0])


def test_shared_inserted_layout_and_mask_by_hand():
    # prompt [1]; thinking [10, 11]; a group of two summaries cut after 1 thinking token sharing
    # inserted [90, 91]; then a branch at the full thinking with inserted [92]
    t = pack_tree([1], [10, 11], [SummaryBranch(1, [90, 91], [20, 21], 0.5), SummaryBranch(1, [90, 91], [22], -0.5),
                                  SummaryBranch(2, [92], [23], 1.0)], share_inserted=True)
    #                               prompt thinking  inserted  s1      s2   branch 3
    assert t.input_ids.tolist() == [1, 10, 11, 90, 91, 20, 21, 22, 92, 23]
    # both summaries continue after the inserted tokens: positions 2, 3 (inserted), then 4, 5 / 4
    assert t.position_ids.tolist() == [0, 1, 2, 2, 3, 4, 5, 4, 3, 4]
    assert t.loss_mask.tolist() == [False, True, True, False, False, True, True, True, False, True]
    # (a group of one shares its inserted token with its only summary the same way)
    assert t.shared_start.tolist() == [0, 0, 0, 0, 0, 3, 3, 3, 0, 8]
    assert t.shared_end.tolist() == [0, 0, 0, 0, 0, 5, 5, 5, 0, 9]
    # each token's previous token in its own sequence (summary 2 follows the inserted tokens, not summary 1)
    assert t.predecessor.tolist() == [-1, 0, 1, 1, 3, 4, 5, 4, 2, 8]
    assert t.branch_indices(0).tolist() == [0, 1, 3, 4, 5, 6]
    assert t.branch_indices(1).tolist() == [0, 1, 3, 4, 7]
    assert t.branch_indices(2).tolist() == [0, 1, 2, 8, 9]
    m = dense_tree_mask(t.cut, t.branch_start, t.shared_start, t.shared_end).int()
    want = [
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # prompt
        [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],  # thinking
        [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0, 0, 0, 0],  # shared inserted: prompt + 1 thinking token + itself
        [1, 1, 0, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 0, 1, 1, 1, 0, 0, 0, 0],  # summary 1: trunk cut + inserted + itself
        [1, 1, 0, 1, 1, 1, 1, 0, 0, 0],
        [1, 1, 0, 1, 1, 0, 0, 1, 0, 0],  # summary 2: the same inserted, not summary 1
        [1, 1, 1, 0, 0, 0, 0, 0, 1, 0],  # branch 3 (its own inserted token)
        [1, 1, 1, 0, 0, 0, 0, 0, 1, 1],
    ]
    assert m.tolist() == want
    thinking, summaries = unpack(t, t.input_ids)
    assert thinking.tolist() == [10, 11] and [x.tolist() for x in summaries] == [[20, 21], [22], [23]]


# ------------------------------------------------------------------ equivalence with a tiny Qwen2
def random_tree(gen, prompt_len, think_len, n_branches, vocab=64, pad_to_multiple=None, group=1, share=False):
    """``n_branches`` summary groups of ``group`` summaries (same cut and inserted tokens)."""
    def ids(n):
        return torch.randint(1, vocab, (n,), generator=gen).tolist()

    def rand(lo, hi):
        return int(torch.randint(lo, hi, (1,), generator=gen))

    branches = []
    for _ in range(n_branches):
        cut, inserted = rand(0, think_len + 1), ids(rand(1, 4))
        branches += [SummaryBranch(cut, inserted, ids(rand(0, 6))) for _ in range(group)]
    return pack_tree(ids(prompt_len), ids(think_len), branches, pad_to_multiple=pad_to_multiple, share_inserted=share)


@pytest.mark.parametrize("share", [False, True])
def test_packed_logits_equal_separate_sequences(tiny_qwen2, share):
    gen = torch.Generator().manual_seed(1)
    trees = [random_tree(gen, 5, 40, 6, group=3, share=share), random_tree(gen, 3, 17, 4, group=2, share=share),
             random_tree(gen, 7, 1, 3, share=share)]
    batch = stack_trees(trees, pad_to_multiple=16)
    mask = dense_tree_mask(batch["cut"], batch["branch_start"], batch["shared_start"], batch["shared_end"])[:, None]
    with torch.no_grad():
        packed = tiny_qwen2(input_ids=batch["input_ids"], position_ids=batch["position_ids"], attention_mask=mask).logits
        causal_only = tiny_qwen2(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
        worst_control = 0.0
        for b, tree in enumerate(trees):
            trunk = tree.trunk_indices()
            ref = tiny_qwen2(input_ids=tree.input_ids[trunk][None]).logits[0]
            torch.testing.assert_close(packed[b, trunk], ref, rtol=0, atol=1e-5)
            for i in range(len(tree.branches)):
                idx = tree.branch_indices(i)
                ref = tiny_qwen2(input_ids=tree.input_ids[idx][None]).logits[0]
                torch.testing.assert_close(packed[b, idx], ref, rtol=0, atol=1e-5)
                worst_control = max(worst_control, (causal_only[b, idx] - ref).abs().max().item())
    assert worst_control > 1e-3  # control: without the tree mask, branches see each other


# ------------------------------------------------------------------ FlexAttention
def dense_reference(t):
    """The tree mask by its definition: q sees k iff k is a token of the sequence q belongs to
    (prompt + thinking[:cut] + inserted + summary of its branch, or the trunk) and k <= q."""
    n = t.length
    m = torch.eye(n, dtype=torch.bool)
    sequences = [t.trunk_indices()] + [t.branch_indices(i) for i in range(len(t.branches))]
    for idx in sequences:
        own = idx if idx is sequences[0] else idx[idx >= t.trunk_len]  # the tokens this sequence adds
        for q in own.tolist():
            for k in idx.tolist():
                if k <= q:
                    m[q, k] = True
    return m


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 6),
    st.integers(1, 60),
    st.integers(0, 6),
    st.sampled_from([None, 8, 16]),
    st.sampled_from([8, 16, 32]),
    st.integers(0, 2**31 - 1),
    st.sampled_from([(1, False), (3, False), (3, True)]),
)
def test_mask_mod_and_block_mask_equal_dense_mask(prompt_len, think_len, n_branches, pad, block, seed, grouping):
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    group, share = grouping
    t = random_tree(torch.Generator().manual_seed(seed), prompt_len, think_len, n_branches, pad_to_multiple=pad,
                    group=group, share=share)
    n = t.length
    shared = (t.shared_start, t.shared_end) if share else (None, None)
    dense = dense_tree_mask(t.cut, t.branch_start, *shared)
    assert torch.equal(dense, dense_reference(t))
    mod = tree_mask_mod(t.cut, t.branch_start, *shared)
    assert torch.equal(create_mask(mod, None, None, n, n, "cpu")[0, 0], dense)
    # interval-built block tables == create_block_mask's (which builds the dense mask eagerly)
    ref = create_block_mask(mod, None, None, n, n, "cpu", block)
    mine = tree_block_mask(t.cut, t.branch_start, "cpu", block, shared_start=shared[0], shared_end=shared[1])
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "full_q_num_blocks"):
        assert torch.equal(getattr(mine, name), getattr(ref, name)), name
    # block counts are the number of attended pairs of every tile
    nb = -(-n // block)
    padded = F.pad(dense, (0, nb * block - n, 0, nb * block - n)).view(nb, block, nb, block)
    assert torch.equal(tree_block_counts(t.cut, t.branch_start, block, *shared)[0], padded.sum((1, 3)))


def test_batched_mask_mod_and_block_mask_equal_dense():
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    gen = torch.Generator().manual_seed(3)
    batch = stack_trees([random_tree(gen, 2, 9, 3), random_tree(gen, 4, 20, 2)], pad_to_multiple=8)
    n = batch["cut"].shape[1]
    got = create_mask(tree_mask_mod(batch["cut"], batch["branch_start"]), 2, None, n, n, "cpu")
    assert torch.equal(got[:, 0], dense_tree_mask(batch["cut"], batch["branch_start"]))
    mod = tree_mask_mod(batch["cut"], batch["branch_start"])
    ref = create_block_mask(mod, 2, None, n, n, "cpu", 8)
    mine = tree_block_mask(batch["cut"], batch["branch_start"], "cpu", 8)
    assert mine.kv_num_blocks.shape == (2, 1, n // 8)
    assert torch.equal(mine.to_dense(), ref.to_dense())
    assert torch.equal(mine.full_kv_num_blocks, ref.full_kv_num_blocks)


def test_compiled_flex_attention_equals_sdpa_with_dense_mask():
    """The one compiled test (~10-30 s on CPU the first time)."""
    from torch.nn.attention.flex_attention import flex_attention

    gen = torch.Generator().manual_seed(0)
    tree = random_tree(gen, 10, 150, 5, pad_to_multiple=128)
    n = tree.length
    q, k, v = (torch.randn(1, 2, n, 16, generator=gen) for _ in range(3))
    block_mask = tree_block_mask(tree.cut, tree.branch_start, "cpu", 128)
    try:
        out = torch.compile(flex_attention, dynamic=False)(q, k, v, block_mask=block_mask)
    finally:
        # dynamo caches compiled code per function: a later compile of flex_attention with other
        # shapes (transformers' flex path in tests/verl) would be marked dynamic, and inductor's CPU
        # flex template fails to build with dynamic shapes in torch 2.13
        torch._dynamo.reset()
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=dense_tree_mask(tree.cut, tree.branch_start))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
