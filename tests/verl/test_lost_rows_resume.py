"""A node lost right after a verl checkpoint (from a hunt of the tiny backend): the checkpoint was durable, the
rows it covers were not (verl's FileLogger never syncs; wandb-core's last rows unwritten). verl's resume refused
in one line, asking the user to move the checkpoint aside, and the dry run named the checkpoint it refused.
Now the trainer flushes the rows to disk before each save; a resume past lost rows goes back to the newest kept
checkpoint before them (verl's tracker pointed there, the newer folders set aside), with a warning in the log and
`arctl status`; the dry run names that step, reading only; with none kept, one line and nothing changed.
The run folders are built here (checkpoints as verl lays them out, verl's file log, W&B's offline files); verl's
``run_ppo`` is a stand-in that reads where verl would resume and logs through verl's own tracker."""

from __future__ import annotations

import copy
import json
import os
import threading

import pytest

from arctl.backends.base import get_backend
from arctl.backends.verl import checkpoints, history, rehearsal
from arctl.backends.verl import trainer as verl_trainer
from arctl.track import writer
from arctl.track.phase import read_warning

STEP = "trainer/global_step"


@pytest.fixture
def config(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["data_dir"] = str(tmp_path / "data")
    cfg["wandb"].update(mode="offline", id="lost-rows")
    cfg["run_id"] = "lost-rows"
    for name, split in [("deepscaler", "train"), ("aime24", "test"), ("amc22", "test"), ("math500", "test"),
                        ("minerva", "test"), ("olympiadbench", "test")]:
        (tmp_path / "data" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / name / f"{split}.parquet").write_bytes(b"")
    return cfg


def _row(step):
    return {STEP: step, "actor/pg_loss": 0.1 * step}


def _crashed_after(config, run_dir, saved, on_disk):
    """What a first attempt left after its node was lost right after the last of ``saved``'s checkpoints: complete
    checkpoint folders (verl's tracker naming the last), and the rows of steps ``1..on_disk`` alone in verl's file
    log and (W&B on) the W&B files: those of the later steps were in the lost page cache."""
    if (config.get("wandb") or {}).get("mode") != "disabled":
        run = writer.open_run(config, run_dir)
        for step in range(1, on_disk + 1):
            writer.log_row(run, _row(step))
        writer.close_run(run)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / writer.VERL_METRICS_FILE).write_text(
        "".join(json.dumps({"step": s, "data": _row(s)}) + "\n" for s in range(1, on_disk + 1)))
    for step in saved:
        rehearsal.save_checkpoint(run_dir / "checkpoints", step)


def _files(run_dir):
    return {str(p.relative_to(run_dir)): p.read_bytes() if p.is_file() else None for p in sorted(run_dir.rglob("*"))}


def test_a_resume_past_lost_rows_goes_back_to_the_newest_checkpoint_before_them(config, tmp_path, monkeypatch):
    """Checkpoints 2 and 4 (keep 2); rows 3..4 lost from verl's file log and the W&B files. The dry run names step
    2 and changes nothing; the attempt tells verl to resume from global_step_2 (its own find_latest_ckpt_path),
    sets global_step_4 aside, warns, and the run's history holds every step once (was: ValueError, "move
    global_step_4 aside", and a dry run naming step 4)."""
    import verl.trainer.main_ppo as main_ppo
    import wandb
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
    from wandb_reference import synced_history

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    run_dir = tmp_path / "run"
    _crashed_after(config, run_dir, saved=(2, 4), on_disk=2)
    before = _files(run_dir)
    assert get_backend("verl").resume_step(config, run_dir) == 2  # what the attempt takes
    assert _files(run_dir) == before  # read only: no log folded, no folder moved

    seen = {}

    def fake_run_ppo(cfg, task_runner_class):  # verl: resume where the tracker says, then log through its tracker
        from verl.utils.tracking import Tracking

        ckpt = str(cfg.trainer.default_local_dir)
        seen["resume_from"] = find_latest_ckpt_path(ckpt)
        seen["steps"] = checkpoints.saved_steps(ckpt)
        with monkeypatch.context() as env:
            for key, value in cfg.ray_kwargs.ray_init.runtime_env.env_vars.items():
                env.setenv(key, str(value))
            tracker = Tracking(project_name=cfg.trainer.project_name, experiment_name=cfg.trainer.experiment_name,
                               default_backend=["wandb"], config={})
            for step in (3, 4, 5):  # steps 3..4 trained again
                tracker.log(data=_row(step), step=step)
            wandb.finish()

    monkeypatch.setattr(main_ppo, "run_ppo", fake_run_ppo)
    assert verl_trainer.train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    ckpt = run_dir / "checkpoints"
    assert seen["resume_from"] == str(ckpt / "global_step_2")
    assert seen["steps"] == [2]  # the newer folder is not counted, pruned or saved over
    assert (ckpt / f"global_step_4{checkpoints.SET_ASIDE}" / checkpoints.MARKER).is_file()  # left on disk
    warning = read_warning(run_dir)
    assert "step 3's row is in neither" in warning and "resumed from" in warning and "global_step_2" in warning
    assert f"global_step_4{checkpoints.SET_ASIDE}" in warning
    kept = [json.loads(line)[STEP] for line in (run_dir / writer.METRICS_FILE).read_text().splitlines()]
    assert kept == [1, 2]
    _, rows = synced_history(run_dir)
    assert [r[STEP] for r in rows] == [1, 2, 3, 4, 5]  # each step once


