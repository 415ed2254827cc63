"""A disk full for a few seconds during a tiny run: wandb-core writes nothing after its first write error (even
once there is space again), so W&B took rows it never wrote, and the run "completed" with no W&B history, which
nothing resumed (from a hunt). A checkpoint or the warm-up cache on a full disk failed without saying so or
where. ENOSPC is raised in-process by monkeypatched writes; nothing is mounted."""

import errno
import io
import os
import threading

import pytest
import torch
from micro import MICRO  # tests/support/micro.py

from arctl.backends.tiny import checkpoint, trainer
from arctl.backends.tiny.trainer import train
from arctl.compose import resolve_experiment
from arctl.track import metrics_schema as ms
from arctl.track import writer

FULL = os.strerror(errno.ENOSPC)


def _config():
    return resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config


def _synced_steps(run_dir):
    """(W&B run ids, the steps a W&B server would hold once the run's files are synced)."""
    import wandb
    from wandb_reference import synced_history  # tests/support/wandb_reference.py

    wandb.teardown()
    ids, rows = synced_history(run_dir)
    return ids, [r[ms.STEP_KEY] for r in rows]


def _losing_log(monkeypatch, first_from: int, every_run: bool):
    """writer.log_row as wandb-core behaves after ENOSPC: it takes the rows from step ``first_from`` on and
    never writes them (of the run's first W&B run only, unless ``every_run``: the disk stays full)."""
    real_log, runs = writer.log_row, []

    def log_row(run, row):
        runs.append(run) if not runs else None
        if row[ms.STEP_KEY] >= first_from and (every_run or run is runs[0]):
            return
        real_log(run, row)

    monkeypatch.setattr(writer, "log_row", log_row)
    return real_log


def test_rows_w_and_b_never_wrote_are_logged_again_before_the_run_completes(tmp_path, monkeypatch, capsys):
    """The run's W&B files lack steps 2..3 after its close: they are re-logged from metrics.jsonl into a new
    fragment, and the run completes with every step once under one W&B id."""
    _losing_log(monkeypatch, 2, every_run=False)
    run_dir = tmp_path / "r"
    assert train(_config(), run_dir, threading.Event()) == "completed"
    ids, steps = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == [0, 1, 2, 3]
    assert len(list((run_dir / "wandb").rglob("run-*.wandb"))) == 2  # the run's, and the one that re-logged
    assert "W&B lost" not in capsys.readouterr().out


def test_rows_w_and_b_cannot_take_again_leave_the_run_to_a_resume_that_re_logs_them_without_training(
        tmp_path, monkeypatch, capsys):
    """The disk stays full while the rows are re-logged: the run is not "completed" (which nothing resumes),
    it ends preempted at its final checkpoint with one line saying what W&B lost; its resume trains nothing
    and re-logs them."""
    real_log = _losing_log(monkeypatch, 2, every_run=True)
    run_dir = tmp_path / "ws" / "runs" / "r"
    assert train(_config(), run_dir, threading.Event()) == "preempted"
    out = capsys.readouterr().out
    # the resume names the run's workspace (a job cannot know the shell's: a bare one acted on ./arctl-runs)
    assert (f"W&B lost steps 2..3; the checkpoint is saved and the next attempt "
            f"(`arctl resume r --workdir {tmp_path / 'ws'}`)") in out, out
    from arctl.track.phase import read_warning

    assert "W&B lost steps 2..3" in read_warning(run_dir)
    monkeypatch.setattr(writer, "log_row", real_log)

    def no_training(*args, **kwargs):
        raise AssertionError("the resume trained a step")

    monkeypatch.setattr(trainer, "ppo_update", no_training)
    assert train(_config(), run_dir, threading.Event()) == "completed"
    ids, steps = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == [0, 1, 2, 3]
    assert read_warning(run_dir) is None  # re-logged: `arctl status` no longer says they are lost


