"""How much of a claim's paired spread is evaluation noise (tiny backend; issue #31, "final-accuracy
tests with less evaluation noise").

    python benchmarks/eval_noise.py --workdir W --pair grpo-dense:grpo --pair grpo-lp-v2:grpo \\
        [--streams 2] [--shard 0/2] [--json OUT]

A claim compares two arms seed by seed: d_i = stat(A, seed i) - stat(B, seed i), each stat read off
the run's final evaluation (1,024 problems, ``eval.n_samples`` = 1 at tiny scale, one sampling stream
``tiny.eval_seed`` shared by every arm). The spread of d_i is training noise (seeds) plus
evaluation noise (which samples the final evaluation drew). This re-evaluates every finished run's
final checkpoint on the *same problems* with ``--streams`` other sampling streams (the trainer's
own final evaluation: the 32-budget grid and the eval budgets, ``evaluate(sample_seed=...)``), so
for each pair and seed there are 1 + streams paired differences that differ only by evaluation
noise. Their pooled within-seed variance is the evaluation noise of one d_i; the rest of var(d_i)
is training noise. With ``eval.n_samples = k`` the sampling noise of a final evaluation falls k-fold
(k independent samples per problem, averaged), so the script prints the seeds 80% power needs at
the observed mean now, at k = 4 and 16, and with no evaluation noise at all.

The first run's original stream is evaluated again and compared with its logged numbers (the
re-evaluation is the trainer's own evaluation, bit for bit). Results are appended to ``--json`` per
run and stream, so an interrupted measurement resumes; ``--shard i/n`` splits the runs between
processes (one torch thread each), which write to their own ``OUT.i`` and are merged by a last call
without ``--shard``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from _args import positive_int  # noqa: E402  benchmarks/ (the script's folder is on sys.path)

STATS = ("anytime", "final", "think_len")  # the claims' stats of a run's final evaluation (reports/claims.yaml)
STREAM0 = 1_000_003  # other sampling streams: STREAM0 + 1, + 2, ... (never tiny.eval_seed itself)


def _key(stat: str, dataset: str = "toy") -> str:
    """The logged metric of ``stat`` (arctl.track.metrics_schema)."""
    from arctl.track import metrics_schema as ms

    return {"anytime": ms.eval_grid_anytime_acc, "final": ms.eval_final_acc, "think_len": ms.eval_think_len}[stat](dataset)


def _runs(workdir: Path, arms: set[str], sweep: str = "paper") -> list[Path]:
    """The completed runs of ``arms`` with a final checkpoint, ordered by (arm, seed): one per cell,
    as reports read them (:func:`arctl.report.cells.one_run_per_cell`: where a workspace holds two runs
    of one arm and seed, e.g. main-grpo of ``arctl sweep paper`` and of ``arctl sweep baselines``, the
    one ``sweep`` composes)."""
    import pandas as pd
    import yaml

    from arctl.launch.status_file import read_status
    from arctl.report.cells import cell_composer, one_run_per_cell
    from arctl.track.runs import Runs, flatten_config

    rows, dirs = [], {}
    # an export (the committed evidence) has no status.json: its index says which runs completed (from a hunt:
    # the README's command on docs/evidence/tiny-8seeds found no completed run)
    index = workdir / "export.json"
    exported = (json.loads(index.read_text()).get("runs") or {}) if index.is_file() else {}
    for d in sorted((workdir / "runs").iterdir()):
        cfg = d / "config.yaml"
        state = read_status(d).get("state") or (exported.get(d.name) or {}).get("state")
        if not cfg.is_file() or state != "completed":
            continue
        c = yaml.safe_load(cfg.read_text())
        if c.get("arm") in arms and c.get("scale", {}).get("name", "tiny") == "tiny":
            rows.append({"run_id": d.name, "experiment": c.get("experiment"), "arm": c["arm"], "seed": int(c["seed"]),
                         **{f"config.{k}": v for k, v in flatten_config(c).items()}})
            dirs[d.name] = (c["arm"], int(c["seed"]), d)
    if rows:
        kept = one_run_per_cell(Runs(history=pd.DataFrame(), runs=pd.DataFrame(rows)), compose=cell_composer([sweep]),
                                source=str(workdir)).runs["run_id"]
        dirs = {name: dirs[name] for name in kept}
    return [d for _, _, d in sorted(dirs.values(), key=lambda t: (t[0], t[1]))]


def _logged(run_dir: Path) -> dict:
    """The final evaluation as the run logged it: the last row of metrics.jsonl."""
    if not (run_dir / "metrics.jsonl").is_file():
        sys.exit(f"error: {run_dir} has no metrics.jsonl (an exported run) and --json holds no measurement of it: "
                 "measure it in the workspace it trained in")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {stat: float(last[_key(stat)]) for stat in STATS}


def _evaluate(run_dir: Path, streams: list[int | None]) -> dict:
    """{stream: {stat: value}} of the run's final checkpoint (stream None: tiny.eval_seed)."""
    import yaml

    from arctl.algo.prompts import InsertedTokens
    from arctl.algo.settings import Objective
    from arctl.backends.tiny.checkpoint import newest_intact
    from arctl.backends.tiny.evaluate import budget_accuracy, evaluate
    from arctl.backends.tiny.settings import TinyRun
    from arctl.backends.tiny.warmup import warmup_model

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["tiny"]["diag_problems"] = 0  # the variance diagnostics are not a claim's stat
    run = TinyRun.from_config(config)
    model, tok, _ = warmup_model(config, run_dir, lambda m, t: budget_accuracy(m, t, config, run.warmup_eval_problems))
    found = newest_intact(run_dir)
    if found.state is None or int(found.state["step"]) != run.total_steps:
        raise SystemExit(f"error: {run_dir.name} has no checkpoint of its last step {run.total_steps}")
    model.load_state_dict(found.state["model"])
    model.eval()
    inserted = InsertedTokens.from_tokenizer(tok, Objective.from_config(config).summary.inserted)
    grid = sorted(set(run.eval_grid) | set(run.eval_budgets))
    out = {}
    for s in streams:
        m = evaluate(model, tok, inserted, config, grid, sample_seed=s)
        out["logged" if s is None else str(s)] = {stat: float(m[_key(stat)]) for stat in STATS}
    return out


