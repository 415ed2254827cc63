"""Per-method summary of the baselines sweep (docs/evidence/baselines.md), read with arctl's own reader
from a workspace or an export (its W&B files): one run per cell as `arctl report --sweep baselines`
reads them, finished runs only, each run's final evaluation. Mean ± 95% Student-t interval over
seeds; paired differences (same seed) to AR-uniform and to GRPO with their p-value and the seeds a
paired t-test needs for 80% power at the observed mean and sd; budget forcing minus the plain
evaluation of the same model. Budgets are fractions of the largest evaluation budget b_m.

    python docs/evidence/baselines/summarize.py WORKSPACE_OR_EXPORT summary.json > summary.md
"""

import json
import math
import sys

import numpy as np

from arctl.compose.sweep import load_sweep
from arctl.report.claims import seeds_needed
from arctl.report.cells import cell_composer, one_run_per_cell
from arctl.report.specs import arm_label, load_spec
from arctl.report.stats import holm, seeds_for_power, t975, t_cdf
from arctl.track.metrics_schema import NAME_ACC, parse_metric
from arctl.track.runs import load_runs

SWEEP = "baselines"
FRACTIONS = (0.125, 0.25, 0.375, 0.5, 0.75, 1.0)
SUMMARY = ("grid_anytime_acc", "curve_auc", "final_acc", "think_len")
DATASETS = ("toy", "toy-forced")

ws, out_json = sys.argv[1], sys.argv[2]
arms = list(load_spec("figure", "budget_methods")["arms"])
runs = load_runs(ws, experiments=load_sweep(SWEEP).experiments, metrics=["eval/*"], progress=False, last_only=True)
one_run_per_cell(runs, compose=cell_composer([SWEEP]), source=ws)
finished = {str(r["run_id"]) for r in runs.runs.to_dict("records") if str(r.get("state")) == "finished"}
h = runs.history[runs.history["run_id"].astype(str).isin(finished)]
final: dict[tuple[str, int], dict[str, float]] = {}
for (arm, seed), g in h.groupby(["arm", "seed"], observed=True):
    final[(str(arm), int(seed))] = dict(zip(g["metric"].astype(str), g["value"].astype(float)))
budgets = sorted({p.budget for m in h["metric"].astype(str).unique() if (p := parse_metric(m)) and p.name == NAME_ACC and p.budget})
b_m = max(budgets)
shown = [min(budgets, key=lambda b: abs(b - f * b_m)) for f in FRACTIONS]
keys = [(f"{ds} acc@{b}", f"eval/{ds}/acc@{b}") for ds in DATASETS for b in shown]
keys += [(f"{ds} {n}", f"eval/{ds}/{n}") for ds in DATASETS for n in SUMMARY]


def stats(x):
    """mean, half-width of the 95% t-interval, n, p of the t-test against 0, seeds for 80% power."""
    x = np.asarray(x, float)
    n = len(x)
    if n < 2:
        return [round(float(x.mean()), 6), None, n, None, None]
    sd = float(x.std(ddof=1))
    half = t975(n - 1) * sd / math.sqrt(n)
    p = 2 * (1 - t_cdf(abs(x.mean()) / (sd / math.sqrt(n)), n - 1)) if sd > 0 else None
    # an sd from one degree of freedom is uncertain by a factor ~0.3-16 (80%): no seed count from it
    need = seeds_for_power(float(x.mean()) / sd) if sd > 0 and n >= 3 else None
    # p to 3 significant digits (not 4 decimals: a p of 2.4e-5 rounded to 0 made Holm's 5 x p 0 too)
    return [round(float(x.mean()), 6), round(half, 6), n, None if p is None else float(f"{p:.3g}"), need]


seeds_of = {a: sorted(s for b, s in final if b == a) for a in arms}
anytime_diffs: dict[tuple[str, str], np.ndarray] = {}  # (reference, method) -> paired anytime differences
out = {"b_m": b_m, "budgets_shown": shown, "arms": {}, "vs_ar_uniform": {}, "vs_grpo": {}, "forced_minus_plain": {},
       "runs": sorted(finished)}
for arm in arms:
    out["arms"][arm] = {"seeds": seeds_of[arm]}
    for label, k in keys:
        vals = [final[(arm, s)].get(k) for s in seeds_of[arm]]
        if vals and all(v is not None for v in vals):
            out["arms"][arm][label] = stats(vals)
    for ref in ("ar-uniform", "grpo"):
        common = sorted(set(seeds_of[arm]) & set(seeds_of[ref]))
        if arm == ref or not common:
            continue
        res = {}
        for label, k in keys:
            d = [final[(arm, s)].get(k, np.nan) - final[(ref, s)].get(k, np.nan) for s in common]
            if not np.isnan(d).any():
                res[label] = stats(d)
                if label == "toy grid_anytime_acc":
                    anytime_diffs[(ref.replace("-", "_"), arm)] = np.asarray(d, float)
        out["vs_" + ref.replace("-", "_")][arm] = res
    res = {}
    for n_ in ("grid_anytime_acc", "curve_auc", "final_acc"):
        pairs = [(final[(arm, s)].get(f"eval/toy-forced/{n_}"), final[(arm, s)].get(f"eval/toy/{n_}")) for s in seeds_of[arm]]
        if pairs and all(a is not None and b is not None for a, b in pairs):
            res[n_] = stats([a - b for a, b in pairs])
    out["forced_minus_plain"][arm] = res
