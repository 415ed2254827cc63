"""``load_runs(experiments=...)`` and shared runs (``shared.json``, a sweep with ``share_arms``): a
run serves the experiments its shared.json lists, once, under the first requested one; without a
filter nothing changes. Real offline W&B runs written by arctl.track.writer.open_run."""

from __future__ import annotations

import json
import os

import pytest
from wandb_workspace import _write_run

from arctl.track.runs import load_runs

STEPS = [0, 1, 2]
SHARED = ("main-grpo", "grpo", 0)  # serves ablation-vr and ablation-dense
OWN = [("ablation-vr", "grpo-vr", 0), ("ablation-dense", "grpo-dense", 0)]


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory):
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    root = tmp_path_factory.mktemp("shared-ws")
    kept = _write_run(root, *SHARED, STEPS)
    for cell in OWN:
        _write_run(root, *cell, STEPS)
    (kept / "shared.json").write_text(json.dumps({"experiments": ["ablation-vr", "ablation-dense"]}))
    return root


def _read(ws, cache, **kw):
    return load_runs(ws, cache_dir=cache, progress=False, processes=1, **kw)


def _rows(out) -> dict[str, str]:
    ids = list(out.runs["run_id"])
    assert len(ids) == len(set(ids)), f"a run listed twice: {ids}"
    assert set(out.history["run_id"].unique()) <= set(ids)
    return dict(zip(out.runs["run_id"], out.runs["experiment"]))


def test_a_shared_run_is_read_as_a_run_of_the_experiment_it_serves(shared_ws, tmp_path):
    out = _read(shared_ws, tmp_path, experiments=["ablation-vr"])
    assert _rows(out) == {"main-grpo--grpo--s0": "ablation-vr", "ablation-vr--grpo-vr--s0": "ablation-vr"}
    hist = out.history[out.history["run_id"] == "main-grpo--grpo--s0"]
    assert set(hist["experiment"]) == {"ablation-vr"} and set(hist["arm"]) == {"grpo"}
    assert sorted(hist[hist["metric"] == "train/loss"]["step"]) == STEPS
    row = out.runs.set_index("run_id").loc["main-grpo--grpo--s0"]
    assert row["config.experiment"] == "main-grpo"  # its config says whose run it is


def test_one_row_per_run_under_the_first_requested_experiment_it_serves(shared_ws, tmp_path):
    both = _read(shared_ws, tmp_path, experiments=["ablation-vr", "ablation-dense"])
    assert _rows(both) == {"main-grpo--grpo--s0": "ablation-dense", "ablation-vr--grpo-vr--s0": "ablation-vr",
                           "ablation-dense--grpo-dense--s0": "ablation-dense"}
    assert len(both.history[(both.history["run_id"] == "main-grpo--grpo--s0")
                            & (both.history["metric"] == "train/loss")]) == len(STEPS)
    # its own experiment requested: kept as is
    own = _read(shared_ws, tmp_path, experiments=["ablation-vr", "main-grpo"])
    assert _rows(own) == {"main-grpo--grpo--s0": "main-grpo", "ablation-vr--grpo-vr--s0": "ablation-vr"}
    # an experiment it does not serve: not there
    assert _rows(_read(shared_ws, tmp_path, experiments=["ctx-16k"])) == {}


def test_without_a_filter_nothing_is_relabelled_and_the_cache_keeps_its_own_experiment(shared_ws, tmp_path):
    expected = {"main-grpo--grpo--s0": "main-grpo", "ablation-vr--grpo-vr--s0": "ablation-vr",
                "ablation-dense--grpo-dense--s0": "ablation-dense"}
    assert _rows(_read(shared_ws, tmp_path)) == expected  # first read: parses and caches
    _read(shared_ws, tmp_path, experiments=["ablation-vr"])  # a relabelling read from the cache
    again = _read(shared_ws, tmp_path)
    assert _rows(again) == expected
    fresh_cache = _read(shared_ws, tmp_path / "other", experiments=["ablation-vr"])  # relabelled while parsing
    assert _rows(fresh_cache)["main-grpo--grpo--s0"] == "ablation-vr"
    assert _rows(_read(shared_ws, tmp_path / "other")) == expected


@pytest.mark.parametrize("text", ["{not json", "[]", '{"experiments": "ablation-vr"}', '{"experiments": [1]}',
                                  '{"cells": [["ablation-vr"]]}', '{"cells": [["ablation-vr", 3]]}'])
def test_a_broken_shared_json_serves_nothing(tmp_path, text):
    os.environ["WANDB_MODE"] = "offline"
    kept = _write_run(tmp_path / "ws", *SHARED, STEPS)
    (kept / "shared.json").write_text(text)
    assert _rows(_read(tmp_path / "ws", tmp_path / "cache", experiments=["ablation-vr"])) == {}
    assert _rows(_read(tmp_path / "ws", tmp_path / "cache")) == {"main-grpo--grpo--s0": "main-grpo"}


def test_a_run_serving_an_arm_of_another_name_is_read_as_that_arm(tmp_path):
    """One config under two arm names (AR-base is ablation-vr's grpo-vr-decouple): shared.json's
    cells name the arm; read for that experiment, the run is that arm's; read with its own, it is one
    row and ``serves`` lists the other cells."""
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    kept = _write_run(ws, "main-ar-base", "ar-base", 0, STEPS)
    _write_run(ws, "ablation-vr", "grpo-vr", 0, STEPS)
    cells = [["ablation-vr", "grpo-vr-decouple"], ["ablation-vr2", "ar-base"]]
    (kept / "shared.json").write_text(json.dumps({"cells": cells}))
    rid = "main-ar-base--ar-base--s0"

    vr = _read(ws, tmp_path / "c", experiments=["ablation-vr"])
    assert _rows(vr) == {rid: "ablation-vr", "ablation-vr--grpo-vr--s0": "ablation-vr"}
    row = vr.runs.set_index("run_id").loc[rid]
    assert row["arm"] == "grpo-vr-decouple" and row["serves"] == ""
    assert set(vr.history[vr.history["run_id"] == rid]["arm"]) == {"grpo-vr-decouple"}

    both = _read(ws, tmp_path / "c", experiments=["main-ar-base", "ablation-vr"])
    row = both.runs.set_index("run_id").loc[rid]
    assert (row["experiment"], row["arm"]) == ("main-ar-base", "ar-base")
    assert json.loads(row["serves"]) == [["ablation-vr", "grpo-vr-decouple"]]  # the requested cells only
    everything = _read(ws, tmp_path / "c").runs.set_index("run_id")
    assert json.loads(everything.loc[rid, "serves"]) == cells and everything.loc["ablation-vr--grpo-vr--s0", "serves"] == ""
    # the same-arm cell of ablation-vr2, read alone: its experiment, its own arm
    two = _read(ws, tmp_path / "c", experiments=["ablation-vr2"]).runs.set_index("run_id")
    assert (two.loc[rid, "experiment"], two.loc[rid, "arm"]) == ("ablation-vr2", "ar-base")
