"""A completed run whose inputs from outside its config changed since it ran is evaluated again. From a hunt: an
eval-only verl run (``verl.eval_only=true verl.eval_checkpoint=RUN/checkpoints/global_step_3``, or ``=model``) has
its run id from the checkpoint's path as text; after ``arctl run ... --force`` retrained RUN (other weights under
the same path), the same eval command said "skip ... completed" and the old numbers went into the tables. The
launch now records what identifies those inputs (``Backend.inputs_identity``) in the run folder (``inputs.json``),
and the plan reruns a completed run whose inputs no longer match, as ``--force`` reruns it; run ids are unchanged."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

from arctl.backends.verl import VerlBackend
from arctl.backends.verl import checkpoints as verl_checkpoints
from arctl.backends.verl.rehearsal import save_checkpoint as verl_save
from arctl.backends.verl.settings import EVAL_MODEL
from arctl.launch import states
from arctl.launch.executors import LaunchError
from arctl.launch.launcher import items_from_resolved, launch, plan
from arctl.launch.registry import Registry
from arctl.launch.rundir import read_inputs
from arctl.launch.testing import CountBackend
from arctl.launch.workspace import Workspace, run_paths

INPUTS_FILE = run_paths(Path("run"))["inputs"].name  # the launch's record of what a run read

STUBS = "arctl_test_eval_inputs_stubs"


class ReadsACheckpoint(CountBackend):
    """The counting job, whose runs read a file named by ``$ARCTL_TEST_INPUTS`` (an eval-only run's checkpoint)."""

    def inputs_identity(self, config):
        path = Path(os.environ["ARCTL_TEST_INPUTS"])
        return {"path": str(path), "weights": path.read_text()} if path.exists() else None


@pytest.fixture
def checkpoint(specs, tmp_path, monkeypatch) -> Path:
    """The file every run of ``lt3`` reads (its weights: its text), with the stub backend in the jobs and plans."""
    module = types.ModuleType(STUBS)
    module.READS = ReadsACheckpoint()
    monkeypatch.setitem(sys.modules, STUBS, module)
    monkeypatch.setenv("ARCTL_TEST_BACKEND", f"{STUBS}:READS")
    path = tmp_path / "global_step_3"
    path.write_text("trained once")
    monkeypatch.setenv("ARCTL_TEST_INPUTS", str(path))
    return path


def _items():
    from arctl.compose import resolve_sweep

    return items_from_resolved(resolve_sweep("lt3", []))


def _planned(ws: Workspace) -> dict[str, tuple[str, str]]:
    return {i.run_id: (i.action, i.reason) for i in plan(_items(), ws)}


def _evaluated(tmp_path: Path) -> tuple[Workspace, list[str]]:
    ws = Workspace(tmp_path / "ws")
    result = launch(_items(), ws, executor="debug", members=["lt3"])
    assert len(result.submitted) == 3 and not result.failed
    return ws, [i.run_id for i in _items()]


def test_a_completed_run_whose_checkpoint_changed_is_evaluated_again_and_one_unchanged_is_skipped(
        checkpoint, tmp_path):
    ws, ids = _evaluated(tmp_path)
    for rid in ids:
        assert read_inputs(ws.run_dir(rid)) == {"path": str(checkpoint), "weights": "trained once"}
    assert {action for action, _ in _planned(ws).values()} == {"skip"}
    with Registry(ws.registry_path) as reg:
        before = {rid: reg.get(rid) for rid in ids}

    checkpoint.write_text("trained again")  # `arctl run ... --force` retrained the run it evaluates
    planned = _planned(ws)
    reason = (f"completed, but the checkpoint it evaluates has changed since it was evaluated ({checkpoint}: "
              "weights trained once -> trained again)")
    assert planned == {rid: ("rerun", reason) for rid in ids}
    result = launch(_items(), ws, executor="debug", members=["lt3"])
    assert sorted(i.run_id for i in result.submitted) == sorted(ids) and not result.failed
    with Registry(ws.registry_path) as reg:
        for rid in ids:  # rerun as --force reruns: same run id, a new W&B id, the evaluated run's files aside
            after = reg.get(rid)
            assert after.state == states.COMPLETED and after.generation == before[rid].generation + 1
            assert after.wandb_run_id != before[rid].wandb_run_id
            assert read_inputs(ws.run_dir(rid)) == {"path": str(checkpoint), "weights": "trained again"}
            [archive] = (ws.run_dir(rid) / "previous").iterdir()
            assert json.loads((archive / INPUTS_FILE).read_text())["weights"] == "trained once"
    assert {action for action, _ in _planned(ws).values()} == {"skip"}


def test_a_run_recorded_before_inputs_were_recorded_or_whose_inputs_are_gone_is_left_as_it_is(checkpoint, tmp_path):
    ws, (a, b, c) = _evaluated(tmp_path)
    (ws.run_dir(a) / INPUTS_FILE).unlink()  # launched by an arctl that recorded nothing
    checkpoint.write_text("trained again")
    planned = _planned(ws)
    assert planned[a] == ("skip", "completed") and planned[b][0] == planned[c][0] == "rerun"
    checkpoint.unlink()  # gone since (pruned, or its run retrained and not saved again yet): nothing to compare with
    planned = _planned(ws)
    assert planned[a] == ("skip", "completed")
    assert planned[b] == planned[c] == ("skip", f"completed; the checkpoint it evaluated ({checkpoint}) cannot be "
                                                "read now: not compared")


def test_only_the_changed_run_is_rerun_and_the_others_skip_lines_still_name_force(checkpoint, tmp_path):
    ws, (a, b, c) = _evaluated(tmp_path)
    (ws.run_dir(a) / INPUTS_FILE).write_text(json.dumps({"path": str(checkpoint), "weights": "other weights"}))
    result = launch(_items(), ws, executor="debug", members=["lt3"])
    assert [i.run_id for i in result.submitted] == [a]
    assert sorted((i.run_id, why) for i, why in result.skipped) == [(b, "completed (use --force to rerun)"),
                                                                    (c, "completed (use --force to rerun)")]
    assert read_inputs(ws.run_dir(a))["weights"] == "trained once"


def test_a_refused_rerun_puts_back_what_the_evaluated_run_read(checkpoint, tmp_path, refusing_sbatch):
    """A rerun whose submission is refused is the completed run it was, ``inputs.json`` too: the next launch
    still finds its inputs changed (had the rerun's stayed, it would skip the stale evaluation for good)."""
    ws, ids = _evaluated(tmp_path)
    checkpoint.write_text("trained again")
    with pytest.raises(LaunchError, match="invalid partition"):
        launch(_items(), ws, executor="slurm", members=["lt3"])
    with Registry(ws.registry_path) as reg:
        assert {reg.get(rid).state for rid in ids} == {states.COMPLETED}
    for rid in ids:
        assert read_inputs(ws.run_dir(rid))["weights"] == "trained once"
        assert not (ws.run_dir(rid) / "previous").exists()
    assert {action for action, _ in _planned(ws).values()} == {"rerun"}


def test_a_stopped_run_resumes_reading_its_inputs_as_they_are_now(checkpoint, tmp_path):
    ws, (a, b, c) = _evaluated(tmp_path)
    with Registry(ws.registry_path) as reg:
        reg.update(a, state=states.FAILED, error="killed")
    checkpoint.write_text("trained again")
    action, reason = _planned(ws)[a]
    assert action == "resume" and reason.endswith(
        f"; the checkpoint it evaluates has changed since its last attempt was launched ({checkpoint}: weights "
        "trained once -> trained again): this attempt reads it as it is now")
    launch(_items(), ws, executor="debug", members=["lt3"])
    assert read_inputs(ws.run_dir(a))["weights"] == "trained again"


def _eval_config(checkpoint: str, model: str = "Qwen/Qwen2.5-0.5B") -> dict:
    return {"backend": "verl", "model": {"path": model}, "verl": {"eval_only": True, "eval_checkpoint": checkpoint}}


def test_verl_identifies_the_checkpoint_an_eval_only_run_evaluates_by_its_saved_files(tmp_path):
    ckpt_dir = tmp_path / "runs" / "r" / "checkpoints"
    verl_save(ckpt_dir, 3)
    folder = verl_checkpoints.folder(ckpt_dir, 3)
    identity = VerlBackend().inputs_identity(_eval_config(str(folder)))
    assert identity["path"] == str(folder.resolve()) and identity["files"] == "2"  # data.pt, arctl's marker
    assert VerlBackend().inputs_identity(_eval_config(str(folder))) == identity  # unchanged: the same
    assert VerlBackend().inputs_identity({**_eval_config(str(folder)), "verl": {"eval_checkpoint": str(folder)}}) is None

    os.utime(folder / "data.pt", ns=(1, 1))  # saved again (a retrain writes the same names and sizes)
    verl_checkpoints.mark_complete(ckpt_dir, 3)
    again = VerlBackend().inputs_identity(_eval_config(str(folder)))
    assert again is not None and again != identity and again["path"] == identity["path"]
    (folder / "actor" / "model_world_size_1_rank_0.pt").write_text("shard")
    assert VerlBackend().inputs_identity(_eval_config(str(folder)))["files"] == "3"
    assert VerlBackend().inputs_identity(_eval_config(str(tmp_path / "global_step_9"))) is None  # gone


def test_verl_identifies_the_model_an_eval_only_run_of_the_model_evaluates_by_its_config_and_weights(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors.index.json", "model-00001-of-00001.safetensors", "tokenizer.json"):
        (model / name).write_text(name)
    config = _eval_config(EVAL_MODEL, str(model))
    identity = VerlBackend().inputs_identity(config)
    assert identity["path"] == str(model.resolve()) and identity["files"] == "3"  # not the tokenizer
    os.utime(model / "tokenizer.json", ns=(1, 1))
    assert VerlBackend().inputs_identity(config) == identity
    os.utime(model / "model-00001-of-00001.safetensors", ns=(1, 1))  # other weights
    assert VerlBackend().inputs_identity(config) != identity
    assert VerlBackend().inputs_identity(_eval_config(EVAL_MODEL)) is None  # a hub id: Hugging Face resolves it
