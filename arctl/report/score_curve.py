"""Figure ``score_curve`` (paper Fig. 3): accuracy vs thinking budget per benchmark, one line per
arm, from each run's final evaluation ``eval/{dataset}/acc@{budget}``; mean ± 95% CI over seeds. A
spec with ``per_seed: true`` also draws each seed's curve, thin, in its arm's colour (a collapsed
seed shows), and writes them to ``<name>.seeds.csv``. The tables behind it (written as ``<name>.csv`` and
``<name>.seeds.csv``) hold accuracy in percent, as the figure draws it, in columns that say so
(:data:`MEAN`, :data:`CI`, :data:`VALUE`; before 2026-12-04: fractions of 1 in ``mean``, ``ci``, ``value``)."""

from __future__ import annotations

import numpy as np

from arctl.report.data import ReportData, final_values, full_support, left_out_note
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label, dataset_label, dataset_order, order
from arctl.report.stats import mean_ci95
from arctl.report.style import add_footnote, add_legend, arm_colors, new_figure, report_rc, runs_footnote
from arctl.track.metrics_schema import NAME_ACC, eval_key, parse_metric

METRICS = [eval_key(NAME_ACC, budget="*")]
MEAN, CI, VALUE = "acc_mean_pct", "acc_ci95_pct", "acc_pct"  # percent: the mean, the 95% interval's half-width, a seed's


def _final_accuracies(data: ReportData):
    """The final evaluation's accuracies, one row per (run, dataset, budget): columns arm, seed,
    dataset, budget, value."""
    import pandas as pd

    fin = final_values(data.history)
    rows = []
    for m in fin["metric"].cat.categories if len(fin) else []:
        p = parse_metric(m)
        if p is not None and p.name == NAME_ACC and p.budget is not None and p.dataset:
            rows.append((m, p.dataset, int(p.budget)))
    meta = pd.DataFrame(rows, columns=["metric", "dataset", "budget"])
    if not len(meta):
        return pd.DataFrame(columns=["arm", "seed", "dataset", "budget", "value"])
    fin = fin.assign(metric=fin["metric"].astype(str), arm=fin["arm"].astype(str)).merge(meta, on="metric")
    return fin[["arm", "seed", "dataset", "budget", "value"]]


def curve_table(acc):
    """Long table (arm, dataset, budget, :data:`MEAN`, :data:`CI`, n) of the final-evaluation accuracies
    ``acc`` (:func:`_final_accuracies`, fractions of 1), in percent."""
    import pandas as pd

    out = []
    for (arm, ds, b), g in acc.groupby(["arm", "dataset", "budget"], observed=True):
        mean, ci, n = mean_ci95(g["value"].to_numpy())
        out.append((str(arm), ds, int(b), 100 * float(mean), 100 * float(ci), int(n)))
    return pd.DataFrame(out, columns=["arm", "dataset", "budget", MEAN, CI, "n"])


def seed_table(acc):
    """Long table (arm, dataset, budget, seed, :data:`VALUE`) of each run's final-evaluation accuracies ``acc``
    (:func:`_final_accuracies`), in percent (a run without a seed in its config has no seed line: it still counts in
    the mean)."""
    import pandas as pd

    seed = pd.to_numeric(acc["seed"], errors="coerce")
    acc = acc[seed.notna() & (seed >= 0)]  # the history says -1 for a run without a seed (arctl.track.runs.tidy)
    acc = acc.assign(seed=pd.to_numeric(acc["seed"]).astype(int), **{VALUE: 100 * acc["value"].astype(float)})
    return acc[["arm", "dataset", "budget", "seed", VALUE]].sort_values(
        ["arm", "dataset", "seed", "budget"], kind="stable").reset_index(drop=True)


