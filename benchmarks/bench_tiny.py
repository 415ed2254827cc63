"""Benchmarks of the tiny backend (run by hand; numbers go to docs/benchmarks.md "## Tiny backend").

    python benchmarks/bench_tiny.py tree        # tree-packed vs duplicated-branch update, m = 4
    python benchmarks/bench_tiny.py step        # one RL step of AnytimeReasoner and GRPO (tiny scale)
    python benchmarks/bench_tiny.py eval        # anytime evaluation (4 budgets, 32-budget grid) vs its floor
    python benchmarks/bench_tiny.py decode      # thinking decode: grouped-query attention vs the per-head
                                                # copy of the keys/values it replaced, side by side
    python benchmarks/bench_tiny.py forward     # the lean decoding forward vs Hugging Face's, side by side:
                                                # thinking and summary passes (tiny and micro shapes) and
                                                # whole RL steps; the same tokens (checked)
    python benchmarks/bench_tiny.py shrink      # the thinking's decoding batch shrinking as rows end vs the
                                                # full batch to the end (the same tokens, checked): the
                                                # trainer's evaluation and whole RL steps, on the warm-up
    python benchmarks/bench_tiny.py ablation    # whole ablation-vr at tiny scale (3 arms, 1 seed), as the
                                                # Quickstart runs it: the CLI, local executor, fresh workspace
    python benchmarks/bench_tiny.py bandwidth   # attention against the KV cache vs one thread's memory
                                                # bandwidth: what bounds the thinking pass

One torch thread (``--threads``) for tree/step. Peak RSS is the process's ``ru_maxrss``. step, forward and
shrink write their runs into ``--workspace`` (default: a fresh temporary folder, printed; never the user's
arctl workspace, whose registry would not know them); ablation makes its own workspace in it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded with importlib (tests/tiny/test_rollout.py)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import positive_int  # noqa: E402  benchmarks/ (the script's folder is on sys.path)

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
        loss, _, _ = policy_loss(model, batch, BENCH_OBJECTIVE, n_trees=int(batch.input_ids.shape[0]))
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


class SettingError(Exception):
    """A run config the benchmark cannot build (an arctl.compose.errors.SpecError or another ValueError):
    main() prints it as one error line instead of a traceback."""


def _resolve(name: str, overrides: list[str]):
    from arctl.compose import resolve_experiment

    try:
        return resolve_experiment(name, overrides=overrides)
    except ValueError as err:  # SpecError is one
        raise SettingError(str(err)) from err


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


def _copied_heads_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """The attention of ``prefix_attention`` before grouped_matmul (own tokens only): the kv heads
    copied per query head (``repeat_interleave``) at every step, then one matmul per head."""
    groups = query.shape[1] // key.shape[1]
    ks, vs = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    scores = (query @ ks.transpose(-1, -2)) * float(scaling) + attention_mask
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    return (weights @ vs).transpose(1, 2).contiguous(), None


def bench_decode(args) -> None:
    """The thinking pass of one tiny training step (8 prompts x G=8, to b_m tokens), on an untrained
    model of the tiny scale's shape, with the current attention and with the copied-heads one,
    alternating (best of ``--repeats``), for the tiny model's own heads (4 query, 4 kv: nothing to
    copy) and for grouped-query heads (4 query, 1 kv, as the R1-Distill models group 6 to 1); both
    sample the same tokens (checked)."""
    from transformers import AttentionInterface

    from arctl.backends.tiny import decode
    from arctl.backends.tiny import prefix_attention as pa
    from arctl.backends.tiny.rollout import generate_thinking

    run = _resolve("main-ar-uniform", [])[0]
    b_m = max(run.config["thinking"]["budgets"])
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 416, (57,), generator=g).tolist() for _ in range(8)] * 8
    print(f"| kv heads / query heads | attention | thinking pass s (best of {args.repeats}), 64 rows x {b_m} tokens "
          "| ms per token step | speed-up | same tokens |")
    print("|---|---|---|---|---|---|")
    for kv in (int(run.config["model"]["num_kv_heads"]), 1):
        model = build_model(model_config({**run.config["model"], "num_kv_heads": kv}, 416, 0, 2), 0).eval()
        times: dict[str, list[float]] = {"grouped (now)": [], "copied heads (before)": []}
        tokens = {}
        for _ in range(args.repeats):
            for name in times:
                impl = pa.shared_prefix_attention if name.startswith("grouped") else _copied_heads_attention
                # both paths: Hugging Face's (the registered interface) and the lean decoder's, which calls
                # the function by the name it imported (from a review: patching only the interface timed
                # the same code on both sides, 1.00x)
                AttentionInterface.register(pa.NAME, impl)
                decode.shared_prefix_attention = impl
                try:
                    t0 = time.perf_counter()
                    out = generate_thinking(model, prompts, b_m, 1.0, torch.Generator().manual_seed(1), 1, 0)
                    times[name].append(time.perf_counter() - t0)
                finally:
                    AttentionInterface.register(pa.NAME, pa.shared_prefix_attention)
                    decode.shared_prefix_attention = pa.shared_prefix_attention
                tokens[name] = out.think_ids
        best = {k: min(v) for k, v in times.items()}
        for k, v in best.items():
            ratio = best["copied heads (before)"] / v
            print(f"| {kv} / {run.config['model']['num_heads']} | {k} | {v:.2f} | {v / b_m * 1e3:.1f} | {ratio:.2f}x | "
                  f"{torch.equal(*tokens.values())} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f}; {args.threads} thread(s)")


def _rollout_pass(model, prompts, b_m: int, budgets: list[int]):
    """One training rollout's model work: the thinking of every prompt, then A = 4 summaries of <= 8
    tokens per budget on each cut (AnytimeReasoner's branches). Returns (thinking s, summaries s, tokens)."""
    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.tiny.rollout import generate_summaries, generate_thinking, plan_branches

    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    thinking = generate_thinking(model, prompts, b_m, 1.0, g, 2, 0)
    t1 = time.perf_counter()
    branches = plan_branches(thinking, budgets, InsertedTokens((3, 2, 4), (4,), 2), per_budget=True)
    generate_summaries(model, thinking, branches, 4, 8, 1.0, g, 1, 0, 1024)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, (thinking.think_ids, [b.summaries for b in branches])


def bench_forward(args) -> None:
    """The lean decoding forward (arctl/backends/tiny/decode.py) against Hugging Face's, alternating in
    one process (best of ``--repeats``): the thinking and summary passes of one training rollout at the
    tiny scale's model shape and at the test suite's micro shape (8 prompts x G=8, to b_m tokens, on an
    untrained model, so every thinking runs to b_m), then ``--steps`` whole RL steps of AR-uniform and
    GRPO at tiny scale (mean step time from the run's own perf/step_time_s)."""
    from unittest import mock

    from arctl.backends.tiny import decode
    from arctl.backends.tiny.trainer import train
    from arctl.track import metrics_schema as ms

    run = _resolve("main-ar-uniform", [])[0]
    budgets = list(run.config["thinking"]["budgets"])
    b_m = max(budgets)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 416, (57,), generator=g).tolist() for _ in range(8)] * 8
    micro = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    print("| model | pass | Hugging Face s | lean s | speed-up | same tokens |")
    print("|---|---|---|---|---|---|")
    for label, shape in (("tiny (128 wide, 4 layers)", {}), ("micro (32 wide, 2 layers)", micro)):
        model = build_model(model_config({**run.config["model"], **shape}, 416, 0, 2), 0).eval()
        best = {"hf": [float("inf")] * 2, "lean": [float("inf")] * 2}
        out = {}
        for _ in range(args.repeats):
            for name in best:
                with mock.patch.object(decode, "supports", (lambda m: False) if name == "hf" else decode.supports):
                    th, su, out[name] = _rollout_pass(model, prompts, b_m, budgets)
                best[name] = [min(best[name][0], th), min(best[name][1], su)]
        same = torch.equal(out["hf"][0], out["lean"][0]) and out["hf"][1] == out["lean"][1]
        for i, what in enumerate(("thinking", "summaries")):
            hf, lean = best["hf"][i], best["lean"][i]
            print(f"| {label} | {what} | {hf:.2f} | {lean:.2f} | {hf / lean:.2f}x | {same} |", flush=True)
    ws = Path(args.workspace)
    print(f"\n| tiny scale, {args.steps} steps | Hugging Face s/step | lean s/step | speed-up |")
    print("|---|---|---|---|")
    for exp in ("main-ar-uniform", "main-grpo"):
        config = _resolve(exp, [f"trainer.total_steps={args.steps}", "trainer.test_freq=1000", "trainer.save_freq=1000",
                                "wandb.mode=disabled", "eval.num_problems=16", "tiny.diag_problems=0",
                                "eval.grid_size=2"])[0].config
        means = {}
        for name in ("hf", "lean", "hf", "lean"):  # alternating: a slow spell of the machine hits both
            with mock.patch.object(decode, "supports", (lambda m: False) if name == "hf" else decode.supports):
                run_dir = ws / "runs" / f"bench-forward-{exp}-{name}-{time.time_ns()}"
                train(config, run_dir, threading.Event())
            rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            wall = [r[ms.PERF_STEP_TIME_S] for r in rows if ms.PERF_STEP_TIME_S in r]
            means.setdefault(name, []).append(sum(wall) / len(wall))
        hf, lean = min(means["hf"]), min(means["lean"])
        print(f"| {exp} | {hf:.2f} | {lean:.2f} | {hf / lean:.2f}x |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f}; {args.threads} thread(s)")


