"""Tables final/anytime equal values computed by hand from the written metrics."""

import csv
import json

import pytest
from wandb_workspace import LAST_STEP, final_acc, grid_anytime_acc

from arctl.report.render import render_table

DATASETS = [("AMC22", "amc22"), ("AIME24", "aime24"), ("MATH500", "math500")]
ARMS = [("GRPO", "grpo", (0, 1)), ("AR-base", "ar-base", (0,)), ("AR-linear", "ar-linear", (0,)),
        ("AR-uniform", "ar-uniform", (0, 1))]


def _expected(fn):
    table = {}
    for label, arm, seeds in ARMS:
        row = {dl: 100 * sum(fn(arm, s, ds, LAST_STEP) for s in seeds) / len(seeds) for dl, ds in DATASETS}
        row["Avg"] = sum(row.values()) / len(DATASETS)
        table[label] = row
    return table


@pytest.mark.parametrize("name, fn", [("final", final_acc), ("anytime", grid_anytime_acc)])
def test_table_values_formats_and_bold(workspace, tmp_path, name, fn):
    res = render_table(name, out_dir=tmp_path, workdir=workspace, cache_dir=tmp_path / "c", progress=False,
                       processes=1)
    want = _expected(fn)
    got = res.table.drop(columns="source")
    assert list(got.index) == [a for a, _, _ in ARMS]
    assert list(got.columns) == [d for d, _ in DATASETS] + ["Avg"]
    for label, row in want.items():
        for col, v in row.items():
            assert got.loc[label, col] == pytest.approx(v, abs=1e-9)
    md = (tmp_path / f"{name}.md").read_text()
    best = max(want, key=lambda a: want[a]["AIME24"])
    assert f"| {best}" in md and f"**{want[best]['AIME24']:.1f}**" in md
    # AR-base and AR-linear average one seed where GRPO and AR-uniform average two: the rows say so
    shown = [line.split(" | ")[0].removeprefix("| ") for line in md.splitlines()[2:]]
    assert shown == ["GRPO", "AR-base (1 of 2 runs)", "AR-linear (1 of 2 runs)", "AR-uniform"]
    assert md.count("**") == 2 * 4  # one bold cell per column (3 benchmarks + Avg)
    tex = (tmp_path / f"{name}.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert f"\\textbf{{{want[best]['AIME24']:.1f}}}" in tex
    assert "AR-linear (1 of 2 runs) &" in tex and "GRPO &" in tex
    with open(tmp_path / f"{name}.csv") as f:
        rows = {r["algorithm"]: r for r in csv.DictReader(f)}
    assert float(rows["GRPO"]["AMC22"]) == pytest.approx(want["GRPO"]["AMC22"], abs=1e-4)
    # --json holds the numbers the Markdown prints (it held none: from a hunt), with the runs each row averages
    doc = json.loads(json.dumps(res.to_json(), allow_nan=False))
    assert [r["row"] for r in doc["rows"]] == [a for a, _, _ in ARMS]
    assert [r["runs"] for r in doc["rows"]] == [2, 1, 1, 2]
    for r in doc["rows"]:
        assert r["source"] == "arctl" and "source" not in r["values"]
        assert all(r["values"][c] == pytest.approx(v, abs=1e-9) for c, v in want[r["row"]].items())


def test_compare_paper_adds_paper_rows_and_differences(workspace, tmp_path):
    res = render_table("final", out_dir=tmp_path, workdir=workspace, cache_dir=tmp_path / "c", progress=False,
                       processes=1, compare_paper=True)
    t = res.table
    paper = t[t["source"] == "paper"]
    diff = t[t["source"] == "diff"]
    assert paper.loc["GRPO", "AMC22"] == 65.0 and paper.loc["AR-uniform", "MATH500"] == 85.6
    assert "R1-Distill-1.5B" in paper.index and "R1-Distill-1.5B" not in diff.index
    want = _expected(final_acc)
    assert diff.loc["AR-base", "AIME24"] == pytest.approx(want["AR-base"]["AIME24"] - 32.7)
    # three of the paper's five benchmarks: the paper's Avg (over five) is not shown, nor a mean over the three under
    # its name (it was: 59.5 for GRPO), and the difference has none; the reason is said once
    assert paper["Avg"].isna().all() and diff["Avg"].isna().all()
    assert [w for w in res.warnings if "the paper's rows show no Avg" in w] == [
        "--compare-paper: the paper's Avg averages AMC22, AIME24, MATH500, Minerva, OlympiadBench; these runs have no "
        "Minerva, OlympiadBench, so the paper's rows show no Avg, nor their difference (a mean over the benchmarks "
        "shown would not be the paper's number)"]
    md = (tmp_path / "final.md").read_text()
    assert "GRPO (paper)" in md and "Δ vs paper" in md
    rows = [r for r in res.to_json()["rows"] if r["row"] == "GRPO"]
    assert [(r["source"], r["runs"]) for r in rows] == [("arctl", 2), ("paper", None), ("diff", None)]
    assert rows[1]["values"]["AMC22"] == 65.0


def test_avg_leaves_out_the_budget_forced_evaluation():
    """``toy-forced`` is the same problems decoded with s1 budget forcing, not another benchmark: the
    Avg column of budget_auc is the plain benchmarks' mean, not the mean of plain and forced."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.tables import AVG, accuracy_table
    from arctl.track.runs.tidy import Runs

    rows = [("r1", "grpo", "eval/toy/curve_auc", 0.5), ("r1", "grpo", "eval/toy-forced/curve_auc", 0.1),
            ("r2", "grpo", "eval/toy/curve_auc", 0.7), ("r2", "grpo", "eval/toy-forced/curve_auc", 0.3)]
    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": m, "value": v, "step": 10} for r, a, m, v in rows])
    data = ReportData(Runs(history, pd.DataFrame()), None, source="test")
    table = accuracy_table({"key": "eval/{dataset}/curve_auc", "scale": 100}, data)
    assert table.loc[table.index[0], AVG] == pytest.approx(60.0)  # (50 + 70) / 2, not (60 + 20) / 2
    assert table.loc[table.index[0]].drop(AVG).tolist() == pytest.approx([60.0, 20.0])


def test_a_row_with_a_cell_over_fewer_runs_says_so():
    """From the review of the "(n of N runs)" note: it counted runs per row, so a run that logged
    AMC22 but not AIME24 kept the row unmarked while its AIME24 cell (and Avg) averaged one run."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.tables import accuracy_table, to_latex, to_markdown
    from arctl.track.runs.tidy import Runs

    rows = [("g0", "grpo", "amc22", 0.5), ("g0", "grpo", "aime24", 0.3), ("g1", "grpo", "amc22", 0.7),
            ("u0", "ar-uniform", "amc22", 0.6), ("u0", "ar-uniform", "aime24", 0.2),
            ("u1", "ar-uniform", "amc22", 0.6), ("u1", "ar-uniform", "aime24", 0.4)]
    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": f"eval/{d}/grid_anytime_acc", "value": v, "step": 9}
                            for r, a, d, v in rows])
    table = accuracy_table({"key": "eval/{dataset}/grid_anytime_acc", "scale": 100},
                           ReportData(Runs(history, pd.DataFrame()), None, source="test"))
    md, tex = to_markdown(table), to_latex(table)
    names = [line.split(" | ")[0].removeprefix("| ") for line in md.splitlines()[2:]]
    assert sorted(names) == ["AR-uniform", "GRPO (1 of 2 runs)"]
    assert "GRPO (1 of 2 runs) &" in tex
    assert table.loc["GRPO", "AIME24"] == pytest.approx(30.0) and table.loc["GRPO", "AMC22"] == pytest.approx(60.0)


def test_a_seed_that_logged_nan_is_named_in_its_row_not_counted_silently():
    """From a review: pandas' mean skips a NaN, so a diverged seed's NaN final value left the cell's mean (biased
    upward) while the row still counted the run: nothing in the table said a seed was missing."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.tables import accuracy_table, to_markdown
    from arctl.track.runs.tidy import Runs

    nan = float("nan")
    rows = [("g0", "grpo", 0.5), ("g1", "grpo", 0.7), ("u0", "ar-uniform", 0.6), ("u1", "ar-uniform", nan)]
    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": "eval/aime24/final_acc", "value": v, "step": 9}
                            for r, a, v in rows])
    table = accuracy_table({"key": "eval/{dataset}/final_acc", "scale": 100},
                           ReportData(Runs(history, pd.DataFrame()), None, source="test"))
    names = sorted(line.split(" | ")[0].removeprefix("| ") for line in to_markdown(table).splitlines()[2:])
    assert names == ["AR-uniform (1 of 2 runs)", "GRPO"]
    assert table.loc["AR-uniform", "AIME24"] == pytest.approx(60.0)
