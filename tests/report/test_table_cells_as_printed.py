"""A table's cells say what they are (from a mutation hunt of arctl.report.tables/data, each a cell a reader of
the paper's tables would take wrongly; every test here failed before its fix): bold follows the printed number (a
mean printed "52.9" was bold beside "53.0"); with ``--compare-paper`` the Avg difference compares the same
benchmarks (runs equal to the paper on its five benchmarks and with gsm8k beside them showed +7.4, no warning);
two arms one run serves (``share_arms``, arms written alike) are each a row (the table kept one of the two), and
each a curve of the score-curve figure."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from spec_tree import write_specs  # tests/support/spec_tree.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.data import ReportData
from arctl.report.tables import accuracy_table, compare_with_paper, paper_rows, to_latex, to_markdown
from arctl.track.runs.tidy import Runs

SPEC = {"key": "eval/{dataset}/final_acc", "scale": 100, "name": "final"}


def _table(rows):
    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": f"eval/{d}/final_acc", "value": v, "step": 9}
                            for r, a, d, v in rows])
    return accuracy_table(SPEC, ReportData(Runs(history, pd.DataFrame()), None, source="test"))


def _cells(md: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0].removeprefix("| "): [c.strip() for c in line.strip(" |").split(" | ")[1:]]
            for line in md.splitlines()[2:]}


def test_a_cell_printed_lower_than_another_is_not_bold():
    """GRPO's seeds 0.844 and 0.215 average 52.949999999999996, printed "52.9" (Python's format), which pandas'
    round(1) made 53.0: it was bold beside AR-uniform's 53.0, a tie the table does not show (about 1 in 11
    two-seed means of 3-decimal accuracies round one way and print the other). Cells that print alike stay bold
    alike (MATH500: 45.04 and 45.0 both print "45.0")."""
    table = _table([("g0", "grpo", "aime24", 0.844), ("g1", "grpo", "aime24", 0.215),
                    ("u0", "ar-uniform", "aime24", 0.53), ("u1", "ar-uniform", "aime24", 0.53),
                    ("g0", "grpo", "math500", 0.4504), ("g1", "grpo", "math500", 0.4504),
                    ("u0", "ar-uniform", "math500", 0.45), ("u1", "ar-uniform", "math500", 0.45)])
    cells = _cells(to_markdown(table))
    assert list(table.columns) == ["AIME24", "MATH500", "Avg"]
    assert cells["AR-uniform"][:2] == ["**53.0**", "**45.0**"]
    assert cells["GRPO"][:2] == ["52.9", "**45.0**"]
    tex = to_latex(table)
    assert r"AR-uniform & \textbf{53.0} & \textbf{45.0}" in tex
    assert r"GRPO & 52.9 & \textbf{45.0}" in tex


PAPER_GRPO = {"amc22": 0.65, "aime24": 0.289, "math500": 0.847, "minerva": 0.289, "olympiadbench": 0.459}  # Table 1


def test_the_difference_of_avg_compares_the_same_benchmarks():
    """Runs that evaluated the paper's five benchmarks and gsm8k, equal to the paper's GRPO on the five: our Avg
    averages six ((65 + 28.9 + 84.7 + 28.9 + 45.9 + 95) / 6 = 58.07), the paper's five (50.7); the difference said
    +7.4 in Avg, with no warning. It has no Avg now, and the note says why; the paper's row keeps its own Avg."""
    table = _table([("g0", "grpo", d, v) for d, v in {**PAPER_GRPO, "gsm8k": 0.95}.items()])
    assert table.loc["GRPO", "Avg"] == pytest.approx(348.4 / 6)
    rows = paper_rows(SPEC, list(table.columns))  # avg_of's default: every column but Avg (none forced here)
    long = compare_with_paper(table, rows)
    diff = long[long["source"] == "diff"]
    assert all(diff.loc["GRPO", c] == pytest.approx(0.0) for c in ("AMC22", "AIME24", "MATH500", "Minerva"))
    assert pd.isna(diff.loc["GRPO", "Avg"])
    assert long[long["source"] == "paper"].loc["GRPO", "Avg"] == pytest.approx(50.7)
    assert rows.attrs["avg_note"] == (
        "--compare-paper: our Avg averages gsm8k too, which the paper's Avg does not (it averages AMC22, AIME24, "
        "MATH500, Minerva, OlympiadBench), so the differences from the paper show no Avg (a mean over other "
        "benchmarks is not comparable with the paper's); the benchmarks' differences compare like with like")
    cells = _cells(to_markdown(table, long))
    assert cells["GRPO (Δ vs paper)"] == ["+0.0"] * 5 + ["–", "–"]  # gsm8k: none in the paper
    assert cells["GRPO (paper)"][-1] == "50.7"


def test_a_budget_forced_column_leaves_the_difference_of_avg_in():
    """A budget-forced evaluation (``-forced``, labelled "Toy, budget forcing") is out of our Avg, so beside the
    paper's five benchmarks our Avg still averages the paper's five: the difference keeps its Avg, no note
    (``avg_of``, not the columns' labels, says what our Avg averages). Ours is 253.4 / 5 = 50.68, the paper's
    50.7 (its own, from its rounded cells' unrounded values): -0.02."""
    table = _table([("g0", "grpo", d, v) for d, v in {**PAPER_GRPO, "toy-forced": 0.95}.items()])
    assert "Toy, budget forcing" in table.columns
    rows = paper_rows(SPEC, list(table.columns), table.attrs["avg_of"])
    diff = compare_with_paper(table, rows)
    assert diff[diff["source"] == "diff"].loc["GRPO", "Avg"] == pytest.approx(-0.02)
    assert rows.attrs["avg_note"] is None


