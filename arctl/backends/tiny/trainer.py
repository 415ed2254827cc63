"""The tiny backend's training loop, top to bottom: warm-up, rollout, advantages, PPO update, eval.

    train(config, run_dir, stop_event=None) -> "completed" | "preempted"

``config`` is one resolved run config (arctl.spec); all maths comes from ``arctl.algo``. A run is
exactly resumable: it restarts from the newest checkpoint in ``run_dir/checkpoints`` with the same
weights, optimizer and RNG streams; the problems of step s depend on (seed, s) only.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from arctl.algo.advantages import grpo_advantages, summary_advantages, thinking_advantages, token_advantages
from arctl.algo.objective import anytime_objective, final_score
from arctl.algo.priors import budget_prior
from arctl.algo.prompts import InsertedTokens
from arctl.algo.rewards import length_penalty
from arctl.algo.tree import SummaryBranch, pack_tree
from arctl.backends.tiny import task
from arctl.backends.tiny.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from arctl.backends.tiny.evaluate import evaluate, max_budget_accuracy
from arctl.backends.tiny.rollout import Rollout, rollout
from arctl.backends.tiny.update import ppo_update, tree_batch
from arctl.backends.tiny.warmup import WarmupInterrupted, warmup_model
from arctl.track import metrics_schema as ms

log = logging.getLogger(__name__)
REQUIRED_TINY = ("task", "warmup", "eval_seed", "diag_problems", "max_rows", "threads")


def train(config: dict, run_dir: Path, stop_event: threading.Event | None = None) -> str:
    """Train one (experiment, arm, seed) on the toy task; returns "completed" or "preempted"."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_config(config)
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(int(config["tiny"]["threads"]))
    torch.use_deterministic_algorithms(bool(config["trainer"].get("deterministic")))
    stop, restore_signals = stop_event or threading.Event(), None
    if stop_event is None:
        restore_signals = install_stop_handlers(stop)
    try:
        return _train(config, run_dir, stop)
    except WarmupInterrupted as stopped:
        print(f"tiny: {config.get('experiment')}/{config.get('arm')} preempted during the warm-up ({stopped}); "
              "nothing was cached, the warm-up restarts with the run", flush=True)
        return "preempted"
    finally:
        if restore_signals:
            restore_signals()
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _train(config: dict, run_dir: Path, stop: threading.Event) -> str:
    tiny, optim, data, trainer = config["tiny"], config["optim"], config["data"], config["trainer"]
    seed = int(config["seed"])

    # 1. the warmed-up model shared by every arm and seed (trained once, cached in the workspace)
    model, tok, warm = warmup_model(
        config, run_dir, lambda m, t: max_budget_accuracy(m, t, config, int(tiny["warmup"]["eval_problems"])),
        should_stop=stop.is_set,
    )
    inserted = InsertedTokens.from_tokenizer(tok)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(optim["lr"]), betas=tuple(optim["betas"]), weight_decay=float(optim["weight_decay"])
    )
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)

    # 2. resume from the newest checkpoint, if any
    start, wandb_id = 0, None
    if (ckpt := latest_checkpoint(run_dir)) is not None:
        state = load_checkpoint(ckpt, model, optimizer, generator)
        start, wandb_id = state["step"], state["wandb_id"]
        log.info("tiny: resuming %s from step %d", run_dir, start)
    run = open_wandb(config, run_dir, wandb_id)
    wandb_id = getattr(run, "id", None)

    total = int(trainer["total_steps"])
    budgets = [int(b) for b in config["thinking"]["budgets"]]
    eval_budgets = [int(b) for b in config["eval"]["budgets"]]
    # the final evaluation: the grid (paper Table 2) and the training-curve budgets in one rollout
    grid = sorted({int(b) for b in (config["eval"].get("grid") or [])} | set(eval_budgets))
    test_freq, save_freq = int(trainer.get("test_freq") or 0), int(trainer.get("save_freq") or 0)
    progress = Progress(total, start)
    status = "completed"
    try:
        if start == 0 and test_freq > 0:
            log_metrics(run, run_dir, 0, evaluate(model, tok, inserted, config, eval_budgets), progress)
        for step in range(start + 1, total + 1):
            t0, cpu0 = time.perf_counter(), time.process_time()
            set_lr(optimizer, float(optim["lr"]), step, int(optim.get("warmup_steps") or 0))

            # 3. rollout: G thinking samples per problem, summaries at every distinct cut
            model.eval()
            problems = step_problems(config, step)
            ro = rollout(
                model, tok, inserted, problems, int(config["rollout"]["n"]), budgets,
                int(config["summary"]["group_size"]), int(config["summary"]["max_tokens"]),
                float(config["rollout"]["temperature"]), generator, int(tiny["max_rows"]),
            )

            # 4. advantages (arctl.algo) and tree-packed sequences
            scores = shaped_scores(config, ro)
            probs = budget_prior(config["thinking"]["prior"], budgets, config["thinking"].get("probs"))
            trees = build_trees(config, ro, scores, probs)

            # 5. PPO-clip update over prompt-group mini-batches
            model.train()
            g = int(config["rollout"]["n"])
            groups = torch.arange(len(trees)) // g
            upd = ppo_update(
                model, optimizer, tree_batch(trees, tok.pad_token_id), groups, int(data["ppo_mini_batch_size"]),
                int(optim["ppo_epochs"]), float(optim["clip_ratio"]), float(optim["clip_ratio_high"]),
                float(max(budgets)), float(optim["grad_clip"]), float(config["rollout"]["temperature"]),
                int(tiny.get("update_micro_batch", 16)),
            )
            model.eval()
            metrics = train_metrics(config, ro, scores, probs, upd, time.perf_counter() - t0)
            metrics[ms.PERF_STEP_CPU_S] = time.process_time() - cpu0

            # 6. evaluation, checkpoint, stop
            if step == total:
                metrics.update(evaluate(model, tok, inserted, config, grid))
            elif test_freq > 0 and step % test_freq == 0:
                metrics.update(evaluate(model, tok, inserted, config, eval_budgets))
            log_metrics(run, run_dir, step, metrics, progress)
            if step == total or (save_freq > 0 and step % save_freq == 0):
                save_checkpoint(run_dir, step, model, optimizer, generator, wandb_id, int(tiny.get("keep_checkpoints", 2)))
            if step < total and stop.is_set():
                save_checkpoint(run_dir, step, model, optimizer, generator, wandb_id, int(tiny.get("keep_checkpoints", 2)))
                status = "preempted"
                break
    finally:
        progress.close()
        if run is not None:
            run.finish()
    print(f"tiny: {config.get('experiment')}/{config.get('arm')} seed {seed} {status}; run dir {run_dir}, "
          f"W&B files {run_dir / 'wandb'}", flush=True)
    return status


