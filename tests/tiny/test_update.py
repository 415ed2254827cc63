"""The tree-packed PPO loss equals the loss of the same tokens as duplicated branch sequences."""

import pytest
import torch

from arctl.algo.settings import Loss, Objective, Thinking
from arctl.algo.tree import SummaryBranch, pack_tree
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.update import (
    duplicated_batch,
    policy_loss,
    token_logprobs,
    tree_batch,
)

OBJECTIVE = Objective(Thinking(budgets=(4, 8, 12)), loss=Loss(loss_norm_len=12))  # C = trees x 12
MICRO_MODEL = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                   tie_embeddings=True, max_position_embeddings=256)


def _trees(vocab, seed, share=False, think_end=False):
    """Trees of 2-summary groups; with ``share`` a group's summaries share their inserted tokens; with
    ``think_end`` (Elastic's E1 layout, ``summary.inserted=think_end``) a branch at the end of a
    finished thinking has no inserted tokens (the answer follows the model's own ``</think>``) and a
    cut one has one."""
    g = torch.Generator().manual_seed(seed)
    r = lambda n: torch.randint(3, vocab, (n,), generator=g).tolist()  # noqa: E731
    trees = []
    for t_len, cuts in [(12, [4, 8, 12]), (7, [3, 7]), (10, [10])]:
        branches = []
        for c in cuts:
            inserted = r(2 + (c % 3))
            if think_end:
                inserted = [] if c == t_len else r(1)
            branches += [SummaryBranch(c, inserted if share or think_end else r(2 + (c % 3)), r(1 + k),
                                       float(torch.randn(1, generator=g))) for k in range(2)]
        trees.append(pack_tree(r(5), r(t_len), branches, torch.randn(t_len, generator=g), share_inserted=share))
    return trees


LAYOUTS = [dict(share=False), dict(share=True), dict(think_end=True), dict(share=True, think_end=True)]


def _model(vocab):
    cfg = model_config(MICRO_MODEL, vocab, 0, 2)
    return build_model(cfg, 1)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_tree_logprobs_equal_duplicated_branch_logprobs(layout):
    model = _model(50)
    trees = _trees(50, 0, **layout)
    if layout.get("think_end"):  # a finished thinking's answer has no inserted tokens before it
        assert any(span.summary_start == span.start for tree in trees for span in tree.branches)
    tb, db = tree_batch(trees, 0), duplicated_batch(trees, 0)
    lt, _ = token_logprobs(model, tb)
    ld, _ = token_logprobs(model, db)
    tree_vals = torch.sort(lt[tb.loss_mask]).values
    dup_vals = torch.sort(ld[db.loss_mask]).values
    assert tree_vals.shape == dup_vals.shape  # the same trained tokens, each once
    torch.testing.assert_close(tree_vals, dup_vals, atol=1e-5, rtol=1e-5)


