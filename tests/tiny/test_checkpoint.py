"""Checkpoints are verified before they are loaded (issue 25, 7): flipped bytes, a truncated or an
emptied file is skipped for the newest intact checkpoint with a warning; none intact is one line
naming the files; the resumed run keeps every step once."""

from __future__ import annotations

import json
import threading

import pytest
import torch
from micro import MICRO  # tests/support/micro.py

from arctl.backends.tiny.checkpoint import CheckpointError, newest_intact, save_checkpoint
from arctl.backends.tiny.trainer import train
from arctl.compose import resolve_experiment
from arctl.track import metrics_schema as ms
from arctl.track.phase import read_warning


def _flip(path, count=64):
    """Flip ``count`` bytes in the middle of the file (inside the tensors' data)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _empty(path):
    path.write_bytes(b"")


DAMAGE = {"64 flipped bytes": _flip, "truncated": _truncate, "emptied": _empty}


@pytest.fixture
def two_checkpoints(tmp_path):
    """step 1 and step 2 of a small model; returns (run_dir, weights at step 1, weights at step 2)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.AdamW(model.parameters())
    generator = torch.Generator().manual_seed(0)
    weights = []
    for step in (1, 2):
        with torch.no_grad():
            model.weight.add_(1.0)
        save_checkpoint(tmp_path, step, model, optimizer, generator, "wb-id", keep=2)
        weights.append(model.weight.detach().clone())
    return tmp_path, weights[0], weights[1]


def test_an_intact_checkpoint_is_the_newest(two_checkpoints):
    run_dir, _, w2 = two_checkpoints
    found = newest_intact(run_dir)
    assert found.path.name == "step_000002.pt" and not found.skipped and found.warning() is None
    assert torch.equal(found.state["model"]["weight"], w2)


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_newest_checkpoint_is_skipped_for_the_previous_one(two_checkpoints, damage):
    run_dir, w1, _ = two_checkpoints
    damage(run_dir / "checkpoints" / "step_000002.pt")
    found = newest_intact(run_dir)
    assert found.path.name == "step_000001.pt" and torch.equal(found.state["model"]["weight"], w1)
    assert [p.name for p, _ in found.skipped] == ["step_000002.pt"]
    assert "step_000002.pt" in found.warning() and "resumed from step_000001.pt" in found.warning()


def test_flipped_bytes_would_load_silently_without_the_checksum(two_checkpoints):
    """Why the checksum is needed: the damaged file still loads (garbage weights, no error)."""
    run_dir, _, w2 = two_checkpoints
    path = run_dir / "checkpoints" / "step_000002.pt"
    _flip(path)
    state = torch.load(path, map_location="cpu", weights_only=False)
    assert not torch.equal(state["model"]["weight"], w2)  # loaded, and wrong


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_no_intact_checkpoint_is_one_line_naming_every_file(two_checkpoints, damage):
    run_dir, _, _ = two_checkpoints
    for step in (1, 2):
        damage(run_dir / "checkpoints" / f"step_00000{step}.pt")
    with pytest.raises(CheckpointError) as err:
        newest_intact(run_dir)
    text = str(err.value)
    assert "\n" not in text and "step_000001.pt" in text and "step_000002.pt" in text and "delete" in text


def test_a_checkpoint_without_a_checksum_file_is_used_if_it_loads(two_checkpoints):
    run_dir, _, w2 = two_checkpoints
    (run_dir / "checkpoints" / "step_000002.pt.sha256").unlink()  # an older arctl wrote it
    assert torch.equal(newest_intact(run_dir).state["model"]["weight"], w2)
    _truncate(run_dir / "checkpoints" / "step_000002.pt")  # and if it does not load, the previous one
    assert newest_intact(run_dir).path.name == "step_000001.pt"


def test_pruning_removes_checksum_files_with_their_checkpoints(two_checkpoints):
    run_dir, _, _ = two_checkpoints
    model = torch.nn.Linear(64, 64)
    save_checkpoint(run_dir, 3, model, torch.optim.AdamW(model.parameters()), torch.Generator(), None, keep=2)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "step_000002.pt", "step_000002.pt.sha256", "step_000003.pt", "step_000003.pt.sha256"]


