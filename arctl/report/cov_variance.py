"""Figure ``cov_variance`` (paper Fig. 2). Left: correlation coefficient of the baselines V1 and V2
with the return R(x, z, j_t) per thinking budget; right: normalised variance of the BRPO advantage
vs GRPO (and V1 alone) per budget. Values: the first logged ``eval/{ds}/corr_{v1,v2}@{b}`` and
``eval/{ds}/nvar/{brpo,grpo,v1}@{b}`` of every run that logged them (its first evaluation: the model RL
starts from, as the paper evaluates the untrained R1-Distill-1.5B), mean over runs and datasets. Not the
paper's 8 budgets {1000, ..., 8000}: the evaluation's own (``eval.budgets``, 4 at paper scale). Every experiment
is searched, so runs evaluated at other budgets (a 7B run's 16000) can meet: a series draws the budgets that as
many values as at its fullest budget average (:func:`arctl.report.data.full_support`, as the other curves), the
rest is said in a warning and kept in the CSV (series, budget, value, n) with its n. An eval-only run
(``verl.eval_only``) is left out, said in a warning: its one evaluation is a checkpoint's, not the model RL
starts from."""

from __future__ import annotations

import math

from arctl.report.cells import CONFIG_PREFIX, _plain, listed
from arctl.report.data import ReportData, first_values, full_support, left_out_note, spec_hint
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label
from arctl.report.style import add_footnote, new_figure, report_rc, runs_footnote
from arctl.track.metrics_schema import (
    CORR_KINDS,
    CORR_PREFIX,
    NVAR_PREFIX,
    corr_name,
    eval_key,
    nvar_name,
    parse_metric,
)

CORR_GLOB = eval_key(f"{CORR_PREFIX}v*", budget="*")
NVAR_GLOB = eval_key(f"{NVAR_PREFIX}*", budget="*")
METRICS = [eval_key(corr_name(kind), budget="*") for kind in CORR_KINDS] + [NVAR_GLOB]
SERIES = {
    corr_name("v1"): ("left", r"$V_1$", "#1f77b4"),
    corr_name("v2"): ("left", r"$V_2$", "#ff7f0e"),
    nvar_name("grpo"): ("right", "GRPO", "#7f7f7f"),
    nvar_name("v1"): ("right", r"$V_1$ only", "#1f77b4"),
    nvar_name("brpo"): ("right", "BRPO", "#d62728"),
}
EVAL_ONLY = CONFIG_PREFIX + "verl.eval_only"  # the runs table's column of a run that evaluated a checkpoint only


def eval_only_runs(data: ReportData) -> list[str]:
    """The runs of ``data`` that logged a diagnostic and trained nothing (config ``verl.eval_only``): their one
    evaluation is of ``verl.eval_checkpoint`` (a trained checkpoint at its step, e.g. 630), and their first
    evaluation is not the model before RL (from a hunt: one was averaged into that curve with the training runs'
    step 0)."""
    table, h = data.runs.runs, data.history
    if not len(table) or EVAL_ONLY not in table.columns or not len(h):
        return []
    logged = set(h.loc[[(p := parse_metric(m)) is not None and p.name in SERIES for m in h["metric"].astype(str)],
                       "run_id"].astype(str))
    return sorted(str(r) for r, v in zip(table["run_id"], table[EVAL_ONLY]) if _plain(v) is True and str(r) in logged)


def eval_only_warning(left_out: list[str]) -> str:
    return (f"left out {len(left_out)} eval-only run(s) (verl.eval_only): their evaluation is of verl.eval_checkpoint, "
            f"not the model before RL that this figure reads from each run's first evaluation: {listed(left_out)}")


