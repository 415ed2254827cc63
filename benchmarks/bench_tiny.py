"""Benchmarks of the tiny backend (run by hand; numbers go to docs/benchmarks.md "## Tiny backend").

    python benchmarks/bench_tiny.py tree        # tree-packed vs duplicated-branch update, m = 4
    python benchmarks/bench_tiny.py step        # one RL step of AnytimeReasoner and GRPO (tiny scale)
    python benchmarks/bench_tiny.py ablation    # whole ablation-vr at tiny scale (3 arms, 1 seed), as the
                                                # Quickstart runs it: the CLI, local executor, fresh workspace

One torch thread (``--threads``) for tree/step. Peak RSS is the process's ``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time
from pathlib import Path

import torch

from arctl.algo.settings import Loss, Objective, Thinking
from arctl.algo.tree import SummaryBranch, pack_tree
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.update import duplicated_batch, policy_loss, tree_batch

BENCH_OBJECTIVE = Objective(Thinking(budgets=(64,)), loss=Loss(loss_norm_len=64))  # the loss; its constant is immaterial here


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _trees(n_trees: int, think: int, budgets: list[int], group: int, inserted: int, summary: int, vocab: int):
    g = torch.Generator().manual_seed(0)
    r = lambda n: torch.randint(3, vocab, (n,), generator=g).tolist()  # noqa: E731
    trees = []
    for _ in range(n_trees):
        branches = [SummaryBranch(b, r(inserted), r(summary), 1.0) for b in budgets for _ in range(group)]
        trees.append(pack_tree(r(12), r(think), branches, torch.randn(think, generator=g)))
    return trees


def _time_update(model, batch, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        loss, _ = policy_loss(model, batch, BENCH_OBJECTIVE, n_trees=int(batch.input_ids.shape[0]))
        loss.backward()
        model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return min(times[1:])


def bench_tree(args) -> None:
    model_cfg = dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=4, intermediate_size=512,
                     tie_embeddings=True, max_position_embeddings=4096)
    model = build_model(model_config(model_cfg, 416, 0, 2), 0)
    print("| shape | trees | tree tokens | dup tokens | tree fwd+bwd s | duplicated s | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for name, n, think, budgets in [
        ("tiny: thinking 64, m=4, 4 summaries x (5+8)", 64, 64, [16, 32, 48, 64]),
        ("thinking 1024, m=4, 4 summaries x (5+8)", 4, 1024, [256, 512, 768, 1024]),
    ]:
        trees = _trees(n, think, budgets, 4, 5, 8, 416)
        tb, db = tree_batch(trees, 0), duplicated_batch(trees, 0)
        t_tree = _time_update(model, tb, args.repeats)
        t_dup = _time_update(model, db, args.repeats)
        print(f"| {name} | {n} | {tb.input_ids.numel()} | {db.input_ids.numel()} | {t_tree:.3f} | {t_dup:.3f} | "
              f"{t_dup / t_tree:.1f}x |", flush=True)


def _resolve(name: str, overrides: list[str]):
    from arctl.spec import resolve_experiment

    return resolve_experiment(name, overrides=overrides)


def bench_step(args) -> None:
    from arctl.backends.tiny.trainer import train
    from arctl.track import metrics_schema as ms

    ws = Path(args.workspace)
    print("| experiment/arm | steps | wall s/step mean / min | CPU s/step mean / min | peak RSS MB |")
    print("|---|---|---|---|---|")
    for exp, arm in (("main-ar-uniform", None), ("main-grpo", None), ("ablation-vr", "grpo-vr"),
                     ("ablation-vr", "grpo-vr-decouple")):
        runs = _resolve(exp, [f"trainer.total_steps={args.steps}", "trainer.test_freq=1000", "trainer.save_freq=1000",
                              "wandb.mode=disabled", "eval.num_problems=16", "tiny.diag_problems=0", "eval.grid_size=2"])
        run = next(r for r in runs if arm is None or r.arm == arm)
        run_dir = ws / "runs" / f"bench-step-{exp}-{run.arm}-{time.time_ns()}"
        train(run.config, run_dir, threading.Event())
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        wall = [r[ms.PERF_STEP_TIME_S] for r in rows if ms.PERF_STEP_TIME_S in r]
        cpu = [r[ms.PERF_STEP_CPU_S] for r in rows if ms.PERF_STEP_CPU_S in r]
        print(f"| {exp}/{run.arm} | {len(wall)} | {sum(wall) / len(wall):.2f} / {min(wall):.2f} | "
              f"{sum(cpu) / len(cpu):.2f} / {min(cpu):.2f} | {peak_rss_mb():.0f} |", flush=True)


def bench_ablation(args) -> None:
    """What the Quickstart runs: ``arctl run ablation-vr --scale tiny --executor local`` in a fresh
    workspace (warm-up included), timed from submission until the last arm completes."""
    import os
    import subprocess
    import sys
    import tempfile

    from arctl.track import metrics_schema as ms

    ws = Path(tempfile.mkdtemp(prefix="bench-ablation-", dir=args.workspace if Path(args.workspace).exists() else None))
    env = {**os.environ, "ARCTL_HOME": str(ws), "WANDB_MODE": "offline", "ARCTL_CACHE": str(ws / "cache")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "arctl.cli.main", "run", "ablation-vr", "--scale", "tiny",
                           "--executor", "local", "--json"], env=env, capture_output=True, text=True)
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"arctl run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    warm = json.loads(next((ws / "cache" / "tiny-warmup").glob("*/warmup.json")).read_text())  # a cold cache
    status = json.loads(subprocess.run([sys.executable, "-m", "arctl.cli.main", "status", "--json"], env=env,
                                       capture_output=True, text=True, check=True).stdout)
    print(f"workspace {ws}")
    print("| arm | state | started → ended (min after submission) | CPU s/step (mean) | final anytime acc (grid) |")
    print("|---|---|---|---|---|")
    for run in status:
        rows = [json.loads(line) for line in (Path(run["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
        cpu = [r[ms.PERF_STEP_CPU_S] for r in rows if ms.PERF_STEP_CPU_S in r]
        t_sub = run["submitted_at"]
        print(f"| {run['arm']} | {run['state']} | {(run['started_at'] - t_sub) / 60:.1f} → {(run['ended_at'] - t_sub) / 60:.1f} | "
              f"{sum(cpu) / len(cpu):.2f} | {rows[-1].get(ms.eval_grid_anytime_acc('toy'), float('nan')):.3f} |", flush=True)
    print(f"\nwhole ablation-vr: {total / 60:.1f} min wall incl. warm-up ({warm['seconds'] / 60:.1f} min, "
          f"accuracy {warm['accuracy']:.3f} at the max budget); load average now {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("tree", "step", "ablation"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workspace", default="arctl-runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    {"tree": bench_tree, "step": bench_step, "ablation": bench_ablation}[args.what](args)


if __name__ == "__main__":
    main()
