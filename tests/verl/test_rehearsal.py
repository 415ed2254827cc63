"""The verl backend's stop path, in process (the real-SLURM version: tests/launch/test_slurm_verl_preempt.py):
a stop request lets the step in progress finish and checkpoint within half the warning; a step that
outlives its grace, or any step under SIGTERM (``stop_event.abandon``), is abandoned and the last
checkpoint kept; the next attempt resumes there with the same W&B id. ``verl.rehearsal_steps`` stands
in for verl's ``run_ppo`` (sleeping steps, verl's checkpoint layout)."""

from __future__ import annotations

import copy
import json
import threading
import time

import pytest

from arctl.backends.verl.checkpoints import TRACKER
from arctl.backends.verl.rehearsal import PROGRESS_FILE

pytestmark = pytest.mark.slow  # the verl trainer's stop path in processes


def latest_step(checkpoint_dir) -> int:
    from arctl.backends.verl.checkpoints import newest_complete

    return newest_complete(checkpoint_dir)[0]


@pytest.fixture
def config(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"].update(rehearsal_steps=4, rehearsal_step_s=0.05)
    cfg["trainer"]["save_freq"] = 2
    cfg["wandb"].update(mode="offline", id="rehearsal-run")
    cfg["cluster"]["preempt_warning_s"] = 60
    return cfg


def _history(run_dir):
    from arctl.track.wandbfile import read_wandb_file

    files = sorted({p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}, key=lambda p: p.stat().st_mtime)
    runs = [read_wandb_file(f) for f in files]
    return [r.wandb_id for r in runs], [int(s) for r in runs for s in r.column("trainer/global_step")]


def _stop_during(run_dir, step, event, abandon=False):
    """Set ``event`` once the rehearsal reports ``step`` running (a timer thread)."""

    def watch():
        while True:
            try:
                if json.loads((run_dir / PROGRESS_FILE).read_text()) == {**_progress(run_dir), "step": step,
                                                                           "phase": "running"}:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        event.abandon = abandon
        event.set()

    threading.Thread(target=watch, daemon=True).start()


def _progress(run_dir):
    data = json.loads((run_dir / PROGRESS_FILE).read_text())
    return {k: data[k] for k in ("time", "pid", "resumed_from")}


def test_a_rehearsal_runs_checkpoints_and_logs_every_step(config, tmp_path):
    import wandb

    from arctl.backends.verl.trainer import train

    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    ckpt = run_dir / "checkpoints"
    assert sorted(p.name for p in ckpt.glob("global_step_*")) == ["global_step_2", "global_step_4"]
    assert (ckpt / TRACKER).read_text() == "4" and latest_step(ckpt) == 4
    ids, steps = _history(run_dir)
    assert ids == ["rehearsal-run"] and steps == [1, 2, 3, 4]


@pytest.mark.parametrize("abandon", [False, True], ids=["usr1-finishes-the-step", "term-abandons-it"])
def test_a_stop_mid_step_then_resume(config, tmp_path, abandon):
    import wandb

    from arctl.backends.verl.trainer import train

    config["verl"]["rehearsal_step_s"] = 1.5
    run_dir = tmp_path / "run"
    stop = threading.Event()
    _stop_during(run_dir, 3, stop, abandon=abandon)
    assert train(config, run_dir, stop) == "preempted"
    wandb.teardown()
    ckpt = run_dir / "checkpoints"
    if abandon:  # step 3 thrown away (had it ended, the stop would have saved it): step 2 is the last checkpoint
        assert latest_step(ckpt) == 2 and not (ckpt / "global_step_3").exists()
        assert json.loads((run_dir / PROGRESS_FILE).read_text())["phase"] == "running"
    else:  # USR1 with a 30 s grace: step 3 ends, is saved, the run stops
        assert latest_step(ckpt) == 3
    resumed_from = latest_step(ckpt)
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    assert json.loads((run_dir / PROGRESS_FILE).read_text())["resumed_from"] == resumed_from
    assert latest_step(ckpt) == 4
    ids, steps = _history(run_dir)
    assert set(ids) == {"rehearsal-run"} and len(ids) == 2  # one W&B run, a fragment per attempt
    assert sorted(set(steps)) == [1, 2, 3, 4] and steps[-1] == 4


def test_a_step_that_outlives_its_grace_is_abandoned(config, tmp_path):
    import wandb

    from arctl.backends.verl.trainer import step_grace_s, train

    config["verl"]["rehearsal_step_s"] = 3.0
    config["cluster"]["preempt_warning_s"] = 1  # grace 0.5 s, a step of 3 s
    assert step_grace_s(config, threading.Event()) == 0.5
    run_dir = tmp_path / "run"
    stop = threading.Event()
    _stop_during(run_dir, 1, stop)
    assert train(config, run_dir, stop) == "preempted"
    wandb.teardown()
    # had step 1 been allowed to end, the stop would have saved it
    assert latest_step(run_dir / "checkpoints") == 0
    assert json.loads((run_dir / PROGRESS_FILE).read_text()) | {"time": 0, "pid": 0} == {
        "step": 1, "phase": "running", "resumed_from": 0, "time": 0, "pid": 0}


@pytest.mark.parametrize("w_and_b_lost_rows", [False, True], ids=["logged-past-the-checkpoint", "service-lost-rows"])
def test_the_synced_history_holds_every_step_once_after_a_resume(config, tmp_path, w_and_b_lost_rows):
    """kill -9 after step 4 was logged but before its checkpoint (the tracker still says 2); in the
    second case the W&B service had also lost every row of the first attempt (a TERM reaches it).
    The next attempt rewinds W&B to step 2, re-logs what it lost from verl's file log, and redoes
    3-4: read by the independent reader, steps 1-4 exactly once under one W&B id."""
    import shutil

    import wandb
    from wandb_reference import synced_history

    from arctl.backends.verl.trainer import train

    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    ckpt = run_dir / "checkpoints"
    shutil.rmtree(ckpt / "global_step_4")
    (ckpt / TRACKER).write_text("2")
    if w_and_b_lost_rows:
        (first,) = {p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}
        first.write_bytes(first.read_bytes()[:7])  # the header only: nothing reached the file
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    ids, rows = synced_history(run_dir)
    assert ids == {"rehearsal-run"}
    assert [r["trainer/global_step"] for r in rows] == [1, 2, 3, 4]
    kept = [json.loads(line)["trainer/global_step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert kept == [1, 2]  # what the resumed attempt kept; verl's file log holds the attempt's own steps


def test_a_resume_that_turns_w_and_b_on_holds_the_steps_before_it(config, tmp_path):
    """From a hunt: the first attempt ran with wandb.mode=disabled and was killed after step 3 (checkpoint 2);
    the resume ran with wandb.mode=offline (the launcher accepts it: the kept history is logged). The W&B
    history started at step 3: steps 1-2, which metrics.jsonl has, were never logged. Read by the
    independent reader: steps 1-4 once each."""
    import shutil

    import wandb
    from wandb_reference import synced_history

    from arctl.backends.verl.trainer import train

    run_dir = tmp_path / "run"
    config["wandb"]["mode"] = "disabled"
    assert train(config, run_dir, threading.Event()) == "completed"
    ckpt = run_dir / "checkpoints"
    shutil.rmtree(ckpt / "global_step_4")
    (ckpt / TRACKER).write_text("2")
    assert not list((run_dir / "wandb").rglob("run-*.wandb"))
    config["wandb"]["mode"] = "offline"
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    ids, rows = synced_history(run_dir)
    assert ids == {"rehearsal-run"}
    assert [r["trainer/global_step"] for r in rows] == [1, 2, 3, 4]
    assert [r["train/loss"] for r in rows] == [1.0, 0.5, 1 / 3, 0.25]