# Holm over the methods compared with one reference, on the anytime accuracy (the page's one test per method)
for ref in ("ar_uniform", "grpo"):
    tests = {a: d["toy grid_anytime_acc"][3] for a, d in out["vs_" + ref].items()
             if d.get("toy grid_anytime_acc") and d["toy grid_anytime_acc"][3] is not None}
    out["holm_anytime_vs_" + ref] = {a: float(f"{h:.3g}") for a, h in zip(tests, holm(list(tests.values())))}
    # seeds for 80% power at Holm's level for the first of the family's tests (alpha / k), as the claims report
    # counts them (arctl.report.claims.seeds_needed); before 2026-12-04 this page used alpha = 0.05
    out["seeds_holm_anytime_vs_" + ref] = {
        a: seeds_needed(float(d.mean()), float(d.std(ddof=1)), len(tests)) if len(d) >= 3 else None
        for (r, a), d in anytime_diffs.items() if r == ref and a in tests}
json.dump(out, open(out_json, "w"), indent=1)


def cell(v, scale=100.0, sign=False):
    if v is None:
        return "–"
    m, half = v[0] * scale, v[1]
    text = f"{m:+.1f}" if sign else f"{m:.1f}"
    return text + (f" ± {half * scale:.1f}" if half is not None else "")


def method_table(ds):
    cols = [(f"acc@{b}", f"acc@{b}") for b in shown] + [("curve AUC", "curve_auc"), ("anytime (grid)", "grid_anytime_acc"),
                                                        ("think len", "think_len")]
    lines = ["| method (seeds) | " + " | ".join(c for c, _ in cols) + " |", "|---|" + "---|" * len(cols)]
    for a in arms:
        s = out["arms"][a]
        lines.append(f"| {arm_label(a)} ({len(s['seeds'])}) | " + " | ".join(
            cell(s.get(f"{ds} {k}"), 1 if k == "think_len" else 100) for _, k in cols) + " |")
    return "\n".join(lines)


def p_text(p):
    return f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def diff_table(key, ref):
    cols = [f"toy acc@{b}" for b in shown] + ["toy curve_auc", "toy grid_anytime_acc"]
    lines = ["| method | " + " | ".join(c.split(" ", 1)[1] for c in cols)
             + f" | seeds for 80% power (anytime, at Holm's level for {len(out['holm_anytime_' + key])} methods; p, and Holm's p) |",
             "|---|" + "---|" * (len(cols) + 1)]
    for a, d in out[key].items():
        any_ = d.get("toy grid_anytime_acc")
        holm_need = out["seeds_holm_anytime_" + key].get(a)
        need = "–" if not any_ else "needs ≥ 3 seeds to say" if any_[2] < 3 else f"{holm_need}" if holm_need else "> 1000"
        adjusted = out["holm_anytime_" + key].get(a)
        p = f" (p {p_text(any_[3])}, Holm {p_text(adjusted)})" if any_ and any_[3] is not None else ""
        lines.append(f"| {arm_label(a)} − {ref} | " + " | ".join(cell(d.get(c), sign=True) for c in cols) + f" | {need}{p} |")
    return "\n".join(lines)


print(f"Largest evaluation budget b_m = {b_m} thinking tokens; columns at {', '.join(map(str, shown))} "
      f"(b_m x {', '.join(map(str, FRACTIONS))}). Percentages; mean ± 95% t-interval over seeds.\n")
print("### Without budget forcing (`eval/toy/`)\n")
print(method_table("toy"))
print("\n### With s1 budget forcing, 2 cues (`eval/toy-forced/`)\n")
print(method_table("toy-forced"))
for ref, key in (("AR-uniform", "vs_ar_uniform"), ("GRPO", "vs_grpo")):
    print(f"\n### Paired differences to {ref} (same seed; percentage points)\n")
    print(diff_table(key, ref))
print("\n### Budget forcing minus plain evaluation (same model and seed; percentage points)\n")
print("| method | anytime (grid) | curve AUC | final acc |\n|---|---|---|---|")
for a in arms:
    d = out["forced_minus_plain"].get(a, {})
    print(f"| {arm_label(a)} | " + " | ".join(cell(d.get(c), sign=True) for c in ("grid_anytime_acc", "curve_auc", "final_acc")) + " |")
