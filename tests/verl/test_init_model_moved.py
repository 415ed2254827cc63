"""The KL reference of a verl run started from another (``trainer.init_from``: L1-Max from L1-Exact's
final checkpoint) rebuilt after its workspace was moved or copied (arctl/backends/verl/init_model.py).

From a hunt: ``init.json`` names the checkpoint merged by its absolute path; a workspace moved from
scratch to project space, then ``init_model/`` deleted to free quota, and the next attempt stopped with
"the checkpoint it was merged from is gone ... `arctl run --force`" although it was intact in the moved
workspace. The checkpoint is now found by name in the other run's folder as this run finds it now, and
used only where it is the one merged. Real files in tmp_path; only verl's merge is stubbed."""

from __future__ import annotations

import json
import shutil

import pytest

from arctl.backends.verl import checkpoints
from arctl.backends.verl.init_model import INIT_MODEL_DIR, INIT_RECORD, init_model_path
from arctl.backends.verl.overrides import VerlConfigError

PARENT, CHILD = "p_l1-exact_s0_aaaa", "p_l1-max_s0_bbbb"


def _complete(checkpoint_dir, step, weights=b"w"):
    """A complete checkpoint, as tests/verl/test_init_model.py makes them; ``weights``: another run's."""
    actor = checkpoints.folder(checkpoint_dir, step) / "actor"
    actor.mkdir(parents=True)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(weights * 10)
    checkpoints.mark_complete(checkpoint_dir, step)


@pytest.fixture
def merged(monkeypatch):
    calls = []

    def merge(actor, target):
        calls.append(actor)
        target.mkdir(parents=True)

    monkeypatch.setattr("arctl.backends.verl.init_model.merge_actor", merge)
    return calls


def _kl(runs):
    return {"init_dir": str(runs / PARENT), "optim": {"kl_coef": 0.001}}


def _started_from_parent(runs):
    """L1-Max started from L1-Exact's step 40 (merged), then a checkpoint of its own."""
    _complete(runs / PARENT / "checkpoints", 40)
    assert init_model_path(_kl(runs), runs / CHILD) == str(runs / CHILD / INIT_MODEL_DIR)
    _complete(runs / CHILD / "checkpoints", 10)


def test_a_moved_workspace_merges_the_reference_again_from_its_own_copy(tmp_path, merged):
    old, new = tmp_path / "scratch" / "ws", tmp_path / "project" / "ws"
    _started_from_parent(old / "runs")
    new.parent.mkdir()
    shutil.move(str(old), str(new))
    shutil.rmtree(new / "runs" / CHILD / INIT_MODEL_DIR)  # 3-15 GB: deleted to free quota
    runs = new / "runs"
    assert init_model_path(_kl(runs), runs / CHILD) == str(runs / CHILD / INIT_MODEL_DIR)
    assert merged[-1] == checkpoints.folder(runs / PARENT / "checkpoints", 40) / "actor"


def test_an_init_record_without_identity_still_finds_the_moved_checkpoint(tmp_path, merged):
    """An init.json written before the checkpoint's identity was kept (run id, step, absolute path)."""
    old, new = tmp_path / "scratch" / "ws", tmp_path / "project" / "ws"
    _started_from_parent(old / "runs")
    record = old / "runs" / CHILD / INIT_RECORD
    record.write_text(json.dumps({k: v for k, v in json.loads(record.read_text()).items() if k != "identity"}))
    new.parent.mkdir()
    shutil.move(str(old), str(new))
    shutil.rmtree(new / "runs" / CHILD / INIT_MODEL_DIR)
    runs = new / "runs"
    assert init_model_path(_kl(runs), runs / CHILD) == str(runs / CHILD / INIT_MODEL_DIR)
    assert merged[-1] == checkpoints.folder(runs / PARENT / "checkpoints", 40) / "actor"


def test_after_a_copy_the_old_workspace_rerun_since_is_not_the_reference(tmp_path, merged):
    old, new = tmp_path / "scratch" / "ws", tmp_path / "project" / "ws"
    _started_from_parent(old / "runs")
    shutil.copytree(old, new)
    shutil.rmtree(old / "runs" / PARENT / "checkpoints")  # L1-Exact rerun (--force) in the old workspace
    _complete(old / "runs" / PARENT / "checkpoints", 40, weights=b"v")
    shutil.rmtree(new / "runs" / CHILD / INIT_MODEL_DIR)
    runs = new / "runs"
    assert init_model_path(_kl(runs), runs / CHILD) == str(runs / CHILD / INIT_MODEL_DIR)
    assert merged[-1] == checkpoints.folder(runs / PARENT / "checkpoints", 40) / "actor"


def test_a_parent_rerun_since_with_the_same_sizes_is_one_clear_error(tmp_path, merged):
    runs = tmp_path / "ws" / "runs"
    _started_from_parent(runs)
    shutil.rmtree(runs / PARENT / "checkpoints")  # rerun: same shapes, other weights
    _complete(runs / PARENT / "checkpoints", 40, weights=b"v")
    shutil.rmtree(runs / CHILD / INIT_MODEL_DIR)
    with pytest.raises(VerlConfigError, match=r"is not the one merged .* rerun since\?.*cannot be rebuilt"):
        init_model_path(_kl(runs), runs / CHILD)
    assert len(merged) == 1 and not (runs / CHILD / INIT_MODEL_DIR).exists()


def test_a_parent_left_in_the_old_workspace_is_found_by_its_recorded_path(tmp_path, merged):
    """Only the run itself moved: its workspace now has no folder of the run it started from."""
    old, new = tmp_path / "scratch" / "ws" / "runs", tmp_path / "project" / "ws" / "runs"
    _started_from_parent(old)
    new.mkdir(parents=True)
    shutil.move(str(old / CHILD), str(new / CHILD))
    shutil.rmtree(new / CHILD / INIT_MODEL_DIR)
    assert init_model_path(_kl(new), new / CHILD) == str(new / CHILD / INIT_MODEL_DIR)
    assert merged[-1] == checkpoints.folder(old / PARENT / "checkpoints", 40) / "actor"


def test_a_checkpoint_gone_everywhere_names_where_to_restore_it(tmp_path, merged):
    old, new = tmp_path / "scratch" / "ws", tmp_path / "project" / "ws"
    _started_from_parent(old / "runs")
    new.parent.mkdir()
    shutil.move(str(old), str(new))
    runs = new / "runs"
    shutil.rmtree(runs / PARENT / "checkpoints" / "global_step_40")  # pruned
    shutil.rmtree(runs / CHILD / INIT_MODEL_DIR)
    here = checkpoints.folder(runs / PARENT / "checkpoints", 40)
    with pytest.raises(VerlConfigError, match=rf"\({here}\) is gone .* restore .* to {here}, or") as err:
        init_model_path(_kl(runs), runs / CHILD)
    assert str(old) not in str(err.value)  # not the path the workspace had
    assert not (runs / CHILD / INIT_MODEL_DIR).exists()
