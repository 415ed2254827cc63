"""arctl's trainer mode is verl's synchronous trainer in every place verl tells them apart (its mode
name is "arctl", verl compares with the literal "sync"): replay buffer, dataloader fetch size,
checkpoints without TransferQueue state, nothing re-issued on resume; and the entropy metric is a
mean over tokens, not verl's token sum. Real ``ArctlPPOTrainer`` objects on CPU, workers stubbed."""

from __future__ import annotations

import os

import pytest
import torch


@pytest.fixture(scope="module")
def composed(paper_config, tmp_path_factory):
    from arctl.backends.verl.overrides import build_verl_config

    run_dir = tmp_path_factory.mktemp("run")
    return build_verl_config(paper_config, run_dir)[1]


class NoTransferQueue:
    """TransferQueue stand-in: the synchronous trainer must not save, load or list its state."""

    def __getattr__(self, name):
        def refuse(*args, **kwargs):
            raise AssertionError(f"the synchronous trainer called TransferQueue.{name}")

        return refuse


class Workers:
    """The actor worker group's checkpoint calls, recorded (a real one writes FSDP shards)."""

    def __init__(self):
        self.calls = []

    def save_checkpoint(self, local_path, remote_path, global_step, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        self.calls.append(("save", local_path, global_step))

    def load_checkpoint(self, local_path, del_local_after_load=False):
        self.calls.append(("load", local_path))


class Loader:
    def __init__(self):
        self.loaded = None

    def state_dict(self):
        return {"position": 17}

    def load_state_dict(self, state):
        self.loaded = state


def _trainer(composed, monkeypatch):
    import verl.trainer.ppo.v1.trainer_base as base

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    monkeypatch.setattr(base, "tq", NoTransferQueue())
    trainer = ArctlPPOTrainer(composed.copy())
    trainer.actor_rollout_wg = Workers()
    trainer.train_dataloader = Loader()
    return trainer


def test_the_arctl_mode_is_the_synchronous_trainer(composed, monkeypatch):
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

    from arctl.backends.verl.rollout_failures import FailFast
    from arctl.backends.verl.trainer_v1 import QuestionOrder

    trainer = _trainer(composed, monkeypatch)
    assert trainer.trainer_mode == "sync"
    # verl's synchronous buffer (arctl adds the check of failed groups, test_rollout_failures.py, and the order of
    # a batch's rows: below)
    assert type(trainer.replay_buffer).__mro__[1:4] == (FailFast, QuestionOrder, ReplayBuffer)
    assert not isinstance(trainer.replay_buffer, ReplayBufferAsync)
    # prompts are fetched a whole batch at a time, not one by one (64 fetches per step)
    assert trainer.replay_buffer.gen_batch_size == composed.data.train_batch_size == 64


def test_the_dataloader_fetches_whole_batches(composed, monkeypatch):
    import verl.trainer.ppo.v1.trainer_base as base

    trainer = _trainer(composed, monkeypatch)
    rows = [{"uid": i} for i in range(200)]
    monkeypatch.setattr(base, "create_rl_dataset", lambda *a, **k: rows)
    monkeypatch.setattr(base, "create_rl_sampler", lambda *a, **k: None)
    trainer.tokenizer = trainer.processor = None
    trainer._init_dataloader()
    assert trainer.config.data.get("gen_batch_size") in (None, 64)  # not forced to 1
    assert trainer.train_dataloader.batch_size == 64


def test_save_then_resume_keeps_no_transfer_queue_state(composed, monkeypatch):
    trainer = _trainer(composed, monkeypatch)
    trainer.global_steps = 3
    trainer._save_checkpoint()  # NoTransferQueue raises if the TQ state is saved
    ckpt = os.path.join(composed.trainer.default_local_dir, "global_step_3")
    assert sorted(os.listdir(ckpt)) == ["actor", "arctl_complete.json", "data.pt"]  # no transfer_queue/ with the trained batch in it
    with open(os.path.join(composed.trainer.default_local_dir, "latest_checkpointed_iteration.txt")) as f:
        assert f.read() == "3"

    resumed = _trainer(composed, monkeypatch)
    resumed._load_checkpoint()  # resume_mode auto: the newest checkpoint; no TQ state to load
    assert resumed.global_steps == 3
    assert resumed.actor_rollout_wg.calls == [("load", os.path.join(ckpt, "actor"))]
    assert resumed.train_dataloader.loaded == {"position": 17}
    assert resumed._reissue_inflight_prompts() == 0  # no orphaned in-flight rows to re-issue


class FakeTQ:
    def __init__(self, rows):
        self.rows = rows

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in select_fields} for k in keys])


class Batch:
    def __init__(self, keys):
        self.keys, self.tags, self.partition_id = list(keys), [{}] * len(keys), "train"

    def __len__(self):
        return len(self.keys)


