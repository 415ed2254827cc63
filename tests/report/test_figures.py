"""Every figure renders from real offline runs; plotted numbers equal the hand-computed ones."""

import numpy as np
import pytest
from wandb_workspace import (
    GRID,
    LAST_STEP,
    acc,
    anytime_acc,
    corr,
    nvar,
    think_len,
)

from arctl.report.render import render_figure
from arctl.report.stats import mean_ci95, t975
from arctl.track.wandbfile.reader import NO_EXIT_RECORD, TAIL_CUT

FIGURES = ["score_curve", "ablation_dense", "ablation_decouple", "ablation_vr", "main_training", "r1_7b",
           "ctx_16k", "cov_variance", "tree_mask"]


# one pytest-xdist worker for the module: its fixture renders every figure once (25-65 s)
pytestmark = pytest.mark.xdist_group("figures")


@pytest.fixture(scope="module")
def rendered(workspace, tmp_path_factory):
    out = tmp_path_factory.mktemp("figs")
    cache = tmp_path_factory.mktemp("cache")
    import warnings

    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in FIGURES:
            results[name] = render_figure(name, out_dir=out, workdir=workspace, cache_dir=cache, progress=False,
                                          processes=1)
    return results


@pytest.mark.parametrize("name", FIGURES)
def test_figure_files_exist_and_axes_are_labelled(rendered, name):
    res = rendered[name]
    for suffix, min_size in ((".png", 15_000), (".pdf", 5_000), (".svg", 10_000)):
        path = next(p for p in res.outputs if p.suffix == suffix)
        assert path.stat().st_size > min_size, path
    axes = [ax for ax in res.figure.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert ax.lines or ax.images
    if name != "tree_mask":
        assert res.runs, "a figure states which runs it used"
        runs_json = next(p for p in res.outputs if p.name.endswith(".runs.json")).read_text()
        assert res.runs[0]["run_id"] in runs_json


def _line(ax, label):
    return next(line for line in ax.lines if line.get_label() == label)


def test_score_curve_values(rendered):
    fig = rendered["score_curve"].figure
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["AMC22", "AIME24", "MATH500"]  # labels.yaml order
    ax = next(ax for ax in fig.axes if ax.get_title() == "AIME24")
    grpo = _line(ax, "GRPO")
    np.testing.assert_array_equal(grpo.get_xdata(), GRID)
    want = [100 * (acc("grpo", 0, "aime24", b, LAST_STEP) + acc("grpo", 1, "aime24", b, LAST_STEP)) / 2 for b in GRID]
    np.testing.assert_allclose(grpo.get_ydata(), want)
    base = _line(ax, "AR-base")
    np.testing.assert_allclose(base.get_ydata(), [100 * acc("ar-base", 0, "aime24", b, LAST_STEP) for b in GRID])
    # the maximum budget is marked
    assert any(np.allclose(line.get_xdata(), [max(GRID)] * 2) for line in ax.lines if line.get_linestyle() == "--")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["GRPO", "AR-base", "AR-linear", "AR-uniform"]
    # the numbers behind the figure, as CSV beside it
    import pandas as pd

    csv = pd.read_csv(next(p for p in rendered["score_curve"].outputs if p.suffix == ".csv"))
    rows = csv[(csv["arm"] == "grpo") & (csv["dataset"] == "aime24")].sort_values("budget")
    np.testing.assert_allclose(rows["acc_mean_pct"].to_numpy(), want)  # percent, as drawn (and as named)
    assert list(rows["n"]) == [2] * len(GRID)


def test_training_curve_means_and_bands(rendered):
    res = rendered["ablation_dense"]
    axes = [ax for ax in res.figure.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in axes[::2]] == ["Anytime accuracy (%)", "Final accuracy (%)", "Avg. thinking length"]
    ax = axes[0]  # anytime accuracy, AIME24
    assert ax.get_title() == "AIME24"
    dense = _line(ax, "GRPO+dense")
    steps = [0, 10, 20]
    np.testing.assert_array_equal(dense.get_xdata(), steps)
    a0 = [anytime_acc("grpo-dense", 0, "aime24", s) for s in steps]
    a1 = [anytime_acc("grpo-dense", 1, "aime24", s) for s in steps]
    np.testing.assert_allclose(dense.get_ydata(), [50 * (x + y) for x, y in zip(a0, a1)])
    # 95% CI of two seeds: t(1) * sd / sqrt(2), sd = |a0 - a1| / sqrt(2)  -> 12.7062 * |a0 - a1| / 2
    tab = res.table[(res.table["arm"] == "grpo-dense") & (res.table["metric"] == "eval/aime24/anytime_acc")]
    np.testing.assert_allclose(tab["ci"], [100 * t975(1) * abs(x - y) / 2 for x, y in zip(a0, a1)])
    tl = _line(axes[5], "GRPO")  # thinking length, AMC22, one seed: no band
    np.testing.assert_allclose(tl.get_ydata(), [think_len("grpo", 0, "amc22", s) for s in steps])


def test_resumed_run_curve_is_continuous(rendered):
    ax = next(ax for ax in rendered["main_training"].figure.axes if ax.get_title() == "AIME24")
    line = _line(ax, "AR-uniform")
    want = [50 * (anytime_acc("ar-uniform", 0, "aime24", s) + anytime_acc("ar-uniform", 1, "aime24", s))
            for s in (0, 10, 20)]
    np.testing.assert_allclose(line.get_ydata(), want)


def test_truncated_run_is_plotted_from_what_survived(rendered):
    res = rendered["ablation_vr"]
    # its file has no exit record (killed, cut): said as a run not finished, not as damage to remove
    assert any(w.endswith(NO_EXIT_RECORD) and "grpo-vr--s1" in w for w in res.warnings), res.warnings
    assert not any(w.endswith(TAIL_CUT) for w in res.warnings), res.warnings
    assert {r["seed"] for r in res.runs if r["arm"] == "grpo-vr"} == {0, 1}
    tab = res.table[(res.table["arm"] == "grpo-vr") & (res.table["metric"] == "eval/aime24/final_acc")]
    # seed 1 ran 400 steps but only its first ~30 survived: its evals at 0, 10, 20 join seed 0's
    assert tab.set_index("step")["n"].to_dict() == {0: 2, 10: 2, 20: 2}


def test_cov_variance_values(rendered):
    left, right = [ax for ax in rendered["cov_variance"].figure.axes if ax.get_visible()]
    np.testing.assert_allclose(_line(left, "$V_1$").get_ydata(), [corr("v1", b) for b in GRID])
    np.testing.assert_allclose(_line(left, "$V_2$").get_ydata(), [corr("v2", b) for b in GRID])
    np.testing.assert_allclose(_line(right, "BRPO").get_ydata(), [nvar("brpo", b) for b in GRID])
    np.testing.assert_allclose(_line(right, "GRPO").get_ydata(), [nvar("grpo", b) for b in GRID])


def test_tree_mask_is_the_algo_mask(rendered):
    from arctl.algo.tree import SummaryBranch, dense_tree_mask, pack_tree

    res = rendered["tree_mask"]
    img = res.figure.axes[0].images[0].get_array()
    tree = pack_tree(list(range(4)), list(range(24)), [SummaryBranch(c, [1, 1], [2, 2, 2]) for c in (6, 12, 18, 24)])
    np.testing.assert_array_equal(np.asarray(img) > 0.5, dense_tree_mask(tree.cut, tree.branch_start).numpy())
    # a summary branch cut at 6 sees the prompt (4) + 6 thinking tokens + its own causal part
    row = res.table.set_index("segment").loc["summary@6"]
    assert row["visible_keys"] == sum(4 + 6 + k for k in range(1, 6))


def test_mean_ci95_against_a_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 5))
    x[2, 1] = np.nan
    mean, half, n = mean_ci95(x, axis=0)
    for j in range(5):
        col = x[:, j][~np.isnan(x[:, j])]
        assert n[j] == len(col)
        assert mean[j] == pytest.approx(sum(col) / len(col))
        sd = (sum((v - col.mean()) ** 2 for v in col) / (len(col) - 1)) ** 0.5
        assert half[j] == pytest.approx(t975(len(col) - 1) * sd / len(col) ** 0.5)
    assert np.isnan(mean_ci95(np.array([[1.0], [np.nan]]))[1][0])


