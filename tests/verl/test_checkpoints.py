"""verl checkpoints a resume can trust (arctl/backends/verl/checkpoints.py): a step is saved once when
``save_freq`` and a stop request meet; a save is marked complete only after it returned; before an
attempt verl's tracker is pointed at the newest complete checkpoint, whatever a kill left behind.
Real ``ArctlPPOTrainer`` objects and verl's own ``find_latest_ckpt_path``; the workers' shard
writing is recorded, not run (the CPU end-to-end run saves real shards: test_cpu_end_to_end.py)."""

from __future__ import annotations

import os

import pytest

from arctl.backends.verl import checkpoints


@pytest.fixture(scope="module")
def composed(paper_config, tmp_path_factory):
    from arctl.backends.verl.overrides import build_verl_config

    return build_verl_config(paper_config, tmp_path_factory.mktemp("run"))[1]


class Workers:
    """The actor worker group's save, recorded, writing a shard file as FSDP would."""

    def __init__(self):
        self.saves = []

    def save_checkpoint(self, local_path, remote_path, global_step, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "model_world_size_1_rank_0.pt"), "wb") as f:
            f.write(b"w" * (100 + global_step))
        self.saves.append(global_step)


class Loader:
    def state_dict(self):
        return {"position": 17}


class Replicas:
    def update_weights(self, global_steps=None):
        pass


def _trainer(composed, monkeypatch, tmp_path):
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    cfg = composed.copy()
    cfg.trainer.default_local_dir = str(tmp_path / "checkpoints")
    cfg.arctl.stop_file = str(tmp_path / "STOP")
    trainer = ArctlPPOTrainer(cfg)
    trainer.actor_rollout_wg = Workers()
    trainer.train_dataloader = Loader()
    trainer.checkpoint_manager = Replicas()
    trainer.timing_raw = {}
    return trainer


def test_a_stop_at_a_save_freq_step_saves_the_step_once(composed, monkeypatch, tmp_path):
    """verl's loop saves at step 2 (save_freq 2); the stop request arrives in the same step: the stop's
    save must not write global_step_2 a second time (a kill during that second save left the tracker
    naming a half-overwritten folder)."""
    trainer = _trainer(composed, monkeypatch, tmp_path)
    trainer.global_steps = 2
    trainer.total_training_steps = 10
    trainer._save_checkpoint()  # verl's fit(): save_freq fires
    (tmp_path / "STOP").write_text("stop requested\n")
    trainer.on_step_end()  # the stop: checkpoint and end
    assert trainer.actor_rollout_wg.saves == [2]
    assert trainer.total_training_steps == 2  # the run still ends after this step
    trainer.global_steps = 3
    trainer.on_step_end()  # a later step under the same stop is saved
    assert trainer.actor_rollout_wg.saves == [2, 3]


def test_a_save_is_marked_complete_after_it_returned(composed, monkeypatch, tmp_path):
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    trainer = _trainer(composed, monkeypatch, tmp_path)
    trainer.global_steps = 4
    trainer._save_checkpoint()
    ckpt = tmp_path / "checkpoints"
    assert checkpoints.problem(ckpt, 4) is None
    assert checkpoints.repair(ckpt) == (4, [])  # nothing to repair
    assert find_latest_ckpt_path(str(ckpt)) == str(ckpt / "global_step_4")


def _save(ckpt, step):
    shard = checkpoints.folder(ckpt, step) / "actor" / "model.pt"
    shard.parent.mkdir(parents=True, exist_ok=True)
    shard.write_bytes(b"w" * 64)
    (checkpoints.folder(ckpt, step) / "data.pt").write_bytes(b"d" * 8)
    (ckpt / checkpoints.TRACKER).write_text(str(step))
    checkpoints.mark_complete(ckpt, step)


@pytest.mark.parametrize("damage", ["killed-before-the-marker", "tracker-truncated", "shard-truncated",
                                    "shard-missing", "marker-garbage", "tracker-names-a-missing-folder"])
