"""What a figure's and a table's files say, through `arctl report` on real offline W&B runs (from a review):
cov_variance averaged runs of different budget sets into one jagged curve; the training curves' CSV held
percent and tokens under names the doc gave to fractions of 1; the paper's row of --compare-paper carried an
Avg recomputed over part of its benchmarks; a table's CSV lost the "(n of N runs)" the Markdown shows; arms of
a spec without runs vanished without a word; the score curve's CSV wrote 57.99999999999999."""

from __future__ import annotations

import csv
import json
import math
import os
import re

import pytest
from fake_policy import diag_row  # tests/support/fake_policy.py
from typer.testing import CliRunner
from wandb_workspace import (
    GRID,
    LAST_STEP,
    _write_run,
    acc,
    anytime_acc,
    final_acc,
    think_len,
)

from arctl.cli.main import app

runner = CliRunner()


def _report(workspace, out, *args) -> dict:
    res = runner.invoke(app, ["report", *args, "--workdir", str(workspace), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --- 1. cov_variance: a mean over the same runs at every budget, with its n --------------------------------------

def _diag_row(budgets, base: float) -> dict:
    return diag_row(budgets, base)


def test_cov_variance_averages_the_same_runs_at_every_budget_and_writes_n(tmp_path):
    """A main-grpo run evaluated at 1000-8000 and an r1-7b run at 1000-16000 (every experiment is searched):
    the curve was the mean of both to 8000, then jumped to the 7B run's values at 12000 and 16000."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    small, large = [1000, 2000, 4000, 8000], [1000, 2000, 4000, 8000, 12000, 16000]
    _write_run(ws, "main-grpo", "grpo", 0, [], extra_rows=[_diag_row(small, 0.2)])
    _write_run(ws, "r1-7b", "ar-base", 0, [], extra_rows=[_diag_row(large, 0.6)])
    wandb.teardown()

    doc = _report(ws, tmp_path / "out", "--figure", "cov_variance")
    rows = {(r["series"], int(r["budget"])): r for r in _csv(tmp_path / "out" / "cov_variance.csv")}
    for b in small:  # both runs: (0.2 + b/1e5 + 0.6 + b/1e5) / 2 = 0.4 + b/1e5
        assert float(rows[("corr_v1", b)]["value"]) == pytest.approx(0.4 + b / 1e5, abs=1e-9)
        assert float(rows[("corr_v2", b)]["value"]) == pytest.approx(0.4 - b / 1e5, abs=1e-9)
        assert float(rows[("nvar/brpo", b)]["value"]) == pytest.approx(0.4, abs=1e-9)
        assert int(rows[("corr_v1", b)]["n"]) == 2
    for b in (12000, 16000):  # the 7B run alone: in the CSV with its n, not on the curve
        assert float(rows[("corr_v1", b)]["value"]) == pytest.approx(0.6 + b / 1e5, abs=1e-9)
        assert int(rows[("corr_v1", b)]["n"]) == 1
    said = [w for w in doc["warnings"] if "12000, 16000" in w]
    assert said == ["corr_v1, corr_v2, nvar/grpo, nvar/v1, nvar/brpo: 2 budget(s) (12000, 16000) that not every run "
                    "logged are left out of their curves (runs evaluated at other budgets, e.g. of other experiments, "
                    "or a NaN where it is undefined; the CSV has them with their n)"], doc["warnings"]

    from arctl.report.render import render_figure

    res = render_figure("cov_variance", out_dir=tmp_path / "again", workdir=ws, progress=False, processes=1)
    left = [ax for ax in res.figure.axes if ax.get_visible()][0]
    (v1,) = [ln for ln in left.lines if ln.get_label() == "$V_1$"]
    assert list(v1.get_xdata()) == small
    assert list(v1.get_ydata()) == pytest.approx([0.4 + b / 1e5 for b in small])


# --- 2. training curves: the unit of every row -------------------------------------------------------------------

def test_training_curve_csv_says_the_unit_of_each_row(workspace, tmp_path):
    _report(workspace, tmp_path, "--figure", "main_training")
    rows = _csv(tmp_path / "main_training.csv")
    by = {(r["arm"], r["metric"], int(r["step"])): r for r in rows}
    step = 10
    grpo_any = by[("grpo", "eval/aime24/anytime_acc", step)]
    assert grpo_any["unit"] == "percent"
    want = 50 * (anytime_acc("grpo", 0, "aime24", step) + anytime_acc("grpo", 1, "aime24", step))
    assert float(grpo_any["mean"]) == pytest.approx(want, abs=1e-4)
    base_final = by[("ar-base", "eval/amc22/final_acc", LAST_STEP)]
    assert base_final["unit"] == "percent"
    assert float(base_final["mean"]) == pytest.approx(100 * final_acc("ar-base", 0, "amc22", LAST_STEP), abs=1e-4)
    tl = by[("ar-base", "eval/amc22/think_len", step)]
    assert tl["unit"] == "tokens" and float(tl["mean"]) == pytest.approx(think_len("ar-base", 0, "amc22", step))
    assert {r["unit"] for r in rows} == {"percent", "tokens"}


def test_a_panel_s_unit_follows_its_scale():
    from arctl.report.training_curves import panel_unit

    assert panel_unit("eval/aime24/anytime_acc", 100) == "percent"
    assert panel_unit("eval/aime24/final_acc", 1) == "fraction of 1"
    assert panel_unit("eval/aime24/acc_at_frac/50", 1) == "fraction of 1"
    assert panel_unit("eval/aime24/think_len", 1) == "tokens"
    assert panel_unit("eval/aime24/think_len", 0.001) == "tokens x 0.001"
    assert panel_unit("train/loss", 1) == "as logged"
    assert panel_unit("train/loss", 10) == "as logged x 10"


# --- 3. and 4. tables: the paper's own Avg, the runs of each row in the CSV --------------------------------------

def test_the_paper_row_avg_is_the_paper_s_own_or_none(workspace, tmp_path):
    """Our runs have 3 of the paper's 5 benchmarks: the paper's Avg (over 5) is not shown as the paper's, nor a
    mean over the 3 (53.3 for AR-base) under the paper's name; the reason is said once."""
    doc = _report(workspace, tmp_path, "--table", "final", "--compare-paper")
    md = (tmp_path / "final.md").read_text()
    paper_lines = [ln for ln in md.splitlines() if "(paper)" in ln]
    assert len(paper_lines) == 5
    for line in paper_lines:
        assert line.rstrip().endswith("| – |"), line
    assert "53.3" not in md
    reason = [w for w in doc["warnings"] if "Avg" in w and "paper" in w]
    assert len(reason) == 1
    assert "AMC22, AIME24, MATH500, Minerva, OlympiadBench" in reason[0] and "no Minerva, OlympiadBench" in reason[0]
    rows = {(r["row"], r["source"]): r for r in doc["rows"]}
    assert rows[("AR-base", "paper")]["values"]["Avg"] is None
    assert rows[("AR-base", "paper")]["values"]["AIME24"] == 32.7
    assert rows[("AR-base", "diff")]["values"]["Avg"] is None  # ours over 3 benchmarks minus the paper's over 5: none
    want = 100 * (final_acc("ar-base", 0, "aime24", LAST_STEP))
    assert rows[("AR-base", "diff")]["values"]["AIME24"] == pytest.approx(want - 32.7)
    csv_rows = [r for r in _csv(tmp_path / "final.csv") if r["source"] == "paper"]
    assert csv_rows and all(r["Avg"] == "" for r in csv_rows)


def test_the_paper_row_avg_is_the_paper_s_when_every_benchmark_is_shown():
    from arctl.report.tables import paper_rows

    cols = ["AMC22", "AIME24", "MATH500", "Minerva", "OlympiadBench", "Avg"]
    out = paper_rows({"name": "final"}, cols)
    # the paper's 45.6, not the mean of its five cells ((56.4 + 22.3 + 81.1 + 26.3 + 42.0) / 5 = 45.62)
    assert out.loc["R1-Distill-1.5B", "Avg"] == 45.6 and out.loc["GRPO", "Avg"] == 50.7
    assert out.attrs.get("avg_note") is None
    part = paper_rows({"name": "final"}, ["AIME24", "MATH500", "Avg"])
    assert part["Avg"].isna().all() and part.loc["GRPO", "AIME24"] == 28.9
    assert "AIME24, MATH500" in part.attrs["avg_note"]


def test_a_table_csv_says_how_many_runs_each_row_averages(workspace, tmp_path):
    _report(workspace, tmp_path / "plain", "--table", "final")
    rows = {r["algorithm"]: r for r in _csv(tmp_path / "plain" / "final.csv")}
    assert [(a, rows[a]["runs"], rows[a]["most_runs"]) for a in rows] == [
        ("GRPO", "2", "2"), ("AR-base", "1", "2"), ("AR-linear", "1", "2"), ("AR-uniform", "2", "2")]
    assert float(rows["AR-base"]["AIME24"]) == pytest.approx(100 * final_acc("ar-base", 0, "aime24", LAST_STEP),
                                                              abs=1e-4)
    doc = _report(workspace, tmp_path / "cmp", "--table", "final", "--compare-paper")
    assert doc["rows"][0]["row"] == "GRPO" and "runs" not in doc["rows"][0]["values"]  # a column of the CSV only
    both = _csv(tmp_path / "cmp" / "final.csv")
    assert [(r["algorithm"], r["runs"]) for r in both if r["source"] == "arctl"] == [
        ("GRPO", "2"), ("AR-base", "1"), ("AR-linear", "1"), ("AR-uniform", "2")]
    assert all(r["runs"] == "" and r["most_runs"] == "" for r in both if r["source"] != "arctl")


# --- 5. arms of a spec without runs ----------------------------------------------------------------------------------

def test_arms_of_a_spec_without_runs_are_named(workspace, tmp_path):
    doc = _report(workspace, tmp_path, "--figure", "ablation_dense")
    assert doc["missing_arms"] == ["grpo-lp-v1", "grpo-lp-v2"]
    (said,) = [w for w in doc["warnings"] if "grpo-lp-v1" in w]
    assert said.startswith("2 arm(s) of the spec have no runs in ") and "GRPO+length_penalty_v1 (grpo-lp-v1)" in said
    # its workspace, and the seeds the other arms' runs have (they are read beside them)
    assert f"`arctl run ablation-dense --arm grpo-lp-v1 --arm grpo-lp-v2 --seeds 0,1 --workdir {workspace}`" in said
    runs_json = json.loads((tmp_path / "ablation_dense.runs.json").read_text())
    assert runs_json["missing_arms"] == ["grpo-lp-v1", "grpo-lp-v2"]
    # every arm there, or an experiment without runs (named as such, its arms not again): none
    doc = _report(workspace, tmp_path / "m", "--figure", "main_training")
    assert doc["missing_arms"] == [] and not [w for w in doc["warnings"] if "no runs" in w]
    doc = _report(workspace, tmp_path / "b", "--figure", "budget_methods")
    assert "baselines-l1" in doc["missing_experiments"] and doc["missing_arms"] == []
    # --experiment narrows what is expected: main_training of main-grpo alone misses no arm
    doc = _report(workspace, tmp_path / "g", "--figure", "main_training", "--experiment", "main-grpo")
    assert doc["missing_arms"] == []


# --- 6. score-curve CSVs rounded as tables are ------------------------------------------------------------------------

def test_score_curve_csv_is_rounded_as_tables_are(workspace, tmp_path):
    from arctl.report.tables import CSV_DECIMALS

    _report(workspace, tmp_path, "--figure", "score_curve")
    text = (tmp_path / "score_curve.csv").read_text()
    decimals = [len(m) for m in re.findall(r"\.(\d+)", text)]
    assert decimals and max(decimals) <= CSV_DECIMALS
    rows = {(r["arm"], r["dataset"], int(r["budget"])): r for r in _csv(tmp_path / "score_curve.csv")}
    for b in GRID:
        v = [100 * acc("grpo", s, "amc22", b, LAST_STEP) for s in (0, 1)]
        mean = sum(v) / 2
        ci = 12.706204736174707 * abs(v[0] - v[1]) / 2  # t(1) * sd / sqrt(2), sd = |a - b| / sqrt(2)
        got = rows[("grpo", "amc22", b)]
        assert abs(float(got["acc_mean_pct"]) - mean) <= 0.5 * 10 ** -CSV_DECIMALS + 1e-12
        assert math.isclose(float(got["acc_ci95_pct"]), round(ci, CSV_DECIMALS), abs_tol=1.1 * 10 ** -CSV_DECIMALS)


def test_a_paper_row_without_some_benchmarks_keeps_its_own_avg(tmp_path, monkeypatch):
    """Per row: a row of the paper with no value on the benchmarks these runs lack keeps its Avg (over the ones it
    has, all shown here); the other rows have none."""
    from arctl.report.tables import paper_rows

    (tmp_path / "specs" / "reports").mkdir(parents=True)
    (tmp_path / "specs" / "reports" / "paper_tables.csv").write_text(
        "table,algorithm,AMC22,AIME24,MATH500,Minerva,Avg\n"
        "final,Full,60.0,30.0,80.0,20.0,47.5\n"
        "final,Three,61.0,31.0,81.0,,57.7\n")
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path / "specs"))
    out = paper_rows({"name": "final"}, ["AMC22", "AIME24", "MATH500", "Avg"])
    assert math.isnan(out.loc["Full", "Avg"]) and out.loc["Three", "Avg"] == 57.7  # the paper's, not (61+31+81)/3
    assert out.attrs["avg_note"].startswith("--compare-paper: the paper's Avg averages AMC22, AIME24, MATH500, "
                                            "Minerva; these runs have no Minerva, so")