def test_with_no_checkpoint_kept_before_the_lost_rows_it_is_one_line_and_nothing_changes(config, tmp_path,
                                                                                        monkeypatch):
    """keep_checkpoints=1: only global_step_4, rows 3..4 lost. The dry run says the attempt cannot resume (None);
    the attempt fails in one line naming the lost step and the checkpoint, and leaves the run as it was."""
    import verl.trainer.main_ppo as main_ppo

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    config["wandb"]["mode"] = "disabled"  # verl's file log is then the run's only record
    config["verl"]["keep_checkpoints"] = 1
    run_dir = tmp_path / "run"
    _crashed_after(config, run_dir, saved=(4,), on_disk=2)
    assert get_backend("verl").resume_step(config, run_dir) is None
    (run_dir / "wandb").mkdir()
    before = _files(run_dir)
    monkeypatch.setattr(main_ppo, "run_ppo", lambda cfg, task_runner_class: pytest.fail("verl started"))
    with pytest.raises(ValueError) as refused:
        verl_trainer.train(config, run_dir, threading.Event())
    line = str(refused.value)
    assert "\n" not in line and "step 3's row is in neither" in line, line
    assert "no complete checkpoint before step 3 is kept (verl.keep_checkpoints=1)" in line, line
    assert str(run_dir / "checkpoints" / "global_step_4") in line and "start the run over" in line, line
    assert _files(run_dir) == before


def test_the_rows_are_kept_where_the_records_hold_them_and_a_step_set_aside_twice_keeps_both(config, tmp_path):
    """No row lost: the newest checkpoint, nothing set aside, nothing said. A step whose rows are lost twice (set
    aside, saved again, lost again) keeps both folders, and verl's tracker names the chosen one."""
    config["wandb"]["mode"] = "disabled"
    run_dir = tmp_path / "run"
    _crashed_after(config, run_dir, saved=(2, 4), on_disk=4)
    assert history.resume_step(config, run_dir) == 4
    point = history.prepare_resume(config, run_dir)
    assert (point.step, point.passed, point.notes) == (4, [], [])

    ckpt = run_dir / "checkpoints"
    (ckpt / f"global_step_4{checkpoints.SET_ASIDE}").mkdir()  # an earlier loss of step 4
    (run_dir / writer.VERL_METRICS_FILE).write_text(
        "".join(json.dumps({"step": s, "data": _row(s)}) + "\n" for s in (1, 2)))
    point = history.prepare_resume(config, run_dir)
    assert (point.step, point.passed) == (2, [4])
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "global_step_2", f"global_step_4{checkpoints.SET_ASIDE}", f"global_step_4{checkpoints.SET_ASIDE}-2",
        checkpoints.TRACKER]
    assert (ckpt / checkpoints.TRACKER).read_text() == "2"


class _Workers:
    def __init__(self, events):
        self.events = events

    def save_checkpoint(self, local_path, remote_path, global_step, max_ckpt_to_keep=None):
        self.events.append(("save", global_step))
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "model_world_size_1_rank_0.pt"), "wb") as f:
            f.write(b"w" * 100)


def test_the_rows_a_checkpoint_covers_are_on_disk_before_its_save_begins(paper_config, tmp_path, monkeypatch):
    """verl's FileLogger writes its lines unbuffered and never syncs them: the trainer fsyncs metrics.jsonl, verl's
    file log, the pending row and the run folder before the save begins (was: none of them), once a save."""
    from arctl.backends.verl.overrides import build_verl_config
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    run_dir = tmp_path / "run"
    cfg = build_verl_config(paper_config, run_dir)[1]
    cfg.trainer.default_local_dir = str(run_dir / "checkpoints")
    cfg.arctl.stop_file = str(run_dir / "STOP")
    trainer = ArctlPPOTrainer(cfg)
    events = []
    trainer.actor_rollout_wg = _Workers(events)
    trainer.train_dataloader = type("Loader", (), {"state_dict": lambda self: {}})()
    trainer.checkpoint_manager = type("Replicas", (), {"update_weights": lambda self, global_steps=None: None})()
    trainer.timing_raw = {}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / writer.METRICS_FILE).write_text(json.dumps(_row(1)) + "\n")
    with open(run_dir / writer.VERL_METRICS_FILE, "wb", buffering=0) as log:  # as verl's FileLogger writes
        log.write(json.dumps({"step": 2, "data": _row(2)}).encode() + b"\n")
    trainer._arctl_training = True
    trainer.global_steps = 3
    trainer._arctl_step_metrics = (3, {"actor/pg_loss": 0.3})

    real_fsync = os.fsync

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    trainer._save_checkpoint()
    trainer._save_checkpoint()  # the stop's call at the same step: no second save, no second flush
    monkeypatch.undo()
    save = events.index(("save", 3))
    synced = [path for what, path in events[:save] if what == "fsync"]
    for name in (writer.METRICS_FILE, writer.VERL_METRICS_FILE, "pending_row.json"):
        assert str(run_dir / name) in synced, (name, events)
    assert str(run_dir) in synced
    assert synced.count(str(run_dir / writer.VERL_METRICS_FILE)) == 1
    assert [e for e in events if e[0] == "save"] == [("save", 3)]
