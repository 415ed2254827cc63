"""``trainer.init_from`` on verl (arctl/backends/verl/init_model.py): which model a run starts from.
The merge itself runs on the real checkpoint of verl's CPU loop (tests/launch/test_slurm_verl_cpu.py)."""

from __future__ import annotations

import json

import pytest

from arctl.backends.verl import checkpoints
from arctl.backends.verl.init_model import INIT_MODEL_DIR, INIT_RECORD, init_model_path
from arctl.backends.verl.overrides import VerlConfigError


def _complete(checkpoint_dir, step):
    actor = checkpoints.folder(checkpoint_dir, step) / "actor"
    actor.mkdir(parents=True)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"w" * 10)
    checkpoints.mark_complete(checkpoint_dir, step)


def test_a_run_without_init_from_keeps_its_model(tmp_path):
    assert init_model_path({"model": {"path": "m"}}, tmp_path) is None


def test_a_run_to_start_from_without_a_complete_checkpoint_is_one_clear_error(tmp_path):
    parent, child = tmp_path / "p", tmp_path / "c"
    (parent / "checkpoints" / "global_step_3").mkdir(parents=True)  # a save that did not finish
    with pytest.raises(VerlConfigError, match="run p has no complete checkpoint to start from"):
        init_model_path({"init_dir": str(parent)}, child)
    assert not (child / INIT_MODEL_DIR).exists()


def test_merges_the_newest_complete_checkpoint_once(tmp_path, monkeypatch):
    parent, child = tmp_path / "p", tmp_path / "c"
    _complete(parent / "checkpoints", 2)
    _complete(parent / "checkpoints", 5)
    (parent / "checkpoints" / "global_step_7").mkdir()  # not complete: never the one merged
    merged = []

    def merge(actor, target):
        merged.append(actor)
        target.mkdir(parents=True)

    monkeypatch.setattr("arctl.backends.verl.init_model.merge_actor", merge)
    config = {"init_dir": str(parent)}
    assert init_model_path(config, child) == str(child / INIT_MODEL_DIR)
    assert merged == [parent / "checkpoints" / "global_step_5" / "actor"]
    assert json.loads((child / INIT_RECORD).read_text())["step"] == 5
    assert init_model_path(config, child) == str(child / INIT_MODEL_DIR) and len(merged) == 1  # a resume reuses it


def test_a_run_with_its_own_checkpoint_and_no_merged_model_resumes_from_its_own(tmp_path):
    child = tmp_path / "c"
    _complete(child / "checkpoints", 4)
    assert init_model_path({"init_dir": str(tmp_path / "gone")}, child) is None


def test_a_kl_run_whose_merged_model_was_deleted_merges_it_again_for_its_reference(tmp_path, monkeypatch):
    """From a review: verl builds the KL term's reference from ``model.path``; a run started from another
    (L1-Max from L1-Exact, kl_coef 0.001) whose init_model/ was deleted after its own first checkpoint fell
    back to the base model, so its KL reference changed mid-run without a word. Now merged again from the
    checkpoint init.json names; where that is gone, one clear error. Without a KL term, as before."""
    import shutil

    parent, child = tmp_path / "p", tmp_path / "c"
    _complete(parent / "checkpoints", 5)
    merged = []

    def merge(actor, target):
        merged.append(actor)
        target.mkdir(parents=True)

    monkeypatch.setattr("arctl.backends.verl.init_model.merge_actor", merge)
    kl = {"init_dir": str(parent), "optim": {"kl_coef": 0.001}}
    assert init_model_path(kl, child) == str(child / INIT_MODEL_DIR)
    _complete(child / "checkpoints", 3)  # the run's own checkpoint
    shutil.rmtree(child / INIT_MODEL_DIR)
    assert init_model_path({**kl, "optim": {"kl_coef": 0.0}}, child) is None  # its weights: its checkpoint
    assert init_model_path(kl, child) == str(child / INIT_MODEL_DIR)
    assert merged == [parent / "checkpoints" / "global_step_5" / "actor"] * 2
    shutil.rmtree(child / INIT_MODEL_DIR)
    shutil.rmtree(parent / "checkpoints" / "global_step_5")  # pruned since
    with pytest.raises(VerlConfigError, match="KL term's reference .* cannot be rebuilt"):
        init_model_path(kl, child)
    (child / INIT_RECORD).unlink()  # and the record of what it was merged from
    with pytest.raises(VerlConfigError, match="were deleted: the KL term's reference"):
        init_model_path(kl, child)