def test_per_seed_curves_are_each_run_s_own_numbers(workspace, tmp_path, monkeypatch):
    """A spec with ``per_seed: true`` (budget_methods) draws every seed's curve beside the mean and
    writes them to <name>.seeds.csv: a collapsed seed shows."""
    import pandas as pd

    from arctl.report import score_curve
    from arctl.report.data import read_report_runs
    from arctl.report.specs import load_spec

    spec = {**load_spec("figure", "score_curve"), "per_seed": True}
    data = read_report_runs(spec, metrics=score_curve.METRICS, workdir=workspace, cache_dir=tmp_path / "cache",
                            progress=False, processes=1, final_only=True)
    fig, table = score_curve.build(spec, data)
    ax = next(ax for ax in fig.axes if ax.get_title() == "AIME24")
    for seed in (0, 1):
        line = _line(ax, f"_GRPO seed {seed}")
        np.testing.assert_array_equal(line.get_xdata(), GRID)
        np.testing.assert_allclose(line.get_ydata(), [100 * acc("grpo", seed, "aime24", b, LAST_STEP) for b in GRID])
    assert not [t for t in fig.legends[0].get_texts() if "seed" in t.get_text()]  # the legend names arms only
    bands = [c for ax in fig.axes for c in ax.collections]  # two seeds: t = 12.7, bands far past [0, 100] unclipped
    assert bands and all(0 <= y <= 100 for c in bands for path in c.get_paths() for y in path.vertices[:, 1])
    seeds = table.attrs["seeds"]
    assert set(seeds[seeds["arm"] == "grpo"]["seed"]) == {0, 1}
    # a run whose config has no seed (NaN in the runs table) draws no seed line, and still counts in the mean
    data.history["seed"] = data.history["seed"].astype(float)
    data.history.loc[(data.history["arm"] == "grpo") & (data.history["seed"] == 1), "seed"] = np.nan
    _, unseeded = score_curve.build(spec, data)
    left = unseeded.attrs["seeds"]
    assert set(left[left["arm"] == "grpo"]["seed"]) == {0}
    pd.testing.assert_frame_equal(unseeded, table)
    plain = score_curve.build({**spec, "per_seed": False}, data)[0]
    assert not [line for ax in plain.axes for line in ax.lines if "seed" in line.get_label()]
    # through `arctl report`: a user's spec with per_seed writes the seeds beside the figure
    import yaml

    (tmp_path / "specs" / "reports").mkdir(parents=True)
    user = {k: v for k, v in spec.items() if not k.startswith("_")} | {"name": "seedy"}
    (tmp_path / "specs" / "reports" / "seedy.yaml").write_text(yaml.safe_dump(user))
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path / "specs"))
    res = render_figure("seedy", out_dir=tmp_path / "out", workdir=workspace, cache_dir=tmp_path / "cache",
                        progress=False, processes=1)
    written = pd.read_csv(tmp_path / "out" / "seedy.seeds.csv")
    assert tmp_path / "out" / "seedy.seeds.csv" in res.outputs
    row = written[(written["arm"] == "grpo") & (written["dataset"] == "aime24") & (written["seed"] == 1)
                  & (written["budget"] == GRID[0])]
    assert row["acc_pct"].tolist() == [pytest.approx(100 * acc("grpo", 1, "aime24", GRID[0], LAST_STEP))]


