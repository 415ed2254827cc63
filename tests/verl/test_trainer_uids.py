"""Under ``trainer.deterministic`` arctl's trainer draws the questions' uids from the run's seed and the
step (``ArctlPPOTrainer._reproducible_uids``), through verl's own batch fetch and validation."""

from __future__ import annotations

from omegaconf import OmegaConf


def test_deterministic_runs_draw_the_same_uids_at_each_step_and_resumes_too(monkeypatch):
    """A leftover of an earlier review: under trainer.deterministic each request's seed derives from
    its question's uid (agent_loop.request_seed), which verl draws with uuid4, so two runs of one
    config sampled differently. verl's own batch fetch, with arctl's trainer, now draws uids from
    the run's seed and the step: the same in a rerun and in a resume at that step, distinct within a
    step (over several fetches) and across steps, seeds and validation; verl's uuid4 otherwise."""
    import numpy as np
    from verl.trainer.ppo.v1 import trainer_base

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    def trainer(deterministic: bool, seed: int = 0, step: int = 1):
        t = object.__new__(ArctlPPOTrainer)
        t.config = OmegaConf.create({"arctl": {"seed": seed},
                                     "actor_rollout_ref": {"rollout": {"full_determinism": deterministic}}})
        t.train_dataloader_it, t.global_steps, t.total_training_steps = None, step, 10
        t.train_dataloader = [{"raw_prompt": np.array(["a", "b", "c"], dtype=object)}] * 2
        return t

    def uids(t) -> list[str]:
        return [str(u) for u in t._fetch_one_gen_batch()["uid"]]

    first = trainer(True)
    step1 = uids(first) + uids(first)  # two fetches of one step
    assert len(set(step1)) == 6 and trainer_base.uuid.uuid4.__module__ == "uuid"  # verl's uuid4 again
    first.global_steps = 2
    step2 = uids(first)
    rerun = trainer(True)
    assert uids(rerun) + uids(rerun) == step1
    assert uids(trainer(True, step=2)) == step2  # a resume at step 2
    assert not set(step2) & set(step1) and not set(uids(trainer(True, seed=1))) & set(step1)
    assert uids(trainer(False)) != uids(trainer(False))  # not deterministic: verl's uuid4

    validations = []
    monkeypatch.setattr("verl.trainer.ppo.v1.trainer_sync.PPOTrainerSync._validate",
                        lambda self: validations.append(str(trainer_base.uuid.uuid4())) or {})
    t = trainer(True)
    t.config.arctl.stop_file = None
    t._validate(), trainer(True)._validate()
    assert validations[0] == validations[1] and validations[0] not in step1  # its own, the same each run
