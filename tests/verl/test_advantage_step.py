"""The trainer's advantage step (``ArctlPPOTrainer._compute_advantage`` over TransferQueue rows) on
hand-built trees: the numbers of the authors' semantics, laid onto the packed and duplicated rows.
(Every arm against the tiny backend: test_objective_equivalence.py.)"""

from __future__ import annotations

import pytest
import torch

from arctl.algo.settings import BudgetControl, Objective, Summary, Thinking
from arctl.backends.verl.advantage import TreeRecord, record_advantages
from arctl.backends.verl.agent_loop import LeafGroup, TreeRollout, output_rows


def _tree(prompt, thinking, budgets, rewards, finished=False, inserted=(90, 91), summary_len=2):
    """A TreeRollout with the given rewards per budget ([m][A]; budgets that share a prefix get one
    group with A summaries each); summary tokens are dummies."""
    from arctl.algo.prompts import distinct_cuts

    groups = []
    for cut, idx in distinct_cuts(len(thinking), budgets):
        rew = [float(r) for j in idx for r in rewards[j]]
        groups.append(LeafGroup(cut=cut, budget_indices=idx, prefix=[], inserted=list(inserted),
                                summaries=[[70 + a] * summary_len for a in range(len(rew))], rewards=rew))
    return TreeRollout(list(prompt), list(thinking), list(budgets), groups, finished, False,
                       group_size=len(rewards[0]))


def _objective(budgets, a, prior="uniform", baseline="brpo", decoupled=True):
    return Objective(Thinking(budgets=tuple(budgets), prior=prior, baseline=baseline, lam=0.5),
                     Summary(decoupled=decoupled, group_size=a))


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


def _run_trainer_step(monkeypatch, trees_by_uid, layout, objective, control=None, step=1, total=1):
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
    trainer.arctl_objective, trainer.arctl_control = objective, control or BudgetControl()
    trainer.global_steps, trainer.total_training_steps = step, total
    metrics = {}
    trainer._compute_advantage(Batch(keys, [{}] * len(keys)), metrics)
    return {k: fake.rows[k]["advantages"] for k in keys}, rows, metrics


def test_hand_worked_brpo_example(monkeypatch):
    # m = 2 budgets {2, 4}, uniform priors, lam = 1/2, A = 2 summaries per budget, one question, G = 2.
    # tree 1: thinking of 3 tokens ending in </think> (id 5): cuts {2, 3}; all rewards 1 -> r = [1, 1]
    # tree 2: thinking of 4 tokens: cuts {2, 4}; rewards [1, 0] and [1, 1] -> r = [0.5, 1]
    # R_k = sum_{j>=k} P_j r_j: tree1 [1, .5], tree2 [.75, .5]; V2 = [.875, .5]
    # V1_1 = r_0 * P_1: tree1 .5, tree2 .25; BRPO k=0: V2; k=1: (V1 + V2)/2 = tree1 .5, tree2 .375
    # A: tree1 [.125, 0], tree2 [-.125, .125]; summary: tree2 cut-2 group [1, 0] -> [.5, -.5] (weight 1)
    t1 = _tree([1, 2], [10, 11, 5], [2, 4], [[1, 1], [1, 1]], finished=True)
    t2 = _tree([1, 2], [10, 12, 13, 14], [2, 4], [[1, 0], [1, 1]])
    adv, rows, metrics = _run_trainer_step(monkeypatch, {"q": [t1, t2]}, "flex", _objective([2, 4], 2))
    a1, a2 = adv["q_0_0"].tolist(), adv["q_1_0"].tolist()
    # packed response: thinking, then 4 summaries of (2 inserted + 2 summary) tokens
    assert a1 == pytest.approx([0.125, 0.125, 0.0] + [0, 0, 0, 0] * 4)
    assert a2 == pytest.approx([-0.125, -0.125, 0.125, 0.125] + [0, 0, .5, .5, 0, 0, -.5, -.5] + [0, 0, 0, 0] * 2)
    assert metrics["train/score@2"] == pytest.approx(0.75)
    assert metrics["train/score@4"] == pytest.approx(1.0)
    assert metrics["train/anytime_score"] == pytest.approx(0.875)
    assert metrics["train/think_len/mean"] == pytest.approx(3.5)


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_coupled_summary_gets_the_outcome_grpo_advantage(monkeypatch, layout):
    # grpo-vr (base prior, BRPO, coupled, A = 1), budgets {2, 4}: rewards tree1 [1 | 0], tree2 [0 | 1].
    # The last budget's summary gets r_m - mean_g r_m = -1/2 / +1/2, as the authors' A = 1 branch of
    # compute_summary_advantage. (The thinking's last segment is -3/4 / +3/4: what arctl used to give
    # the summary, and wrongly so.) The first budget's summary is not trained.
    t1 = _tree([1, 2], [10, 11, 12, 13], [2, 4], [[1], [0]])
    t2 = _tree([1, 2], [10, 12, 13, 14], [2, 4], [[0], [1]])
    adv, rows, _ = _run_trainer_step(monkeypatch, {"q": [t1, t2]}, layout,
                                     _objective([2, 4], 1, prior="base", decoupled=False))
    if layout == "flex":  # thinking (4), then 2 summaries of 2 inserted + 2 summary tokens
        assert adv["q_0_0"].tolist() == pytest.approx([-0.5, -0.5, -0.75, -0.75, 0, 0, 0, 0, 0, 0, -0.5, -0.5])
        assert adv["q_1_0"].tolist() == pytest.approx([0.5, 0.5, 0.75, 0.75, 0, 0, 0, 0, 0, 0, 0.5, 0.5])
    else:  # thinking row, then one row per summary: thinking[:cut] + inserted + summary
        assert adv["q_0_0"].tolist() == pytest.approx([-0.5, -0.5, -0.75, -0.75])
        assert adv["q_0_1"].tolist() == [0.0] * 6
        assert adv["q_0_2"].tolist() == pytest.approx([0, 0, 0, 0, 0, 0, -0.5, -0.5])
        assert adv["q_1_2"].tolist() == pytest.approx([0, 0, 0, 0, 0, 0, 0.5, 0.5])