@report_rc()  # drawn with matplotlib's defaults and arctl's settings, not the user's
def build(spec: dict, data: ReportData):
    acc = _final_accuracies(data)  # parsed once for both tables
    table = curve_table(acc)
    seeds = seed_table(acc) if spec.get("per_seed") else None
    if not len(table):
        raise ReportError(
            f"the runs in {data.source} logged no final evaluation {eval_key(NAME_ACC, '<dataset>', '<budget>')}; "
            "they must finish training (the final evaluation runs at the last step)"
        )
    datasets = dataset_order(table["dataset"].unique())
    arms = order(table["arm"].unique(), spec.get("arms"))
    colors = arm_colors(arms)
    ncols = min(len(datasets), 3)
    nrows = -(-len(datasets) // ncols)
    fig, axes = new_figure(nrows, ncols)
    max_budget = int(table["budget"].max())
    partial: dict[str, set[int]] = {}  # arm -> budgets left out of its curve (not every one of its runs logged them)
    blank: dict[str, list[str]] = {}  # arm -> the panels where no run of it has a finite value (no line there)
    for i, ds in enumerate(datasets):
        ax = axes[i // ncols][i % ncols]
        sub = table[table["dataset"] == ds]
        for arm in arms:
            a = sub[sub["arm"] == arm].sort_values("budget")
            if not len(a):
                continue
            # the mean over the same runs at every budget (as training_curves): a budget only some runs logged
            # (a NaN, an evaluation without the grid) made the curve jagged by who was in it (from a review)
            full = full_support(a["n"].to_numpy())
            if not full.any():  # every run's value there NaN (a diverged seed, each of them): nothing to draw
                blank.setdefault(arm, []).append(ds)
                continue
            if not full.all():
                partial.setdefault(arm, set()).update(int(b) for b in a["budget"].to_numpy()[~full])
            a = a[full]
            x, y, ci = a["budget"].to_numpy(), a[MEAN].to_numpy(), a[CI].to_numpy()
            ax.plot(x, y, marker="o", ms=3, lw=1.5, color=colors[arm], label=arm_label(arm))
            if seeds is not None:  # each seed thin beside the mean ("_": not in the legend)
                for seed, g in seeds[(seeds["arm"] == arm) & (seeds["dataset"] == ds)].groupby("seed"):
                    ax.plot(g["budget"], g[VALUE], lw=0.6, alpha=0.45, color=colors[arm],
                            label=f"_{arm_label(arm)} seed {seed}")
            if np.isfinite(ci).any():
                # an accuracy lies in [0, 100]: a t-band over few seeds is drawn only there
                lo, hi = np.clip(y - np.nan_to_num(ci), 0, 100), np.clip(y + np.nan_to_num(ci), 0, 100)
                ax.fill_between(x, lo, hi, color=colors[arm], alpha=0.2, lw=0)
        ax.axvline(max_budget, color="0.4", ls="--", lw=1)
        ax.annotate(f"max budget {max_budget}", xy=(max_budget, 0.02), xycoords=("data", "axes fraction"),
                    ha="right", va="bottom", fontsize=7, color="0.3", rotation=90)
        ax.set_title(dataset_label(ds))
        ax.set_xlabel("thinking budget (tokens)")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
    for j in range(len(datasets), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    for arm, budgets in partial.items():
        data.runs.warnings = [*data.runs.warnings, left_out_note(
            arm_label(arm), "budget", budgets, of=" of the arm", curve="its curve",
            why="a NaN a run logged, or an evaluation without them")]
    # an arm with no line in any panel: out of the legend and of the footnote's runs, said once (from a hunt: an
    # arm whose every seed diverged was in both, with no line and no word)
    drawn = [a for a in arms if len(blank.get(a, [])) < len(set(table.loc[table["arm"] == a, "dataset"]))]
    for arm, panels in blank.items():
        where = "" if arm not in drawn else f" of {', '.join(dataset_label(d) for d in panels)} (no line there)"
        data.runs.warnings = [*data.runs.warnings, f"{arm_label(arm)}: no run has a finite final evaluation{where}"
                              + ("" if arm in drawn else "; it is left out of the figure (the CSV has it, n = 0)")]
    handles, labels = [], []
    for ax in np.ravel(axes):  # a panel may lack an arm another has
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labels:
                handles.append(hd)
                labels.append(lb)
    add_legend(fig, handles, labels)
    add_footnote(fig, runs_footnote([r for r in data.used_runs() if str(r["arm"]) in drawn], arm_label, drawn))
    if seeds is not None:
        table.attrs["seeds"] = seeds  # written beside the figure as <name>.seeds.csv
    return fig, table
