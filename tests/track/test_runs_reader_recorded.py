"""A run's config as the readers give it: its frozen config.yaml, plus what its job recorded in the W&B
config beside it (the tiny backend's warm-up identity and the kind of machine it trained on). Real
offline W&B runs written by arctl.track.writer.open_run."""

from __future__ import annotations

import os

from wandb_workspace import _write_run  # tests/support/wandb_workspace.py

from arctl.track.runs import load_runs

RECORDED = {"warmup": {"weights_sha256": "ab" * 32, "accuracy": 0.73, "key": "k1"},
            "machine": "AMD EPYC | AVX2 | torch 2.13.0+cpu"}


def test_the_jobs_own_records_join_the_config_yaml_which_wins_where_both_say(tmp_path):
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    _write_run(tmp_path, "main-grpo", "grpo", 0, [0, 1], recorded=RECORDED, wandb_config={"seed": 99, "arm": "other"})
    _write_run(tmp_path, "main-grpo", "grpo", 1, [0, 1])  # a run that recorded nothing
    out = load_runs(tmp_path, cache_dir=tmp_path / "cache", progress=False, processes=1)
    rows = {r["run_id"]: r for r in out.runs.to_dict("records")}
    mine, plain = rows["main-grpo--grpo--s0"], rows["main-grpo--grpo--s1"]
    assert mine["config.warmup.weights_sha256"] == "ab" * 32 and mine["config.warmup.accuracy"] == 0.73
    assert mine["config.machine"] == RECORDED["machine"]
    assert (mine["config.seed"], mine["config.arm"], mine["seed"], mine["arm"]) == (0, "grpo", 0, "grpo")  # config.yaml's
    assert "config.machine" not in plain or plain["config.machine"] != plain["config.machine"]  # absent: NaN
