"""Actor forward on packed trees: FlexAttention BlockMask == dense 4-D mask == duplicated branches (CPU)."""

from __future__ import annotations

import pytest
import torch

from arctl.algo.tree import SummaryBranch, pack_tree, stack_trees
from arctl.backends.verl.tree_forward import padded_tree_encoding, sequence_log_probs, tree_log_probs


def _trees():
    g = torch.Generator().manual_seed(1)
    r = lambda n: torch.randint(3, 250, (n,), generator=g).tolist()  # noqa: E731
    ins, fin = r(4), r(2)
    t1 = pack_tree(r(9), r(70), [SummaryBranch(20, ins, r(5)), SummaryBranch(20, ins, r(3)),
                                 SummaryBranch(50, ins, r(6)), SummaryBranch(70, fin, r(4))])
    t2 = pack_tree(r(12), r(40), [SummaryBranch(10, ins, r(7)), SummaryBranch(40, fin, r(2))])
    return [t1, t2]


def test_flex_block_mask_forward_equals_dense_and_duplicated_branches(tiny_model):
    torch.set_num_threads(1)
    trees = _trees()
    batch = stack_trees(trees, pad_to_multiple=128)
    ids, pos = batch["input_ids"], batch["position_ids"]
    model = tiny_model
    with torch.no_grad():
        model.set_attn_implementation("sdpa")
        dense = tree_log_probs(model, ids, pos, batch["cut"], batch["branch_start"], "sdpa")
        model.set_attn_implementation("flex_attention")
        try:
            flex = tree_log_probs(model, ids, pos, batch["cut"], batch["branch_start"], "flex_attention")
        finally:
            model.set_attn_implementation("sdpa")
        for b, tree in enumerate(trees):
            valid = torch.zeros(ids.shape[1] - 1, dtype=torch.bool)  # log-prob of token t sits at t-1
            valid[: tree.valid_len - 1] = True
            torch.testing.assert_close(flex[b][valid], dense[b][valid], atol=1e-5, rtol=1e-5)
            # duplicated branches: each branch as its own sequence, plain causal attention
            trunk = sequence_log_probs(model, tree.input_ids[tree.trunk_indices()])
            torch.testing.assert_close(dense[b][: tree.trunk_len - 1], trunk, atol=1e-5, rtol=1e-5)
            for i, span in enumerate(tree.branches):
                own = sequence_log_probs(model, tree.input_ids[tree.branch_indices(i)])
                n = span.end - span.start - 1  # branch tokens after its first (inserted) one
                torch.testing.assert_close(dense[b][span.start : span.end - 1], own[-n:], atol=1e-5, rtol=1e-5)
                # every trained token of the branch (summary) is covered by the comparison above
                assert not tree.loss_mask[span.start]


def test_the_token_after_a_branch_boundary_is_never_trained():
    for tree in _trees():
        for span in tree.branches:
            assert span.summary_start > span.start  # >= 1 inserted token opens every branch
            assert not tree.loss_mask[span.start]


def test_padded_tree_encoding_pads_to_self_attention():
    cut = torch.nested.as_nested_tensor([torch.tensor([0, 0, 2]), torch.tensor([0])], layout=torch.jagged)
    bst = torch.nested.as_nested_tensor([torch.tensor([0, 0, 2]), torch.tensor([0])], layout=torch.jagged)
    c, s = padded_tree_encoding(cut, bst, 4)
    assert c.tolist() == [[0, 0, 2, 0], [0, 0, 0, 0]]
    assert s.tolist() == [[0, 0, 2, 3], [0, 1, 2, 3]]


