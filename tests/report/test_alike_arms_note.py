"""The note of a cell read from one of several runs of one computation names what each was launched as (from a
review: two arms of one experiment written alike, ``vr`` and ``vr2``, each trained, were said to be "launched
under several experiments' names"; they are one experiment's runs under two arm names)."""

from __future__ import annotations

import json
from pathlib import Path

from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from spec_tree import write_specs  # tests/support/spec_tree.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.experiment import load_experiment
from arctl.compose.resolve import resolve_arm

FIGURE = ("kind: figure\nname: evall\nbuilder: training_curves\nexperiments: [evx]\narms: [grpo, vr, vr2]\n"
          "datasets: [aime24]\npanels:\n  - {key: \"eval/{dataset}/anytime_acc\", label: acc}\n")


def _train(ws: Path, arm: str, serves: list | None = None) -> str:
    """A finished seed-0 run of evx/``arm`` as the specs compose it; ``serves``: its shared.json's cells."""
    import wandb

    rid = write_resolved_run(ws, resolve_arm(load_experiment("evx"), arm, 0, "tiny"),
                             every_step={"eval/aime24/anytime_acc": 0.3})
    if serves:
        (ws / "runs" / rid / "shared.json").write_text(json.dumps({"cells": serves}))
    wandb.teardown()
    return rid


def test_two_alike_arms_each_trained_are_named_in_the_note(tmp_path, monkeypatch):
    write_specs(tmp_path / "specs", monkeypatch=monkeypatch, experiments={"evx": (
        "description: alike arms\nseeds: [0]\narms:\n  grpo: [algo=grpo, prior=base]\n"
        "  vr: [algo=grpo-vr, prior=base]\n  vr2: [algo=grpo-vr, prior=base]\n")},
        sweeps={"evs": "experiments: [evx]\nseeds: [0]\nshare_arms: true\n"}, reports={"evall": FIGURE})
    ws = tmp_path / "ws"
    _train(ws, "grpo")
    vr = _train(ws, "vr", serves=[["evx", "vr2"]])  # the shared sweep's run, serving vr2 too
    vr2 = _train(ws, "vr2")  # and vr2 trained on its own (`arctl run evx --arm vr2`)
    for extra in (["--sweep", "evs"], ["--experiment", "evx"]):
        out = tmp_path / f"out-{extra[0][2:]}"
        res = CliRunner().invoke(app, ["report", "--figure", "evall", "--workdir", str(ws), "--out", str(out),
                                       "--json", *extra])
        assert res.exit_code == 0, res.output
        [note] = [w for w in json.loads(res.stdout)["warnings"] if "runs of the same config" in w]
        assert note.startswith("evx/vr2 seed 0 has 2 runs of the same config in "), note
        assert note.endswith(f"(launched as evx/vr2 and evx/vr): read {vr2}, left out {vr}"), note
        assert "experiments' names" not in note
