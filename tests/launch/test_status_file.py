"""status.json is written by a job but read as input: a field whose value is not of its kind is left out."""

from __future__ import annotations

import json

from arctl.launch.status_file import STATUS_FILE, read_status


def test_only_the_fields_of_their_kind_are_read(tmp_path):
    good = {"state": "running", "pid": 41, "step": -1, "first_step": 3, "first_step_at": 1.5, "total_steps": 100,
            "test_freq": 20, "attempt": 0, "metric_value": 0.25, "job_id": "7_1", "metric_files": {"m": [1, 2, 3]},
            "error": None}
    bad = {"state": "dancing", "pid": 0, "step": True, "first_step": 2.0, "first_step_at": float("inf"),
           "total_steps": 0, "test_freq": "20", "attempt": -1, "metric_value": False, "job_id": 7,
           "metric_files": {"m": [1, True, 3]}, "error": ["x"], "unknown": 1}
    for key, value in bad.items():
        (tmp_path / STATUS_FILE).write_text(json.dumps({**good, key: value}))
        assert read_status(tmp_path) == {k: v for k, v in good.items() if k != key}, key
    (tmp_path / STATUS_FILE).write_text(json.dumps(good))
    assert read_status(tmp_path) == good


def test_a_step_sqlite_cannot_hold_is_no_step(tmp_path):
    """From a review: a metrics file (input) with ``{"step": 1e19}`` reached the registry's INTEGER column:
    `arctl status` died with OverflowError, a traceback, and `arctl repair` with it."""
    from arctl.launch.progress import tail_progress
    from arctl.launch.refresh import refresh
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.workspace import Workspace

    (tmp_path / STATUS_FILE).write_text(json.dumps({"step": 10**19, "pid": 2**64, "attempt": 1}))
    assert read_status(tmp_path) == {"attempt": 1}
    (tmp_path / "verl_metrics.jsonl").write_text(json.dumps({"step": 1e19, "data": {"train/loss": 0.5}}) + "\n")
    assert tail_progress(tmp_path) == {"metric_name": "train/loss", "metric_value": 0.5, "metric_nonfinite": None}
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state="FAILED", claim=None, before_claim=None)
        ws.run_dir("r0").mkdir(parents=True)
        (ws.run_dir("r0") / "verl_metrics.jsonl").write_text(json.dumps({"step": 1e19, "data": {}}) + "\n"
                                                              + json.dumps({"step": -3, "data": {}}) + "\n")
        reg.update("r0", state="RUNNING", executor="local", job_id="1")
        assert refresh(reg, ws)[0].step is None


def test_status_prints_a_jobs_error_and_phase_without_their_control_sequences(tmp_path):
    """From a review: a job's error (Ray's carry colour codes; one cut at 500 characters can split one) and
    what it wrote as its phase reached the terminal as they were: an error holding ESC[2J cleared the screen."""
    from typer.testing import CliRunner

    from arctl.cli.main import app
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0),
                   RunRecord(run_id="r1", experiment="e", arm="a", seed=1)], new_claim_token())
        reg.update("r0", state="FAILED", claim=None, before_claim=None, error="boom \x1b[2J\x1b[H gone")
        reg.update("r1", state="FAILED", claim=None, before_claim=None, warning="slow \x1b]0;title\x07",
                   metric_name="x\x1b[31my", metric_value=1.0)
    for r in ("r0", "r1"):
        ws.run_dir(r).mkdir(parents=True)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output
    assert "boom \\x1b[2J\\x1b[H gone" in res.output and "x\\x1b[31my=1" in res.output