def measure(runs: list[Path], streams: int, out: Path, check_first: bool) -> dict:
    done = json.loads(out.read_text()) if out.is_file() else {}
    wanted = [STREAM0 + k for k in range(1, streams + 1)]
    unmeasured: list[str] = []
    for i, d in enumerate(runs):
        if not (d / "metrics.jsonl").is_file() and "logged" not in done.get(d.name, {}):
            unmeasured.append(d.name)  # an exported run (no metrics.jsonl, no checkpoint) --json never measured
            continue
        rec = done.setdefault(d.name, {})
        if (d / "metrics.jsonl").is_file():  # an exported run has none: its measurement has what it logged
            rec["logged"] = _logged(d)
        todo = [s for s in wanted if str(s) not in rec]
        check = check_first and i == 0 and "check" not in rec
        if not todo and not check:
            continue
        t0 = time.perf_counter()
        got = _evaluate(d, ([None] if check else []) + todo)
        if check:
            again = got.pop("logged")
            rec["check"] = {"same_as_logged": again == rec["logged"], "again": again}
            print(f"{d.name}: the original stream again {'==' if again == rec['logged'] else '!='} logged "
                  f"({again} vs {rec['logged']})", flush=True)
        rec.update(got)
        rec.setdefault("seconds", []).append(round(time.perf_counter() - t0, 1))
        out.write_text(json.dumps(done, indent=1))
        print(f"[{i + 1}/{len(runs)}] {d.name}: {len(todo)} stream(s) in {time.perf_counter() - t0:.0f} s", flush=True)
    if unmeasured:
        print(f"note: {len(unmeasured)} exported run(s) that {out} has no measurement of are left out (an export "
              f"has no checkpoints to evaluate): {', '.join(unmeasured[:3])}{' ...' if len(unmeasured) > 3 else ''}",
              file=sys.stderr, flush=True)
    return done


def _arm_seed(run_dir_name: str, workdir: Path) -> tuple[str, int]:
    import yaml

    c = yaml.safe_load((workdir / "runs" / run_dir_name / "config.yaml").read_text())
    return c["arm"], int(c["seed"])