def test_a_training_curve_averages_the_same_runs_at_every_step():
    """Found by a review: the mean at each step was over whichever runs logged it, so a seed that stopped
    at step 60 (or a running one) moved the curve at 80, and one seed's extra evaluation at step 47 was
    drawn as the arm's mean. The curve keeps the steps every run logged; the rest is said in a warning
    and kept, with its n, in the table."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.training_curves import build
    from arctl.track.runs import Runs

    rows = [(f"r{s}", "grpo", step, 0.4 + 0.1 * s + 0.001 * step) for s in range(3) for step in (0, 20, 40, 60, 80, 100)
            if not (s == 0 and step > 60)] + [("r1", "grpo", 47, 0.9)]
    history = pd.DataFrame([{"run_id": r, "arm": a, "experiment": "e", "seed": int(r[1]), "step": st,
                             "metric": "eval/toy/anytime_acc", "value": v} for r, a, st, v in rows])
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    data = ReportData(Runs(history, pd.DataFrame({"run_id": ["r0", "r1", "r2"], "experiment": ["e"] * 3,
                                                   "arm": ["grpo"] * 3, "seed": [0, 1, 2]})), None, source="t")
    fig, table = build({"name": "t", "panels": [{"key": "eval/{dataset}/anytime_acc", "label": "a"}]}, data)
    line = _line(fig.axes[0], "GRPO")
    np.testing.assert_array_equal(line.get_xdata(), [0, 20, 40, 60])
    np.testing.assert_allclose(line.get_ydata(), [0.5 + 0.001 * s for s in (0, 20, 40, 60)])
    assert table.set_index("step")["n"].to_dict() == {0: 3, 20: 3, 40: 3, 47: 1, 60: 3, 80: 2, 100: 2}
    assert data.runs.warnings == ["GRPO: 3 step(s) (47, 80, 100) that not every run of the arm logged are left out of "
                                  "its mean curve (the run(s) without a value there: r0 (no value at steps 47, 80, 100), "
                                  "r2 (no value at step 47); the CSV has them with their n)"]
    plt.close(fig)


def test_cov_variance_draws_no_point_where_a_correlation_is_undefined():
    """The run reader now keeps a logged NaN: corr(V1, R) is NaN at the smallest budget (V1 constant). A
    point there would break the line; a budget undefined in every run is no point, and a figure with no
    defined value is the "no run logged" error, not an empty figure."""
    import math

    import pandas as pd
    import pytest

    from arctl.report.cov_variance import build, series_table
    from arctl.report.data import ReportData
    from arctl.report.errors import ReportError
    from arctl.track.runs.tidy import Runs

    def data(rows):
        h = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
        return ReportData(runs=Runs(history=h, runs=pd.DataFrame()), experiments=None, source="here")

    nan = math.nan
    table = series_table(data([("r0", 9, "eval/toy/corr_v1@8", nan), ("r1", 9, "eval/toy/corr_v1@8", nan),
                               ("r0", 9, "eval/toy/corr_v1@16", 0.5), ("r1", 9, "eval/toy/corr_v1@16", nan)]))
    assert table.to_dict("records") == [{"series": "corr_v1", "budget": 16, "value": 0.5, "n": 1}]
    with pytest.raises(ReportError, match="logged"):
        build({"hint": "x"}, data([("r0", 9, "eval/toy/corr_v1@8", nan)]))


def test_cov_variance_shows_the_model_before_rl_as_the_paper_does():
    """From a review: the paper's Fig. 2 evaluates the untrained R1-Distill-1.5B; the figure took each run's
    last values (the trained model, on the final grid). It takes each run's first evaluation now."""
    import pandas as pd

    from arctl.report.cov_variance import series_table
    from arctl.report.data import ReportData
    from arctl.track.runs.tidy import Runs

    rows = [("r0", 0, "eval/toy/corr_v1@8", 0.2), ("r0", 100, "eval/toy/corr_v1@8", 0.9),
            ("r0", 100, "eval/toy/corr_v1@4", 0.7), ("r1", 0, "eval/toy/corr_v1@8", 0.4)]
    h = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    table = series_table(ReportData(runs=Runs(history=h, runs=pd.DataFrame()), experiments=None, source="here"))
    got = {r["budget"]: round(r["value"], 9) for r in table.to_dict("records")}
    assert got == {8: 0.3}  # step 0 of both runs; a budget only the later (final grid) evaluation has: not drawn


