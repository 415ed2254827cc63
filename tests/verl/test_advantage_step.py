"""The trainer's advantage step on hand-built tree batches equals arctl.algo applied directly."""

from __future__ import annotations

import random

import pytest
import torch

from arctl.algo.advantages import summary_advantages, thinking_advantages, token_advantages
from arctl.algo.priors import budget_prior
from arctl.backends.verl.advantage import AdvantageSettings, TreeRecord, response_advantages, tree_advantages
from arctl.backends.verl.agent_loop import LeafGroup, TreeRollout, output_rows


def _tree(prompt, thinking, budgets, leaves, finished=False, inserted=(90, 91), summary_len=2):
    """A TreeRollout with given leaf rewards per distinct cut (summary tokens are dummies)."""
    from arctl.algo.prompts import distinct_cuts

    groups = []
    for (cut, idx), rewards in zip(distinct_cuts(len(thinking), budgets), leaves):
        groups.append(LeafGroup(cut=cut, budget_indices=idx, prefix=[], inserted=list(inserted),
                                summaries=[[70 + a] * summary_len for a in range(len(rewards))],
                                rewards=[float(r) for r in rewards]))
    return TreeRollout(list(prompt), list(thinking), list(budgets), groups, finished, False)


class FakeTQ:
    """In-memory stand-in for TransferQueue's kv API (kv_batch_get / kv_batch_put)."""

    def __init__(self, rows: dict[str, dict]):
        self.rows = rows

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        fields = select_fields or list(next(iter(self.rows.values())))
        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in fields} for k in keys])

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, k in enumerate(keys):
            for name in fields.keys():
                self.rows[k][name] = fields[name][i]
        return Batch(keys, [{}] * len(keys))


class Batch:
    def __init__(self, keys, tags):
        self.keys, self.tags, self.partition_id, self.extra_info = list(keys), list(tags), "train", {}

    def __len__(self):
        return len(self.keys)


def _run_trainer_step(monkeypatch, trees_by_uid, layout, settings):
    """Rows as verl stores them, through ArctlPPOTrainer._compute_advantage with a fake TransferQueue."""
    from arctl.backends.verl import trainer_v1

    rows, keys = {}, []
    for uid, trees in trees_by_uid.items():
        for session, tree in enumerate(trees):
            for i, row in enumerate(output_rows(tree, layout)):
                key = f"{uid}_{session}_{i}"
                keys.append(key)
                rows[key] = {
                    "uid": uid,
                    "response_mask": torch.tensor(row["response_mask"]),
                    "extra_fields": {"arctl": row["record"].to_dict(), "reward_extra_info": {}},
                }
    fake = FakeTQ(rows)
    monkeypatch.setattr(trainer_v1, "tq", fake)
    trainer = trainer_v1.ArctlPPOTrainer.__new__(trainer_v1.ArctlPPOTrainer)
    trainer.arctl_settings = settings
    metrics = {}
    trainer._compute_advantage(Batch(keys, [{}] * len(keys)), metrics)
    return {k: fake.rows[k]["advantages"] for k in keys}, rows, metrics


def test_hand_worked_brpo_example(monkeypatch):
    # m = 2 budgets {2, 4}, uniform priors, lam = 0.5, A = 2 summaries, one question, G = 2.
    # tree 1: thinking of 3 tokens ending in </think> (id 5): cuts {2, 3}; all leaves correct -> r = [1, 1]
    # tree 2: thinking of 4 tokens: cuts {2, 4}; leaves [1, 0] and [1, 1] -> r = [0.5, 1]
    # R_k = sum_{j>=k} P_j r_j: tree1 [1, .5], tree2 [.75, .5]; V2 = [.875, .5]
    # V1_1 = r_0 * P_1: tree1 .5, tree2 .25; BRPO k=0: V2; k=1: (V1 + V2)/2 = tree1 .5, tree2 .375
    # A: tree1 [.125, 0], tree2 [-.125, .125]; summary: tree2 cut-2 group [1, 0] -> [.5, -.5] (weight m*P' = 1)
    t1 = _tree([1, 2], [10, 11, 5], [2, 4], [[1, 1], [1, 1]], finished=True)
    t2 = _tree([1, 2], [10, 12, 13, 14], [2, 4], [[1, 0], [1, 1]])
    s = AdvantageSettings(budgets=(2, 4), prior="uniform", baseline="brpo", lam=0.5)
    adv, rows, metrics = _run_trainer_step(monkeypatch, {"q": [t1, t2]}, "flex", s)
    a1, a2 = adv["q_0_0"].tolist(), adv["q_1_0"].tolist()
    # packed response: thinking, then 4 leaves of (2 inserted + 2 summary) tokens
    assert a1 == pytest.approx([0.125, 0.125, 0.0] + [0, 0, 0, 0] * 4)
    assert a2 == pytest.approx([-0.125, -0.125, 0.125, 0.125] + [0, 0, .5, .5, 0, 0, -.5, -.5] + [0, 0, 0, 0] * 2)
    assert metrics["train/score@2"] == pytest.approx(0.75)
    assert metrics["train/score@4"] == pytest.approx(1.0)
    assert metrics["train/anytime_score"] == pytest.approx(0.875)
    assert metrics["train/think_len/mean"] == pytest.approx(3.5)


