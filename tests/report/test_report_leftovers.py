"""Three leftovers of an audit of the report layer: a table's Avg over runs that lack a benchmark, the unit of
score_curve's CSV, and `arctl export` of completed runs that have no status.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from arctl.cli.main import app

EVIDENCE_RUNS = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "baselines" / "data" / "runs"


def _table(rows):
    from arctl.report.data import ReportData
    from arctl.report.tables import accuracy_table
    from arctl.track.runs.tidy import Runs

    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": f"eval/{d}/final_acc", "value": v, "step": 9}
                            for r, a, d, v in rows])
    return accuracy_table({"key": "eval/{dataset}/final_acc", "scale": 100},
                          ReportData(Runs(history, pd.DataFrame()), None, source="test"))


def test_avg_averages_the_runs_that_logged_every_benchmark():
    """From an audit: Avg was the mean of the columns' means, so a run missing a benchmark (not logged, or NaN)
    set a mean over two seeds beside one over three. Avg is now each complete run's mean over the benchmarks,
    averaged over those runs (as claims compare runs only on what all of them have), and the row counts it."""
    from arctl.report.tables import AVG, to_latex, to_markdown

    nan = float("nan")
    rows = [("g0", "grpo", "amc22", 0.5), ("g0", "grpo", "aime24", 0.3),
            ("g1", "grpo", "amc22", 0.7), ("g1", "grpo", "aime24", nan),  # diverged on AIME24
            ("g2", "grpo", "aime24", 0.5),  # did not log AMC22
            *[(f"u{i}", "ar-uniform", d, v) for i in range(3) for d, v in (("amc22", 0.6), ("aime24", 0.2 + i / 10))],
            ("l0", "ar-linear", "amc22", 0.4), ("l1", "ar-linear", "aime24", 0.2)]  # no run has both
    table = _table(rows)
    # the cells average what each benchmark has: AMC22 g0, g1; AIME24 g0, g2
    assert table.loc["GRPO", "AMC22"] == pytest.approx(60.0) and table.loc["GRPO", "AIME24"] == pytest.approx(40.0)
    assert table.loc["GRPO", AVG] == pytest.approx(40.0)  # g0 alone: (50 + 30) / 2; the columns' means gave 50
    assert table.loc["AR-uniform", AVG] == pytest.approx((60 + 30) / 2)
    assert np.isnan(table.loc["AR-linear", AVG])  # no run to average (the columns' means gave 30)
    assert table.attrs["runs"] == {"AR-uniform": 3, "GRPO": 1, "AR-linear": 0}
    md = to_markdown(table)
    names = {line.split(" | ")[0].removeprefix("| "): line for line in md.splitlines()[2:]}
    assert sorted(names) == ["AR-linear (0 of 3 runs)", "AR-uniform", "GRPO (1 of 3 runs)"]
    assert names["AR-linear (0 of 3 runs)"].endswith("| – |")
    assert "GRPO (1 of 3 runs) &" in to_latex(table)


def test_avg_of_complete_runs_is_the_mean_of_the_columns():
    """Where every run logged every benchmark, Avg is what it was: the mean of the columns' means."""
    from arctl.report.tables import AVG

    rows = [(f"g{i}", "grpo", d, v + i / 10) for i in range(3) for d, v in (("amc22", 0.5), ("aime24", 0.1), ("math500", 0.7))]
    table = _table(rows)
    assert table.loc["GRPO", AVG] == pytest.approx(table.loc["GRPO"].drop(AVG).mean())
    assert table.attrs["runs"] == {"GRPO": 3}


def test_score_curve_csvs_hold_the_percent_the_figure_draws(workspace, tmp_path):
    """From an audit: score_curve.csv held fractions of 1 in columns `mean`/`ci` beside a figure in percent. The
    CSVs now hold the numbers drawn, in columns that name their unit."""
    from arctl.report import score_curve
    from arctl.report.data import read_report_runs
    from arctl.report.render import render_figure
    from arctl.report.specs import arm_label, dataset_label, load_spec

    res = render_figure("score_curve", out_dir=tmp_path / "out", workdir=workspace, cache_dir=tmp_path / "c",
                        progress=False, processes=1)
    written = pd.read_csv(tmp_path / "out" / "score_curve.csv")
    assert list(written.columns) == ["arm", "dataset", "budget", "acc_mean_pct", "acc_ci95_pct", "n"]
    checked = 0
    for ax in (a for a in res.figure.axes if a.get_visible()):
        for line in ax.lines:
            arm = next((a for a in written["arm"].unique() if arm_label(a) == line.get_label()), None)
            if arm is None:
                continue
            ds = next(d for d in written["dataset"].unique() if dataset_label(d) == ax.get_title())
            rows = written[(written["arm"] == arm) & (written["dataset"] == ds)].sort_values("budget")
            np.testing.assert_allclose(rows["acc_mean_pct"].to_numpy(), line.get_ydata())
            checked += 1
    assert checked >= 4
    assert written["acc_mean_pct"].max() > 1  # percent, not fractions of 1
    spec = {**load_spec("figure", "score_curve"), "per_seed": True}
    data = read_report_runs(spec, metrics=score_curve.METRICS, workdir=workspace, cache_dir=tmp_path / "c",
                            progress=False, processes=1, final_only=True)
    fig, table = score_curve.build(spec, data)
    seeds = table.attrs["seeds"]
    assert list(seeds.columns) == ["arm", "dataset", "budget", "seed", "acc_pct"]
    ax = next(a for a in fig.axes if a.get_title() == "AIME24")
    line = next(ln for ln in ax.lines if ln.get_label() == "_GRPO seed 1")
    mine = seeds[(seeds["arm"] == "grpo") & (seeds["dataset"] == "aime24") & (seeds["seed"] == 1)]
    np.testing.assert_allclose(mine.sort_values("budget")["acc_pct"].to_numpy(), line.get_ydata())


