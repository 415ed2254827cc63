"""Training-curve figures (``ablation_dense``, ``ablation_decouple``, ``ablation_vr``,
``main_training``, ``r1_7b``, ``ctx_16k``): one panel per metric × benchmark (one per metric for a key without
``{dataset}``, such as ``train/loss``), metric vs ``trainer/global_step``, arms as lines, seeds as mean ± 95% CI
bands. The table behind it (``<name>.csv``):
arm, metric, unit, step, mean, ci (the 95% interval's half-width), n; mean and ci in the panel's unit, the metric
as logged × the panel's ``scale``, which ``unit`` names (:func:`panel_unit`: "percent", "tokens", ...)."""

from __future__ import annotations

import numpy as np

from arctl.compose.report_specs import DATASET, key_glob
from arctl.report.cells import listed as listed_items
from arctl.report.cells import unfinished
from arctl.report.data import (
    ReportData,
    eval_budgets_notes,
    evaluation_metric,
    evaluation_wait,
    full_support,
    left_out_note,
)
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label, dataset_label, dataset_order, order
from arctl.report.stats import mean_ci95
from arctl.report.style import add_footnote, add_legend, arm_colors, new_figure, report_rc, runs_footnote
from arctl.track.metrics_schema import (
    ACC_AT_FRAC_PREFIX,
    NAME_ACC,
    NAME_ANYTIME_ACC,
    NAME_CHANCE_ACC,
    NAME_CURVE_AUC,
    NAME_FINAL_ACC,
    NAME_GRID_ANYTIME_ACC,
    NAME_THINK_LEN,
    TRAIN_THINK_LEN_MEAN,
    eval_datasets,
    eval_key,
    parse_metric,
)

DEFAULT_PANELS = [
    {"key": eval_key(NAME_ANYTIME_ACC, DATASET), "label": "Anytime accuracy (%)", "scale": 100},
    {"key": eval_key(NAME_FINAL_ACC, DATASET), "label": "Final accuracy (%)", "scale": 100},
    {"key": eval_key(NAME_THINK_LEN, DATASET), "label": "Avg. thinking length"},
]


# the evaluation's accuracies, logged as fractions of 1 (docs/metrics.md)
ACCURACY_NAMES = (NAME_ACC, NAME_ANYTIME_ACC, NAME_GRID_ANYTIME_ACC, NAME_FINAL_ACC, NAME_CHANCE_ACC, NAME_CURVE_AUC)


def panel_unit(metric: str, scale: float) -> str:
    """The unit of a panel's numbers (its metric as logged × its ``scale``), as the CSV's ``unit`` column says it:
    an accuracy of the evaluation (a fraction of 1) × 100 is "percent", × 1 "fraction of 1"; a thinking length is
    "tokens"; any other metric is "as logged"; another scale is written after an "x" ("tokens x 0.001")."""
    p = parse_metric(metric)
    scale = float(scale)
    if p is not None and p.namespace == "eval" and (p.name in ACCURACY_NAMES or p.name.startswith(ACC_AT_FRAC_PREFIX)):
        if scale == 100:
            return "percent"
        base = "fraction of 1"
    elif metric == TRAIN_THINK_LEN_MEAN or (p is not None and p.namespace == "eval" and p.name == NAME_THINK_LEN):
        base = "tokens"
    else:
        base = "as logged"
    return base if scale == 1 else f"{base} x {scale:g}"


def per_dataset_panel(panel: dict) -> bool:
    """Whether a panel is drawn once per dataset column (its key has ``{dataset}``: ``eval/{dataset}/final_acc``),
    not once (``train/loss``)."""
    return DATASET in panel["key"]


def panel_metric(panel: dict, dataset: str | None) -> str:
    """The metric a panel draws in the column of ``dataset`` (None: a panel without ``{dataset}``)."""
    return panel["key"] if dataset is None else panel["key"].format(dataset=dataset)