def series_table(data: ReportData, eval_only: list[str] | None = None):
    """Mean per (series, budget) over runs and datasets of each run's first evaluation that logged the
    diagnostics (the model before RL; until 2026-12-03 the last values: the trained model, on the final
    grid); a budget only a later evaluation covers (the final grid's) is not drawn from it; eval-only runs
    (:func:`eval_only_runs`, or ``eval_only`` where the caller has them) are left out. Columns series, budget, value, n: the finite values it averages, one
    per run and dataset (a NaN, undefined there, is none)."""
    import pandas as pd

    rows, h = [], data.history
    eval_only = eval_only_runs(data) if eval_only is None else eval_only
    if len(h) and eval_only:
        h = h[~h["run_id"].astype(str).isin(eval_only)]
    if len(h):
        parsed = [parse_metric(m) for m in h["metric"].astype(str)]
        h = h.assign(parsed=parsed)[[p is not None and p.name in SERIES and p.budget is not None for p in parsed]]
        h = first_values(h[h["step"] == h.groupby("run_id")["step"].transform("min")])
        rows = [(p.name, p.dataset, p.budget, float(v)) for p, v in zip(h["parsed"], h["value"])
                if not math.isnan(v)]  # NaN: undefined there
    df = pd.DataFrame(rows, columns=["series", "dataset", "budget", "value"])
    return df.groupby(["series", "budget"], as_index=False)["value"].agg(value="mean", n="size")


def undefined_runs(data: ReportData, eval_only: list[str]) -> list[str]:
    """The runs (not ``eval_only``) that logged a diagnostic of :data:`SERIES`: where :func:`series_table` found no
    value, each of theirs is NaN (undefined: the return constant on every sample, as with accuracy 0 or 1)."""
    h = data.history
    if not len(h):
        return []
    h = h[~h["run_id"].astype(str).isin(eval_only)]
    return sorted({str(r) for r, m in zip(h["run_id"], h["metric"].astype(str))
                   if (p := parse_metric(m)) is not None and p.name in SERIES})


@report_rc()  # drawn with matplotlib's defaults and arctl's settings, not the user's
def build(spec: dict, data: ReportData):
    eval_only = eval_only_runs(data)
    table = series_table(data, eval_only)
    if not len(table):
        which, only = ("training run", f" ({eval_only_warning(eval_only)})") if eval_only else ("run", "")
        undefined = undefined_runs(data, eval_only)
        if undefined:  # logged, every value NaN (from a hunt: said "no run logged", with advice that would not help)
            raise ReportError(
                f"{len(undefined)} {which}(s) in {data.source} logged {CORR_GLOB} and {NVAR_GLOB}, but every value of "
                f"their first evaluation is undefined (NaN: the return is the same on every sample there, e.g. "
                f"accuracy 0 or 1; docs/metrics.md){only}: {listed(undefined)}; evaluate more problems "
                "(tiny.diag_problems; verl: eval.n_samples) or a model whose accuracy varies")
        raise ReportError(f"no {which} in {data.source} logged {CORR_GLOB} or {NVAR_GLOB}{only}; "
                          f"produce one with {spec_hint(spec, data.named)}")
    if eval_only:
        data.runs.warnings = [*data.runs.warnings, eval_only_warning(eval_only)]
    fig, axes = new_figure(1, 2, panel_w=4.2, panel_h=3.0)
    left, right = axes[0]
    partial: dict[tuple[int, ...], list[str]] = {}  # budgets left out -> the series that leave them out
    for name, (side, label, color) in SERIES.items():
        s = table[table["series"] == name].sort_values("budget")
        if not len(s):
            continue
        # the mean over the same runs at every budget: runs of several experiments (every one is searched) at
        # other budgets made the curve the mean of all to 8000, then one run's at 16000 (from a review)
        full = full_support(s["n"].to_numpy())
        if not full.all():
            partial.setdefault(tuple(int(b) for b in s["budget"].to_numpy()[~full]), []).append(name)
        s = s[full]
        ax = left if side == "left" else right
        ax.plot(s["budget"], s["value"], marker="o", ms=3, lw=1.5, color=color, label=label)
    left.set_title(r"corr($V$, $R(x, z, j_t)$)")
    left.set_xlabel("thinking budget (tokens)")
    left.set_ylabel("correlation coefficient")
    right.set_title("normalised variance")
    right.set_xlabel("thinking budget (tokens)")
    right.set_ylabel("variance / variance without baseline")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(frameon=False, fontsize=8)
    for budgets, names in partial.items():  # one line for the series a cause shares (runs at other budgets)
        data.runs.warnings = [*data.runs.warnings, left_out_note(
            ", ".join(names), "budget", budgets, of="", curve="its curve" if len(names) == 1 else "their curves",
            why="runs evaluated at other budgets, e.g. of other experiments, or a NaN where it is undefined")]
    add_footnote(fig, runs_footnote([r for r in data.used_runs() if str(r["run_id"]) not in eval_only], arm_label))
    return fig, table
