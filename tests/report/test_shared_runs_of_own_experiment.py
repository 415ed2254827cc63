"""A run read for every cell of the report it serves, its own experiment's too (from a hunt, "evolve" finding 1):
with ``share_arms: true``, an arm renamed since its runs ran (``grpo-vr:`` -> ``vr:``), or two arms written alike
(``vr``, ``vr2``), was said to have no runs ("produce them with `arctl sweep evs --seeds 0,1`", a command that
then trained nothing), and the renamed arm's runs were drawn under the old name with a warning that the specs "no
longer compose" them; trained again with `arctl run`, one config was drawn as two arms."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from spec_tree import write_specs  # tests/support/spec_tree.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.experiment import load_experiment
from arctl.compose.resolve import resolve_arm

runner = CliRunner()
FIGURE = ("kind: figure\nname: {name}\nbuilder: training_curves\nexperiments: [evx]\narms: [{arms}]\n{only}"
          "datasets: [aime24]\npanels:\n  - {{key: \"eval/{{dataset}}/anytime_acc\", label: acc}}\n")


def _specs(root: Path, arms: dict[str, str], figure_arms: str, only: bool = True) -> None:
    write_specs(root, experiments={
        "evx": "description: evolve\nseeds: [0]\narms:\n" + "".join(f"  {a}: [{v}]\n" for a, v in arms.items())},
        sweeps={"evs": "experiments: [evx]\nseeds: [0, 1]\nshare_arms: true\n"},
        reports={"evfig": FIGURE.format(name="evfig", arms=figure_arms, only="only_listed_arms: true\n" if only else ""),
                 "evall": FIGURE.format(name="evall", arms=figure_arms, only="")})


def _train(ws: Path, arm: str, seeds, serves: list | None = None) -> list[str]:
    """Finished runs of evx/``arm`` as the specs now compose it; ``serves``: their shared.json's cells."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ids = []
    for seed in seeds:
        run = resolve_arm(load_experiment("evx"), arm, seed, "tiny")
        rid = write_resolved_run(ws, run, every_step={"eval/aime24/anytime_acc": 0.3 + 0.1 * seed})
        if serves:
            (ws / "runs" / rid / "shared.json").write_text(json.dumps({"cells": serves}))
        ids.append(rid)
    wandb.teardown()
    return ids


def _report(tmp_path: Path, ws: Path, figure: str, *extra: str) -> dict:
    out = tmp_path / f"out-{figure}-{len(list(tmp_path.glob('out-*')))}"
    res = runner.invoke(app, ["report", "--figure", figure, "--workdir", str(ws), "--out", str(out), "--json",
                              *extra])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    runs = json.loads(next(out.rglob("*runs.json")).read_text())
    doc["read"] = sorted((r["arm"], r["seed"], r["run_id"]) for r in (runs["runs"] if isinstance(runs, dict) else runs))
    return doc


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "specs"
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root


def test_a_renamed_arm_is_read_from_the_runs_that_serve_it(tmp_path, specs):
    ws = tmp_path / "ws"
    _specs(specs, {"grpo": "algo=grpo, prior=base", "grpo-vr": "algo=grpo-vr, prior=base"}, "grpo, vr")
    grpo = _train(ws, "grpo", (0, 1))
    old = _train(ws, "grpo-vr", (0, 1), serves=[["evx", "vr"]])  # what the shared sweep wrote after the rename
    _specs(specs, {"grpo": "algo=grpo, prior=base", "vr": "algo=grpo-vr, prior=base"}, "grpo, vr")
    for extra in (["--sweep", "evs"], ["--experiment", "evx"]):
        doc = _report(tmp_path, ws, "evfig", *extra)
        said = " | ".join(doc["warnings"])
        assert "no runs in" not in said and "no longer compose" not in said, said
        assert doc["read"] == sorted([("grpo", s, grpo[s]) for s in (0, 1)] + [("vr", s, old[s]) for s in (0, 1)])
    # every arm drawn (no only_listed_arms): the old runs once, as vr, not as grpo-vr beside it
    doc = _report(tmp_path, ws, "evall", "--sweep", "evs")
    assert {a for a, _, _ in doc["read"]} == {"grpo", "vr"}, doc["read"]
    # vr trained again with `arctl run` (no sharing): its cell at seed 0 is read once, from its own run
    (new,) = _train(ws, "vr", (0,))
    doc = _report(tmp_path, ws, "evall", "--sweep", "evs")
    assert [r for r in doc["read"] if r[0] != "grpo"] == [("vr", 0, new), ("vr", 1, old[1])], doc["read"]


def test_arms_written_alike_are_each_read_from_the_one_run(tmp_path, specs):
    ws = tmp_path / "ws"
    _specs(specs, {"grpo": "algo=grpo, prior=base", "vr": "algo=grpo-vr, prior=base",
                   "vr2": "algo=grpo-vr, prior=base"}, "grpo, vr, vr2")
    grpo = _train(ws, "grpo", (0,))
    (vr,) = _train(ws, "vr", (0,), serves=[["evx", "vr2"]])  # the sweep launched the two cells once
    for extra in (["--sweep", "evs"], ["--experiment", "evx"]):
        doc = _report(tmp_path, ws, "evfig", *extra)
        said = " | ".join(doc["warnings"])
        assert "no runs in" not in said, said
        assert doc["read"] == [("grpo", 0, grpo[0]), ("vr", 0, vr), ("vr2", 0, vr)], doc["read"]
