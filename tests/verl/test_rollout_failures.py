"""A rollout group that failed in an agent-loop worker fails the step with the worker's own error
(arctl/backends/verl/rollout_failures.py), in training and validation: verl's synchronous replay
buffer (the real one, as the arctl trainer builds it) over a TransferQueue stand-in holding what the
workers wrote; before, the failed group was handed out and its trajectories padded away."""

from __future__ import annotations

import pytest

from arctl.backends.verl.rollout_failures import ERROR_TAG, RolloutFailed


@pytest.fixture(scope="module")
def composed(paper_config, tmp_path_factory):
    from arctl.backends.verl.overrides import build_verl_config

    return build_verl_config(paper_config, tmp_path_factory.mktemp("run"))[1]


class FakeTQ:
    """What verl's workers leave in TransferQueue: prompt entries tagged with their group status
    (tags merge, as TransferQueue's kv_put does) and trajectory entries ``{uid}_{session}_{k}``."""

    def __init__(self):
        self.tags: dict[str, dict[str, dict]] = {}

    def put(self, partition_id, key, tag):
        self.tags.setdefault(partition_id, {}).setdefault(key, {}).update(tag)

    async def async_kv_put(self, key, partition_id, fields=None, tag=None):
        self.put(partition_id, key, tag or {})

    def kv_list(self, partition_id=None):
        if partition_id is None:
            return {p: dict(items) for p, items in self.tags.items()}
        return {partition_id: dict(self.tags.get(partition_id, {}))}

    def kv_clear(self, keys, partition_id):
        for key in keys:
            self.tags.get(partition_id, {}).pop(key, None)


def _group(tq, partition, uid, status, sessions=2):
    tq.put(partition, uid, {"is_prompt": True, "status": status, "global_steps": 1})
    if status == "finished":
        for s in range(sessions):
            tq.put(partition, f"{uid}_{s}_0", {"global_steps": 1})


@pytest.fixture
def buffer(composed, monkeypatch):
    import transfer_queue
    import verl.trainer.ppo.v1.trainer_base as base

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    fake = FakeTQ()
    for name in ("kv_list", "kv_clear", "async_kv_put"):
        monkeypatch.setattr(transfer_queue, name, getattr(fake, name))
    monkeypatch.setattr(base, "tq", transfer_queue)
    trainer = ArctlPPOTrainer(composed.copy())
    trainer.replay_buffer.poll_interval = 0.01
    return trainer.replay_buffer, fake


def test_finished_groups_are_handed_out_as_before(buffer):
    rb, tq = buffer
    for uid in ("q1", "q2"):
        _group(tq, "train", uid, "finished")
    batch, _ = rb.sample(global_steps=1, partition_id="train", batch_size=2)
    assert sorted(batch.keys) == ["q1_0_0", "q1_1_0", "q2_0_0", "q2_1_0"]


@pytest.mark.parametrize("partition", ["train", "val"])
def test_a_failed_group_fails_the_step_with_the_workers_error(buffer, partition):
    import asyncio

    from arctl.backends.verl import rollout_failures

    rb, tq = buffer
    _group(tq, partition, "q1", "finished")
    _group(tq, partition, "q2", "running")
    # the tree loop of q2 raises: it tags q2's entry, then verl's worker marks the group failed
    err = ValueError("prompt length 9000 leaves no room within max_model_len 8192")
    asyncio.run(rollout_failures.record("q2", partition == "val", err))
    tq.put(partition, "q2", {"status": "failure"})
    with pytest.raises(RolloutFailed) as caught:
        rb.sample(global_steps=1, partition_id=partition, batch_size=2)
    what = "validation" if partition == "val" else "training"
    assert str(caught.value) == (f"1 of 2 {what} rollout groups failed in the agent loop (question q2): "
                                 "ValueError: prompt length 9000 leaves no room within max_model_len 8192")
    assert tq.tags[partition]["q2"][ERROR_TAG].startswith("ValueError")


def test_a_failure_without_a_recorded_error_points_at_the_worker_log(buffer):
    rb, tq = buffer
    _group(tq, "train", "q1", "failure")
    with pytest.raises(RolloutFailed, match="1 of 1 training rollout groups failed .* agent-loop worker's log"):
        rb.sample(global_steps=1, partition_id="train", batch_size=1)