def test_logprobs_and_entropy_of_trained_tokens_equal_a_plain_forward():
    model = _model(50)
    trees = _trees(50, 1)
    db = duplicated_batch(trees, 0)
    logp, ent = token_logprobs(model, db, temperature=0.7)
    with torch.no_grad():
        logits = model(input_ids=db.input_ids, attention_mask=db.lengths[:, None] > torch.arange(db.input_ids.shape[1])).logits
    ref_all = torch.log_softmax(logits[:, :-1].float() / 0.7, -1)
    ref = ref_all.gather(-1, db.input_ids[:, 1:, None])[..., 0]
    ref_ent = -(ref_all.exp() * ref_all).sum(-1)
    trained = db.loss_mask[:, 1:]
    torch.testing.assert_close(logp[:, 1:][trained], ref[trained], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent[:, 1:][trained], ref_ent[trained], atol=1e-5, rtol=1e-5)
    assert (logp[:, 1:][~trained] == 0).all() and (logp[:, 0] == 0).all()


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_tree_loss_and_gradient_equal_duplicated_branches(layout):
    trees = _trees(50, 1, **layout)
    if layout == dict(share=True):  # each group's inserted tokens are packed once
        assert sum(t.length for t in trees) < sum(t.length for t in _trees(50, 1, False))
    grads, losses = [], []
    for make in (tree_batch, duplicated_batch):
        model = _model(50)
        loss, _, _ = policy_loss(model, make(trees, 0), OBJECTIVE, n_trees=3)
        loss.backward()
        losses.append(loss.detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(losses[0], losses[1], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)
    assert grads[0].abs().sum() > 0


def test_micro_batched_update_equals_one_batch():
    from arctl.backends.tiny.update import ppo_update

    trees = _trees(50, 2)
    params = []
    for micro in (1, 100):
        model = _model(50)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        out = ppo_update(model, opt, tree_batch(trees, 0), torch.tensor([0, 0, 1]), 2, 2, OBJECTIVE, 1.0,
                         1.0, micro)
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        assert out["loss"] == out["loss"] and out["entropy"] > 0
    torch.testing.assert_close(params[0], params[1], atol=2e-5, rtol=1e-4)  # Adam steps of 1e-2 each
    assert not torch.equal(params[0], torch.cat([p.detach().flatten() for p in _model(50).parameters()]))


def test_the_kl_term_pulls_the_policy_back_to_the_reference():
    """Zero advantages: the policy loss has no gradient, so an update moves the weights by the KL term
    alone, and it moves them towards the reference (the KL of the trained tokens falls); without a
    reference model a KL objective is refused."""
    from arctl.backends.tiny.update import ppo_update

    trees = _trees(50, 3)
    for tree in trees:
        tree.advantages.zero_()
    reference = _model(50).eval().requires_grad_(False)
    kl = Objective(Thinking(budgets=(4, 8, 12)), loss=Loss(loss_norm_len=12, kl_coef=0.5, kl_type="low_var_kl"))
    model = build_model(model_config(MICRO_MODEL, 50, 0, 2), 7)  # another init: far from the reference
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    groups = torch.tensor([0, 0, 1])
    first = ppo_update(model, opt, tree_batch(trees, 0), groups, 2, 1, kl, 0.0, 1.0, 16, reference=reference)
    for _ in range(5):
        last = ppo_update(model, opt, tree_batch(trees, 0), groups, 2, 1, kl, 0.0, 1.0, 16, reference=reference)
    assert first["kl"] > 0 and last["kl"] < 0.8 * first["kl"], (first, last)
    assert first["loss"] == 0.0 and first["kl_loss"] > 0  # train/loss is the policy part alone
    # the same update without the coefficient leaves the weights where they are (no gradient at all)
    plain = build_model(model_config(MICRO_MODEL, 50, 0, 2), 7)
    before = torch.cat([p.detach().flatten().clone() for p in plain.parameters()])
    out = ppo_update(plain, torch.optim.AdamW(plain.parameters(), lr=3e-3, weight_decay=0.0), tree_batch(trees, 0),
                     groups, 2, 1, OBJECTIVE, 0.0, 1.0, 16)
    assert "kl" not in out and torch.equal(before, torch.cat([p.detach().flatten() for p in plain.parameters()]))
    with pytest.raises(ValueError, match="needs the reference model"):
        ppo_update(model, opt, tree_batch(trees, 0), groups, 2, 1, kl, 0.0, 1.0, 16)


def test_an_update_with_a_gradient_that_is_not_finite_is_skipped_as_verl_skips_it():
    """verl 0.9.1's engines skip an optimizer step whose gradient norm is not finite (and drop its
    gradients); the tiny backend stepped anyway and every weight became NaN. A NaN advantage in the second
    prompt group's mini-batch: that step is skipped and counted, the first group's step is taken as if
    the second had not been there, and the weights stay finite."""
    from arctl.backends.tiny.update import ppo_update

    trees = _trees(50, 4)
    trees[2].advantages.fill_(float("nan"))
    model = _model(50)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    out = ppo_update(model, opt, tree_batch(trees, 0), torch.tensor([0, 0, 1]), 1, 1, OBJECTIVE, 1.0, 1.0, 16)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert out["skipped"] == 1 and out["loss"] != out["loss"]  # the NaN loss is logged: the divergence shows
    assert torch.isfinite(after).all()
    alone = _model(50)
    ppo_update(alone, torch.optim.AdamW(alone.parameters(), lr=1e-2), tree_batch(trees[:2], 0), torch.tensor([0, 0]),
               1, 1, OBJECTIVE, 1.0, 1.0, 16)
    torch.testing.assert_close(after, torch.cat([p.detach().flatten() for p in alone.parameters()]))
    assert not torch.equal(after, torch.cat([p.detach().flatten() for p in _model(50).parameters()]))


@pytest.mark.parametrize("mini_groups, epochs", [(1, 1), (1, 2), (2, 2), (2, 1), (3, 1)])
def test_the_entropy_is_the_token_mean_of_the_policy_that_sampled_the_batch(mini_groups, epochs):
    """``train/entropy`` as verl's: one mean over every trained token of the step, under the policy before any
    optimizer step (verl's old-log-prob pass; arctl.backends.verl.advantage.trained_token_mean). Tiny averaged
    the mini-batches' means, the later ones after an update (from a hunt: 2.0 against verl's 2.016 on two
    mini-batches of 277 and 286 tokens). (3, 1): one optimizer step (the tiny scale's train_batch_size =
    ppo_mini_batch_size, one epoch), whose entropy comes from the step's own micro-batches (2 and 1 trees here):
    untested before a mutation hunt (each micro-batch's mean x its token count passed)."""
    from arctl.backends.tiny.update import ppo_update

    trees = _trees(50, 3)
    batch = tree_batch(trees, 0)
    model = _model(50)
    _, ent = token_logprobs(model, batch)
    want = float(ent[batch.loss_mask].double().mean())
    groups = torch.tensor([0, 1, 2])  # three prompts: mini-batches of unequal token counts
    out = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=5e-2), batch, groups, mini_groups, epochs,
                     OBJECTIVE, 1.0, 1.0, 2)
    assert out["entropy"] == pytest.approx(want, rel=1e-6, abs=1e-7)
    again = [float(token_logprobs(model, batch)[1][batch.loss_mask].double().mean())]
    assert again[0] != pytest.approx(want, rel=1e-4)  # the policy moved: a later mini-batch's entropy differs


