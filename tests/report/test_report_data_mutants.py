"""What arctl.report.data says of the runs a table or figure read (mutation hunt of arctl.report.data and cells): cases the
report tests could not tell apart."""

from __future__ import annotations

import pandas as pd
from spec_tree import write_specs  # tests/support/spec_tree.py

from arctl.report.data import ReportData
from arctl.track.runs.tidy import Runs


def test_the_runs_used_are_those_with_values_in_the_report():
    """runs.json and --json's ``runs`` name the runs whose values the report shows: a run of the runs table that
    logged none of the report's metrics (no final evaluation yet, or not what ``requires`` asks) is not one of
    them, though its row stays in the table."""
    table = pd.DataFrame([{"run_id": "g0", "experiment": "main-grpo", "arm": "grpo", "seed": 0},
                          {"run_id": "g1", "experiment": "main-grpo", "arm": "grpo", "seed": 1}])
    history = pd.DataFrame([{"run_id": "g0", "experiment": "main-grpo", "arm": "grpo", "seed": 0,
                             "metric": "eval/aime24/final_acc", "value": 0.5, "step": 9}])
    data = ReportData(Runs(history, table), None, source="test")
    assert data.used_runs() == [{"run_id": "g0", "experiment": "main-grpo", "arm": "grpo", "seed": 0}]


def test_a_cell_read_from_its_own_run_drops_the_shared_run_s_copy(tmp_path, monkeypatch):
    """A run of ``vr`` serves ``vr2`` (arms written alike, ``share_arms``), then ``vr2`` is trained again with `arctl
    run`: its cell at seed 0 is read from its own run (0.6), and the shared run's copy of its values for vr2 is left
    out of the table, not averaged in as a second seed 0 (50.0); vr keeps the shared run's 0.4."""
    import json
    import os

    import wandb
    from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
    from typer.testing import CliRunner

    from arctl.cli.main import app
    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    root = tmp_path / "specs"
    write_specs(root, monkeypatch=monkeypatch, experiments={
        "evx": "description: evolve\nseeds: [0]\narms:\n  vr: [algo=grpo-vr, prior=base]\n  vr2: [algo=grpo-vr, prior=base]\n"},
        sweeps={"evs": "experiments: [evx]\nseeds: [0]\nshare_arms: true\n"},
        reports={"evtab": "kind: table\nname: evtab\nbuilder: table\nexperiments: [evx]\narms: [vr, vr2]\n"
                          "key: \"eval/{dataset}/final_acc\"\nscale: 100\n"})
    os.environ.setdefault("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    ws = tmp_path / "ws"
    shared = write_resolved_run(ws, resolve_arm(load_experiment("evx"), "vr", 0, "tiny"),
                                every_step={"eval/aime24/final_acc": 0.4})
    (ws / "runs" / shared / "shared.json").write_text(json.dumps({"cells": [["evx", "vr2"]]}))
    own = write_resolved_run(ws, resolve_arm(load_experiment("evx"), "vr2", 0, "tiny"),
                             every_step={"eval/aime24/final_acc": 0.6})
    wandb.teardown()
    res = CliRunner().invoke(app, ["report", "--table", "evtab", "--workdir", str(ws), "--out", str(tmp_path / "out"),
                                   "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert sorted((r["arm"], r["run_id"]) for r in doc["runs"]) == [("vr", shared), ("vr2", own)]
    assert {r["row"]: (r["values"]["AIME24"], r["runs"]) for r in doc["rows"]} == {"vr": (40.0, 1), "vr2": (60.0, 1)}
