"""Per-method summary of the baselines sweep (docs/evidence/baselines.md) from each completed run's
metrics.jsonl (its last row is the final evaluation): mean ± 95% Student-t CI over seeds, paired
differences (same seed) to AR-uniform, and forced minus plain evaluation of the same model.

    python docs/evidence/baselines/summarize.py WORKSPACE summary.json > summary.md
"""
import glob
import json
import os
import sys

import numpy as np

from arctl.report.stats import t975

ws = sys.argv[1]
ARMS = ["ar-uniform", "grpo", "thinkprune", "l1-exact", "l1-max", "elastic"]
runs = {}
for d in sorted(glob.glob(f"{ws}/runs/*")):
    st = json.load(open(f"{d}/status.json"))
    cfg_arm = json.load(open(f"{d}/status.json")).get("arm") or os.path.basename(d).split("_")[1]
    seed = int(os.path.basename(d).split("_")[2][1:])
    if st["state"] != "completed":
        continue
    rows = [json.loads(line) for line in open(f"{d}/metrics.jsonl")]
    runs[(cfg_arm, seed)] = rows[-1]

def ci(x):
    x = np.asarray(x, float)
    n = len(x)
    return x.mean(), (t975(n - 1) * x.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")), n

keys = []
for ds in ("toy", "toy-forced"):
    keys += [(f"{ds} acc@{b}", f"eval/{ds}/acc@{b}") for b in (8, 16, 24, 32, 48, 64)]
    keys += [(f"{ds} {n}", f"eval/{ds}/{n}") for n in ("grid_anytime_acc", "curve_auc", "acc_at_frac/25", "acc_at_frac/50", "final_acc", "think_len")]
out = {"arms": {}, "vs_ar_uniform": {}, "vs_grpo": {}, "forced_minus_plain": {}}
for arm in ARMS:
    seeds = sorted(s for a, s in runs if a == arm)
    out["arms"][arm] = {"seeds": seeds}
    for label, k in keys:
        vals = [runs[(arm, s)].get(k) for s in seeds]
        if vals and all(v is not None for v in vals):
            m, c, n = ci(vals)
            out["arms"][arm][label] = [round(m, 4), round(c, 4), n]
    for ref in ("ar-uniform", "grpo"):
        if arm == ref:
            continue
        common = sorted(set(seeds) & {s for a, s in runs if a == ref})
        res = {}
        for label, k in keys:
            d = [runs[(arm, s)].get(k, np.nan) - runs[(ref, s)].get(k, np.nan) for s in common]
            if d and not np.isnan(d).any():
                m, c, n = ci(d)
                res[label] = [round(m, 4), round(c, 4), n]
        out["vs_" + ref.replace("-", "_")][arm] = res
    res = {}
    for n_ in ("grid_anytime_acc", "curve_auc", "final_acc"):
        d = [runs[(arm, s)][f"eval/toy-forced/{n_}"] - runs[(arm, s)][f"eval/toy/{n_}"] for s in seeds]
        if d:
            m, c, n = ci(d)
            res[n_] = [round(m, 4), round(c, 4), n]
    out["forced_minus_plain"][arm] = res
json.dump(out, open(sys.argv[2], "w"), indent=1)

s = out
LAB = {"ar-uniform": "AR-uniform", "grpo": "GRPO", "thinkprune": "ThinkPrune", "l1-exact": "L1-Exact", "l1-max": "L1-Max", "elastic": "Elastic"}
def table(ds, cols, scale=100, fmt="{:.1f} ± {:.1f}"):
    head = "| method | " + " | ".join(c for c, _ in cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    best = {}
    for c, k in cols:
        vals = {a: s["arms"][a].get(f"{ds} {k}", [None])[0] for a in ARMS}
        vals = {a: v for a, v in vals.items() if v is not None}
        if vals and k != "think_len":
            best[c] = max(vals, key=vals.get)
    rows = ""
    for a in ARMS:
        cells = []
        for c, k in cols:
            v = s["arms"][a].get(f"{ds} {k}")
            if v is None:
                cells.append("–")
                continue
            sc = 1 if k == "think_len" else scale
            t = fmt.format(v[0] * sc, v[1] * sc)
            cells.append(f"**{t}**" if best.get(c) == a else t)
        rows += f"| {LAB[a]} (n={len(s['arms'][a]['seeds'])}) | " + " | ".join(cells) + " |\n"
    return head + rows
cols = [("acc@8", "acc@8"), ("acc@16", "acc@16"), ("acc@24", "acc@24"), ("acc@32", "acc@32"), ("acc@48", "acc@48"), ("acc@64", "acc@64"),
        ("curve AUC", "curve_auc"), ("acc at b_m/4", "acc_at_frac/25"), ("acc at b_m/2", "acc_at_frac/50"), ("anytime (grid)", "grid_anytime_acc"), ("think len", "think_len")]
print("### Without budget forcing (`eval/toy/`)\n")
print(table("toy", cols))
print("### With s1 budget forcing, 2 cues (`eval/toy-forced/`)\n")
print(table("toy-forced", cols))
dcols = ["toy acc@8", "toy acc@16", "toy acc@32", "toy acc@48", "toy acc@64", "toy curve_auc", "toy grid_anytime_acc"]
for ref, key in (("AR-uniform", "vs_ar_uniform"), ("GRPO", "vs_grpo")):
    print(f"\n### Paired differences to {ref} (same seed; mean ± 95% CI, percentage points)\n")
    print("| method | " + " | ".join(c.split(" ", 1)[1] for c in dcols) + " |\n|---|" + "---|" * len(dcols))
    for a in ARMS:
        if a in s[key]:
            d = s[key][a]
            print(f"| {LAB[a]} | " + " | ".join((f"{d[c][0] * 100:+.1f} ± {d[c][1] * 100:.1f}" if c in d else "–") for c in dcols) + " |")
print("\n### Budget forcing minus plain evaluation (same model and seed; percentage points)\n")
print("| method | anytime (grid) | curve AUC | final acc |\n|---|---|---|---|")
for a in ARMS:
    d = s["forced_minus_plain"].get(a, {})
    print(f"| {LAB[a]} | " + " | ".join((f"{d[c][0] * 100:+.1f} ± {d[c][1] * 100:.1f}" if c in d else "–") for c in ("grid_anytime_acc", "curve_auc", "final_acc")) + " |")
