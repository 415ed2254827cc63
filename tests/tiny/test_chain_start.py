"""A tiny run that starts from another run's weights (``trainer.init_from``), as its source changes under it:
its KL reference is found by the weights it started from (a --force rerun of the source that trained the same
weights writes another file; one with other weights moved the old file to ``previous/<time>/``), and a run
starts without the warm-up it would throw away, its source's shapes checked first (from a hunt)."""

from __future__ import annotations

import json
import shutil
import threading

import pytest
import torch
import yaml
from chains import child_of, stopping_after  # tests/support/chains.py
from micro import MICRO  # tests/support/micro.py

from arctl.backends.tiny import trainer
from arctl.backends.tiny.checkpoint import file_sha256, newest_intact, save_checkpoint
from arctl.backends.tiny.trainer import INIT_RECORD, train
from arctl.backends.tiny.warmup import warmup_dir
from arctl.compose import resolve_experiment
from arctl.launch.rundir import archive_previous


def _rows(run_dir) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]


def _resave(parent, shift: float, wandb_id: str) -> None:
    """The source's step-3 checkpoint written again as a --force rerun writes it (another W&B id), its weights
    those of the checkpoint now plus ``shift``, after the old files were moved to ``previous/<time>/``."""
    final = newest_intact(parent)
    archive_previous(parent)
    model = torch.nn.Module()
    model.state_dict = lambda: {k: v + shift for k, v in final.state["model"].items()}
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    save_checkpoint(parent, 3, model, optimizer, torch.Generator(), wandb_id, keep=2)


@pytest.fixture(scope="module")
def kl_chain(tmp_path_factory):
    """A completed KL source and a KL dependent of it stopped after step 1 (a checkpoint kept); copied per test."""
    base = tmp_path_factory.mktemp("chain")
    config = resolve_experiment("main-grpo", overrides=[*MICRO, "optim.kl_coef=0.05", "wandb.mode=disabled"])[0].config
    parent, child = base / "runs" / "parent", base / "runs" / "child"
    assert train(config, parent, threading.Event()) == "completed"
    with stopping_after(1) as stop:
        assert train(child_of(config, parent), child, stop) == "preempted"
    return config, base


def _copy(kl_chain, tmp_path):
    config, base = kl_chain
    shutil.copytree(base / "runs", tmp_path / "runs")
    parent, child = tmp_path / "runs" / "parent", tmp_path / "runs" / "child"
    return child_of(config, parent), parent, child


@pytest.fixture(scope="module")
def untouched(kl_chain, tmp_path_factory):
    """The dependent's rows, resumed with its source as it started from it."""
    child_config, _, child = _copy(kl_chain, tmp_path_factory.mktemp("untouched"))
    assert train(child_config, child, threading.Event()) == "completed"
    return _rows(child)


def test_a_kl_run_resumes_after_its_source_was_rerun_with_the_same_weights(kl_chain, untouched, tmp_path):
    child_config, parent, child = _copy(kl_chain, tmp_path)
    init = json.loads((child / INIT_RECORD).read_text())
    _resave(parent, 0.0, "parent-g1")
    assert file_sha256(newest_intact(parent).path) != init["sha256"]  # another file, the same weights
    assert train(child_config, child, threading.Event()) == "completed"
    assert _rows(child) == untouched  # the same KL reference: the same numbers


def test_a_kl_run_resumes_from_the_archive_of_a_source_rerun_with_other_weights(kl_chain, untouched, tmp_path, capsys):
    child_config, parent, child = _copy(kl_chain, tmp_path)
    _resave(parent, 1.0, "parent-g1")
    assert train(child_config, child, threading.Event()) == "completed"
    assert _rows(child) == untouched
    (archive,) = (parent / "previous").iterdir()
    assert f"kept in {archive / 'checkpoints' / 'step_000003.pt'}" in capsys.readouterr().out


def test_where_no_archive_holds_it_the_error_names_every_folder_looked_in(kl_chain, tmp_path):
    child_config, parent, child = _copy(kl_chain, tmp_path)
    _resave(parent, 1.0, "parent-g1")
    _resave(parent, 2.0, "parent-g2")
    first = sorted((parent / "previous").iterdir())[0]
    (first / "checkpoints" / "step_000003.pt").unlink()  # the generation it started from is gone
    with pytest.raises(ValueError) as err:
        train(child_config, child, threading.Event())
    line = str(err.value)
    assert "\n" not in line and "the checkpoint this run started from" in line and "is gone or changed" in line
    for archive in (parent / "previous").iterdir():
        assert str(archive / "checkpoints") in line
    assert str(parent / "checkpoints") in line and "start the run over" in line


