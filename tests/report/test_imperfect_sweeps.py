"""A report of a sweep as sweeps are: a seed that logged an infinity, seeds that diverged (NaN), a run still
running, a cell with two runs. From a hunt on synthetic runs of real offline W&B files: an infinity was the
table's best (bold "inf"), a diverged seed printed a line per metric it logged NaN in, an arm of NaN seeds was in
the score curve's legend with no line, an experiment with a running run was said to have "no runs yet", and a
cell of two runs was read from one without naming the other."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from wandb_workspace import (
    FINAL_DATASETS,
    GRID,
    LAST_STEP,
    _write_run,
    eval_row,
    final_acc,
    run_id,
    train_row,
)

from arctl.report.cells import one_run_per_cell
from arctl.report.stats import mean_ci95
from arctl.track.runs import Runs
from arctl.track.wandbfile.reader import NO_EXIT_RECORD

INF_RUN = run_id("main-grpo", "grpo", 2)
DIVERGED = [run_id("main-ar-linear", "ar-linear", s) for s in (0, 1)]
RUNNING = run_id("main-ar-uniform", "ar-uniform", 0)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """GRPO: seeds 0, 1 and seed 2, whose final evaluation logged +inf on aime24 (final_acc and acc@8000);
    AR-base: one seed; AR-linear: two seeds that diverged at the last step (NaN in every metric); AR-uniform: one
    run killed at step 12 (no exit record)."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    root = tmp_path_factory.mktemp("imperfect") / "ws"
    steps = list(range(LAST_STEP + 1))
    inf = {"trainer/global_step": LAST_STEP, "eval/aime24/final_acc": math.inf, "eval/aime24/acc@8000": math.inf}
    for seed in (0, 1, 2):
        _write_run(root, "main-grpo", "grpo", seed, steps, extra_rows=[inf] if seed == 2 else None)
    _write_run(root, "main-ar-base", "ar-base", 0, steps)
    for seed in (0, 1):
        nan = {k: math.nan for k in {**train_row("ar-linear", seed, LAST_STEP),
                                     **eval_row("ar-linear", seed, LAST_STEP, FINAL_DATASETS, GRID)}}
        _write_run(root, "main-ar-linear", "ar-linear", seed, steps, extra_rows=[{"trainer/global_step": LAST_STEP, **nan}])
    run_dir = _write_run(root, "main-ar-uniform", "ar-uniform", 0, list(range(13)), final=False)
    wandb.teardown()
    (path,) = run_dir.rglob("run-*.wandb")
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])  # killed: no exit record
    return root


@pytest.fixture(scope="module")
def table(ws, tmp_path_factory):
    from arctl.report.render import render_table

    out = tmp_path_factory.mktemp("table")
    return render_table("final", out_dir=out, workdir=ws, progress=False, processes=1), out


@pytest.fixture(scope="module")
def curve(ws, tmp_path_factory):
    from arctl.report.render import render_figure

    out = tmp_path_factory.mktemp("curve")
    return render_figure("score_curve", out_dir=out, workdir=ws, progress=False, processes=1), out


def test_an_infinity_is_left_out_of_a_cell_as_a_nan_is(table):
    """GRPO's aime24 cell is the mean of its two finite seeds, named "(2 of 3 runs)", not "inf" in bold; the CSV
    and --json say the same number."""
    res, out = table
    want = 100 * (final_acc("grpo", 0, "aime24", LAST_STEP) + final_acc("grpo", 1, "aime24", LAST_STEP)) / 2
    md = (out / "final.md").read_text()
    grpo = next(line for line in md.splitlines() if line.startswith("| GRPO"))
    assert "inf" not in md and grpo.startswith("| GRPO (2 of 3 runs) | ") and f"{want:.1f}" in grpo
    assert "**" not in grpo  # AR-base's finite 52.x is the best, not an infinity
    csv = pd.read_csv(out / "final.csv", index_col="algorithm")
    assert csv.loc["GRPO", "AIME24"] == pytest.approx(want) and not np.isinf(csv.select_dtypes("number")).any().any()
    assert (csv.loc["GRPO", "runs"], csv.loc["GRPO", "most_runs"]) == (2, 3)
    row = next(r for r in res.to_json()["rows"] if r["row"].startswith("GRPO"))
    assert row["values"]["AIME24"] == pytest.approx(want) and row["runs"] == 2


def test_an_interval_over_seeds_leaves_an_infinity_out():
    mean, half, n = mean_ci95(np.array([[0.4, 0.5, np.inf], [0.4, -np.inf, np.nan]]), axis=1)
    assert mean[0] == pytest.approx(0.45) and np.isfinite(half[0]) and n.tolist() == [2, 1]
    assert mean[1] == pytest.approx(0.4) and np.isnan(half[1])


