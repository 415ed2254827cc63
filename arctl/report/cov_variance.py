"""Figure ``cov_variance`` (paper Fig. 2). Left: correlation coefficient of the baselines V1 and V2
with the return R(x, z, j_t) per thinking budget; right: normalised variance of the BRPO advantage
vs GRPO (and V1 alone) per budget. Values: the last logged ``eval/{ds}/corr_{v1,v2}@{b}`` and
``eval/{ds}/nvar/{brpo,grpo,v1}@{b}`` of every run that logged them, mean over runs and datasets."""

from __future__ import annotations

import math

from arctl.report.data import ReportData, final_values
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label
from arctl.report.style import add_footnote, new_figure, runs_footnote
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


def series_table(data: ReportData):
    import pandas as pd

    fin = final_values(data.history)
    rows = []
    for m, v in zip(fin["metric"].astype(str), fin["value"]):
        p = parse_metric(m)
        if p is not None and p.name in SERIES and p.budget is not None and not math.isnan(v):  # NaN: undefined there
            rows.append((p.name, p.dataset, p.budget, float(v)))
    df = pd.DataFrame(rows, columns=["series", "dataset", "budget", "value"])
    return df.groupby(["series", "budget"], as_index=False)["value"].mean()


def build(spec: dict, data: ReportData):
    table = series_table(data)
    if not len(table):
        raise ReportError(f"no run in {data.source} logged {CORR_GLOB} or {NVAR_GLOB}; "
                          f"produce one with {spec.get('hint')}")
    fig, axes = new_figure(1, 2, panel_w=4.2, panel_h=3.0)
    left, right = axes[0]
    for name, (side, label, color) in SERIES.items():
        s = table[table["series"] == name].sort_values("budget")
        if not len(s):
            continue
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
    add_footnote(fig, runs_footnote(data.used_runs(), arm_label))
    return fig, table
