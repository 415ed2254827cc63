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