@pytest.mark.parametrize("mini_groups", [1, 3])
def test_the_logged_kl_term_is_its_mean_over_the_optimizer_steps(mini_groups):
    """``kl_loss`` is the mean over optimizer steps of each step's KL term, optim.kl_coef x the sum over the
    mini-batch's trained tokens of the estimate / (trees x loss_norm_len). With lr 0 no step moves the policy,
    so the mean of 3 epochs is that of one epoch's mini-batches, worked here from their log-probs with k2
    ((logp - ref)^2 / 2) (from a mutation hunt: the steps' sum x their count passed)."""
    from arctl.backends.tiny.update import ppo_update

    trees = _trees(50, 3)
    kl = Objective(Thinking(budgets=(4, 8, 12)), loss=Loss(loss_norm_len=12, kl_coef=0.5, kl_type="mse"))
    reference = _model(50).eval().requires_grad_(False)
    model = build_model(model_config(MICRO_MODEL, 50, 0, 2), 7)  # another init: a KL term far from 0
    batch = tree_batch(trees, 0)
    with torch.no_grad():
        logp, ref = token_logprobs(model, batch)[0].double(), token_logprobs(reference, batch)[0].double()
    minis = [[0, 1, 2]] if mini_groups == 3 else [[0], [1], [2]]  # groups 0, 1, 2: one prompt a tree
    terms = [0.5 * float((0.5 * (logp[i] - ref[i]).square() * batch.loss_mask[i]).sum()) / (len(i) * 12)
             for i in minis]
    out = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.0), batch, torch.tensor([0, 1, 2]), mini_groups,
                     3, kl, 0.0, 1.0, 2, reference=reference)
    assert out["steps"] == 3 * len(minis) and min(terms) > 0
    assert out["kl_loss"] == pytest.approx(sum(terms) / len(terms), rel=1e-5)