def _random_batch(rng, budgets, group_size, n_questions, n_samples):
    trees = {}
    for q in range(n_questions):
        trees[f"u{q}"] = []
        for _ in range(n_samples):
            t = rng.randint(1, budgets[-1])
            finished = rng.random() < 0.5
            thinking = [rng.randint(10, 60) for _ in range(t - 1)] + [5 if finished else 61]
            from arctl.algo.prompts import distinct_cuts

            n_groups = len(distinct_cuts(len(thinking), budgets))
            leaves = [[rng.randint(0, 1) for _ in range(group_size)] for _ in range(n_groups)]
            trees[f"u{q}"].append(_tree([1, 2, 3], thinking, budgets, leaves, finished,
                                        summary_len=rng.randint(1, 3)))
    return trees


def _direct(trees_by_uid, s):
    """arctl.algo applied directly: scores [B, G, m] -> thinking / summary advantages per tree."""
    budgets = list(s.budgets)
    m = len(budgets)
    scores = torch.tensor([[t.scores() for t in trees] for trees in trees_by_uid.values()], dtype=torch.float64)
    seg = thinking_advantages(scores, budget_prior(s.prior, budgets, s.probs), s.lam, s.baseline)
    flat = [t for trees in trees_by_uid.values() for t in trees]
    seg = seg.reshape(-1, m)
    tok = token_advantages(seg, [len(t.thinking) for t in flat], budgets)
    pp = budget_prior(s.summary_prior, budgets, s.summary_probs)
    out = []
    for i, t in enumerate(flat):
        leaves = []
        for g in t.groups:
            w = m * float(pp[g.budget_indices].sum())
            leaves.append((summary_advantages(torch.tensor([g.rewards], dtype=torch.float64))[0] * w).tolist())
        if not s.summary_decoupled:
            leaves = [[0.0] * len(g.rewards) for g in t.groups]
            leaves[t.group_of_budget()[-1]] = [float(seg[i, -1])] * len(t.groups[t.group_of_budget()[-1]].rewards)
        out.append((tok[i, : len(t.thinking)].tolist(), leaves))
    return out


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
@pytest.mark.parametrize(
    "prior,baseline,decoupled",
    [("uniform", "brpo", True), ("linear", "v2", False), ("base", "v1", True), ("uniform", "none", False)],
)
def test_trainer_step_equals_arctl_algo_directly(monkeypatch, layout, prior, baseline, decoupled):
    rng = random.Random(hash((layout, prior, baseline, decoupled)) % 1000)
    budgets = [3, 6, 9, 12]
    s = AdvantageSettings(budgets=tuple(budgets), prior=prior, baseline=baseline, lam=0.7,
                          summary_decoupled=decoupled, summary_prior="linear")
    trees = _random_batch(rng, budgets, 3, n_questions=3, n_samples=4)
    adv, rows, _ = _run_trainer_step(monkeypatch, trees, layout, s)
    expected = _direct(trees, s)
    flat_keys = [(uid, sess) for uid, ts in trees.items() for sess in range(len(ts))]
    for (uid, sess), (think_adv, leaf_adv), tree in zip(flat_keys, expected, [t for ts in trees.values() for t in ts]):
        t_len = len(tree.thinking)
        if layout == "flex":
            a = adv[f"{uid}_{sess}_0"]
            assert a[:t_len].tolist() == pytest.approx(think_adv, abs=1e-6)
            rec = TreeRecord.from_dict(rows[f"{uid}_{sess}_0"]["extra_fields"]["arctl"])
            for k, (start, sstart, end) in enumerate(rec.spans):
                g, i = divmod(k, 3)
                assert a[start:sstart].abs().max().item() == 0.0  # inserted tokens: no advantage
                assert a[sstart:end].tolist() == pytest.approx([leaf_adv[g][i]] * (end - sstart), abs=1e-6)
        else:
            assert adv[f"{uid}_{sess}_0"].tolist() == pytest.approx(think_adv, abs=1e-6)
            k = 1
            for g, grp in enumerate(tree.groups):
                for i, summ in enumerate(grp.summaries):
                    a = adv[f"{uid}_{sess}_{k}"]
                    n_prefix = grp.cut + len(grp.inserted)
                    assert a[:n_prefix].abs().max().item() == 0.0  # thinking trained once, in its own row
                    assert a[n_prefix:].tolist() == pytest.approx([leaf_adv[g][i]] * len(summ), abs=1e-6)
                    k += 1