def test_the_score_curve_is_the_mean_over_the_same_runs_at_every_budget():
    """From a review: each budget's mean was over the runs that logged it, so a run whose final evaluation lacked
    some budgets (or logged NaN there) made the curve jump by who was in it. Those budgets are left out of the
    curve, with a warning; the CSV keeps them with their n."""
    import math

    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.score_curve import build
    from arctl.track.runs.tidy import Runs

    rows = [(r, b, v) for r, vals in (("r0", {8: 0.2, 16: 0.4, 24: 0.5}), ("r1", {8: 0.4, 16: math.nan, 24: 0.7}))
            for b, v in vals.items()]
    h = pd.DataFrame([{"run_id": r, "arm": "ar-uniform", "seed": int(r[1]), "step": 9, "metric": f"eval/toy/acc@{b}",
                       "value": v} for r, b, v in rows])
    h["metric"] = h["metric"].astype("category")
    data = ReportData(runs=Runs(history=h, runs=pd.DataFrame()), experiments=None, source="here")
    fig, table = build({}, data)
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_label() == "AR-uniform"]
    assert list(line.get_xdata()) == [8, 24] and list(line.get_ydata()) == pytest.approx([30.0, 60.0])
    assert table.set_index("budget")["n"].to_dict() == {8: 2, 16: 1, 24: 2}
    assert any("1 budget(s) (16)" in w for w in data.runs.warnings)