def test_compare_paper_says_why_the_difference_has_no_avg(tmp_path, monkeypatch):
    """The same through ``build`` (what ``arctl report --table final --compare-paper`` writes): the CSV's
    difference row has an empty Avg, and the note is among the report's warnings."""
    from arctl.report.tables import build

    history = pd.DataFrame([{"run_id": "g0", "arm": "grpo", "metric": f"eval/{d}/final_acc", "value": v, "step": 9}
                            for d, v in {**PAPER_GRPO, "gsm8k": 0.95}.items()])
    data = ReportData(Runs(history, pd.DataFrame()), None, source="test")
    build(SPEC, data, tmp_path, compare_paper=True)
    csv = pd.read_csv(tmp_path / "final.csv", index_col="algorithm")
    diff = csv[csv["source"] == "diff"]
    assert list(diff.index) == ["GRPO"] and pd.isna(diff.loc["GRPO", "Avg"])
    assert diff.loc["GRPO", "MATH500"] == pytest.approx(0.0)
    assert any(w.startswith("--compare-paper: our Avg averages gsm8k too") for w in data.runs.warnings)


def test_arms_written_alike_are_each_a_row_of_a_table(tmp_path, monkeypatch):
    """Two arms written alike (``vr``, ``vr2``) that one run of a ``share_arms`` sweep serves: the run is read for
    both cells (runs.json lists it under each, as the figures draw both), but final_values keeps one row per
    (run, metric), so the table shows one of the two rows and no warning says the other is missing."""
    import os

    import wandb

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    root = tmp_path / "specs"
    write_specs(root, monkeypatch=monkeypatch, experiments={
        "evx": "description: evolve\nseeds: [0]\narms:\n  grpo: [algo=grpo, prior=base]\n  vr: [algo=grpo-vr, prior=base]\n"
               "  vr2: [algo=grpo-vr, prior=base]\n"},
        sweeps={"evs": "experiments: [evx]\nseeds: [0]\nshare_arms: true\n"},
        reports={"evtab": "kind: table\nname: evtab\nbuilder: table\nexperiments: [evx]\narms: [grpo, vr, vr2]\n"
                          "key: \"eval/{dataset}/final_acc\"\nscale: 100\n"})
    os.environ.setdefault("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    ws = tmp_path / "ws"
    write_resolved_run(ws, resolve_arm(load_experiment("evx"), "grpo", 0, "tiny"), every_step={"eval/aime24/final_acc": 0.3})
    vr = write_resolved_run(ws, resolve_arm(load_experiment("evx"), "vr", 0, "tiny"),
                            every_step={"eval/aime24/final_acc": 0.4})
    (ws / "runs" / vr / "shared.json").write_text(json.dumps({"cells": [["evx", "vr2"]]}))
    wandb.teardown()
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["report", "--table", "evtab", "--workdir", str(ws), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert sorted(r["arm"] for r in doc["runs"]) == ["grpo", "vr", "vr2"]
    assert {r["row"]: r["values"]["AIME24"] for r in doc["rows"]} == {"GRPO": 30.0, "vr": 40.0, "vr2": 40.0}


def _copied_under_two_arms(metric: str, value: float):
    """The history :func:`arctl.report.data.read_for_served_cells` makes of run r0 of vr that serves vr2: one copy
    per cell (steps 0 and 9), beside a run g0 of grpo."""
    rows = [{"run_id": rid, "experiment": "evx", "arm": arm, "seed": 0, "metric": metric, "step": step,
             "value": v + (step == 9) * 0.1}
            for rid, arm, v in (("g0", "grpo", 0.3), ("r0", "vr", value), ("r0", "vr2", value)) for step in (0, 9)]
    h = pd.DataFrame(rows)
    for c in ("experiment", "arm", "metric"):
        h[c] = h[c].astype("category")
    return h


def test_arms_written_alike_are_each_a_curve_of_the_score_curve():
    """The score curve reads :func:`arctl.report.data.final_values` as the table does: both arms a run serves are
    drawn, each at its final value (0.5 at step 9), not one of the two."""
    from arctl.report.score_curve import _final_accuracies, curve_table

    h = _copied_under_two_arms("eval/aime24/acc@100", 0.4)
    table = curve_table(_final_accuracies(ReportData(Runs(h, pd.DataFrame()), None, source="test")))
    assert dict(zip(table["arm"], table["acc_mean_pct"].round(6))) == {"grpo": 40.0, "vr": 50.0, "vr2": 50.0}
    assert set(table["n"]) == {1}


def test_the_first_evaluation_counts_a_run_read_for_two_arms_once():
    """The variance figure averages runs, not arms (:func:`arctl.report.cov_variance.series_table`): run r0, read
    for vr and vr2, is one of its two runs ((0.3 + 0.4) / 2 at step 0, n = 2), not two of three."""
    from arctl.report.cov_variance import series_table

    h = _copied_under_two_arms("eval/aime24/corr_v1@100", 0.4)
    table = series_table(ReportData(Runs(h, pd.DataFrame()), None, source="test"), eval_only=[])
    assert table.to_dict("records") == [{"series": "corr_v1", "budget": 100, "value": pytest.approx(0.35), "n": 2}]