def metric_globs(spec: dict) -> list[str]:
    return [key_glob(p["key"]) for p in spec.get("panels") or DEFAULT_PANELS]


def seed_curves(history, metric: str, arm: str):
    """(steps, mean, ci, n) of ``metric`` for ``arm`` across its runs (seeds)."""
    return all_seed_curves(history, [metric]).get((metric, arm))


def all_seed_curves(history, metrics) -> dict[tuple[str, str], tuple]:
    """(metric, arm) → (steps, mean, ci, n) across the arm's runs (seeds), for every metric of
    ``metrics``, from one pass over ``history``: a step × run matrix per (metric, arm)."""
    h = history[history["metric"].isin(list(metrics))]
    out = {}
    if not len(h):
        return out
    metric_code = h["metric"].cat.codes.to_numpy()
    arm_code = h["arm"].cat.codes.to_numpy()
    run_code = h["run_id"].cat.codes.to_numpy()
    step = h["step"].to_numpy()
    value = h["value"].to_numpy(dtype=float)
    order = np.lexsort((run_code, arm_code, metric_code))  # stable: logging order kept within a cell
    key = metric_code[order].astype(np.int64) * (int(arm_code.max()) + 1) + arm_code[order]
    bounds = np.flatnonzero(np.diff(key)) + 1
    metric_names = h["metric"].cat.categories
    arm_names = h["arm"].cat.categories
    for sel in np.split(order, bounds):
        steps, s_idx = np.unique(step[sel], return_inverse=True)
        runs, r_idx = np.unique(run_code[sel], return_inverse=True)
        mat = np.full((len(steps), len(runs)), np.nan)
        mat[s_idx, r_idx] = value[sel]  # one value per (step, run): the stitched history is unique
        mean, ci, n = mean_ci95(mat, axis=1)
        out[(str(metric_names[metric_code[sel[0]]]), str(arm_names[arm_code[sel[0]]]))] = (steps, mean, ci, n)
    return out


def unfinished_ends(table) -> dict[str, str]:
    """run_id -> how the run has not finished, as :func:`arctl.report.cells.unfinished` says it ("failed at step 59
    of 100", "running or killed at step 40 of 100"), of each run of the runs table ``table`` that has not."""
    out = {}
    for item in unfinished(table):
        run, _, end = item.partition(" ")
        out[run] = end[1:-1]  # "(...)"
    return out


def _steps(steps) -> str:
    steps = sorted(steps)
    return f"step{'s' if len(steps) > 1 else ''} {listed_items([str(s) for s in steps])}"


def runs_behind(history, metric: str, arm: str, left_out) -> dict[str, dict[str, set[int]]]:
    """The runs of ``arm`` behind the steps ``left_out`` of its mean curve of ``metric`` (:func:`full_support`):
    run_id -> {"absent": steps it logged no value at, "nan": steps it logged NaN (or an infinity) at}, of each run
    with a finite value at one of the curve's drawn steps (a run with none is in no point of the curve)."""
    cell = history[(history["metric"] == metric) & (history["arm"] == arm)]
    # finite as mean_ci95 counts a sample: an infinity is none (from a hunt: notna() let it pass, so a run that
    # logged one at a left-out step was named neither "absent" nor "nan" there, and the warning named no run)
    cell = cell.assign(_finite=np.isfinite(cell["value"].to_numpy(dtype=float)))
    left_out = {int(s) for s in left_out}
    drawn = set(cell.loc[cell["_finite"], "step"].astype(int)) - left_out
    out: dict[str, dict[str, set[int]]] = {}
    for run, rows in cell.groupby(cell["run_id"].astype(str), observed=True):
        ok = set(rows.loc[rows["_finite"], "step"].astype(int))
        if not ok & drawn:
            continue
        nan = set(rows.loc[~rows["_finite"], "step"].astype(int)) & left_out
        absent = left_out - ok - nan
        if absent or nan:
            out[run] = {"absent": absent, "nan": nan}
    return out