@pytest.mark.parametrize("step,limit", [(1, 4), (2, 2)])
def test_thinkprune_zeroes_the_rewards_of_a_thinking_past_the_steps_limit(monkeypatch, step, limit):
    # GRPO (one budget 4, A = 1), ThinkPrune limits (4, 2) over 2 steps: step 1 limit 4, step 2 limit 2.
    # tree 1: 3 thinking tokens ending in </think>, correct; tree 2: 2 tokens + </think>... cut at 4
    # unfinished, correct. Step 1: tree1 fits (3 <= 4) -> 1; tree2 cut unfinished at the limit -> 0:
    # advantages +1/2, -1/2. Step 2 (limit 2): both exceed -> 0, 0: advantages 0.
    from arctl.algo.settings import BudgetControl

    control = BudgetControl(method="thinkprune", thinkprune_limits=(4, 2))
    t1 = _tree([1, 2], [10, 11, 5], [4], [[1]], finished=True)
    t2 = _tree([1, 2], [10, 12, 13, 14], [4], [[1]])
    adv, _, metrics = _run_trainer_step(monkeypatch, {"q": [t1, t2]}, "flex", _objective([4], 1, prior="base",
                                        baseline="v2", decoupled=False), control, step=step, total=2)
    want = 0.5 if limit == 4 else 0.0
    assert adv["q_0_0"].tolist()[:3] == pytest.approx([want] * 3)
    assert adv["q_1_0"].tolist()[:4] == pytest.approx([-want] * 4)
    assert metrics["train/think_limit"] == limit
    # both answers are right: the verifier's score is 1; the method's (what the advantages saw) beside it
    assert metrics["train/score@4"] == 1.0 and metrics["train/method/score@4"] == pytest.approx(want)


def test_budgets_mismatch_is_an_error():
    rec = output_rows(_tree([1], [10, 11], [2, 8], [[1], [0]]), "flex")[0]["record"]
    with pytest.raises(ValueError, match="budgets"):
        record_advantages([rec], ["u"], _objective([2, 4], 1))


def test_group_size_mismatch_is_an_error():
    """A tree with 2 summaries per budget under a config with summary.group_size=1 (rollout and
    spec out of step) is refused, not trained with the wrong grouping."""
    rec = output_rows(_tree([1], [10, 11], [2, 4], [[1, 0], [0, 0]]), "flex")[0]["record"]
    assert rec.group_size == 2
    with pytest.raises(ValueError, match="summary.group_size is 1"):
        record_advantages([rec], ["u"], _objective([2, 4], 1))


def test_record_round_trips():
    rec = output_rows(_tree([1], [10, 11, 5], [2, 4, 8], [[1, 0], [1, 1], [0, 0]], finished=True), "flex")[0]["record"]
    assert TreeRecord.from_dict(rec.to_dict()) == rec
    assert rec.rewards == ((1.0, 0.0), (1.0, 1.0), (0.0, 0.0)) and rec.cuts == [2, 3, 3]