def test_block_mask_for_the_paper_tree_never_builds_an_LxL_tensor():
    """L = 10,176 (128 prompt + 8,000 thinking + 16 branches x 128): every tensor created while
    building the BlockMask is far smaller than [L, L] (memory numbers: benchmarks/bench_block_mask.py)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from arctl.backends.verl.tree_forward import tree_attention_mask

    cuts = [2000, 4000, 6000, 8000]
    tree = pack_tree([3] * 128, [4] * 8000, [SummaryBranch(c, [1] * 8, [2] * 120) for c in cuts for _ in range(4)])
    assert tree.length == 10176

    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    Largest.numel = max(Largest.numel, t.numel())
            return out

    with Largest():
        mask = tree_attention_mask(tree.cut[None], tree.branch_start[None], "flex_attention")
    assert type(mask).__name__ == "BlockMask"
    assert Largest.numel * 16 < tree.length**2  # largest tensor < L^2 / 16 (it is O(L * L / 128))


def test_patched_fsdp_engine_inputs_give_the_tree_forward(tiny_model, monkeypatch):
    """verl's FSDPEngineWithLMHead.prepare_model_inputs (patched by the plugin) on a micro-batch of
    two packed trees: the model inputs it builds reproduce the per-tree log-probs, for SDPA (dense
    4-D mask) and FlexAttention (BlockMask); micro-batches without tree fields are unchanged."""
    import verl.workers.engine.fsdp.transformer_impl as ti
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    import arctl.backends.verl.plugin  # noqa: F401 - installs the engine patch on import of the engine

    assert getattr(ti.FSDPEngineWithLMHead.prepare_model_inputs, "_arctl_tree_patched", False)
    trees = _trees()
    nest = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731

    def micro_batch(with_tree: bool):
        fields = {"input_ids": nest([t.input_ids for t in trees]), "position_ids": nest([t.position_ids for t in trees]),
                  "temperature": torch.ones(len(trees))}
        if with_tree:
            fields["tree_cut"] = nest([t.cut for t in trees])
            fields["tree_branch_start"] = nest([t.branch_start for t in trees])
        mb = TensorDict(fields, batch_size=len(trees))
        tu.assign_non_tensor(mb, use_remove_padding=False)
        return mb

    class Engine:  # the attributes prepare_model_inputs reads on this path
        pad_to_length = False
        module = tiny_model

    torch.set_num_threads(1)
    plain, _ = ti.FSDPEngineWithLMHead.prepare_model_inputs(Engine(), micro_batch(False))
    assert plain["attention_mask"].dim() == 2  # untouched without tree fields
    for impl in ("sdpa", "flex_attention"):
        tiny_model.set_attn_implementation(impl)
        try:
            inputs, _ = ti.FSDPEngineWithLMHead.prepare_model_inputs(Engine(), micro_batch(True))
            assert type(inputs["attention_mask"]).__name__ == ("BlockMask" if impl == "flex_attention" else "Tensor")
            if impl == "flex_attention":  # verl.block_size, as the run's runtime env gives it (from a review: the
                assert inputs["attention_mask"].BLOCK_SIZE == (128, 128)  # mask was built at 128 whatever it said)
                monkeypatch.setenv("ARCTL_TREE_BLOCK_SIZE", "16")
                inputs, _ = ti.FSDPEngineWithLMHead.prepare_model_inputs(Engine(), micro_batch(True))
                monkeypatch.delenv("ARCTL_TREE_BLOCK_SIZE")
                assert inputs["attention_mask"].BLOCK_SIZE == (16, 16)
            with torch.no_grad():
                logits = tiny_model(**inputs).logits.float()
        finally:
            tiny_model.set_attn_implementation("sdpa")
        for b, tree in enumerate(trees):
            with torch.no_grad():
                ref = tree_log_probs(tiny_model, tree.input_ids[None], tree.position_ids[None], tree.cut[None],
                                     tree.branch_start[None], "sdpa")[0]
            logp = torch.log_softmax(logits[b, : tree.length - 1], -1).gather(-1, tree.input_ids[1:, None])[:, 0]
            torch.testing.assert_close(logp, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("which", ["eager", "unreadable"])
def test_the_patched_engine_refuses_an_attention_that_would_add_the_mask(tiny_model, which):
    """Issue 26 (3): the patch assumed SDPA when it could not read the implementation; a boolean 4-D
    mask given to eager attention is *added* to the scores. It raises instead."""
    import verl.workers.engine.fsdp.transformer_impl as ti
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    import arctl.backends.verl.plugin  # noqa: F401

    tree = _trees()[0]
    nest = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    mb = TensorDict({"input_ids": nest([tree.input_ids]), "position_ids": nest([tree.position_ids]),
                     "temperature": torch.ones(1), "tree_cut": nest([tree.cut]),
                     "tree_branch_start": nest([tree.branch_start])}, batch_size=1)
    tu.assign_non_tensor(mb, use_remove_padding=False)

    built = tiny_model if which == "eager" else torch.nn.Linear(2, 2)  # a module with no config to read

    class Engine:
        pad_to_length = False
        module = built

    if which == "eager":
        tiny_model.set_attn_implementation("eager")
    try:
        with pytest.raises(RuntimeError, match="flex_attention or sdpa"):
            ti.FSDPEngineWithLMHead.prepare_model_inputs(Engine(), mb)
    finally:
        tiny_model.set_attn_implementation("sdpa")
