"""From a hunt of the CLI (2026-12-07; failed on 2907f94): `arctl status` prints the errors of the
:data:`~arctl.cli.cmd_status.ERRORS_SHOWN` failed or preempted runs that ended last, and says how many earlier errors
it left out, but counts only FAILED runs there: a preempted run's error (SLURM's TIMEOUT before its stop checkpoint)
left out was not said at all, and the hint's `--state failed` would not have listed it either."""

from __future__ import annotations

from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace


def test_the_preempted_runs_errors_left_out_are_said(tmp_path):
    from arctl.cli.cmd_status import ERRORS_SHOWN

    ws = Workspace(tmp_path / "ws")
    n = ERRORS_SHOWN + 2
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=f"p{i:02d}", experiment="e", arm="a", seed=i) for i in range(n)], new_claim_token())
        for i in range(n):  # p00 ended first
            ws.run_dir(f"p{i:02d}").mkdir(parents=True)
            reg.update(f"p{i:02d}", state="PREEMPTED", claim=None, before_claim=None,
                       error=f"DUE TO TIME LIMIT {i}", ended_at=1_000_000.0 + i)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh"])
    assert res.exit_code == 0, res.output
    said = [line.split(":")[0] for line in res.output.splitlines() if ": DUE TO TIME LIMIT" in line]
    assert said == [f"p{i:02d}" for i in range(2, n)], said  # the latest ERRORS_SHOWN
    assert any(line.startswith("... and 2 earlier") for line in res.output.splitlines()), res.output