def behind_text(run: str, absent: set[int], nan: set[int], last: int | None, ends: dict[str, str],
                point: str = "evaluation", reached=None) -> str:
    """One run of :func:`runs_behind` as a left-out warning names it: "RUN (failed at step 59 of 100; last
    evaluation at step 40)" for a run that has not finished (``ends``: :func:`unfinished_ends`; ``last``: the last
    step it logged a metric of the figure at, said where it is not ``reached``, the last step of its history),
    "RUN (logged NaN or an infinity at step 60)", "RUN (no value at step 47)" for a step the others logged."""
    parts = []
    if run in ends:
        parts.append(ends[run])
        if last is not None and any(s > last for s in absent):
            if reached is None or reached != reached or int(reached) != last:  # (NaN: unknown)
                parts.append(f"last {point} at step {last}")
            absent = {s for s in absent if s <= last}
    if nan:
        parts.append(f"logged NaN or an infinity at {_steps(nan)}")
    if absent:
        parts.append(f"no value at {_steps(absent)}")
    return f"{run} ({'; '.join(parts)})"


def footnote_runs(used: list[dict], ends: dict[str, str]) -> list[dict]:
    """``used`` (:meth:`ReportData.used_runs`) with the runs of each (arm, experiment) group that have not finished
    said after its experiment, so that the footnote's "AR-base ×3" does not hide them: "AR-base ×3 (main-ar-base;
    seed 2: failed at step 59 of 100)"."""
    said: dict[tuple[str, str], list[str]] = {}
    for r in used:
        if (end := ends.get(str(r["run_id"]))) is not None:
            seed = r.get("seed")
            who = f"seed {int(seed)}" if isinstance(seed, int | float | np.number) and seed == seed else str(r["run_id"])
            said.setdefault((str(r["arm"]), str(r["experiment"])), []).append(f"{who}: {end}")
    return [{**r, "experiment": f"{key[1]}; {', '.join(said[key])}"} if (key := (str(r["arm"]), str(r["experiment"])))
            in said else r for r in used]


def unlogged_datasets_note(listed: list[str], present: set[str]) -> str | None:
    """The warning of the spec's ``datasets`` that no run read logged evaluations of, or None. Some of them
    logged: the others' columns are left out. None of them logged: the figure draws every dataset logged (runs
    at another scale evaluate other benchmarks: tiny's ``toy``, not the paper's ``aime24``), said only where a
    listed one looks like a logged one (from a hunt: ``datasets: [toyy]`` drew every dataset without a word)."""
    import difflib

    unlogged = [d for d in listed if d not in present]
    near = sorted({c for d in unlogged for c in difflib.get_close_matches(d, sorted(present), n=1, cutoff=0.75)})
    if not unlogged or not present or (len(unlogged) == len(listed) and not near):
        return None
    logged = ", ".join(dataset_order(present)) + (f": did you mean {' or '.join(map(repr, near))}?" if near else "")
    if len(unlogged) == len(listed):
        return (f"no run read logged the datasets of the spec ({', '.join(unlogged)}): the figure draws every "
                f"dataset they logged ({logged})")
    return f"dataset(s) {', '.join(unlogged)} of the spec: no run read logged them (they logged {logged}); left out of the figure"


def _wait_for_evaluation(data: ReportData, history, spec: dict, what: str) -> None:
    """ReportError saying to wait where the runs read (those of ``history``) logged none of the figure's evaluation
    metrics (``what`` names them) because every one of them is under way and evaluates later
    (:func:`arctl.report.data.evaluation_wait`), not that they must run evaluations; not where a panel's evaluation
    key is no metric a run logs (a typo)."""
    if data.workdir is None or not len(history) or "run_id" not in data.runs.runs.columns:
        return
    if not all(evaluation_metric(g) for g in metric_globs(spec) if g.startswith("eval/")):
        return
    table = data.runs.runs
    read = table[table["run_id"].astype(str).isin(set(history["run_id"].astype(str)))]
    if wait := evaluation_wait(data.workdir, read):
        raise ReportError(f"the runs in {data.source} logged none of {what} yet: {wait}; wait for them "
                          f"(`arctl status{data.named}`)")