def _steps(run_dir):
    return [json.loads(line)[ms.STEP_KEY] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_run_resumes_from_the_newest_intact_checkpoint_with_a_warning_and_every_step_once(tmp_path):
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"  # checkpoints at steps 2 and 3
    _flip(run_dir / "checkpoints" / "step_000003.pt")
    assert train(config, run_dir, threading.Event()) == "completed"  # redoes step 3 from step 2
    assert "step_000003.pt" in read_warning(run_dir) and "resumed from step_000002.pt" in read_warning(run_dir)
    assert _steps(run_dir) == [0, 1, 2, 3]
    # a later attempt finds its checkpoints intact: the warning was that attempt's, not the run's for ever (a hunt)
    assert train(config, run_dir, threading.Event()) == "completed"
    assert read_warning(run_dir) is None and _steps(run_dir) == [0, 1, 2, 3]
    for path in (run_dir / "checkpoints").glob("step_*.pt"):
        _empty(path)
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        train(config, run_dir, threading.Event())


@pytest.mark.parametrize("keep", [1, 2])
def test_a_save_after_resuming_past_a_damaged_checkpoint_keeps_itself_and_sets_the_damaged_one_aside(
        two_checkpoints, keep):
    """From a review: pruning kept the highest step numbers, damaged or not. Resumed from step 2 past a damaged
    step 5, the save of step 3 deleted itself with keep=1 (only the damaged file was left: no resume possible)
    and the step 2 it resumed from with keep=2."""
    run_dir, _, _ = two_checkpoints
    model = torch.nn.Linear(64, 64)
    save_checkpoint(run_dir, 5, model, torch.optim.AdamW(model.parameters()), torch.Generator(), None, keep=3)
    _flip(run_dir / "checkpoints" / "step_000005.pt")
    found = newest_intact(run_dir)
    assert found.path.name == "step_000002.pt"  # resumed past the damaged step 5
    with torch.no_grad():
        model.weight.fill_(3.0)
    save_checkpoint(run_dir, 3, model, torch.optim.AdamW(model.parameters()), torch.Generator(), None, keep=keep)
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert "step_000003.pt" in names and "step_000005.pt" not in names
    assert {"step_000005.pt.damaged", "step_000005.pt.sha256.damaged"} <= set(names)
    assert ("step_000002.pt" in names) == (keep == 2)
    found = newest_intact(run_dir)
    assert found.path.name == "step_000003.pt" and not found.skipped
    assert torch.equal(found.state["model"]["weight"], torch.full((64, 64), 3.0))


def test_a_kill_between_a_resaved_checkpoint_and_its_checksum_leaves_it_usable(two_checkpoints, monkeypatch):
    """From a review: saving a step again (a stop at a save step saved it twice; a step redone past a damaged one)
    replaced the .pt while its old checksum stayed: a kill before the new checksum was written left a complete
    checkpoint whose bytes 'do not match', skipped as damaged (torch.save's bytes differ from save to save)."""
    from arctl.backends.tiny import checkpoint

    run_dir, _, _ = two_checkpoints
    model = torch.nn.Linear(64, 64)
    with torch.no_grad():
        model.weight.fill_(7.0)

    def killed(path, *a, **k):
        raise KeyboardInterrupt  # the kill, after the .pt was renamed into place

    monkeypatch.setattr(checkpoint, "atomic_write", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run_dir, 2, model, torch.optim.AdamW(model.parameters()), torch.Generator(), None, keep=2)
    found = newest_intact(run_dir)
    assert found.path.name == "step_000002.pt" and not found.skipped
    assert torch.equal(found.state["model"]["weight"], torch.full((64, 64), 7.0))


def test_a_kill_while_a_damaged_steps_checkpoint_is_saved_again_does_not_make_it_trusted(two_checkpoints,
                                                                                         monkeypatch):
    """From a review of the re-save: the old checksum of a damaged step was removed before the new save, so a kill
    during torch.save left the damaged file without a checksum, which is 'used if it loads': trusted."""
    import arctl.backends.tiny.checkpoint as checkpoint

    run_dir, w1, _ = two_checkpoints
    _flip(run_dir / "checkpoints" / "step_000002.pt")
    assert newest_intact(run_dir).path.name == "step_000001.pt"  # resumed from 1, past the damaged 2
    model = torch.nn.Linear(64, 64)

    def killed(state, path):
        raise KeyboardInterrupt  # the kill, during the save of step 2

    monkeypatch.setattr(checkpoint.torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run_dir, 2, model, torch.optim.AdamW(model.parameters()), torch.Generator(), None, keep=2)
    monkeypatch.undo()
    found = newest_intact(run_dir)
    assert found.path.name == "step_000001.pt" and torch.equal(found.state["model"]["weight"], w1)


def _record_another_warmup(run_dir):
    """The first attempt's record, as if it had started from another warm-up than the cache holds now."""
    path = run_dir / "warmup.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "weights_sha256": "f" * 64}))
    return record["weights_sha256"]


@pytest.mark.parametrize("kl", [False, True])
def test_a_resume_from_another_warmup_than_the_first_attempts_is_refused_where_the_run_rests_on_it(tmp_path, kl):
    """From a hunt: the warm-up lives in a cache shared by runs, not in the run's folder; a resume whose cache holds
    another one (emptied and refilled by a training instead of the shipped copy, another machine kind) went on
    silently: the KL term's reference was the new warm-up (its kl and losses other from the first step after the
    resume) and warmup.json took the new sha256. Now a checkpoint with a KL term, or a kept step-0 evaluation
    without a checkpoint, refuses (one line); a checkpoint without one carries on and keeps the first record."""
    overrides = [*MICRO, "optim.kl_coef=0.01"] if kl else MICRO
    config = resolve_experiment("main-ar-uniform", overrides=overrides)[0].config
    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"
    _record_another_warmup(run_dir)
    if kl:
        with pytest.raises(ValueError, match=r"not the one this run started from \(ffffffffffff.*KL term.*start the run "
                           r"over: remove .*checkpoints and .*metrics\.jsonl, then `arctl resume run --workdir \S+`"):
            train(config, run_dir, threading.Event())
    else:
        assert train(config, run_dir, threading.Event()) == "completed"  # the checkpoint's weights carry on
        assert json.loads((run_dir / "warmup.json").read_text())["weights_sha256"] == "f" * 64  # not overwritten
    for path in (run_dir / "checkpoints").glob("step_*"):  # killed before its first checkpoint: step 0 kept
        path.unlink()
    assert 0 in _steps(run_dir)
    with pytest.raises(ValueError, match="step-0 evaluation is of those weights"):
        train(config, run_dir, threading.Event())
    (run_dir / "metrics.jsonl").unlink()  # as the error says (checkpoints gone too): it starts over, recorded
    assert train(config, run_dir, threading.Event()) == "completed"
    assert json.loads((run_dir / "warmup.json").read_text())["weights_sha256"] != "f" * 64