def test_a_training_curve_of_an_arm_whose_every_seed_diverged_is_said_and_not_drawn():
    """From the imperfect-sweeps hunt: an arm whose every run logged NaN was in the legend with no line and no
    word (score_curve was fixed; training_curves kept it). Now: out of the legend and the footnote, one warning,
    kept with n = 0 in the table."""
    import math

    import matplotlib.pyplot as plt
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.report.training_curves import build
    from arctl.track.runs import Runs

    rows = [(f"g{s}", "grpo", step, 0.4 + 0.1 * s) for s in range(2) for step in (0, 20)]
    rows += [(f"l{s}", "ar-linear", step, math.nan) for s in range(2) for step in (0, 20)]
    history = pd.DataFrame([{"run_id": r, "arm": a, "experiment": "e", "seed": int(r[1]), "step": st,
                             "metric": "eval/toy/anytime_acc", "value": v} for r, a, st, v in rows])
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    runs = pd.DataFrame({"run_id": ["g0", "g1", "l0", "l1"], "experiment": ["e"] * 4,
                         "arm": ["grpo", "grpo", "ar-linear", "ar-linear"], "seed": [0, 1, 0, 1]})
    data = ReportData(Runs(history, runs), None, source="t")
    fig, table = build({"name": "t", "panels": [{"key": "eval/{dataset}/anytime_acc", "label": "a"}]}, data)
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert labels == ["GRPO"]
    assert "AR-linear" not in fig._supxlabel.get_text() and "GRPO" in fig._supxlabel.get_text()
    assert data.runs.warnings == ["AR-linear: no run has a finite value in any panel; it is left out of the figure "
                                  "(the CSV has it, n = 0)"]
    assert table[table["arm"] == "ar-linear"]["n"].tolist() == [0, 0]
    plt.close(fig)