def analyse(by: dict, pairs: list[tuple[str, str]]) -> list[dict]:
    """Per pair and stat, from ``by`` = {(arm, seed): {"logged" | stream: {stat: value}}}: seeds, mean
    and sd of the logged d_i, the pooled within-seed (evaluation) variance of d over the streams, and
    the seeds needed for 80% power now, at n_samples 4 and 16, and without evaluation noise."""
    import numpy as np

    from arctl.report.claims import seeds_needed

    rows = []
    for a, b in pairs:
        seeds = sorted(s for (arm, s) in by if arm == a and (b, s) in by)
        for stat in STATS:
            logged, within, dfs = [], [], 0
            for s in seeds:
                ra, rb = by[(a, s)], by[(b, s)]
                keys = [k for k in ra if k in rb and k not in ("check", "seconds")]
                d = np.array([ra[k][stat] - rb[k][stat] for k in keys])
                logged.append(ra["logged"][stat] - rb["logged"][stat])
                if len(d) >= 2:
                    within.append(float(np.var(d, ddof=1)) * (len(d) - 1))
                    dfs += len(d) - 1
            if len(seeds) < 2 or dfs == 0:
                continue
            x = np.array(logged)
            mean, var = float(x.mean()), float(x.var(ddof=1))
            ev = sum(within) / dfs
            train = max(var - ev, 0.0)
            row = {"a": a, "b": b, "stat": stat, "seeds": len(seeds), "mean": mean, "sd": math.sqrt(var),
                   "eval_sd": math.sqrt(ev), "eval_df": dfs, "eval_share": min(ev / var, 1.0) if var > 0 else float("nan"),
                   "seeds_needed": {"now": seeds_needed(mean, math.sqrt(var))}}
            for k in (4, 16):
                row["seeds_needed"][f"n_samples={k}"] = seeds_needed(mean, math.sqrt(train + ev / k))
            row["seeds_needed"]["no eval noise"] = seeds_needed(mean, math.sqrt(train))
            rows.append(row)
    return rows


def arm_pair(text: str) -> tuple[str, str]:
    """``--pair A:B``: two arm names."""
    a, colon, b = text.partition(":")
    if not (colon and a and b):
        raise argparse.ArgumentTypeError(f"{text!r} is not ARM_A:ARM_B (two arm names joined by a colon)")
    return a, b


def shard(text: str) -> tuple[int, int]:
    """``--shard i/n``: the i-th of n processes, 0 <= i < n."""
    i, slash, n = text.partition("/")
    try:
        i_n = int(i), int(n)
    except ValueError:
        i_n = None
    if not slash or i_n is None or not 0 <= i_n[0] < i_n[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is not i/n with 0 <= i < n, e.g. 0/2 and 1/2")
    return i_n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--pair", type=arm_pair, action="append", required=True,
                   help="ARM_A:ARM_B (compared seed by seed)")
    p.add_argument("--streams", type=positive_int, default=2)
    p.add_argument("--shard", type=shard, default=None, help="i/n: measure every n-th run from the i-th")
    p.add_argument("--json", type=Path, default=Path("eval_noise.json"))
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--sweep", default="paper", help="the sweep whose cells are measured where a workspace holds "
                   "several runs of one arm and seed (default: paper)")
    args = p.parse_args(argv)
    if not (args.workdir / "runs").is_dir():
        p.error(f"--workdir {args.workdir} has no runs/ folder: give the workspace the arms ran in")
    pairs = args.pair
    arms = {arm for pair in pairs for arm in pair}
    runs = _runs(args.workdir, arms, args.sweep)
    # a mistyped arm used to drop its pair silently (no rows, exit 0)
    missing = sorted(arms - {_arm_seed(d.name, args.workdir)[0] for d in runs})
    if missing:
        p.error(f"--pair: no completed tiny run of arm(s) {', '.join(missing)} in {args.workdir / 'runs'}: "
                "check the arm names (config.yaml's arm) or finish those runs first")
    import torch

    torch.set_num_threads(args.threads)
    if args.shard:
        i, n = args.shard
        measure(runs[i::n], args.streams, args.json.with_name(f"{args.json.name}.{i}"), check_first=i == 0)
        return 0
    done = {}
    for part in sorted(args.json.parent.glob(f"{args.json.name}.*")):  # the shards' measurements
        done.update(json.loads(part.read_text()))
    if args.json.is_file():
        done.update(json.loads(args.json.read_text()))
    args.json.write_text(json.dumps(done, indent=1))
    done = measure(runs, args.streams, args.json, check_first=not any("check" in r for r in done.values()))
    rows = analyse({_arm_seed(name, args.workdir): rec for name, rec in done.items()}, pairs)
    print(f"\n{'pair':32} {'stat':10} {'n':>2} {'mean':>8} {'sd':>7} {'eval sd':>8} {'eval share':>10}  seeds for 80% power: now / k=4 / k=16 / no eval noise")
    for r in rows:
        sn = r["seeds_needed"]
        print(f"{r['a'] + ' - ' + r['b']:32} {r['stat']:10} {r['seeds']:>2} {r['mean']:+8.4f} {r['sd']:7.4f} "
              f"{r['eval_sd']:8.4f} {r['eval_share']:10.2f}  {sn['now']} / {sn['n_samples=4']} / {sn['n_samples=16']} / {sn['no eval noise']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
