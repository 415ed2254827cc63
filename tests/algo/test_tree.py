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


# ------------------------------------------------------------------ equivalence with a tiny Qwen2
def random_tree(gen, prompt_len, think_len, n_branches, vocab=64, pad_to_multiple=None):
    def ids(n):
        return torch.randint(1, vocab, (n,), generator=gen).tolist()

    branches = [
        SummaryBranch(
            int(torch.randint(0, think_len + 1, (1,), generator=gen)),
            ids(int(torch.randint(1, 4, (1,), generator=gen))),
            ids(int(torch.randint(0, 6, (1,), generator=gen))),
        )
        for _ in range(n_branches)
    ]
    return pack_tree(ids(prompt_len), ids(think_len), branches, pad_to_multiple=pad_to_multiple)


def test_packed_logits_equal_separate_sequences(tiny_qwen2):
    gen = torch.Generator().manual_seed(1)
    trees = [random_tree(gen, 5, 40, 6), random_tree(gen, 3, 17, 4), random_tree(gen, 7, 1, 3)]
    batch = stack_trees(trees, pad_to_multiple=16)
    mask = dense_tree_mask(batch["cut"], batch["branch_start"])[:, None]
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
@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 6),
    st.integers(1, 60),
    st.integers(0, 6),
    st.sampled_from([None, 8, 16]),
    st.sampled_from([8, 16, 32]),
    st.integers(0, 2**31 - 1),
)
def test_mask_mod_and_block_mask_equal_dense_mask(prompt_len, think_len, n_branches, pad, block, seed):
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    t = random_tree(torch.Generator().manual_seed(seed), prompt_len, think_len, n_branches, pad_to_multiple=pad)
    n = t.length
    dense = dense_tree_mask(t.cut, t.branch_start)
    mod = tree_mask_mod(t.cut, t.branch_start)
    assert torch.equal(create_mask(mod, None, None, n, n, "cpu")[0, 0], dense)
    # interval-built block tables == create_block_mask's (which builds the dense mask eagerly)
    ref = create_block_mask(mod, None, None, n, n, "cpu", block)
    mine = tree_block_mask(t.cut, t.branch_start, "cpu", block)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "full_q_num_blocks"):
        assert torch.equal(getattr(mine, name), getattr(ref, name)), name
    # block counts are the number of attended pairs of every tile
    nb = -(-n // block)
    padded = F.pad(dense, (0, nb * block - n, 0, nb * block - n)).view(nb, block, nb, block)
    assert torch.equal(tree_block_counts(t.cut, t.branch_start, block)[0], padded.sum((1, 3)))


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