def eval_cost(model, tok, config: dict, budgets: list[int], n_problems: int, repeats: int) -> dict:
    """Measured time of the anytime evaluation at ``budgets`` against its floor.

    The floor is the thinking once plus every summary's own tokens (its inserted prompt and what it
    decodes), no prefix recomputed, each token at the cost of a thinking token of the same run:
    ``floor = t_think * (1 + summary_tokens / thinking_tokens)`` (token-weighted). ``t_think`` is the
    thinking pass alone, timed on the same problems and random stream. A ratio near 1 leaves nothing
    to save; well above 1 means recomputation or per-row overhead."""
    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.tiny.evaluate import eval_problems
    from arctl.backends.tiny.rollout import generate_thinking, rollout
    from arctl.backends.tiny.tasks import toy_task
    from arctl.backends.tiny.tokenizer import encode_words

    ev, tiny = config["eval"], config["tiny"]
    inserted = InsertedTokens.from_tokenizer(tok)
    problems = eval_problems(config, n_problems)
    kw = dict(temperature=float(ev["temperature"]))
    toy = toy_task(tiny["task"])
    prompts = [encode_words(tok, toy.prompt_words(p)) for p in problems]
    t_think, t_eval = [], []
    for _ in range(repeats):
        gen = torch.Generator().manual_seed(int(tiny["eval_seed"]))
        t0 = time.perf_counter()
        think = generate_thinking(model, prompts, int(max(budgets)), kw["temperature"], gen, inserted.think_end,
                                  tok.pad_token_id)
        t_think.append(time.perf_counter() - t0)
        gen = torch.Generator().manual_seed(int(tiny["eval_seed"]))
        t0 = time.perf_counter()
        out = rollout(model, tok, inserted, toy, problems, 1, list(budgets), 1, int(config["summary"]["max_tokens"]),
                      kw["temperature"], gen, int(tiny["max_rows"]))
        t_eval.append(time.perf_counter() - t0)
    think_tokens = int(think.think_len.sum()) + int(think.prompt_valid.sum())
    summary_tokens = sum(len(b.inserted) * 1 + sum(len(s) for s in b.summaries) for b in out.branches)
    t_th, t_ev = min(t_think), min(t_eval)
    floor = t_th * (1 + summary_tokens / think_tokens)
    return {"budgets": len(budgets), "branches": len(out.branches), "thinking_tokens": think_tokens,
            "summary_tokens": summary_tokens, "t_think_s": t_th, "t_eval_s": t_ev, "floor_s": floor,
            "floor_x_think": floor / t_th, "ratio": t_ev / floor}


