"""From a mutation hunt of track/runs/stitch.py, load.py and discover.py: what a report reads of a resumed run (every
step once, the value of the attempt that came last, its state and its W&B config) and of a run that serves several
cells. The W&B files are stand-ins whose parsed contents (:class:`RunData`) a patched reader returns, so that each
case is the few rows it is about; the stitching, caching and listing are the real ones."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

import arctl.track.wandbfile as wandbfile
from arctl.track.run_data import RunData
from arctl.track.runs import load_runs, stitch_fragments

STEP = "trainer/global_step"
T0 = 1_796_000_000.0  # an epoch time in 2026


def _frag(source: str, start: float, rows, keys=(STEP, "train/loss"), **kw) -> RunData:
    return RunData(wandb_id="r1", source=source, start_time=start, keys=list(keys),
                   values=np.array(rows, dtype=float).reshape(len(rows), len(keys)), **kw)


def test_a_long_resumed_run_reads_the_later_attempts_value_at_every_step_it_logged_again():
    """An attempt killed at step 300 and resumed from step 100: steps 100-299 are in both files, and each reads the
    resumed attempt's value, once. (The hand-worked cases hold a few rows, which any sort keeps in order.)"""
    killed = _frag("w/offline-run-20261201_100000-r1/run-r1.wandb", T0, [[s, 1.0] for s in range(300)])
    resumed = _frag("w/offline-run-20261201_110000-r1/run-r1.wandb", T0 + 3600, [[s, 2.0] for s in range(100, 400)])
    for given in ([killed, resumed], [resumed, killed]):
        wide, _ = stitch_fragments(given)
        assert wide.index.tolist() == list(range(400))
        loss = wide["train/loss"].to_numpy()
        assert (loss[:100] == 1.0).all() and (loss[100:] == 2.0).all()