# ----------------------------------------------------------------------------- the step's parts
def step_problems(config: dict, step: int) -> list[task.Problem]:
    """The training problems of ``step``: a function of (seed, step) only (exact resume)."""
    knobs = config["tiny"]["task"]
    rng = np.random.default_rng([int(config["seed"]), int(step), 1])
    return task.make_problems(rng, int(config["data"]["train_batch_size"]), int(knobs["min_terms"]), int(knobs["max_terms"]))


def shaped_scores(config: dict, ro: Rollout) -> torch.Tensor:
    """Per-budget scores [B, G, m]; with a length penalty, each summary's 0/1 reward is reshaped
    (``arctl.algo.rewards.length_penalty``, thinking length = tokens kept at that budget)."""
    mode = config["reward"]["length_penalty"]
    if mode in (None, "none"):
        return ro.scores
    b, g, m = ro.scores.shape
    budgets = [int(x) for x in config["thinking"]["budgets"]]
    out = torch.zeros(b * g, m, dtype=torch.float64)
    for j in range(m):
        covering = [br for br in ro.branches if j in br.budgets]
        covering.sort(key=lambda br: br.row)
        correct = torch.tensor([r for br in covering for r in br.rewards], dtype=torch.float64)
        a = len(covering[0].rewards)
        lens = torch.tensor([br.cut for br in covering for _ in br.rewards], dtype=torch.float64)
        index = torch.tensor([br.row // g for br in covering for _ in br.rewards])
        shaped = length_penalty(correct, lens, budgets[-1], mode, float(config["reward"]["alpha"]), index)
        out[:, j] = shaped.view(b * g, a).mean(1)
    return out.view(b, g, m)


def build_trees(config: dict, ro: Rollout, scores: torch.Tensor, probs: torch.Tensor) -> list:
    """One packed tree per thinking sample (a summary group's inserted tokens packed once):
    thinking tokens carry the BRPO advantages of their segment; trained summary branches carry theirs. Decoupled: every branch, advantage = reward
    minus its group's mean times the summed summary prior of the budgets it covers. Coupled: only the
    branch covering the max budget, with the outcome (GRPO) advantage."""
    th = config["thinking"]
    budgets = [int(b) for b in th["budgets"]]
    b, g, m = scores.shape
    seg = thinking_advantages(scores, probs, float(th["lam"]), th["baseline"]).view(b * g, m)
    tok_adv = token_advantages(seg, ro.thinking.think_len, budgets, max_len=ro.thinking.think_ids.shape[1])
    summary = config["summary"]
    per_row: list[list[SummaryBranch]] = [[] for _ in range(b * g)]
    if summary["decoupled"]:
        sprobs = budget_prior(summary["prior"], budgets, summary.get("probs"))
        rewards = torch.tensor([br.rewards for br in ro.branches], dtype=torch.float64)
        adv = summary_advantages(rewards)
        for br, row_adv in zip(ro.branches, adv):
            weight = float(sprobs[br.budgets].sum())
            for s, a in zip(br.summaries, row_adv):
                per_row[br.row].append(SummaryBranch(br.cut, br.inserted, s, float(a) * weight))
    else:
        last = [br for br in ro.branches if (m - 1) in br.budgets]
        last.sort(key=lambda br: br.row)
        final = scores[..., -1].reshape(-1)
        adv = grpo_advantages(final, torch.arange(b * g) // g)
        for br in last:
            for s in br.summaries:
                per_row[br.row].append(SummaryBranch(br.cut, br.inserted, s, float(adv[br.row])))
    trees = []
    for row in range(b * g):
        n = int(ro.thinking.think_len[row])
        trees.append(pack_tree(ro.thinking.question(row), ro.thinking.thinking(row), per_row[row], tok_adv[row, :n],
                               share_inserted=True))
    return trees


def train_metrics(config: dict, ro: Rollout, scores: torch.Tensor, probs: torch.Tensor, upd: dict, seconds: float) -> dict:
    budgets = [int(b) for b in config["thinking"]["budgets"]]
    lam = float(config["thinking"]["lam"])
    out = {ms.train_score(b): float(ro.scores[..., j].mean()) for j, b in enumerate(budgets)}
    out[ms.TRAIN_THINK_LEN_MEAN] = float(ro.thinking.think_len.double().mean())
    out[ms.TRAIN_ANYTIME_SCORE] = float(ro.scores.mean())
    out[ms.TRAIN_FINAL_SCORE] = float(final_score(ro.scores))
    out[ms.TRAIN_REWARD_MEAN] = float(anytime_objective(scores, probs))
    for kind in ms.ADV_VAR_KINDS:
        out[ms.train_adv_var(kind)] = float(thinking_advantages(scores, probs, lam, kind).var(unbiased=False))
    out[ms.TRAIN_LOSS] = upd["loss"]
    out[ms.TRAIN_ENTROPY] = upd["entropy"]
    out[ms.PERF_STEP_TIME_S] = seconds
    return out


def set_lr(optimizer: torch.optim.Optimizer, lr: float, step: int, warmup_steps: int) -> None:
    scale = min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    for group in optimizer.param_groups:
        group["lr"] = lr * scale


# ----------------------------------------------------------------------------- plumbing
def check_config(config: dict) -> None:
    """One clear error line for a config the tiny backend cannot run."""
    tiny = config.get("tiny") or {}
    missing = [k for k in REQUIRED_TINY if k not in tiny]
    if missing:
        raise ValueError(
            f"tiny backend: config section 'tiny' lacks {', '.join(missing)}; resolve the run with --scale tiny "
            "(arctl/conf/scale/tiny.yaml defines them)"
        )
    if int(config["trainer"].get("total_steps") or 0) <= 0:
        raise ValueError("tiny backend: trainer.total_steps must be a positive number of steps")
    if max(config["thinking"]["budgets"]) > max(config["eval"]["budgets"]):
        raise ValueError("tiny backend: thinking.budgets exceed the largest eval budget; set eval.budgets to cover them")
    g = int(config["rollout"]["n"])
    if int(config["data"]["train_batch_size"]) % int(config["data"]["ppo_mini_batch_size"]) or g < 1:
        raise ValueError("tiny backend: data.train_batch_size must be a multiple of data.ppo_mini_batch_size")


def install_stop_handlers(stop: threading.Event):
    """SIGTERM / SIGUSR1 set ``stop`` (checkpoint at the end of the step); returns a restorer."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = {}
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        old[sig] = signal.signal(sig, lambda *_: stop.set())

    def restore():
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore


def open_wandb(config: dict, run_dir: Path, wandb_id: str | None):
    """The W&B run (offline by default) via arctl.track.writer; a resumed run reuses its id."""
    from arctl.track import writer

    if (config.get("wandb") or {}).get("mode") == "disabled":
        return None
    if wandb_id is None or config.get("run_id"):
        return writer.open_run(config, run_dir)
    import wandb

    kwargs = writer.wandb_init_kwargs(config, run_dir)
    kwargs.update(id=wandb_id, resume="allow")
    Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(x_transaction_log_flush_interval=writer.DEFAULT_FLUSH_INTERVAL_S, silent=True, console="off")
    run = wandb.init(settings=settings, **kwargs)
    run.define_metric(ms.STEP_KEY)
    run.define_metric("*", step_metric=ms.STEP_KEY)
    return run


def log_metrics(run, run_dir: Path, step: int, metrics: dict, progress: Progress) -> None:
    """Log one row to W&B and to ``run_dir/metrics.jsonl``; update the progress display."""
    row = {ms.STEP_KEY: step, **metrics}
    if run is not None:
        run.log(row)
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    progress.update(step, metrics)


class Progress:
    """A rich progress bar (step, reward, anytime accuracy, s/step) on a TTY outside CI; a one-line
    summary per evaluation otherwise (and always)."""

    def __init__(self, total: int, start: int):
        self.total, self.bar, self.task = total, None, None
        self.anytime = float("nan")
        ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        if sys.stderr.isatty() and not ci:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(
                TextColumn("tiny"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeRemainingColumn(), transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task("train", total=total, completed=start, info="")

    def update(self, step: int, metrics: dict) -> None:
        anytime = [v for k, v in metrics.items() if k.endswith("/anytime_acc")]
        if anytime:
            self.anytime = anytime[0]
            final = [v for k, v in metrics.items() if k.endswith("/final_acc")]
            msg = f"tiny step {step}/{self.total}: eval anytime acc {self.anytime:.3f}, final acc {final[0]:.3f}"
            (self.bar.console.print if self.bar else print)(msg)
        if self.bar is not None:
            info = (
                f"reward {metrics.get(ms.TRAIN_REWARD_MEAN, float('nan')):.3f}  anytime {self.anytime:.3f}  "
                f"{metrics.get(ms.PERF_STEP_TIME_S, float('nan')):.2f} s/step"
            )
            self.bar.update(self.task, completed=step, info=info)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