def test_outcome_grpo_arm_uses_grpo_advantages():
    from arctl.algo.advantages import grpo_advantages

    s = AdvantageSettings(budgets=(8,), prior="base", baseline="v2", summary_decoupled=False)
    assert s.outcome_grpo
    trees = [_tree([1], [10] * 5, [8], [[r]]) for r in (1, 0, 0, 1, 1)]
    uids = ["a", "a", "b", "b", "b"]
    recs = [TreeRecord.from_dict(output_rows(t, "flex")[0]["record"].to_dict()) for t in trees]
    advs = tree_advantages(recs, uids, s)
    want = grpo_advantages(torch.tensor([1.0, 0, 0, 1, 1], dtype=torch.float64), uids)
    for a, w, rec in zip(advs, want.tolist(), recs):
        assert a.thinking.tolist() == pytest.approx([w] * 5)
        assert a.leaves[0, 0].item() == pytest.approx(w)  # coupled: the summary shares the outcome advantage
        assert response_advantages(rec, a, 5 + 4)[5 + 2 :].tolist() == pytest.approx([w, w])


def test_budgets_mismatch_is_an_error():
    s = AdvantageSettings(budgets=(2, 4))
    rec = output_rows(_tree([1], [10, 11], [2, 8], [[1], [0]]), "flex")[0]["record"]
    with pytest.raises(ValueError, match="budgets"):
        tree_advantages([rec], ["u"], s)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    m=st.integers(1, 4),
    group_size=st.integers(1, 3),
    n_questions=st.integers(1, 3),
    n_samples=st.integers(2, 4),
    baseline=st.sampled_from(["brpo", "v1", "v2", "none"]),
    prior=st.sampled_from(["uniform", "linear", "base"]),
    lam=st.floats(0.1, 0.9),
    decoupled=st.booleans(),
    layout=st.sampled_from(["flex", "duplicate"]),
)
def test_row_advantages_equal_arctl_algo_on_random_trees(seed, m, group_size, n_questions, n_samples, baseline, prior,
                                                         lam, decoupled, layout):
    from arctl.backends.verl.trainer_v1 import compute_row_advantages

    rng = random.Random(seed)
    budgets = [3 * (j + 1) for j in range(m)]
    s = AdvantageSettings(budgets=tuple(budgets), prior=prior, baseline=baseline, lam=lam,
                          summary_decoupled=decoupled, summary_prior="uniform")
    trees = _random_batch(rng, budgets, group_size, n_questions, n_samples)
    keys, uids, extra, lens, where = [], [], [], [], []
    for uid, ts in trees.items():
        for sess, tree in enumerate(ts):
            for i, row in enumerate(output_rows(tree, layout)):
                keys.append(f"{uid}_{sess}_{i}")
                uids.append(uid)
                extra.append({"arctl": row["record"].to_dict()})
                lens.append(len(row["response_ids"]))
                where.append((tree, row))
    adv, metrics = compute_row_advantages(keys, uids, extra, lens, s)
    expected = _direct(trees, s) if not s.outcome_grpo else None
    flat = [t for ts in trees.values() for t in ts]
    for r, (tree, row) in enumerate(where):
        rec = row["record"]
        if expected is None:
            continue
        t = next(i for i, x in enumerate(flat) if x is tree)  # by identity: equal trees may repeat
        a = adv[r, : lens[r]].double()
        think_adv, leaf_adv = expected[t]
        if rec.row in ("tree", "thinking"):
            assert a[: rec.think_len].tolist() == pytest.approx(think_adv, abs=1e-6)
        if rec.row == "branch":
            g, i = rec.leaf
            n = len(tree.groups[g].summaries[i])
            assert a[lens[r] - n :].tolist() == pytest.approx([leaf_adv[g][i]] * n, abs=1e-6)
            assert a[: lens[r] - n].abs().max().item() == 0.0
    # Dr. GRPO property: with the V2 baseline, each segment's thinking advantages sum to 0 per question
    if baseline == "v2" and not s.outcome_grpo:
        recs = [row["record"] for tree, row in where if row["record"].row in ("tree", "thinking")]
        tuids = [u for u, (tree, row) in zip(uids, where) if row["record"].row in ("tree", "thinking")]
        advs = tree_advantages(recs, tuids, s)
        for uid in set(tuids):
            total = sum(a.segments for a, u in zip(advs, tuids) if u == uid)
            assert total.abs().max().item() < 1e-9
    assert metrics["train/think_len/mean"] == pytest.approx(sum(len(t.thinking) for t in flat) / len(flat))