def bench_eval(args) -> None:
    import os

    from arctl.backends.tiny.tasks import toy_task
    from arctl.backends.tiny.tokenizer import build_tokenizer

    config = _resolve("main-ar-uniform", [])[0].config
    tok = build_tokenizer(toy_task(config["tiny"]["task"]).vocabulary())
    from arctl.backends.tiny.model import model_config as tiny_model_config

    model = build_model(tiny_model_config(config["model"], len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    load = os.getloadavg()[0]
    print(f"tiny scale, {args.problems} problems, 1 sample, untrained model (every thinking runs to the largest "
          f"budget, every summary to summary.max_tokens={config['summary']['max_tokens']}); {args.threads} thread(s); "
          f"best of {args.repeats}; load average {load:.1f}")
    print("| evaluation | branches | thinking tokens | summary tokens | floor / one thinking pass | thinking s | "
          "evaluation s | floor s | **measured / floor** |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, budgets in (("4 budgets", list(config["eval"]["budgets"])), ("32-budget grid", list(config["eval"]["grid"]))):
        r = eval_cost(model, tok, config, budgets, args.problems, args.repeats)
        print(f"| {name} | {r['branches']} | {r['thinking_tokens']} | {r['summary_tokens']} | {r['floor_x_think']:.2f}× | "
              f"{r['t_think_s']:.2f} | {r['t_eval_s']:.2f} | {r['floor_s']:.2f} | **{r['ratio']:.2f}** |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def bench_shrink(args) -> None:
    """The thinking pass with rows that ended leaving the decoding batch (now) vs every row to the end
    (before: ``MIN_DECODE_ROWS`` set above any batch), alternating in one process on the cached
    warm-up of the tiny scale (trained first when absent): one evaluation as the trainer runs it
    (``eval.num_problems`` problems at the eval budgets + the grouped diagnostics) and ``--steps`` RL
    steps of AR-uniform and GRPO. The same metrics both ways (checked)."""
    import math

    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.tiny import rollout as ro
    from arctl.backends.tiny.evaluate import evaluate
    from arctl.backends.tiny.trainer import train
    from arctl.backends.tiny.warmup import warmup_model
    from arctl.track import metrics_schema as ms

    ws = Path(args.workspace)
    shrinking = ro.MIN_DECODE_ROWS
    modes = {"shrinking (now)": shrinking, "full batch (before)": 10**9}
    config = _resolve("main-ar-uniform", [])[0].config
    from arctl.backends.tiny.evaluate import budget_accuracy
    from arctl.backends.tiny.settings import TinyRun

    problems = TinyRun.from_config(config).warmup_eval_problems  # as the trainer measures it, if it trains one
    model, tok, info = warmup_model(config, ws / "bench-shrink-warmup",
                                    lambda m, t: budget_accuracy(m, t, config, problems))
    model.eval()
    inserted = InsertedTokens.from_tokenizer(tok)
    budgets = sorted(config["eval"]["budgets"])
    print(f"warm-up {info.get('weights_sha256', '?')[:8]}; load average {os.getloadavg()[0]:.1f}; {args.threads} thread(s); "
          f"best of {args.repeats}, alternating")
    print("| what | full batch (before) s | shrinking (now) s | speed-up | same metrics |")
    print("|---|---|---|---|---|")
    times: dict[str, list[float]] = {m: [] for m in modes}
    found: dict[str, dict] = {}
    try:
        for _ in range(args.repeats):
            for mode, rows in modes.items():
                ro.MIN_DECODE_ROWS = rows
                t0 = time.perf_counter()
                found[mode] = evaluate(model, tok, inserted, config, budgets)
                times[mode].append(time.perf_counter() - t0)
        a, b = found.values()
        same = all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a.values(), b.values())) and a.keys() == b.keys()
        before, now = min(times["full batch (before)"]), min(times["shrinking (now)"])
        print(f"| one evaluation ({config['eval']['num_problems']} problems x {len(budgets)} budgets + "
              f"{config['tiny']['diag_problems']} x {config['rollout']['n']} diagnostics) | {before:.1f} | {now:.1f} | "
              f"{before / now:.2f}x | {same} |", flush=True)
        for exp in ("main-ar-uniform", "main-grpo"):
            run = _resolve(exp, [f"trainer.total_steps={args.steps}", "trainer.test_freq=1000", "trainer.save_freq=1000",
                                 "wandb.mode=disabled", "eval.num_problems=16", "tiny.diag_problems=0", "eval.grid_size=2"])[0]
            step: dict[str, list[float]] = {m: [] for m in modes}
            scores: dict[str, list] = {}
            for _ in range(2):
                for mode, rows in modes.items():
                    ro.MIN_DECODE_ROWS = rows
                    run_dir = ws / "runs" / f"bench-shrink-{exp}-{time.time_ns()}"
                    train(run.config, run_dir, threading.Event())
                    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
                    step[mode].append(sum(r[ms.PERF_STEP_TIME_S] for r in lines if ms.PERF_STEP_TIME_S in r) / args.steps)
                    scores[mode] = [r.get(ms.TRAIN_ANYTIME_SCORE) for r in lines]
            before, now = min(step["full batch (before)"]), min(step["shrinking (now)"])
            print(f"| {exp}, s/step (mean of {args.steps} steps, best of 2 runs) | {before:.2f} | {now:.2f} | "
                  f"{before / now:.2f}x | {len(set(map(str, scores.values()))) == 1} |", flush=True)
    finally:
        ro.MIN_DECODE_ROWS = shrinking
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def bench_ablation(args) -> None:
    """What the Quickstart runs: ``arctl run ablation-vr --scale tiny --executor local`` in a fresh
    workspace (warm-up included), timed from submission until the last arm completes."""
    import os
    import subprocess

    from arctl.track import metrics_schema as ms

    parent = args.workspace if args.workspace and Path(args.workspace).exists() else None
    ws = Path(tempfile.mkdtemp(prefix="bench-ablation-", dir=parent))
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
    # a shipped warm-up (the tiny scale's default) was installed, not trained: its seconds are another machine's
    trained = "shipped, not trained here" if warm.get("shipped") else f"trained here, {warm['seconds'] / 60:.1f} min"
    print(f"\nwhole ablation-vr: {total / 60:.1f} min wall incl. the warm-up ({trained}, accuracy {warm['accuracy']:.3f} "
          f"at the max budget); load average now {os.getloadavg()[0]:.1f}")


def bench_bandwidth(args) -> None:
    """Attention against the KV cache as the thinking pass runs it (``q [B,H,1,d] @ K^T`` on a slice of the
    cache buffer, the tiny model's H = 4, d = 32, a 249-token buffer), timed at three cache lengths, beside one
    thread's sum over a 64 MB tensor: a time linear in L at the sum's GB/s means bytes bound it, not calls."""
    from arctl.backends.tiny.prefix_attention import grouped_matmul

    def best(f, n: int) -> float:
        for _ in range(10):
            f()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n

    n = 40 * args.repeats
    print(f"{args.threads} thread(s); mean of {n} calls; load average {os.getloadavg()[0]:.1f}")
    print("| rows B | cache length L | q.K^T us | keys read GB/s | weights.V us | q.K^T on a contiguous copy us |")
    print("|---|---|---|---|---|---|")
    for rows in (64, 8):
        for length in (60, 150, 249):
            buf = torch.randn(rows, 4, 249, 32)
            keys, q, w = buf[:, :, :length], torch.randn(rows, 4, 1, 32), torch.randn(rows, 4, 1, length)
            dense = keys.contiguous()
            qk = best(lambda: grouped_matmul(q, keys.transpose(-1, -2)), n)  # noqa: B023 - called at once
            wv = best(lambda: grouped_matmul(w, keys), n)  # noqa: B023
            qk_dense = best(lambda: grouped_matmul(q, dense.transpose(-1, -2)), n)  # noqa: B023
            print(f"| {rows} | {length} | {qk * 1e6:.0f} | {keys.numel() * 4 / qk / 1e9:.1f} | {wv * 1e6:.0f} | "
                  f"{qk_dense * 1e6:.0f} |")
    x = torch.randn(16_000_000)
    s = best(lambda: x.sum(), 10)
    print(f"sum over 64 MB: {x.numel() * 4 / s / 1e9:.1f} GB/s; load average after {os.getloadavg()[0]:.1f}")


WRITES_RUNS = ("step", "forward", "shrink")  # the benchmarks that write runs into --workspace (and load a warm-up)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("tree", "step", "eval", "decode", "forward", "shrink", "ablation",
                                             "bandwidth"))
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--steps", type=positive_int, default=10)
    parser.add_argument("--workspace", default=None, help="where step/forward/shrink write their runs (default: a "
                        "fresh temporary folder; the runs would break `arctl status` in a real workspace)")
    parser.add_argument("--problems", type=positive_int, default=256, help="eval: problems evaluated")
    args = parser.parse_args(argv)
    try:
        if args.what in WRITES_RUNS:  # they load or train the warm-up: a bad $ARCTL_TINY_WARMUP stops them here
            from arctl.backends.tiny.settings import warmup_source

            try:
                warmup_source()
            except ValueError as err:
                raise SettingError(str(err)) from err
            if args.workspace is None:
                args.workspace = tempfile.mkdtemp(prefix="bench-tiny-")
                print(f"workspace {args.workspace} (a fresh temporary folder; --workspace DIR to choose)", flush=True)
        torch.set_num_threads(args.threads)
        {"tree": bench_tree, "step": bench_step, "eval": bench_eval, "decode": bench_decode,
         "forward": bench_forward, "shrink": bench_shrink, "ablation": bench_ablation,
         "bandwidth": bench_bandwidth}[args.what](args)
    except SettingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
