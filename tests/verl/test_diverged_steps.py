"""A verl run that stops learning fails, in one line, as the tiny backend's does (from a hunt of the tiny backend).

verl 0.9.1 skips an optimizer step whose gradient norm is not finite (its engines' ``optimizer_step``) and goes
on: a run whose loss stayed NaN trained nothing for the rest of its length and ended completed. arctl's trainer
counts the optimizer steps verl skipped (each mini-batch's ``grad_norm``, before the trainer averages them); a
streak of ``arctl.backends.base.DIVERGED_STEPS`` RL steps that skipped every one fails the run, and no checkpoint
is saved inside a streak but the run's last step's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from arctl.backends import base
from arctl.track.phase import read_warning

NAN = float("nan")
INF = float("inf")


def test_a_streak_of_steps_that_skipped_every_update_fails_the_run(tmp_path, monkeypatch):
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    norms = {1: [1.0, 2.0], 2: [NAN, 1.0], 3: [NAN, NAN], 4: [float("inf"), NAN], 5: [NAN, NAN]}
    saved = []

    def update_actor(self, batch, metrics):  # verl's: the workers' update, then the mean of each metric
        out = self.actor_rollout_wg.update_actor(batch)
        values = out["metrics"]["grad_norm"]
        metrics.update({"actor/grad_norm": sum(values) / len(values),
                        "actor/pg_loss": 0.5 if self.global_steps < 3 else NAN})
        return batch

    monkeypatch.setattr(PPOTrainerSync, "_update_actor", update_actor)
    monkeypatch.setattr(PPOTrainerSync, "_save_checkpoint", lambda self: saved.append(self.global_steps))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    t = object.__new__(ArctlPPOTrainer)
    t.config = OmegaConf.create({
        "arctl": {"rows_per_tree": 1, "stop_file": str(run_dir / "stop"), "keep_checkpoints": None},
        "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 1,
                                        "optim": {"lr": 1e-3, "weight_decay": 0.5, "clip_grad": 2.0}}},
        "trainer": {"default_local_dir": str(tmp_path / "ckpt")},
    })
    t.total_training_steps = 10
    workers = SimpleNamespace()
    workers.update_actor = lambda batch: {"metrics": {"grad_norm": norms[t.global_steps], "loss": [0.0, 0.0]}}
    t.actor_rollout_wg = workers
    update = workers.update_actor
    monkeypatch.setattr("arctl.backends.verl.checkpoints.mark_complete", lambda ckpt, step: None)
    for step in range(1, 5):
        t.global_steps = step
        t._update_actor("batch", {})
        t._save_checkpoint()
        assert workers.update_actor is update  # put back
    assert saved == [1, 2]  # none inside the streak (steps 3, 4)
    assert read_warning(run_dir).startswith("steps 3-4: every optimizer step was skipped (4 of 4: the gradient "
                                            "norm was not finite; train/loss nan), the weights unchanged since step 2")
    t.global_steps = 5
    with pytest.raises(base.Diverged, match=r"^steps 3-5: every optimizer step was skipped \(6 of 6: .* the training "
                                            r"diverged — lower optim.lr \(0.001\), optim.weight_decay \(0.5\) or "
                                            r"optim.grad_clip \(2\)"):
        t._update_actor("batch", {})
    assert base.DIVERGED_STEPS == 3  # (the streak above is that long)


def test_the_last_steps_checkpoint_is_saved_inside_a_streak(tmp_path, monkeypatch):
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    saved = []
    monkeypatch.setattr(PPOTrainerSync, "_save_checkpoint", lambda self: saved.append(self.global_steps))
    monkeypatch.setattr("arctl.backends.verl.checkpoints.mark_complete", lambda ckpt, step: None)
    t = object.__new__(ArctlPPOTrainer)
    t.config = OmegaConf.create({"arctl": {}, "trainer": {"default_local_dir": str(tmp_path)}})
    t._arctl_streak = base.SkipStreak("")
    t._arctl_streak.update(5, 2, 2, NAN)
    t.global_steps, t.total_training_steps = 5, 5
    t._save_checkpoint()
    assert saved == [5]


@pytest.mark.parametrize("dtype", ["fp16", "float16", "16"])
def test_a_loss_scaled_fp16_run_counts_no_skipped_step(tmp_path, monkeypatch, dtype):
    """From a review: in fp16 (``actor.fsdp_config.mixed_precision.param_dtype``) verl's FSDP engine trains with a
    ``ShardedGradScaler``, whose overflow steps report an infinite gradient norm and skip as it lowers the scale (mostly
    early in training): routine, not divergence. Such steps are counted in no streak, and the run goes on."""
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    def update_actor(self, batch, metrics):
        self.actor_rollout_wg.update_actor(batch)
        metrics["actor/pg_loss"] = 0.31  # finite: the gradient overflowed
        return batch

    monkeypatch.setattr(PPOTrainerSync, "_update_actor", update_actor)
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def trainer(mixed_precision):
        t = object.__new__(ArctlPPOTrainer)
        t.config = OmegaConf.create({
            "arctl": {"rows_per_tree": 1, "stop_file": str(run_dir / "stop")},
            "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 1,
                                            "fsdp_config": {"mixed_precision": mixed_precision},
                                            "optim": {"lr": 1e-6, "weight_decay": 0.01, "clip_grad": 1.0}}},
        })
        t.actor_rollout_wg = SimpleNamespace(update_actor=lambda batch: {"metrics": {"grad_norm": [INF, INF]}})
        return t

    t = trainer({"param_dtype": dtype})
    for step in range(1, 2 * base.DIVERGED_STEPS + 1):  # every optimizer step overflowed, twice a streak's length
        t.global_steps = step
        t._update_actor("batch", {})
    assert t._arctl_streak is None and read_warning(run_dir) is None
    t = trainer({"param_dtype": "bf16", "reduce_dtype": "fp32"})  # no scaler (verl's default): they count
    with pytest.raises(base.Diverged, match=r"^steps 1-3: every optimizer step was skipped \(6 of 6"):
        for step in range(1, base.DIVERGED_STEPS + 1):
            t.global_steps = step
            t._update_actor("batch", {})