def test_the_tracker_is_pointed_at_the_newest_complete_checkpoint(tmp_path, damage):
    """What a kill or a damaged disk leaves; verl's own reader then resumes from step 2, the newest
    checkpoint that is whole (before: step 4's broken folder, or int('') in every later attempt)."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    ckpt = tmp_path / "checkpoints"
    _save(ckpt, 2)
    _save(ckpt, 4)
    step4 = checkpoints.folder(ckpt, 4)
    if damage == "killed-before-the-marker":
        (step4 / checkpoints.MARKER).unlink()
    elif damage == "tracker-truncated":
        (step4 / checkpoints.MARKER).unlink()
        (ckpt / checkpoints.TRACKER).write_text("")
    elif damage == "shard-truncated":
        (step4 / "actor" / "model.pt").write_bytes(b"w" * 10)
    elif damage == "shard-missing":
        (step4 / "actor" / "model.pt").unlink()
    elif damage == "marker-garbage":
        (step4 / checkpoints.MARKER).write_text("{not json")
    else:
        (ckpt / checkpoints.TRACKER).write_text("6")
    step, notes = checkpoints.repair(ckpt)
    assert step == (4 if damage == "tracker-names-a-missing-folder" else 2)
    assert len(notes) >= 1 and all(str(ckpt) in n for n in notes)
    assert (ckpt / checkpoints.TRACKER).read_text() == str(step)
    assert find_latest_ckpt_path(str(ckpt)) == str(checkpoints.folder(ckpt, step))
    assert step4.exists()  # kept on disk for inspection, never resumed from
    assert checkpoints.repair(ckpt)[0] == step  # a second repair changes nothing


def test_no_complete_checkpoint_starts_the_run_over(tmp_path):
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    ckpt = tmp_path / "checkpoints"
    _save(ckpt, 2)
    (checkpoints.folder(ckpt, 2) / checkpoints.MARKER).unlink()
    step, notes = checkpoints.repair(ckpt)
    assert step == 0 and any("starts over" in n for n in notes)
    assert not (ckpt / checkpoints.TRACKER).exists()
    assert find_latest_ckpt_path(str(ckpt)) is None  # verl trains from scratch
    assert checkpoints.repair(tmp_path / "nothing-here") == (0, [])


def test_only_the_newest_complete_checkpoints_stay_also_across_a_requeue(composed, monkeypatch, tmp_path):
    """verl keeps every save by default (16 of ~21 GB for a 1.5B paper run); arctl keeps the newest
    ``verl.keep_checkpoints`` (2) whole folders, and a requeued attempt (a new trainer) removes what
    an earlier attempt saved."""
    assert composed.arctl.keep_checkpoints == 2
    trainer = _trainer(composed, monkeypatch, tmp_path)
    ckpt = tmp_path / "checkpoints"
    for step in (1, 2, 3):
        trainer.global_steps = step
        trainer._save_checkpoint()
    assert checkpoints.saved_steps(ckpt) == [3, 2]
    again = _trainer(composed, monkeypatch, tmp_path)  # the requeued job's trainer, resuming at 3
    for step in (4, 5):
        again.global_steps = step
        again._save_checkpoint()
    assert checkpoints.saved_steps(ckpt) == [5, 4] and checkpoints.repair(ckpt) == (5, [])
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step_4", "global_step_5", checkpoints.TRACKER]


def test_prune_keeps_the_newest_complete_ones_and_a_newer_unfinished_save(tmp_path):
    ckpt = tmp_path / "checkpoints"
    for step in (10, 20, 30, 40):
        d = checkpoints.folder(ckpt, step)
        d.mkdir(parents=True)
        (d / "shard.pt").write_bytes(b"x" * step)
        checkpoints.mark_complete(ckpt, step)
    (checkpoints.folder(ckpt, 40) / "shard.pt").write_bytes(b"x")  # damaged after its save
    checkpoints.folder(ckpt, 50).mkdir()  # a save that never finished: no marker
    assert checkpoints.prune(ckpt, 2) == [10]
    assert checkpoints.saved_steps(ckpt) == [50, 40, 30, 20]  # 30 and 20 are the newest complete ones
    assert checkpoints.prune(ckpt, 2) == [] and checkpoints.prune(ckpt, 1) == [20]
    assert checkpoints.repair(ckpt)[0] == 30


def test_a_step_saved_again_over_a_skipped_folder_is_not_taken_for_complete_after_a_kill(composed, monkeypatch,
                                                                                        tmp_path):
    """From a review: step 60's folder was damaged after its save (repair skipped it, left on disk, and the run
    resumed from 40); the attempt trains to 60 again and verl's save writes over the folder in place. A
    kill in that save left the old marker over the new shard: sizes matched, step 60 taken for complete
    (a mix of two saves). Now the skipped folder is removed before the save."""
    trainer = _trainer(composed, monkeypatch, tmp_path)
    ckpt = tmp_path / "checkpoints"
    for step in (40, 60):
        trainer.global_steps = step
        trainer._arctl_saved_step = None
        trainer._save_checkpoint()
    (checkpoints.folder(ckpt, 60) / "actor" / "model_world_size_1_rank_0.pt").write_bytes(b"w" * 10)  # damaged after saving
    step, notes = checkpoints.repair(ckpt)
    assert step == 40 and "global_step_60 skipped" in notes[0]

    class Killed(Workers):
        def save_checkpoint(self, local_path, remote_path, global_step, max_ckpt_to_keep=None):
            super().save_checkpoint(local_path, remote_path, global_step)  # the shard, whole
            raise KeyboardInterrupt("killed before verl's data.pt and tracker")

    trainer = _trainer(composed, monkeypatch, tmp_path)
    trainer.actor_rollout_wg = Killed()
    trainer.global_steps = 60
    with pytest.raises(KeyboardInterrupt):
        trainer._save_checkpoint()
    assert checkpoints.problem(ckpt, 60) is not None
    assert checkpoints.repair(ckpt)[0] == 40