def test_a_close_whose_end_never_reached_the_file_is_not_taken_for_complete(tmp_path, monkeypatch):
    """close_run's wait for the exit record timed out (wandb-core wrote nothing more): only a warning, and the
    run "completed". Now its end counts as lost like a row: the run ends preempted (a resume closes it)."""
    from arctl.track import wandbfile

    monkeypatch.setattr(wandbfile, "has_exit_record", lambda path, tail_blocks=2: False)
    monkeypatch.setattr(writer, "CLOSE_WAIT_S", 0.1)
    with pytest.warns(UserWarning, match="has not completed the run's file"):
        assert train(_config(), tmp_path / "r", threading.Event()) == "preempted"


class _FullDisk(io.FileIO):
    """A file on a disk that fills after ``room`` bytes: its writes then raise ENOSPC, as the kernel's do."""

    room = 256

    def write(self, data):
        if self.tell() + len(memoryview(data)) > self.room:
            raise OSError(errno.ENOSPC, FULL)
        return super().write(data)


def test_a_checkpoint_on_a_full_disk_fails_saying_so_and_where(tmp_path, monkeypatch):
    """torch.save's own writer turned ENOSPC into "RuntimeError: [enforce fail at inline_container.cc:672]
    unexpected pos 128 vs 0". Now an OSError(ENOSPC) naming the checkpoint, and no temporary file is left."""
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.AdamW(model.parameters())
    monkeypatch.setattr(checkpoint, "open", lambda path, mode="r", *a, **k: _FullDisk(path, mode.replace("b", "")),
                        raising=False)
    with pytest.raises(OSError) as raised:
        checkpoint.save_checkpoint(tmp_path, 2, model, optimizer, torch.Generator(), "wid", keep=2)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(tmp_path / "checkpoints" / "step_000002.pt")
    assert not list((tmp_path / "checkpoints").iterdir())
    monkeypatch.undo()
    path = checkpoint.save_checkpoint(tmp_path, 2, model, optimizer, torch.Generator(), "wid", keep=2)
    assert checkpoint.newest_intact(tmp_path).path == path  # written through Python, read by torch


def test_a_warm_up_cache_on_a_full_disk_fails_naming_the_cache(tmp_path, monkeypatch):
    """safetensors' "SafetensorError: ... No space left on device" named no path; now the cache's is named."""
    from safetensors import SafetensorError

    from arctl.backends.tiny.warmup import warmup_dir

    def full(*args, **kwargs):
        raise SafetensorError(f"Error while serializing: IoError({FULL} (os error 28))")

    monkeypatch.setattr(trainer, "warmup_model", full)
    config = _config()
    with pytest.raises(OSError) as raised:
        train(config, tmp_path / "r", threading.Event())
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(warmup_dir(config))
    assert isinstance(raised.value.__cause__, SafetensorError)


def test_a_full_disk_on_the_metrics_file_fails_saying_so_and_where(tmp_path, monkeypatch):
    """From a hunt: a full disk while the step's row was appended to metrics.jsonl failed the run as "the disk is
    full (No space left on device)", no path, no free space (the write's error names no file). Now the job's line
    names the file and the space free there, as for a checkpoint."""
    from arctl.launch.job import failure_line

    run_dir = tmp_path / "ws" / "runs" / "r"
    run_dir.mkdir(parents=True)
    monkeypatch.setattr(_FullDisk, "room", 0)
    monkeypatch.setattr(trainer, "open", lambda path, mode="r", *a, **k: io.TextIOWrapper(_FullDisk(path, mode)),
                        raising=False)
    with pytest.raises(OSError) as raised:
        trainer.log_metrics(None, run_dir, 3, {ms.TRAIN_LOSS: 0.5}, None)
    path = run_dir / writer.METRICS_FILE
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(path)
    line = failure_line(raised.value, run_dir)
    assert line.startswith(f"the disk is full at {path} ({FULL}, ") and " MiB free there)" in line, line