@pytest.fixture
def fake_files(monkeypatch):
    """``add(root, run_id, RunData...)``: a workspace run folder whose W&B files (one per fragment, in its sync
    folder) read as the fragments given."""
    parsed: dict[str, RunData] = {}

    def read(path, summary=True):
        return parsed[str(path)]

    monkeypatch.setattr(wandbfile, "read_wandb_file", read)

    def add(root: Path, run_id: str, *frags: RunData, config: dict | None = None, shared: dict | None = None):
        run_dir = root / "runs" / run_id
        for f in frags:
            path = run_dir / "wandb" / f.source
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            f.source = str(path)
            parsed[f.source] = f
        if config is not None:
            (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
        if shared is not None:
            (run_dir / "shared.json").write_text(json.dumps(shared))
        return run_dir

    return add


def _read(root: Path, cache: Path, **kw):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_runs(root, cache_dir=cache, progress=False, processes=1, **kw)


def _attempts(**last):
    """A run killed at step 3 (no exit record) and resumed to its end: (killed, resumed)."""
    killed = _frag("offline-run-20261201_100000-r1/run-r1.wandb", T0, [[0, 1.0], [1, 1.0], [2, 1.0], [3, 1.0]],
                   state="incomplete", name="grpo-s0", group="main-grpo")
    resumed = _frag("offline-run-20261201_110000-r1/run-r1.wandb", T0 + 3600, [[2, 2.0], [3, 2.0], [4, 2.0]],
                    **{"state": "finished", "exit_code": 0, "name": "grpo-s0", "group": "main-grpo", **last})
    return killed, resumed


def test_a_resumed_run_that_finished_is_read_as_finished(fake_files, tmp_path):
    """A report counts a run by its state: the resumed attempt's (finished), not the killed one's, whichever of the
    files is listed first."""
    killed, resumed = _attempts()
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", resumed, killed,
               config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    out = _read(tmp_path / "ws", tmp_path / "cache")
    row = out.runs.iloc[0]
    assert (row["state"], row["exit_code"], row["n_fragments"], row["last_step"]) == ("finished", 0, 2, 4)
    loss = out.history[out.history["metric"] == "train/loss"].sort_values("step")
    assert loss["step"].tolist() == [0, 1, 2, 3, 4] and loss["value"].tolist() == [1.0, 1.0, 2.0, 2.0, 2.0]


def test_without_a_config_yaml_the_latest_attempts_w_and_b_config_is_the_runs(fake_files, tmp_path):
    """A run folder without config.yaml (copied from W&B only) is known by its W&B config; when the resumed attempt's
    differs (its learning rate changed on resume), the run's config is the resumed attempt's."""
    killed, resumed = _attempts()
    killed.config = {"experiment": "main-grpo", "arm": "grpo", "seed": 0, "optim": {"lr": 1e-6}}
    resumed.config = {"experiment": "main-grpo", "arm": "grpo", "seed": 0, "optim": {"lr": 5e-7}}
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", killed, resumed)
    out = _read(tmp_path / "ws", tmp_path / "cache")
    assert out.runs.iloc[0]["config.optim.lr"] == 5e-7


def test_what_the_resumed_job_recorded_wins_over_what_the_killed_one_did(fake_files, tmp_path):
    """The job records the machine it ran on in its W&B config beside config.yaml: a resumed run ran last on the
    resumed attempt's machine, and that is the one its runs row names."""
    killed, resumed = _attempts()
    killed.config = {"machine": {"host": "node-a"}}
    resumed.config = {"machine": {"host": "node-b"}}
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", killed, resumed,
               config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    out = _read(tmp_path / "ws", tmp_path / "cache")
    assert out.runs.iloc[0]["config.machine.host"] == "node-b" and out.runs.iloc[0]["recorded"] == "machine"


def test_a_run_serving_cells_by_its_config_is_read_under_the_first_of_them(fake_files, tmp_path):
    """``serves(config)`` names two requested cells, the later-sorted first: the run is one row, under the first
    sorted cell, the other in its ``serves`` column (as a shared.json's cells are)."""
    (only,) = _attempts()[1:]
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", only,
               config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    out = _read(tmp_path / "ws", tmp_path / "cache", experiments=["ablation-vr", "ablation-dense"],
                serves=lambda config: [("ablation-vr", "grpo"), ("ablation-dense", "grpo")])
    assert len(out.runs) == 1
    row = out.runs.iloc[0]
    assert (row["experiment"], row["arm"]) == ("ablation-dense", "grpo")
    assert json.loads(row["serves"]) == [["ablation-vr", "grpo"]]


def test_a_shared_run_serves_another_arm_of_its_own_experiment(fake_files, tmp_path):
    """Two arms of one experiment with the same config share one run (``share_arms``): its shared.json names the
    other arm, of its own experiment, and its ``serves`` column keeps that cell, read or not through an experiment
    filter, so a report reads the run as that arm too (load_runs: "cells of its own experiment too")."""
    (only,) = _attempts()[1:]
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", only,
               config={"experiment": "main-grpo", "arm": "grpo", "seed": 0},
               shared={"cells": [["main-grpo", "grpo-copy"], ["ablation-vr", "grpo"]]})
    for kw in ({}, {"experiments": ["main-grpo"]}):
        row = _read(tmp_path / "ws", tmp_path / f"cache{len(kw)}", **kw).runs.iloc[0]
        assert (row["experiment"], row["arm"]) == ("main-grpo", "grpo")
        want = [["ablation-vr", "grpo"], ["main-grpo", "grpo-copy"]] if not kw else [["main-grpo", "grpo-copy"]]
        assert sorted(json.loads(row["serves"])) == want, (kw, row["serves"])


def test_an_attempt_killed_before_its_first_step_adds_no_column_and_no_note():
    """An attempt that died before it logged a row (its file holds its run record only) is no fragment of the
    history: the run reads as the other attempt's rows, with no note about a missing step key."""
    empty = _frag("w/offline-run-20261201_100000-r1/run-r1.wandb", T0, [], keys=())
    resumed = _frag("w/offline-run-20261201_110000-r1/run-r1.wandb", T0 + 3600, [[0, 2.0], [1, 2.0]])
    wide, notes = stitch_fragments([empty, resumed])
    assert wide.index.tolist() == [0, 1] and list(wide.columns) == ["train/loss"] and notes == []