def test_an_init_json_of_the_older_arctl_is_still_accepted_and_found_in_the_archive(kl_chain, untouched, tmp_path):
    """An init.json written before the weights' sha256 was recorded: its file's sha256 is what identifies the
    checkpoint, taken where the file is unchanged, else looked for in the source's archives."""
    child_config, parent, child = _copy(kl_chain, tmp_path)
    init = json.loads((child / INIT_RECORD).read_text())
    old = {k: init[k] for k in ("run_id", "step", "checkpoint", "sha256")}
    (child / INIT_RECORD).write_text(json.dumps(old))
    saved = tmp_path / "saved"
    shutil.copytree(child, saved)
    assert train(child_config, child, threading.Event()) == "completed"  # the file unchanged
    assert _rows(child) == untouched
    shutil.rmtree(child)
    saved.rename(child)
    _resave(parent, 1.0, "parent-g1")
    assert train(child_config, child, threading.Event()) == "completed"  # the file moved to previous/<time>/
    assert _rows(child) == untouched


def test_a_dependent_takes_no_warm_up_and_records_its_sources(tmp_path, monkeypatch):
    """A run that starts from another run's weights neither loads nor trains the warm-up of its own config (its
    weights, tokenizer and model are not the warm-up's); its warm-up record is its source's. Its numbers are those
    of the source's weights (tests/tiny/test_init_from.py: its step-0 evaluation is theirs)."""
    config = resolve_experiment("main-grpo", overrides=[*MICRO, "wandb.mode=disabled"])[0].config
    parent, child = tmp_path / "runs" / "parent", tmp_path / "runs" / "child"
    assert train(config, parent, threading.Event()) == "completed"

    def no_warmup(*_a, **_k):
        raise AssertionError("a run that starts from another run's weights took the warm-up")

    monkeypatch.setattr(trainer, "warmup_model", no_warmup)
    with stopping_after(2) as stop:
        assert train(child_of(config, parent), child, stop) == "preempted"
    assert train(child_of(config, parent), child, threading.Event()) == "completed"  # resumed: none either
    assert json.loads((child / "warmup.json").read_text()) == json.loads((parent / "warmup.json").read_text())


def test_a_source_of_another_shape_is_refused_in_one_line_before_any_warm_up(tmp_path):
    config = resolve_experiment("main-grpo", overrides=[*MICRO, "wandb.mode=disabled"])[0].config
    parent = tmp_path / "runs" / "parent"
    assert train(config, parent, threading.Event()) == "completed"
    (parent / "config.yaml").write_text(yaml.safe_dump(config))  # as the launcher writes it
    wide = {**child_of(config, parent), "model": {**config["model"], "hidden_size": 64}}
    with pytest.raises(ValueError) as err:
        train(wide, tmp_path / "runs" / "child", threading.Event())
    line = str(err.value)
    assert "\n" not in line and "the weights of run parent (step 3" in line and "do not fit this run's model" in line
    assert "is [291, 32] there and [291, 64] here" in line and "model.hidden_size=32 there, 64 here" in line
    assert not warmup_dir(wide).exists()  # no warm-up trained for a model it never trains
    assert not (tmp_path / "runs" / "child" / INIT_RECORD).exists()


def test_a_source_of_another_task_is_refused_naming_the_task(tmp_path):
    """The vocabulary is the task's (tiny.task), not a model key: a run of the running_sum task from a search run
    was told to copy the model section, which was the same (from a review). The line names the task."""
    config = resolve_experiment("main-grpo", overrides=[*MICRO, "wandb.mode=disabled"])[0].config
    parent = tmp_path / "runs" / "parent"
    assert train(config, parent, threading.Event()) == "completed"
    (parent / "config.yaml").write_text(yaml.safe_dump(config))  # as the launcher writes it
    child = child_of(config, parent)
    other = {**child, "tiny": {**child["tiny"], "task": {**child["tiny"]["task"], "name": "running_sum"}}}
    with pytest.raises(ValueError) as err:
        train(other, tmp_path / "runs" / "child", threading.Event())
    line = str(err.value)
    assert "\n" not in line and "do not fit this run's model" in line, line
    assert "tiny.task.name=search there, running_sum here" in line and "model section and task" in line, line
