"""Runs a shared.json names as another cell's (``share_arms``: AR-base serves ablation-vr's grpo-vr-decouple) in
the claims report (arctl.report.claims.run_views). From a hunt of a workspace launched with micro overrides:
each of 33 shared runs got its own warning line and was left out (claim 6 had no seed of grpo-vr-decouple),
while the other runs that differ from their cell in the same overrides got one line together and were read."""

from __future__ import annotations

import json

import pandas as pd

from arctl.report.claims import run_views

SEEDS = range(6)
SERVED = ("ablation-vr", "grpo-vr-decouple")


def _runs(**config):
    """(history, runs table): AR-base at six seeds, each serving ablation-vr/grpo-vr-decouple, with ``config``."""
    rows = [(f"b{s}", step, metric, 0.5) for s in SEEDS for step in (0, 10)
            for metric in ("eval/toy/grid_anytime_acc", "eval/toy/final_acc")]
    history = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    table = pd.DataFrame([{"run_id": f"b{s}", "seed": s, "arm": "ar-base", "experiment": "main-ar-base",
                           "config.eval.grid": "[10, 20]", "serves": json.dumps([list(SERVED)]),
                           **{f"config.{k}": v for k, v in config.items()}} for s in SEEDS])
    return history, table


def _composer(cells: dict):
    return lambda experiment, arm, seed, scale: cells.get((experiment, arm))


def test_a_shared_run_launched_with_an_override_is_read_as_both_cells():
    """Launched with trainer.total_steps=3 where both cells compose 100 (one config, two names): it differs from
    the cell it serves only as it differs from its own, so it is read as both, as the report reads its own cell's
    run (one_run_per_cell's one line names it and the key)."""
    history, table = _runs(**{"trainer.total_steps": 3, "summary.decoupled": True})
    same = {"trainer.total_steps": 100, "summary.decoupled": True}
    cells = {("main-ar-base", "ar-base"): {"arm": "ar-base", **same}, SERVED: {"arm": "grpo-vr-decouple", **same}}
    said: list[str] = []
    views = run_views(history, table, compose=_composer(cells), warnings=said)
    assert said == []
    assert sorted(v.seed for v in views if (v.experiment, v.arm) == SERVED) == list(SEEDS)
    assert sorted(v.seed for v in views if v.arm == "ar-base") == list(SEEDS)


def test_runs_a_stale_shared_json_names_get_one_line_together_and_are_not_read():
    """The served cell no longer composes as the run's own (summary.decoupled differs between them): not its run;
    one line for the six, with the count, the first ids and how many more."""
    history, table = _runs(**{"summary.decoupled": True})
    cells = {("main-ar-base", "ar-base"): {"arm": "ar-base", "summary.decoupled": True},
             SERVED: {"arm": "grpo-vr-decouple", "summary.decoupled": False}}
    said: list[str] = []
    views = run_views(history, table, compose=_composer(cells), warnings=said)
    assert [v.arm for v in views] == ["ar-base"] * len(SEEDS)
    assert said == ["6 runs (b0, b1, b2, b3 and 2 more): their shared.json says they serve ablation-vr/grpo-vr-decouple, "
                    "but their config differs from that cell's in summary.decoupled: not read as that arm's runs (run "
                    "`arctl sweep` to train the cell)"]


def test_an_override_on_a_key_where_the_two_cells_differ_is_no_shared_config():
    """optim.lr overridden (differs from both cells) where the cells themselves differ in it: the two names are
    not one config, whatever the run was launched with; nor where its own cell no longer composes."""
    history, table = _runs(**{"optim.lr": 0.5})
    cells = {("main-ar-base", "ar-base"): {"arm": "ar-base", "optim.lr": 0.1},
             SERVED: {"arm": "grpo-vr-decouple", "optim.lr": 0.2}}
    said: list[str] = []
    views = run_views(history, table, compose=_composer(cells), warnings=said)
    assert {v.arm for v in views} == {"ar-base"} and len(said) == 1 and "in optim.lr:" in said[0], said
    del cells[("main-ar-base", "ar-base")]
    said = []
    views = run_views(history, table, compose=_composer(cells), warnings=said)
    assert {v.arm for v in views} == {"ar-base"} and len(said) == 1 and said[0].startswith("6 runs"), said