def test_only_the_latest_attempt_without_an_exit_record_is_said_to_be_running_or_killed(fake_files, tmp_path):
    """A killed attempt that was resumed has no exit record, and that is no news (a resumed run): a report names
    no file of a run whose last attempt finished; where the last attempt has none either (it still runs, or died
    too), it names that attempt's file, not the killed one's."""
    from arctl.track.wandbfile.reader import NO_EXIT_RECORD

    killed, resumed = _attempts()
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", killed, resumed,
               config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    killed.warnings = [f"{killed.source}: {NO_EXIT_RECORD}"]
    assert not [w for w in _read(tmp_path / "ws", tmp_path / "cache").warnings if NO_EXIT_RECORD in w]

    resumed.state, resumed.exit_code = "incomplete", None
    resumed.warnings = [f"{resumed.source}: {NO_EXIT_RECORD}"]
    said = [w for w in _read(tmp_path / "ws", tmp_path / "cache2").warnings if NO_EXIT_RECORD in w]
    assert said == [f"{resumed.source}: {NO_EXIT_RECORD}"]


def test_a_run_known_only_by_its_w_and_b_group_and_name_is_found_for_its_experiment(fake_files, tmp_path):
    """No config.yaml and a W&B config that names no experiment (a run logged by another tool into arctl's layout):
    its W&B group is its experiment and its name ``{arm}-s{seed}`` its cell, so a report of that experiment reads
    it."""
    (only,) = _attempts()[1:]
    only.config = {"optim": {"lr": 1e-6}}
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", only)
    out = _read(tmp_path / "ws", tmp_path / "cache", experiments=["main-grpo"])
    assert out.runs[["experiment", "arm", "seed"]].values.tolist() == [["main-grpo", "grpo", 0]]


def test_a_workspace_given_as_a_string_is_read_into_its_own_cache(fake_files, tmp_path):
    """``load_runs("path/to/ws")`` (a notebook's call, no cache folder given): read, and cached in the workspace."""
    (only,) = _attempts()[1:]
    fake_files(tmp_path / "ws", "main-grpo--grpo--s0", only, config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = load_runs(str(tmp_path / "ws"), progress=False, processes=1)
    assert out.runs["run_id"].tolist() == ["main-grpo--grpo--s0"] and (tmp_path / "ws" / ".arctl-cache").is_dir()


def test_a_resumed_run_in_a_bare_wandb_folder_is_one_run_of_both_its_files(fake_files, tmp_path):
    """A folder of W&B files without arctl's ``runs/`` (a copied ``wandb/``): a run resumed once has two sync
    folders, and is one run (its W&B id) of both, every step once."""
    killed, resumed = _attempts()
    fake_files(tmp_path / "x", "r1", killed, resumed)
    bare = tmp_path / "x" / "runs" / "r1"  # the files alone, no runs/ above them
    out = _read(bare, tmp_path / "cache")
    assert out.runs[["run_id", "n_fragments", "last_step"]].values.tolist() == [["r1", 2, 4]]
    assert sorted(out.history[out.history["metric"] == "train/loss"]["step"]) == [0, 1, 2, 3, 4]


def test_a_shared_run_without_a_config_yaml_is_read_as_the_cells_its_shared_json_names(tmp_path, monkeypatch):
    """The run of main-grpo serves ablation-vr's grpo cell (its shared.json); its config.yaml is missing, its W&B
    config names it: a read of ablation-vr has it, as it does where the config.yaml is there (from a hunt: it read
    shared.json only beside a config.yaml, so the run served nothing)."""
    run_dir = tmp_path / "ws" / "runs" / "main-grpo--grpo--s0"
    path = run_dir / "wandb" / "offline-run-20261201_100000-r1" / "run-r1.wandb"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    (run_dir / "shared.json").write_text(json.dumps({"cells": [["ablation-vr", "grpo"]]}))
    frag = RunData(wandb_id="r1", source=str(path), start_time=1_796_000_000.0, state="finished", exit_code=0,
                   keys=["trainer/global_step", "train/loss"], values=np.array([[0, 1.0], [1, 0.5]]),
                   config={"experiment": "main-grpo", "arm": "grpo", "seed": 0})
    monkeypatch.setattr(wandbfile, "read_wandb_file", lambda p, summary=True: frag)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = load_runs(tmp_path / "ws", cache_dir=tmp_path / "cache", progress=False, processes=1,
                        experiments=["ablation-vr"])
    assert out.runs[["run_id", "experiment", "arm"]].values.tolist() == [["main-grpo--grpo--s0", "ablation-vr", "grpo"]]
