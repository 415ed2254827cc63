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


def test_a_broken_config_yaml_is_said_and_the_run_is_read_from_its_wandb_config(tmp_path):
    """Found by an adversarial pass: a config.yaml that is not YAML, or names its experiment with a
    number, left its run out of every report of that experiment without a word (Elastic averaged 4
    of 6 seeds). Now a warning names the file and the run is identified by its W&B config."""
    import pytest

    from arctl.track.runs import RunReadWarning

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    dirs = [_write_run(tmp_path, "main-grpo", "grpo", s, [0, 1]) for s in range(3)]
    (dirs[1] / "config.yaml").write_text(": : [bad")
    (dirs[2] / "config.yaml").write_text("experiment: 5\n")
    with pytest.warns(RunReadWarning) as seen:
        out = load_runs(tmp_path, experiments=["main-grpo"], cache_dir=tmp_path / "cache", progress=False, processes=1)
    said = " ".join(str(w.message) for w in seen)
    assert f"{dirs[1] / 'config.yaml'}: unreadable" in said and "its experiment is 5, not a name" in said
    assert sorted(zip(out.runs["experiment"], out.runs["seed"])) == [("main-grpo", 0), ("main-grpo", 1), ("main-grpo", 2)]


def test_a_workspace_that_cannot_be_written_caches_in_the_user_cache(tmp_path, monkeypatch):
    """Found by an adversarial pass: reading a read-only workspace (a colleague's, an export on a
    read-only mount) was a PermissionError traceback: the parsed runs are cached inside it. Here the
    workspace's cache folder cannot be made (a file is in its place; root ignores permissions)."""
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "user-cache"))
    ws = tmp_path / "ws"
    _write_run(ws, "main-grpo", "grpo", 0, [0, 1])
    (ws / ".arctl-cache").write_text("not a folder\n")
    out = load_runs(ws, progress=False, processes=1)
    assert list(out.runs["seed"]) == [0]
    (cached,) = (tmp_path / "user-cache" / "runs").iterdir()
    assert any(cached.glob("*.json")) and (ws / ".arctl-cache").read_text() == "not a folder\n"
