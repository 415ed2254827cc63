"""A step's row survives a job killed between its checkpoint and verl's log of it (from a hunt).

verl 0.9.1's ``fit`` (run here for real, its workers stood in for) saves step N's checkpoint, then
validates, then logs the step's row. A kill -9, a lost node or a stop whose grace ends in between left
checkpoint N complete and row N nowhere: the resume from N went on at N + 1 (step N missing from the
history) or, where N's validation is redone, logged row N as the evaluation alone (its train/* lost).
The trainer now writes the step's metrics to the run's pending row before the save begins; the resume
logs it. Read by the independent reader: every step once, with its training metrics."""

from __future__ import annotations

import concurrent.futures
import copy
import json
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from arctl.backends.verl import checkpoints, stop_request
from arctl.backends.verl.history import KEPT_LOG, VERL_LOG, prepare_attempt

PENDING_ROW = "pending_row.json"  # arctl.backends.verl.history.PENDING_ROW (by name, as the code before it had none)

pytestmark = pytest.mark.slow  # verl's fit loop and W&B's service


class Killed(BaseException):
    """The job dies here (kill -9, a lost node, the abandon at the end of a stop's grace)."""


@pytest.fixture
def config(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["wandb"].update(mode="offline", id="step-row")
    cfg["run_id"] = "step-row"
    return cfg


@pytest.fixture
def verl_loop(monkeypatch):
    """verl's parent-class work stood in for: a step fills its metrics; a save lays out verl's folder
    (and checks the step's row is on disk before it begins); validation and the weight sync may be
    where the job dies; ``_compute_metrics`` adds verl's batch statistics."""
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.rehearsal import save_checkpoint

    events = {"kill": None, "pending_at_save": []}

    def step(self, metrics, timing_raw):
        metrics.update({"actor/pg_loss": 0.1 * self.global_steps, "train/reward/mean": 0.01 * self.global_steps})
        return SimpleNamespace(keys=[], partition_id="train", tags=[])

    def save(self):
        pending = self.arctl_run_dir / PENDING_ROW
        events["pending_at_save"].append(pending.exists() and json.loads(pending.read_text())["trainer/global_step"])
        save_checkpoint(self.config.trainer.default_local_dir, self.global_steps)

    def killed_at(phase):
        def hook(self, *args, **kwargs):
            if events["kill"] == (phase, self.global_steps):
                raise Killed(f"the job died in step {self.global_steps}'s {phase}")
            # (arctl's _val_metrics_update puts the step into the evaluation's metrics)
            return {"val/acc": 0.5, "trainer/global_step": self.global_steps} if phase == "validation" else None
        return hook

    def compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        metrics["critic/score/mean"] = 0.02 * global_steps

    monkeypatch.setattr(PPOTrainerSync, "step", step)
    monkeypatch.setattr(PPOTrainerSync, "_save_checkpoint", save)
    monkeypatch.setattr(PPOTrainerSync, "_validate", killed_at("validation"))
    monkeypatch.setattr(PPOTrainerSync, "on_step_end", killed_at("weight sync"))
    monkeypatch.setattr(PPOTrainerSync, "_compute_metrics", compute_metrics)
    monkeypatch.setattr(trainer_base.tq, "kv_clear", lambda **kwargs: None)
    monkeypatch.setattr(trainer_base.SkipManager, "init", classmethod(lambda cls, config: None))
    return events


def _attempt(config, run_dir, monkeypatch, total=4, save_freq=2, test_freq=2):
    """One attempt as arctl's ``train()`` runs it (checkpoint repair, the redo of a skipped validation,
    W&B history repair), then verl's real ``fit`` with verl's tracker (file log and W&B)."""
    import wandb

    from arctl.backends.verl.run_config import wandb_env
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    ckpt, stop_file = run_dir / "checkpoints", run_dir / stop_request.STOP_FILE
    ckpt.mkdir(parents=True, exist_ok=True)
    resume_at = checkpoints.repair(ckpt)[0] or None
    redo = resume_at is not None and stop_request.skipped_validation(stop_file) == resume_at
    if not redo:
        stop_request.clear_skipped_validation(stop_file)
    prepare_attempt(config, run_dir, resume_at, redo_validation=redo)
    for key, value in wandb_env(config, run_dir).items():
        monkeypatch.setenv(key, value)
    t = object.__new__(ArctlPPOTrainer)
    t.arctl_run_dir = run_dir
    t.config = OmegaConf.create({
        "trainer": {"project_name": "p", "experiment_name": "e", "logger": ["file", "wandb"], "total_epochs": 1,
                    "val_before_train": redo, "save_freq": save_freq, "test_freq": test_freq,
                    "default_local_dir": str(ckpt)},
        "global_profiler": {"steps": None, "profile_continuous_steps": False},
        "arctl": {"stop_file": str(stop_file), "redo_validation_at": resume_at if redo else None},
    })
    t.global_steps, t.total_training_steps, t.steps_per_epoch = resume_at or 0, total, total
    t._dump_futures, t._dump_executor = [], concurrent.futures.ThreadPoolExecutor(1)
    t._arctl_metric_defined = False
    try:
        t.fit(agent_loop_manager=None)
        t.logger.finish()  # verl's task runner, after fit
    finally:
        wandb.teardown()  # killed: the service ends too; what it wrote stays
        t.logger._finished = True


def _check_history(run_dir, total):
    from wandb_reference import synced_history

    from arctl.backends.verl.history import kept_rows

    ids, rows = synced_history(run_dir)
    assert ids == {"step-row"}
    assert [r["trainer/global_step"] for r in rows] == list(range(1, total + 1))  # each step once
    for r in rows:  # each with its training metrics
        assert r["train/loss"] == pytest.approx(0.1 * r["trainer/global_step"])
        assert r["train/reward/mean"] == pytest.approx(0.01 * r["trainer/global_step"])
    kept = kept_rows(run_dir, total)  # metrics.jsonl and verl's file log, as the next attempt folds them
    assert [r["trainer/global_step"] for r in kept] == list(range(1, total + 1))
    assert all(r["train/loss"] == pytest.approx(0.1 * r["trainer/global_step"]) for r in kept)
    return rows


def test_a_run_logs_every_step_once_and_leaves_no_pending_row(config, tmp_path, monkeypatch, verl_loop):
    run_dir = tmp_path / "run"
    _attempt(config, run_dir, monkeypatch)
    assert verl_loop["pending_at_save"] == [2, 4]  # the step's row was on disk before its save began
    assert not (run_dir / PENDING_ROW).exists()  # gone once verl logged the step: not logged twice
    verl_log = [json.loads(line)["step"] for line in (run_dir / VERL_LOG).read_text().splitlines()]
    assert verl_log == [1, 2, 3, 4]
    rows = _check_history(run_dir, 4)
    assert [r.get("val/acc") for r in rows] == [None, 0.5, None, 0.5]


@pytest.mark.parametrize("phase", ["validation", "weight sync"],
                         ids=["killed-validating-step-4", "killed-before-a-step-that-does-not-validate"])
def test_a_job_killed_after_a_checkpoint_and_before_its_row_keeps_the_row(config, tmp_path, monkeypatch,
                                                                         verl_loop, phase):
    """Checkpoint 4 complete, row 4 logged nowhere. Killed in its validation: the resume validates step 4
    first and logs its row with the step's training metrics (was: the evaluation alone). Killed before a
    step that does not validate (test_freq 3): the resume re-logs row 4 and goes on at 5 (was: no step 4)."""
    run_dir, test_freq = tmp_path / "run", 2 if phase == "validation" else 3
    verl_loop["kill"] = (phase, 4)
    with pytest.raises(Killed):
        _attempt(config, run_dir, monkeypatch, total=6, test_freq=test_freq)
    assert checkpoints.newest_complete(run_dir / "checkpoints")[0] == 4
    assert [json.loads(line)["step"] for line in (run_dir / VERL_LOG).read_text().splitlines()] == [1, 2, 3]
    assert (stop_request.skipped_validation(run_dir / stop_request.STOP_FILE) == 4) is (phase == "validation")
    verl_loop["kill"] = None
    _attempt(config, run_dir, monkeypatch, total=6, test_freq=test_freq)
    assert not (run_dir / PENDING_ROW).exists()
    rows = _check_history(run_dir, 6)
    if phase == "validation":
        assert rows[3]["val/acc"] == 0.5  # the redone evaluation, with the step's training metrics
    kept = [json.loads(line)["trainer/global_step"] for line in (run_dir / KEPT_LOG).read_text().splitlines()]
    assert kept == [1, 2, 3, 4, 5, 6]