def test_the_score_curve_leaves_an_infinity_out(curve):
    _, out = curve
    csv = pd.read_csv(out / "score_curve.csv")
    at = csv[(csv["arm"] == "grpo") & (csv["dataset"] == "aime24") & (csv["budget"] == 8000)].iloc[0]
    assert at["n"] == 2 and np.isfinite(at["acc_mean_pct"]) and at["acc_mean_pct"] < 100


def test_a_diverged_seed_is_one_line_naming_the_metrics_the_report_reads(table):
    """Each diverged seed logged NaN in ~90 metrics; the table reads 3 of them (final_acc of each benchmark):
    one line per run, and nothing of the metrics it does not read."""
    res, _ = table
    for rid in DIVERGED:
        said = [w for w in res.warnings if w.startswith(f"run {rid}")]
        assert said == [f"run {rid} logged NaN from step {LAST_STEP} in eval/aime24/final_acc and 2 other metric(s) "
                        "read (a mean over runs leaves those values out)"], said
    assert [w for w in res.warnings if w.startswith(f"run {INF_RUN}")] == [
        f"run {INF_RUN} logged +inf from step {LAST_STEP} in eval/aime24/final_acc (a mean over runs leaves those "
        "values out)"]  # its acc@8000 is not read by this table


def test_a_run_left_out_unfinished_is_named_once(table):
    """The left-out line names the killed run; its W&B file's "no exit record" line is not said beside it."""
    res, _ = table
    assert any(w.startswith("left out 1 run(s) that have not finished") and RUNNING in w for w in res.warnings)
    assert not [w for w in res.warnings if w.endswith(NO_EXIT_RECORD)], res.warnings


def test_an_experiment_whose_runs_are_not_read_is_not_said_to_have_none(table, ws, tmp_path):
    """main-ar-uniform has a run (killed at step 12): not "no runs yet" (missing_experiments) but a warning that
    says why none is read; an experiment without any run is still missing."""
    from arctl.launch.workspace import workdir_arg
    from arctl.report.render import render_table

    res, out = table
    assert res.missing_experiments == []
    assert json.loads((out / "final.runs.json").read_text())["missing_experiments"] == []
    # and what --json and runs.json say of it: not missing, not silent either
    assert res.unread_experiments == ["main-ar-uniform"] == res.to_json()["unread_experiments"]
    assert json.loads((out / "final.runs.json").read_text())["unread_experiments"] == ["main-ar-uniform"]
    assert f"main-ar-uniform has 1 run(s), none of which this table reads: 1 not finished ({RUNNING}); it is left out " \
           f"(`arctl status{workdir_arg(ws)}` shows its runs)" in res.warnings
    other = render_table("final", out_dir=tmp_path / "o", workdir=ws, progress=False, processes=1,
                         experiments=["main-grpo", "main-ar-uniform", "ablation-dense"])
    assert other.missing_experiments == ["ablation-dense"]
    assert other.unread_experiments == ["main-ar-uniform"]


def test_an_arm_whose_every_seed_is_nan_is_said_and_not_drawn(curve):
    """AR-linear's two seeds diverged: no line, so neither in the legend nor in the footnote's runs; one warning."""
    res, out = curve
    assert "AR-linear: no run has a finite final evaluation; it is left out of the figure (the CSV has it, n = 0)" \
        in res.warnings
    assert not [w for w in res.warnings if w.startswith("AR-linear: ") and "budget(s)" in w]
    fig = res.figure
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert "GRPO" in labels and "AR-linear" not in labels
    assert "AR-linear" not in fig._supxlabel.get_text() and "GRPO" in fig._supxlabel.get_text()
    csv = pd.read_csv(out / "score_curve.csv")
    assert (csv.loc[csv["arm"] == "ar-linear", "n"] == 0).all() and len(csv[csv["arm"] == "ar-linear"])


def test_a_cell_read_from_one_of_two_runs_names_both():
    """The run that is the composed cell is read; a warning names it and the one left out, with the key where
    they differ."""
    table = pd.DataFrame.from_records([
        {"run_id": rid, "experiment": "main-grpo", "arm": "grpo", "seed": 0, "config.scale": "tiny",
         "config.trainer.total_steps": total} for rid, total in (("r100", 100), ("r200", 200))])
    history = pd.DataFrame({"run_id": table["run_id"], "experiment": "main-grpo", "arm": "grpo", "seed": 0,
                            "step": 0, "metric": "eval/toy/final_acc", "value": [0.5, 0.6]})
    cell = {"scale": "tiny", "trainer.total_steps": 100}
    out = one_run_per_cell(Runs(history=history, runs=table), compose=lambda e, a, s, sc: dict(cell), source="/ws")
    assert out.runs["run_id"].tolist() == ["r100"]
    assert out.warnings == ["main-grpo/grpo seed 0 has 2 runs in /ws: read r100 (trainer.total_steps=100, the cell as "
                            "the report's sweep composes it), left out r200 (trainer.total_steps=200); "
                            "--where trainer.total_steps=VALUE reads another"]