def test_entropy_is_the_mean_over_trained_tokens(composed, monkeypatch):
    import verl.trainer.ppo.v1.trainer_base as base

    from arctl.backends.verl import trainer_v1
    from arctl.backends.verl.advantage import TreeRecord

    budgets = tuple(composed.arctl.objective.thinking.budgets)
    thinking = TreeRecord(budgets=budgets, think_len=2, rewards=((0.0,),) * len(budgets), row="thinking")
    branch = TreeRecord(budgets=budgets, think_len=2, rewards=((0.0,),) * len(budgets), row="branch", leaf=(0, 0),
                        spans=((2, 3, 5),) * len(budgets))
    rows = {  # a thinking row (its third token is not in it), a branch row (a prefix token, an inserted, two summary)
        "a": {"entropy": torch.tensor([1.0, 2.0, 9.0]), "extra_fields": {"arctl": thinking.to_dict()}},
        "b": {"entropy": torch.tensor([9.0, 9.0, 3.0, 4.0]), "extra_fields": {"arctl": branch.to_dict()}},
        "c": {"entropy": torch.tensor([9.0, 9.0]), "extra_fields": {}},  # verl's padding row
    }

    def verl_old_log_prob(self, batch, metrics):  # verl's: writes entropy, logs a token *sum*
        metrics["actor/entropy"] = 10.0 / float(composed.actor_rollout_ref.actor.loss_scale_factor)
        return batch

    monkeypatch.setattr(base.PPOTrainer, "_compute_old_log_prob", verl_old_log_prob)
    monkeypatch.setattr(trainer_v1, "tq", FakeTQ(rows))
    trainer = _trainer(composed, monkeypatch)
    trainer.arctl_layout = "duplicate"  # no tree tensors to write
    metrics = {}
    batch = Batch(["a", "b", "c"])
    batch.tags = [{}, {}, {"is_padding": True}]
    trainer._compute_old_log_prob(batch, metrics)
    assert metrics["train/entropy"] == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert metrics["actor/entropy"] == metrics["train/entropy"]


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_the_update_counts_the_mini_batch_in_rows_of_the_layout(paper_config, tmp_path, monkeypatch, layout):
    """verl's update takes ``ppo_mini_batch_size x rollout.n`` rows per mini-batch; the duplicated
    layout trains 1 + m*A rows per tree, so the update (and the batch multiple) must see 17x that,
    while the config verl validates keeps the mini-batch in prompts (<= data.train_batch_size)."""
    import copy

    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.overrides import build_verl_config

    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["tree_attention"] = layout
    composed = build_verl_config(cfg, tmp_path)[1]  # runs verl's validation: mini <= train batch
    trainer = _trainer(composed, monkeypatch)
    trainer.global_steps = 1
    rows = 17 if layout == "duplicate" else 1
    seen = []
    monkeypatch.setattr(PPOTrainerSync, "_update_actor",
                        lambda self, batch, metrics: seen.append(self.config.actor_rollout_ref.actor.ppo_mini_batch_size))
    trainer._update_actor(None, {})
    assert seen == [32 * rows]
    assert trainer._get_required_batch_multiple(dp_size=8) == 32 * rows * composed.actor_rollout_ref.rollout.n
    assert trainer.config.actor_rollout_ref.actor.ppo_mini_batch_size == 32  # restored


def test_a_batch_reaches_the_mini_batches_in_question_order_not_in_the_order_rollouts_finished(composed, monkeypatch):
    """From a review of the verl path: TransferQueue lists a step's rows in the order the trees' rollouts
    finished (roughly by thinking length), verl's balancing keeps each rank's rows in that order and each rank
    cuts them into the actor's mini-batches unshuffled: with two optimizer steps a batch (every paper arm), the
    first trained the short thinkings, the second the long ones. The batch is now in question order: each
    question's samples and rows together, the questions in the order of their seeded uids."""
    import random

    from transfer_queue.metadata import KVBatchMeta

    import arctl.backends.verl.trainer_v1 as v1

    trainer = _trainer(composed, monkeypatch)
    rng = random.Random(0)
    uids = [str(v1.step_uid((0, 1, "train"), k)) for k in range(6)]
    thinking = {(u, s): rng.randrange(100, 8000) for u in uids for s in range(4)}
    rows = [f"{u}_{s}_{i}" for (u, s) in thinking for i in range(3)]
    finished = sorted(rows, key=lambda k: (thinking[(k.split("_")[0], int(k.split("_")[1]))], k))  # completion order
    snapshot = {k: {"seq_len": len(k)} for k in finished}
    import verl.trainer.ppo.v1.replay_buffer as rb

    monkeypatch.setattr(rb.tq, "kv_clear", lambda **kw: None)  # (TransferQueue's store is not running here)
    batch = trainer.replay_buffer._materialize_batch("train", uids, snapshot)
    assert isinstance(batch, KVBatchMeta)
    assert batch.keys == sorted(rows, key=lambda k: (k.split("_")[0], int(k.split("_")[1]), int(k.split("_")[2])))
    assert batch.tags == [snapshot[k] for k in batch.keys]  # each row keeps its own tag
    # the two halves (two optimizer steps) hold whole questions, not the short and the long thinkings
    first = {k.split("_")[0] for k in batch.keys[: len(rows) // 2]}
    assert len(first) == 3 and not first & {k.split("_")[0] for k in batch.keys[len(rows) // 2:]}
    assert batch.keys[0].startswith(min(uids))
