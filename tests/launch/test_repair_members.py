"""A completed run a sweep kept (launched before by its experiment) stays the sweep's after `arctl repair` (from a
hunt of the registry: the registry's membership row was its only record; `arctl status SWEEP` lost the run)."""

from __future__ import annotations

import json

from arctl.launch.registry import Registry
from arctl.launch.shared import MEMBERS_FILE


def _sweep_runs(ws) -> set[str]:
    with Registry(ws / "registry.sqlite") as reg:
        return {r.run_id for r in reg.list("lt3")}


def test_a_run_a_sweep_kept_stays_the_sweep_s_after_a_repair(specs, tmp_path, cli):
    ws = tmp_path / "ws"
    cli("run", "lt", "--executor", "debug", "--workdir", str(ws), check=True)  # a, b, c by the experiment
    cli("sweep", "lt3", "--executor", "debug", "--workdir", str(ws), check=True)  # keeps them: completed
    kept = _sweep_runs(ws)
    assert len(kept) == 3
    for run_id in kept:
        assert "lt3" in json.loads((ws / "runs" / run_id / MEMBERS_FILE).read_text())["members"]
    cli("repair", "--workdir", str(ws), check=True)
    assert _sweep_runs(ws) == kept
    out = cli("status", "lt3", "--workdir", str(ws), "--json", check=True)
    assert {r["run_id"] for r in json.loads(out.stdout)} == kept
