"""A node lost right after a checkpoint (from a hunt): the checkpoint was on disk (fsync), the rows it covers were
not (metrics.jsonl appended without a flush, wandb-core's last rows unwritten), and the resume from it completed
the run with those steps missing from its W&B history, no warning anywhere. The crash's lost page cache is made by
cutting both files back; the W&B history is read with the independent reader (tests/support/wandb_reference.py)."""

import json
import os
import struct
import threading

import pytest
from micro import MICRO  # tests/support/micro.py

from arctl.backends.tiny.checkpoint import CheckpointError
from arctl.backends.tiny.trainer import train
from arctl.compose import resolve_experiment
from arctl.track import metrics_schema as ms
from arctl.track import writer
from arctl.track.phase import read_warning

TOTAL, CRASH = 5, 4  # checkpoints at 2 and 4 (save_freq=2, keep 2); the node is lost right after step 4's


def _config():
    return resolve_experiment("main-ar-uniform", overrides=[*MICRO, f"trainer.total_steps={TOTAL}"])[0].config


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / writer.METRICS_FILE).read_text().splitlines()]


def _cut_wandb(run_dir, step):
    """Cut the run's .wandb file before its first history row of ``step`` or later, as a lost page cache leaves it."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb_reference import BLOCK, CHUNK

    (path,) = {p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}
    data, pos, start, parts = path.read_bytes(), 7, None, []
    while pos + CHUNK <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK:
            pos += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0:
            pos += left
            continue
        if kind in (1, 2):
            start, parts = pos, []
        parts.append(data[pos + CHUNK: pos + CHUNK + length])
        pos += CHUNK + length
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(b"".join(parts))
            if rec.WhichOneof("record_type") == "history" and any(
                    (item.key or "/".join(item.nested_key)) == ms.STEP_KEY and int(float(item.value_json)) >= step
                    for item in rec.history.item):
                os.truncate(path, start)
                return
    raise AssertionError(f"no row of step {step} in {path}")


def _synced_steps(run_dir):
    import wandb
    from wandb_reference import synced_history

    wandb.teardown()
    ids, rows = synced_history(run_dir)
    return ids, [r[ms.STEP_KEY] for r in rows]


def test_a_crash_right_after_a_checkpoint_resumes_before_the_rows_it_lost(tmp_path, monkeypatch):
    """The step-4 checkpoint is kept, rows 3..4 are lost from both records: the resume goes back to the step-2
    checkpoint with a warning (status.json's) and redoes 3..4 (the same numbers): every step once. With no
    checkpoint before the lost rows, one error line and nothing written. And each checkpoint's rows are flushed
    to disk before it (once a save, not once a step), so a crash no longer loses them."""
    stop, real_log = threading.Event(), writer.log_row
    synced, order = [], []

    def log_row(run, row):  # the node is lost right after the step-4 checkpoint: a stop makes the attempt end there
        real_log(run, row)
        if row[ms.STEP_KEY] == CRASH:
            stop.set()

    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        order.append(("fsync", synced[-1]))
        return real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        order.append(("replace", os.fspath(dst)))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(writer, "log_row", log_row)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    run_dir = tmp_path / "ws" / "runs" / "crashed"
    assert train(_config(), run_dir, stop) == "preempted"
    monkeypatch.undo()
    metrics = str(run_dir / writer.METRICS_FILE)
    saves = [i for i, (what, path) in enumerate(order) if what == "replace" and path.endswith(".pt")]
    assert len(saves) == 2 and synced.count(metrics) == 2  # once a save, not once a step
    for before, save in zip([-1, *saves], saves, strict=False):
        assert ("fsync", metrics) in order[before + 1: save], order  # the rows first, then the checkpoint

    first = _rows(run_dir)
    assert [r[ms.STEP_KEY] for r in first] == list(range(CRASH + 1))
    (run_dir / writer.METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in first[:3]))  # steps 0..2
    _cut_wandb(run_dir, 3)
    assert writer.last_logged_step(run_dir) == 2
    from arctl.backends.base import get_backend

    # the dry run's step is the one the attempt takes (from a review: it named 4, the newest intact)
    assert get_backend("tiny").resume_step(_config(), run_dir) == 2

    # keep=1's disk (the step-2 checkpoint pruned): no checkpoint before the lost rows, one line, nothing written
    ckpts = run_dir / "checkpoints"
    aside = tmp_path / "aside"
    aside.mkdir()
    for p in ckpts.glob("step_000002.pt*"):
        p.rename(aside / p.name)
    def kept():  # what the run keeps (not phase.json: the warm-up's load says what it does; not W&B's own service
        # logs, debug*.log, which the first attempt's wandb-core process may still append to as it winds down: a CI run
        # failed on "server: all connections closed" written 70 ms after the snapshot)
        return {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != "phase.json"
                and not (p.name.startswith("debug") and p.suffix == ".log" and "wandb" in p.parts)}

    before = kept()
    assert get_backend("tiny").resume_step(_config(), run_dir) is None  # it cannot resume: the attempt fails
    with pytest.raises(CheckpointError) as refused:
        train(_config(), run_dir, threading.Event())
    line = str(refused.value)
    assert "\n" not in line and "step 3's row is in neither" in line and "no checkpoint before step 3" in line, line
    assert str(run_dir / "checkpoints" / "step_000004.pt") in line and "start the run over" in line
    assert kept() == before
    for p in aside.iterdir():
        p.rename(ckpts / p.name)

    assert train(_config(), run_dir, threading.Event()) == "completed"
    ids, steps = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == list(range(TOTAL + 1))  # each step once, under one W&B id
    assert writer.logged_steps(run_dir) == list(range(TOTAL + 1))  # arctl's own reader too
    again = _rows(run_dir)
    assert [r[ms.STEP_KEY] for r in again] == list(range(TOTAL + 1))
    for a, b in zip(first, again[:CRASH + 1], strict=True):  # the redone steps are the lost ones
        assert {k: v for k, v in a.items() if not k.startswith("perf/")} == \
            {k: v for k, v in b.items() if not k.startswith("perf/")}
    warning = read_warning(run_dir)
    assert "step 3's row is in neither" in warning and "resumed from step_000002.pt, not step_000004.pt" in warning