@report_rc()  # drawn with matplotlib's defaults and arctl's settings, not the user's
def build(spec: dict, data: ReportData):
    import pandas as pd

    h = data.history
    panels = spec.get("panels") or DEFAULT_PANELS
    present = set(eval_datasets(h["metric"].cat.categories))
    listed = [str(d) for d in spec.get("datasets") or []]
    datasets = [d for d in listed if d in present] or dataset_order(present)
    # only a panel of a {dataset} key needs the evaluations' datasets (from a hunt: a figure of train/loss alone
    # was refused with "they must run evaluations" where the runs had logged it and no evaluation)
    per_dataset = any(per_dataset_panel(p) for p in panels)
    if per_dataset and not datasets:
        _wait_for_evaluation(data, h, spec, ", ".join(p["key"] for p in panels))
        raise ReportError(
            f"the runs in {data.source} logged none of {', '.join(p['key'] for p in panels)}; "
            "they must run evaluations during training (eval.datasets, trainer.test_freq)"
        )
    if per_dataset and (note := unlogged_datasets_note(listed, present)):
        data.runs.warnings = [*data.runs.warnings, note]
    arms = order(h["arm"].astype(str).unique(), spec.get("arms"))
    colors = arm_colors(arms)
    # a panel of a key without {dataset} (train/loss) is one panel, in the first column, and its rows are in the
    # CSV once (from a hunt: it was drawn and written once per dataset column)
    cells = [(i, j, panel, ds) for i, panel in enumerate(panels)
             for j, ds in (enumerate(datasets) if per_dataset_panel(panel) else [(0, None)])]
    fig, axes = new_figure(len(panels), len(datasets) if per_dataset else 1)
    for i, panel in enumerate(panels):
        if not per_dataset_panel(panel):
            for ax in axes[i][1:]:
                ax.set_axis_off()
    keys = [panel_metric(panel, ds) for _, _, panel, ds in cells]
    curves = all_seed_curves(h, keys)
    rows = []
    partial: dict[str, set[int]] = {}  # arm -> steps left out of its mean (not every one of its runs logged them)
    behind: dict[str, dict[str, dict[str, set[int]]]] = {}  # arm -> run -> its steps left out (runs_behind)
    evals: dict[str, bool] = {}  # run -> whether every metric it is behind a left-out step of is an evaluation's
    blank: dict[str, list[str]] = {}  # arm -> the panels where no run of it has a finite value (no line there)
    lined: set[str] = set()  # arms with a line in some panel
    for i, j, panel, ds in cells:
        ax = axes[i][j]
        metric = panel_metric(panel, ds)
        drawn = False
        for arm in arms:
            c = curves.get((metric, arm))
            if c is None:
                continue
            x, mean, ci, n = c
            scale = float(panel.get("scale", 1))
            mean, ci = mean * scale, ci * scale
            # the mean over the same runs at every point: a step only some of the arm's runs logged (one
            # still running or stopped early, an extra evaluation) would move the curve by who is in it
            full = full_support(n)
            unit = panel_unit(metric, scale)
            rows += [(arm, metric, unit, int(s), float(m), float(e), int(k)) for s, m, e, k in zip(x, mean, ci, n)]
            if not full.any():  # every run logged NaN (diverged): no line, so no legend entry (said below)
                where = panel.get("label", metric)
                blank.setdefault(arm, []).append(where if ds is None else f"{where}, {dataset_label(ds)}")
                continue
            lined.add(arm)
            if not full.all():
                partial.setdefault(arm, set()).update(int(s) for s in x[~full])
                for run, steps in runs_behind(h, metric, arm, x[~full]).items():
                    had = behind.setdefault(arm, {}).setdefault(run, {"absent": set(), "nan": set()})
                    had["absent"] |= steps["absent"]
                    had["nan"] |= steps["nan"]
                    p = parse_metric(metric)
                    evals[run] = evals.get(run, True) and p is not None and p.namespace == "eval"
            ax.plot(x[full], mean[full], lw=1.5, color=colors[arm], label=arm_label(arm))
            if np.isfinite(ci[full]).any():
                ax.fill_between(x[full], (mean - np.nan_to_num(ci))[full], (mean + np.nan_to_num(ci))[full],
                                color=colors[arm], alpha=0.2, lw=0)
            drawn = True
        if not drawn:
            ax.text(0.5, 0.5, f"{metric}\nnot logged", ha="center", va="center", transform=ax.transAxes,
                    fontsize=8, color="0.4")
        ax.set_title(dataset_label(ds) if ds is not None else metric)
        ax.set_xlabel("step")
        ax.set_ylabel(panel.get("label", metric))
        ax.grid(alpha=0.3)
    if not rows:
        _wait_for_evaluation(data, h, spec, ", ".join(metric_globs(spec)))
        raise ReportError(f"the runs in {data.source} logged none of the metrics of this figure "
                          f"({', '.join(metric_globs(spec))})")
    # each run behind a left-out step named, with how far it got (from a hunt: "AR-base: 3 step(s) (60, 80, 100)
    # ... left out" while seed 2 had failed at step 59, and nothing said so)
    ends = unfinished_ends(data.runs.runs)
    read = data.runs.runs
    reached = dict(zip(read["run_id"].astype(str), read["last_step"], strict=True)) \
        if behind and "last_step" in read.columns else {}
    figure_rows = h[h["metric"].isin(keys)] if behind else h  # a run's last point: its last of the figure's metrics
    for arm, steps in partial.items():
        named = []
        for run, had in sorted(behind.get(arm, {}).items()):
            mine = figure_rows.loc[figure_rows["run_id"].astype(str) == run, "step"]
            last = int(mine.max()) if len(mine) else None
            named.append(behind_text(run, had["absent"], had["nan"], last, ends,
                                     "evaluation" if evals.get(run) else "point", reached.get(run)))
        why = (f"the run(s) without a value there: {listed_items(named)}" if named
               else "a run still running or stopped early, or a NaN a run logged")
        data.runs.warnings = [*data.runs.warnings, left_out_note(
            arm_label(arm), "step", steps, of=" of the arm", curve="its mean curve", why=why)]
    # an arm with no line in a panel (from a hunt: an arm whose every seed diverged was in the legend with no line
    # and no word, as score_curve's was): said once, and out of the legend and the footnote's runs where it has none
    for arm, where in blank.items():
        data.runs.warnings = [*data.runs.warnings, f"{arm_label(arm)}: no run has a finite value in "
                              + ("; ".join(where) + " (no line there)" if arm in lined else
                                 "any panel; it is left out of the figure (the CSV has it, n = 0)")]
    # arms drawn side by side on an eval summary of their runs' eval.budgets (anytime_acc, final_acc) or eval.grid:
    # said where those differ
    data.runs.warnings = [*data.runs.warnings, *eval_budgets_notes(data, keys, arms)]
    handles, labels = [], []
    for ax in np.ravel(axes):
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labels:
                handles.append(hd)
                labels.append(lb)
    add_legend(fig, handles, labels)
    shown = [a for a in arms if a in lined]
    note = runs_footnote(footnote_runs([r for r in data.used_runs() if str(r["arm"]) in lined], ends), arm_label,
                         shown)
    add_footnote(fig, f"{spec['description']}. {note}" if spec.get("description") else note)
    # mean and ci in the panel's unit (its scale's: percent for the accuracies of the paper's panels), said per row
    table = pd.DataFrame(rows, columns=["arm", "metric", "unit", "step", "mean", "ci", "n"])
    return fig, table
