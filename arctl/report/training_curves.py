"""Training-curve figures (``ablation_dense``, ``ablation_decouple``, ``ablation_vr``,
``main_training``, ``r1_7b``, ``ctx_16k``): one panel per metric × benchmark, metric vs
``trainer/global_step``, arms as lines, seeds as mean ± 95% CI bands."""

from __future__ import annotations

import numpy as np

from arctl.report.data import ReportData
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label, dataset_label, dataset_order, order
from arctl.report.stats import mean_ci95
from arctl.report.style import add_footnote, add_legend, arm_colors, new_figure, runs_footnote
from arctl.track.metrics_schema import eval_datasets

DEFAULT_PANELS = [
    {"key": "eval/{dataset}/anytime_acc", "label": "Anytime accuracy (%)", "scale": 100},
    {"key": "eval/{dataset}/final_acc", "label": "Final accuracy (%)", "scale": 100},
    {"key": "eval/{dataset}/think_len", "label": "Avg. thinking length"},
]


def metric_globs(spec: dict) -> list[str]:
    return [p["key"].replace("{dataset}", "*") for p in spec.get("panels") or DEFAULT_PANELS]


def seed_curves(history, metric: str, arm: str):
    """(steps, mean, ci, n) of ``metric`` for ``arm`` across its runs (seeds)."""
    sub = history[(history["metric"] == metric) & (history["arm"] == arm)]
    if not len(sub):
        return None
    wide = sub.pivot_table(index="step", columns="run_id", values="value", aggfunc="last", observed=True)
    mean, ci, n = mean_ci95(wide.to_numpy(), axis=1)
    return wide.index.to_numpy(), mean, ci, n


def build(spec: dict, data: ReportData):
    import pandas as pd

    h = data.history
    panels = spec.get("panels") or DEFAULT_PANELS
    present = set(eval_datasets(h["metric"].cat.categories))
    datasets = [d for d in (spec.get("datasets") or []) if d in present] or dataset_order(present)
    if not datasets:
        raise ReportError(
            f"the runs in {data.source} logged none of {', '.join(p['key'] for p in panels)}; "
            "they must run evaluations during training (eval.datasets, trainer.test_freq)"
        )
    arms = order(h["arm"].astype(str).unique(), spec.get("arms"))
    colors = arm_colors(arms)
    fig, axes = new_figure(len(panels), len(datasets))
    rows = []
    for i, panel in enumerate(panels):
        for j, ds in enumerate(datasets):
            ax = axes[i][j]
            metric = panel["key"].format(dataset=ds)
            drawn = False
            for arm in arms:
                c = seed_curves(h, metric, arm)
                if c is None:
                    continue
                x, mean, ci, n = c
                scale = float(panel.get("scale", 1))
                mean, ci = mean * scale, ci * scale
                ax.plot(x, mean, lw=1.5, color=colors[arm], label=arm_label(arm))
                if np.isfinite(ci).any():
                    ax.fill_between(x, mean - np.nan_to_num(ci), mean + np.nan_to_num(ci), color=colors[arm],
                                    alpha=0.2, lw=0)
                rows += [(arm, metric, int(s), float(m), float(e), int(k)) for s, m, e, k in zip(x, mean, ci, n)]
                drawn = True
            if not drawn:
                ax.text(0.5, 0.5, f"{metric}\nnot logged", ha="center", va="center", transform=ax.transAxes,
                        fontsize=8, color="0.4")
            ax.set_title(f"{dataset_label(ds)}")
            ax.set_xlabel("step")
            ax.set_ylabel(panel.get("label", metric))
            ax.grid(alpha=0.3)
    if not rows:
        raise ReportError(f"the runs in {data.source} logged none of the metrics of this figure "
                          f"({', '.join(metric_globs(spec))})")
    handles, labels = [], []
    for ax in np.ravel(axes):
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labels:
                handles.append(hd)
                labels.append(lb)
    add_legend(fig, handles, labels)
    note = runs_footnote(data.used_runs(), arm_label, arms)
    add_footnote(fig, f"{spec['description']}. {note}" if spec.get("description") else note)
    table = pd.DataFrame(rows, columns=["arm", "metric", "step", "mean", "ci", "n"])
    return fig, table
