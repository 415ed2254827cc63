"""A resume that turns W&B logging off (or on) where the run's earlier attempts did otherwise is refused (from a
hunt: a run resumed with ``wandb.mode=disabled`` completed with its W&B history, what reports and figures read,
ending at the stop, without a word); a completed run whose folder was deleted is skipped with what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def test_a_resume_with_wandb_turned_off_is_refused_and_with_its_mode_it_resumes(specs, tmp_path, cli, monkeypatch):
    ws = tmp_path / "ws"
    run = ["run", "lt", "--arm", "a", "trainer.total_steps=3", "--executor", "debug", "--workdir", str(ws)]
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "a")  # raises after its first step: FAILED, with a W&B history
    doc = json.loads(cli(*run, "wandb.mode=offline", "--json").stdout)
    run_dir = Path(doc["submitted"][0]["run_dir"])
    assert doc["submitted"][0]["state"] == "FAILED" and list((run_dir / "wandb").rglob("*.wandb"))
    monkeypatch.delenv("ARCTL_TEST_FAIL_ARM")
    frozen = (run_dir / "config.yaml").read_text()
    res = cli(*run, "wandb.mode=disabled")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stdout + res.stderr
    assert lines[0] == (f"error: lt/a: resuming run {run_dir.name} with wandb.mode=disabled, where its earlier attempts "
                        "ran with wandb.mode=offline: its W&B history, which reports read, would end at the stop; "
                        "resume it with wandb.mode=offline"), lines[0]
    assert (run_dir / "config.yaml").read_text() == frozen  # nothing written, nothing claimed
    status = json.loads(cli("status", "--workdir", str(ws), "--json").stdout)
    assert [r["state"] for r in status] == ["FAILED"]
    doc = json.loads(cli(*run, "wandb.mode=offline", "--json").stdout)
    assert (doc["submitted"][0]["action"], doc["submitted"][0]["state"]) == ("resume", "COMPLETED")

    # its folder deleted by hand: the launch skips it as completed, and says what runs it (alone) again
    shutil.rmtree(run_dir)
    doc = json.loads(cli(*run, "wandb.mode=offline", "--json").stdout)
    (skipped,) = doc["skipped"]
    assert skipped["reason"].startswith("completed") and f"its folder {run_dir} is gone" in skipped["reason"]
    assert f"`arctl run lt --arm a --scale tiny --seeds 0 --force --workdir {ws}` (with the overrides it was launched " \
           "with) runs it again from the start" in skipped["reason"], skipped


def test_a_resume_that_turns_wandb_on_or_off_where_nothing_was_logged_is_not_refused(specs, tmp_path, cli, monkeypatch):
    """From a review of the first version: it refused W&B turned on at a resume (the tiny trainer re-logs the kept
    history from metrics.jsonl) and turned off where the run had logged nothing."""
    ws = tmp_path / "ws"
    run = ["run", "lt", "--arm", "a", "trainer.total_steps=3", "--executor", "debug", "--workdir", str(ws)]
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "a")
    doc = json.loads(cli(*run, "wandb.mode=disabled", "--json").stdout)
    assert doc["submitted"][0]["state"] == "FAILED"
    monkeypatch.delenv("ARCTL_TEST_FAIL_ARM")
    doc = json.loads(cli(*run, "wandb.mode=offline", "--json").stdout)
    assert (doc["submitted"][0]["action"], doc["submitted"][0]["state"]) == ("resume", "COMPLETED"), doc