@pytest.fixture
def old_ws(tmp_path) -> Path:
    """Two completed runs of the committed baselines evidence (100 of trainer.total_steps 100, W&B's clean exit
    record) in a workspace, as a run from before status.json or one whose status.json was lost: no status.json."""
    root = tmp_path / "ws"
    for name in sorted(p.name for p in EVIDENCE_RUNS.iterdir())[:2]:
        shutil.copytree(EVIDENCE_RUNS / name, root / "runs" / name)
    assert not list(root.rglob("status.json"))
    return root


def _export(*args):
    return CliRunner().invoke(app, ["export", *args])


def test_a_completed_run_without_status_json_is_exported(old_ws, tmp_path):
    """From an audit: a workspace whose runs have no status.json exported nothing without --unfinished ("not
    completed (state unknown)"), though each run's W&B files end with the final step and a clean finish."""
    res = _export("--workdir", str(old_ws), "--out", str(tmp_path / "out"), "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    assert sorted(r["run_id"] for r in done["runs"]) == sorted(p.name for p in (old_ws / "runs").iterdir())
    assert not done["skipped"]
    index = json.loads((tmp_path / "out" / "export.json").read_text())["runs"]
    assert {e["state"] for e in index.values()} == {"completed"}


def _cut_exit_record(run: Path) -> None:
    """The run's W&B file without its last 32 KiB block: no exit record (a job killed while it logged)."""
    from arctl.track.wandbfile import has_exit_record

    (path,) = {p.resolve() for p in run.rglob("run-*.wandb")}
    data = path.read_bytes()
    path.write_bytes(data[: (len(data) - 1) // 32768 * 32768])
    assert not has_exit_record(path)


@pytest.mark.parametrize("case", ["short", "killed", "no-total"])
def test_a_run_without_status_json_that_did_not_complete_is_named_with_why(old_ws, tmp_path, case):
    """A run without status.json counts completed only where its files say so; one that does not is skipped
    with why, and where none is left the error is one line saying why and what to do, exit 2, nothing written."""
    runs = sorted((old_ws / "runs").iterdir())
    for run in runs:
        cfg = run / "config.yaml"
        if case == "short":  # a preempted attempt finishes its W&B run too, before the last step
            cfg.write_text(cfg.read_text().replace("total_steps: 100,", "total_steps: 200,"))
        elif case == "killed":
            _cut_exit_record(run)
        else:
            cfg.write_text(cfg.read_text().replace("total_steps: 100,", ""))
    why = {"short": "its W&B history ends at step 100 of 200",
           "killed": "its last W&B attempt has no exit record (running, or killed)",
           "no-total": "no trainer.total_steps in its config.yaml"}[case]
    out = tmp_path / "out"
    res = _export("--workdir", str(old_ws), "--out", str(out))
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert f"no runs to export from {old_ws}: 2 not completed (the first, {runs[0].name}: no status.json" in lines[0]
    assert why in lines[0] and lines[0].endswith("--unfinished exports them as they are")
    assert not out.exists()
    # one such run beside a completed one: exported the other, named the skipped one
    shutil.rmtree(old_ws / "runs" / runs[1].name)
    shutil.copytree(EVIDENCE_RUNS / runs[1].name, old_ws / "runs" / runs[1].name)
    res = _export("--workdir", str(old_ws), "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    assert [r["run_id"] for r in done["runs"]] == [runs[1].name]
    assert [s["run_id"] for s in done["skipped"]] == [runs[0].name] and why in done["skipped"][0]["why"]
    # --unfinished exports it as it is
    res = _export("--workdir", str(old_ws), "--out", str(tmp_path / "all"), "--unfinished", "--json")
    assert res.exit_code == 0 and len(json.loads(res.output)["runs"]) == 2, res.output


def test_status_json_says_first(old_ws, tmp_path):
    """A run's status.json is what its job reported: a run it calls failed is not exported on its W&B files."""
    run = sorted((old_ws / "runs").iterdir())[0]
    (run / "status.json").write_text(json.dumps({"state": "failed"}))
    res = _export("--workdir", str(old_ws), "--out", str(tmp_path / "out"), "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    assert [s["run_id"] for s in done["skipped"]] == [run.name] and "state failed" in done["skipped"][0]["why"]
