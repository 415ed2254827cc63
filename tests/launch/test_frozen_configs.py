"""A run frozen before a config key existed still resumes, as the run it was (arctl resume's input)."""

from __future__ import annotations

import copy

import pytest

from arctl.compose import resolve_experiment
from arctl.launch.run_id import ADDED_AT_DEFAULT, NEW_DEFAULT, make_run_id
from arctl.launch.rundir import dump_config, read_frozen_run
from arctl.launch.workspace import run_paths

LATER_KEYS = sorted({*ADDED_AT_DEFAULT, *NEW_DEFAULT})


@pytest.mark.parametrize("scale", ["tiny", "paper"])
@pytest.mark.parametrize("drop", LATER_KEYS, ids=lambda k: ".".join(k))
def test_a_config_without_a_key_added_later_resumes_with_the_value_it_computed_with(tmp_path, scale, drop):
    """Before, `arctl resume` of every such run failed with one line, e.g. 'verl.grader: missing key'."""
    run = resolve_experiment("main-ar-uniform", scale=scale)[0]
    config = copy.deepcopy({k: v for k, v in run.config.items() if k not in ("run_id", "run_dir", "init_dir")})
    section, key = drop
    if drop in NEW_DEFAULT and config["backend"] == section:
        config[section][key] = NEW_DEFAULT[drop][0]  # what a run of that backend computed with before the key
    run_id = make_run_id(config)
    old = copy.deepcopy(config)
    del old[section][key]
    assert make_run_id(old) == run_id  # the run as it was frozen: the same identity
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    run_paths(run_dir)["config"].write_text(dump_config(old), encoding="utf-8")

    back = read_frozen_run(run_dir, run_id, "main-ar-uniform", "ar-uniform", 0)
    assert back[section][key] == config[section][key]
    assert make_run_id(back) == run_id


def test_a_verl_run_from_before_the_grader_key_resumes_grading_with_math_verify(tmp_path):
    from arctl.backends.verl.overrides import arctl_settings

    run = resolve_experiment("main-ar-uniform", scale="paper")[0]
    old = copy.deepcopy({k: v for k, v in run.config.items() if k not in ("run_id", "run_dir", "init_dir")})
    del old["verl"]["grader"]
    run_id = make_run_id(old)
    assert run_id != make_run_id(run.config)  # a new run of the same cell grades with the authors' grader
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    run_paths(run_dir)["config"].write_text(dump_config(old), encoding="utf-8")
    back = read_frozen_run(run_dir, run_id, "main-ar-uniform", "ar-uniform", 0)
    assert back["verl"]["grader"] == "math-verify" and arctl_settings(back)["grader"] == "math-verify"


def test_a_run_frozen_before_a_key_is_shared_by_a_cell_that_computes_the_same(tmp_path):
    """A sweep in an old workspace reuses the runs it already has: the frozen config is compared with the
    keys added since at the values it computed with (before, its missing keys made it another run)."""
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.shared import share_key, workspace_runs
    from arctl.launch.workspace import Workspace

    run = resolve_experiment("main-grpo", scale="tiny")[0]
    config = copy.deepcopy({k: v for k, v in run.config.items() if k not in ("run_id", "run_dir", "init_dir")})
    old = copy.deepcopy(config)
    for section, key in LATER_KEYS:
        old.get(section, {}).pop(key, None)
    run_id = make_run_id(config)
    assert make_run_id(old) == run_id and share_key(old) != share_key(config)
    ws = Workspace.open(tmp_path / "ws")
    run_dir = ws.run_dir(run_id)
    run_dir.mkdir(parents=True)
    run_paths(run_dir)["config"].write_text(dump_config(old), encoding="utf-8")
    with Registry(ws.registry_path) as reg:
        token = new_claim_token()
        (rec,) = reg.claim([RunRecord(run_id=run_id, experiment="main-grpo", arm="grpo", seed=0)], token).claimed
        reg.release([run_id], token, "COMPLETED")

    class Cell:  # what the launcher passes: another experiment's cell of the same config
        def __init__(self):
            self.run_id, self.seed = "other_cell_s0_0123456789", 0

    _, elsewhere = workspace_runs([Cell()], ws)
    assert [(w.run_id, w.key == share_key(config)) for w in elsewhere] == [(run_id, True)]
