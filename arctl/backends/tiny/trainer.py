"""The tiny backend's training loop, top to bottom: warm-up, rollout, advantages, PPO update, eval.

    train(config, run_dir, stop_event=None) -> "completed" | "preempted"

``config`` is one resolved run config (arctl.compose); all maths comes from ``arctl.algo``. A run is
exactly resumable: it restarts from the newest checkpoint in ``run_dir/checkpoints`` with the same
weights, optimizer and RNG streams; the problems of step s depend on (seed, s) only.
"""

from __future__ import annotations

import copy
import errno
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

from arctl.algo.methods import control as bc
from arctl.algo.prompts import InsertedTokens
from arctl.algo.settings import BudgetControl, Objective
from arctl.algo.tree import SummaryBranch, pack_tree
from arctl.algo.tree_loss import Tree, TreeAdvantages, batch_stats, tree_advantages
from arctl.backends.base import INIT_RECORD, Diverged, SkipStreak, diverged_advice, stop_follows
from arctl.backends.tiny.checkpoint import (
    CheckpointError,
    Found,
    file_sha256,
    load_checkpoint,
    newest_intact,
    restore,
    save_checkpoint,
    weights_sha256,
)
from arctl.backends.tiny.evaluate import budget_accuracy, evaluate
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.rollout import LogitsNotFinite, Rollout, budget_scores, rollout
from arctl.backends.tiny.settings import TinyRun
from arctl.backends.tiny.tasks import target_word, task_section, toy_task
from arctl.backends.tiny.tokenizer import build_tokenizer
from arctl.backends.tiny.update import ppo_update, tree_batch
from arctl.backends.tiny.warmup import (
    WarmupInterrupted,
    machine_kind,
    resume_command,
    warmup_dir,
    warmup_model,
)
from arctl.config.files import atomic_write
from arctl.track import metrics_schema as ms
from arctl.track import writer
from arctl.track.phase import read_warning, scan_warning, write_phase, write_warning
from arctl.track.start_record import MACHINE_SECTION, WARMUP_FIELDS, WARMUP_RECORD, WARMUP_SECTION

log = logging.getLogger(__name__)
WANDB_LOST = "W&B lost "  # the start of the warning of a run whose W&B files lack rows (`arctl status` shows it)
REQUIRED_TINY = ("task", "warmup", "eval_seed", "diag_problems", "max_rows", "threads")


def train(config: dict, run_dir: Path, stop_event: threading.Event | None = None) -> str:
    """Train one (experiment, arm, seed) on the toy task; returns "completed" or "preempted"."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_config(config)
    run = TinyRun.from_config(config)
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(run.threads)
    torch.use_deterministic_algorithms(run.deterministic)
    stop, restore_signals = stop_event or threading.Event(), None
    if stop_event is None:
        restore_signals = install_stop_handlers(stop)
    try:
        return _train(config, run, run_dir, stop)
    except WarmupInterrupted as stopped:
        print(f"tiny: {run.experiment}/{run.arm} preempted during the warm-up ({stopped}); "
              "nothing was cached, the warm-up restarts with the run", flush=True)
        return "preempted"
    finally:
        if restore_signals:
            restore_signals()
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _train(config: dict, run: TinyRun, run_dir: Path, stop: threading.Event) -> str:
    seed = run.seed

    # 1. the warmed-up model shared by every arm and seed (trained once, cached in the workspace); a run that
    # starts from another run's weights (trainer.init_from) needs none of it: its model and the toy tokenizer are
    # built from its config, its weights are that run's (or its own checkpoint's), and its warm-up record is
    # that run's (from a hunt: each such run first loaded or trained the warm-up of its own config, which it
    # threw away, 16-24 min where none was cached, and only then failed on a model of another shape)
    init_dir = Path(config["init_dir"]) if config.get("init_dir") else None
    if init_dir is not None:
        model, tok = run_model(config)
        warm = source_warmup(init_dir)
    else:
        try:
            model, tok, warm = warmup_model(
                config, run_dir, lambda m, t: budget_accuracy(m, t, config, run.warmup_eval_problems),
                should_stop=stop.is_set, on_phase=lambda text: write_phase(run_dir, text),
            )
        except Exception as err:
            if (full := full_disk(err, warmup_dir(config))) is not None:
                raise full from err
            raise
    objective = Objective.from_config(config)
    inserted = InsertedTokens.from_tokenizer(tok, objective.summary.inserted)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=run.lr, betas=run.betas, weight_decay=run.weight_decay
    )
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)

    # 2. resume from the newest checkpoint, if any. The metrics file keeps exactly the steps the run
    # keeps (those up to the checkpoint), and the W&B history is made to match it (writer.open_run)
    start, wandb_id, resume_at = 0, None, None
    found = newest_intact(run_dir)  # checksums verified; a damaged newest one is skipped, with a warning
    found, gap = covered(config, run, run_dir, found)  # one whose steps' rows were lost in a crash, too
    init = None
    if found.state is None and init_dir is not None:  # trainer.init_from: that run's final weights, shapes checked
        init = start_from_run(model, init_dir, config)
    # the KL term's reference (optim.kl_coef > 0): the weights RL starts from, taken before the checkpoint's
    reference = (reference_model(model, init_dir, run_dir, resumed=found.state is not None)
                 if objective.loss.kl_coef else None)
    if found.state is not None:
        state = restore(found.state, model, optimizer, generator)
        start, wandb_id = state["step"], state["wandb_id"]
        resume_at = start
        log.info("tiny: resuming %s from step %d", run_dir, start)
    notes = [note for note in (found.warning(), gap) if note]
    for note in notes:
        print(f"tiny: WARNING {note}", flush=True)
    scan_warning(run_dir, notes)
    if init is not None:
        atomic_write(run_dir / INIT_RECORD, json.dumps(init, indent=1))
        print(f"tiny: {run.experiment}/{run.arm} starts from run {init['run_id']} (step {init['step']}, "
              f"weights sha256 {init['weights_sha256'][:12]})", flush=True)
    first = first_warmup(run_dir, warm, config, resumed=found.state is not None)  # before kept_rows rewrites a file
    history = kept_rows(run_dir, resume_at)
    if resume_at is None and any(row[ms.STEP_KEY] == 0 for row in history):
        resume_at = 0  # the first attempt's initial evaluation is kept (deterministic), not redone
    wb = open_wandb(config, run_dir, wandb_id, resume_at, history)
    wandb_id = getattr(wb, "id", None) or wandb_id
    record_warmup(run_dir, first, wb)
    record_machine(run_dir, wb)
    if wb is not None and (run_dir / INIT_RECORD).is_file():  # what the run started from, in its W&B config
        wb.config.update({"init": json.loads((run_dir / INIT_RECORD).read_text())}, allow_val_change=True)

    total = run.total_steps
    control = BudgetControl.from_config(config)
    budgets = list(objective.budgets)
    eval_budgets = list(run.eval_budgets)
    # the final evaluation: the grid (paper Table 2) and the training-curve budgets (evaluate: the latter exactly as
    # at a regular evaluation, the grid's other budgets in rollouts of their own)
    grid = sorted(set(run.eval_grid) | set(eval_budgets))
    test_freq, save_freq = run.test_freq, run.save_freq
    progress = Progress(total, start)
    status = "completed"
    closing, closed = None, True
    advice = diverged_advice(run.lr, run.weight_decay, run.grad_clip)
    streak = SkipStreak(advice)  # the steps in a row that skipped every optimizer step: the run fails at 3
    lost = []  # what W&B lost (a step's row or the run's close as the run stopped; rows its files lack after the
    # close, writer.complete_history): the run ends preempted, and its next attempt re-logs them
    try:
        step = start
        if start == 0 and test_freq > 0 and resume_at is None:
            lost += log_metrics(wb, run_dir, 0, evaluate(model, tok, inserted, config, eval_budgets), progress, stop)
        for step in range(start + 1, total + 1):
            t0, cpu0 = time.perf_counter(), time.process_time()
            set_lr(optimizer, run.lr, step, run.lr_warmup_steps)

            # 3. rollout: G thinking samples per problem, group_size summaries at every budget
            #    (L1: a target length in each problem's prompt)
            model.eval()
            ro, targets = train_rollout(model, tok, inserted, config, step, generator)
            limit = bc.step_limit(control, step, total)
            shape_rewards(ro, control, limit, targets)

            # 4. advantages (arctl.algo.tree_loss) and tree-packed sequences
            trees, questions = objective_trees(ro, len(budgets)), question_labels(ro)
            advs = tree_advantages(trees, questions, objective)
            packed = pack_trees(ro, advs)

            # 5. PPO-clip update over prompt-group mini-batches
            model.train()
            groups = torch.tensor(questions)
            upd = ppo_update(
                model, optimizer, tree_batch(packed, tok.pad_token_id), groups, run.ppo_mini_batch_size,
                run.ppo_epochs, objective, run.grad_clip, run.temperature, run.update_micro_batch, reference,
            )
            model.eval()
            # verl prints "WARN: grad_norm is not finite" and skips the same way; a streak of steps that skipped
            # every optimizer step fails the run (arctl.backends.base.SkipStreak), its line the status warning till then
            note = streak.update(step, upd["skipped"], upd["steps"], upd["loss"])
            if note:
                print(f"tiny: WARNING {note}", flush=True)
                write_warning(run_dir, note)
            metrics = ms.train_metrics(batch_stats(trees, questions, advs, objective, ms.ADV_VAR_KINDS))
            metrics.update({ms.TRAIN_LOSS: upd["loss"], ms.TRAIN_ENTROPY: upd["entropy"],
                            ms.PERF_STEP_TIME_S: time.perf_counter() - t0, ms.PERF_STEP_CPU_S: time.process_time() - cpu0})
            if limit is not None:
                metrics[ms.TRAIN_THINK_LIMIT] = float(limit)
            if "kl" in upd:
                metrics.update({ms.TRAIN_KL: upd["kl"], ms.TRAIN_KL_LOSS: upd["kl_loss"]})
            if streak.diverged:  # the step's row is kept (its train/loss), with no evaluation and no checkpoint
                log_metrics(wb, run_dir, step, metrics, progress, stop)
                streak.fail()

            # 6. evaluation, checkpoint, stop
            if step == total:
                metrics.update(evaluate(model, tok, inserted, config, grid))
            elif test_freq > 0 and step % test_freq == 0:
                metrics.update(evaluate(model, tok, inserted, config, eval_budgets))
            lost += log_metrics(wb, run_dir, step, metrics, progress, stop)
            # no checkpoint inside a streak but the last step's: a resume counts the streak again from its first step
            saved = step == total or (save_freq > 0 and step % save_freq == 0 and streak.first is None)
            if saved:  # (the rows it covers flushed to disk first: a crash never leaves it without them)
                save_checkpoint(run_dir, step, model, optimizer, generator, wandb_id, run.keep_checkpoints,
                                covers=run_dir / writer.METRICS_FILE)
            if step < total and stop.is_set():
                if not saved and streak.first is None:  # (saved: the same step twice, a kill between the second's
                    # .pt and its checksum; in a streak: none, as above)
                    save_checkpoint(run_dir, step, model, optimizer, generator, wandb_id, run.keep_checkpoints,
                                    covers=run_dir / writer.METRICS_FILE)
                status = "preempted"
                break
    except LogitsNotFinite as err:  # a rollout's or an evaluation's: the step and what to change, in one line
        status = "failed"
        after = f" (after {streak.line})" if streak.line else ""  # the first bad step, where a streak came first
        raise Diverged(f"step {step}: {err}{after} — {advice}") from err
    except BaseException:
        status = "failed"  # W&B's exit record says so (its clean one took a failed run for finished: a hunt)
        raise
    finally:
        progress.close()
        if wb is not None:
            try:
                closed = writer.close_run(wb, exit_code=1 if status == "failed" else 0)
            except Exception as err:  # noqa: BLE001 - e.g. the W&B service died with the job's TERM
                closing = err  # raised below unless the stop did it (not over an error of the loop's)
    if closing is not None:
        if not stop_follows(stop.is_set):
            raise closing
        lost.append(f"the run's close ({type(closing).__name__}: {closing})")
    if wb is not None and status == "completed" and not lost:
        # what W&B took is not what it wrote: wandb-core writes nothing after its first write error (a disk
        # full for seconds), and the run "completed" with no W&B history (from a hunt). Re-logged now from
        # metrics.jsonl, else the run ends preempted at its final checkpoint, as below
        config_id = {**config, "wandb": {**(config.get("wandb") or {}), "id": wandb_id}} if wandb_id else config
        missing = writer.complete_history(config_id, run_dir, _metric_rows(run_dir), closed=closed)
        if missing:
            lost.append(missing)
            write_warning(run_dir, f"{WANDB_LOST}{missing} (its files {run_dir / 'wandb'}: a full disk?); "
                                   f"{resume_command(run_dir)} re-logs them from metrics.jsonl without training")
        elif (read_warning(run_dir) or "").startswith(WANDB_LOST):  # an earlier attempt's, now re-logged
            write_warning(run_dir, None)
    if lost and status == "completed":
        # the last step's row (its final evaluation: Table 2) or the run's end never reached W&B: a completed
        # run is never resumed, and its W&B history would lack them for good (from a review). Preempted at the
        # final checkpoint instead: the next attempt re-logs them from metrics.jsonl and trains nothing
        status = "preempted"
    if lost:
        print(f"tiny: W&B lost {', '.join(lost)}; the checkpoint is saved and the next attempt "
              f"({resume_command(run_dir)}) re-logs the W&B history from metrics.jsonl without training", flush=True)
    print(f"tiny: {run.experiment}/{run.arm} seed {seed} {status}; run dir {run_dir}, "
          f"W&B files {run_dir / 'wandb'}", flush=True)
    return status


def covered(config: dict, run: TinyRun, run_dir: Path, found: Found) -> tuple[Found, str | None]:
    """The checkpoint to resume from: ``found`` (the newest intact) where the run's records (metrics.jsonl, the W&B
    files) hold the row of every step up to it (:func:`arctl.track.writer.history_gap`), else the newest intact one
    before the first step they lack, with a note saying so. CheckpointError (one line) where none is kept: a resume
    from ``found`` would complete the run with a hole in its history (from a hunt: a node lost right after the
    step-4 checkpoint, its rows 3..4 with it)."""
    if found.state is None:
        return found, None
    step = int(found.state["step"])
    gap = writer.history_gap(config, run_dir, step, _metric_rows(run_dir), first=0 if run.test_freq > 0 else 1)
    if gap is None:
        return found, None
    lost = writer.gap_line(run_dir, gap, step)
    older = newest_intact(run_dir, below=gap)
    if older.state is None:
        raise CheckpointError(f"{lost}, and no checkpoint before step {gap} is kept: a resume from {found.path} would "
                              f"leave the step out of the run's history; restore the row, or {start_over(run_dir)}")
    older.skipped = [*found.skipped, *older.skipped]
    return older, (f"{lost}: resumed from {older.path.name}, not {found.path.name} (steps "
                   f"{older.state['step'] + 1}..{step} are trained again)")


def resume_point(config: dict, run_dir: Path) -> int | None:
    """The step the run's next attempt resumes from, as :func:`_train` will choose it: its newest intact checkpoint
    whose steps' rows the run's records hold (:func:`covered`), 0 where it has none, None where it cannot resume (no
    checkpoint intact, or none before a step its records lost: the attempt fails, saying so). From a review: the
    dry run named the newest intact checkpoint's step where the attempt went back to an older one."""
    try:
        run = TinyRun.from_config(config)
    except ValueError:  # not a whole run config (a caller that has the folder only): its checkpoints alone say
        from arctl.backends.tiny.checkpoint import resume_step

        return resume_step(Path(run_dir))
    try:
        found, _ = covered(config, run, Path(run_dir), newest_intact(Path(run_dir)))
    except CheckpointError:
        return None
    return 0 if found.state is None else int(found.state["step"])


def full_disk(err: BaseException, where: Path) -> OSError | None:
    """``OSError(ENOSPC)`` naming ``where`` for an error that says the disk is full without saying where (from a
    hunt: the warm-up cache failed as "SafetensorError: ... No space left on device", no path), else None (an
    OSError that names its file already says where; any other error is not a full disk's)."""
    if isinstance(err, OSError) and err.filename:
        return None
    for code in (errno.ENOSPC, errno.EDQUOT):  # an exceeded quota is said as one (launch.job.failure_line)
        if (isinstance(err, OSError) and err.errno == code) or os.strerror(code) in str(err):
            return OSError(code, os.strerror(code), str(where))
    return None


# ----------------------------------------------------------------------------- the step's parts
def step_problems(config: dict, step: int) -> list:
    """The training problems of ``step``: a function of (seed, step) only (exact resume)."""
    run = TinyRun.from_config(config)
    rng = np.random.default_rng([run.seed, int(step), 1])
    return run.task.make_problems(rng, run.train_batch_size)


def train_rollout(model, tok, inserted: InsertedTokens, config: dict, step: int,
                  generator: torch.Generator | None) -> tuple[Rollout, list[int] | None]:
    """The training rollout of ``step``: the step's problems (:func:`step_problems`), ``rollout.n``
    thinking samples each, ``summary.group_size`` summaries at every budget (L1: a target length in
    each prompt, :func:`step_targets`), and the rollout caps verl's agent loop applies to the same
    config: the thinking stops at the largest budget or below it at the method's generation limit
    (ThinkPrune's round, :func:`arctl.algo.methods.control.generation_limit`), a branch's inserted
    and summary tokens within ``summary.max_tokens`` (:func:`arctl.algo.prompts.summary_cap`).
    Returns the rollout (verifier rewards) and the targets."""
    run, control = TinyRun.from_config(config), BudgetControl.from_config(config)
    budgets = list(Objective.from_config(config).budgets)
    problems = step_problems(config, step)
    targets = step_targets(config, control, step, len(problems), max(budgets))
    ro = rollout(
        model, tok, inserted, run.task, problems, run.rollout_n, budgets, run.group_size, run.summary_max_tokens,
        run.temperature, generator, run.max_rows, per_budget=True,
        target_words=[target_word(t, bc.target_choices(control)) for t in targets] if targets else None,
        think_max=bc.generation_limit(control, step, run.total_steps),  # ThinkPrune: no token past the round's limit
    )
    return ro, targets


def step_targets(config: dict, control: BudgetControl, step: int, n: int, max_budget: int) -> list[int] | None:
    """The target length in the prompt of each problem of ``step`` (None when the method writes none:
    L1's): a function of (seed, step, problem) only (:func:`arctl.algo.methods.control.question_target`)."""
    if not bc.writes_target(control):
        return None
    seed = int(config["seed"])
    return [bc.question_target(control, f"tiny:{seed}:{step}:{q}", max_budget) for q in range(n)]


def shape_rewards(ro: Rollout, control: BudgetControl, limit: int | None, targets: list[int] | None) -> None:
    """Replace every branch's verifier rewards by the compared method's
    (:func:`arctl.algo.methods.control.shape_rewards`; ``none`` leaves them; the verifier's stay in
    ``branch.verifier``, which the logged scores report) and recompute the per-budget scores."""
    if not bc.shapes_rewards(control):
        return
    g = ro.scores.shape[1]
    trees: dict[int, list] = {}  # a thinking row -> its branches, one per budget (a training rollout's)
    for br in ro.branches:
        if len(br.budgets) != 1:
            raise ValueError(f"a training branch covers budgets {br.budgets}: shaping rewards needs one per budget")
        trees.setdefault(br.row, []).append(br)
    for row, tree in trees.items():
        # the whole tree at once, rows [m][A] in budget order, as verl's TreeRecord.shaped_tree gives it (from a
        # hunt: one branch at a time, a method that reads across budgets computed other maths here than on verl)
        tree.sort(key=lambda br: br.budgets[0])
        for br in tree:
            br.verifier = list(br.rewards)
        shaped = bc.shape_rewards(
            control, [br.rewards for br in tree], [br.cut for br in tree], [[len(s) for s in br.summaries] for br in tree],
            int(ro.thinking.think_len[row]), bool(ro.thinking.finished[row]), limit=limit,
            target=targets[row // g] if targets else None,
        )
        for br, rewards in zip(tree, shaped, strict=True):
            br.rewards = list(rewards)
    b, _, m = ro.scores.shape
    ro.scores = budget_scores(ro.branches, b * g, m).view(b, g, m)


def objective_trees(ro: Rollout, m: int) -> list[Tree]:
    """The rollout's thinking samples as :class:`arctl.algo.tree_loss.Tree` records (a training
    rollout has one branch per (row, budget): ``per_budget=True``)."""
    n_rows = ro.thinking.think_len.shape[0]
    rewards: list[list] = [[None] * m for _ in range(n_rows)]
    shaped = any(br.verifier is not None for br in ro.branches)
    verifier: list[list] = [[None] * m for _ in range(n_rows)]
    for br in ro.branches:
        for j in br.budgets:
            rewards[br.row][j] = tuple(float(r) for r in br.rewards)
            verifier[br.row][j] = tuple(float(r) for r in (br.verifier if br.verifier is not None else br.rewards))
    lens = ro.thinking.think_len.tolist()
    return [Tree(int(n), tuple(r), tuple(v) if shaped else None) for n, r, v in zip(lens, rewards, verifier)]


def question_labels(ro: Rollout) -> list[int]:
    """The problem index of every thinking row (rows are problem-major, G per problem)."""
    b, g, _ = ro.scores.shape
    return [row // g for row in range(b * g)]


def pack_trees(ro: Rollout, advs: list[TreeAdvantages]) -> list:
    """One packed tree per thinking sample: thinking tokens with their segment's advantage, then the
    summaries of every trained budget with theirs (a prefix's inserted tokens packed once)."""
    per_row: list[list[SummaryBranch]] = [[] for _ in advs]
    for br in ro.branches:
        adv = advs[br.row]
        for j in br.budgets:
            if bool(adv.trained[j]):
                for s, a in zip(br.summaries, adv.summaries[j].tolist()):
                    per_row[br.row].append(SummaryBranch(br.cut, br.inserted, s, a))
    return [pack_tree(ro.thinking.question(row), ro.thinking.thinking(row), per_row[row], adv.thinking,
                      share_inserted=True, dtype=torch.float64) for row, adv in enumerate(advs)]


def first_warmup(run_dir: Path, warm: dict, config: dict, resumed: bool) -> dict:
    """The warm-up record of the run: ``warm`` (the cache's now), or, for a later attempt, the one its first
    attempt recorded (``run_dir/warmup.json``), which the cache may no longer hold (emptied and refilled by a
    training instead of the shipped copy, or by another machine kind): a resumed run's checkpoint carries on
    from the weights it came from, and its record says which. ValueError (one line) where what the attempt
    keeps rests on the first warm-up and the cache's differs: a checkpoint with a KL term (its reference is
    the warm-up), or the first attempt's kept step-0 evaluation with no checkpoint (training would restart
    from other weights than it evaluated). From a hunt: such a resume went on silently, its KL and losses
    other from the first step after it, and the record was overwritten with the new warm-up's sha256."""
    try:
        recorded = json.loads((Path(run_dir) / WARMUP_RECORD).read_text())
    except (OSError, ValueError):
        return warm  # a first attempt
    if not isinstance(recorded, dict) or not recorded.get("weights_sha256") or config.get("init_dir"):
        return warm  # (an init_from run's reference is that run's checkpoint: reference_model checks it)
    before, now = str(recorded["weights_sha256"]), str(warm.get("weights_sha256") or "")
    if not now or now == before:
        return warm
    kl = float((config.get("optim") or {}).get("kl_coef") or 0.0) > 0
    rests = ("its checkpoint's KL term takes the warm-up as its reference" if resumed and kl else
             None if resumed else
             "its first attempt's step-0 evaluation is of those weights, and training would restart from others"
             if any(r.get(ms.STEP_KEY) == 0 for r in _metric_rows(Path(run_dir))) else None)
    if rests:
        raise ValueError(f"tiny backend: the cached warm-up (weights sha256 {now[:12]}) is not the one this run "
                         f"started from ({before[:12]}, {Path(run_dir) / WARMUP_RECORD}): {rests} — restore that "
                         "warm-up (the same $ARCTL_TINY_WARMUP and $ARCTL_CACHE as its first attempt), or "
                         f"{start_over(run_dir)}")
    return {**warm, **recorded} if resumed else warm


def start_over(run_dir: Path | None) -> str:
    """The way to start a run over that a resume refuses (``--force`` reruns completed runs only; a failed or
    stopped one is resumed: from a review, the advice "rerun with --force" did nothing)."""
    if run_dir is None:
        return "start the run over: remove its checkpoints/ and metrics.jsonl, then `arctl resume RUN_ID`"
    run_dir = Path(run_dir)
    return (f"start the run over: remove {run_dir / 'checkpoints'} and {run_dir / 'metrics.jsonl'}, then "
            f"{resume_command(run_dir)}")


def _metric_rows(run_dir: Path) -> list[dict]:
    """The rows of ``run_dir/metrics.jsonl`` (none where it is absent; a line cut by a kill left out)."""
    rows = []
    path = run_dir / writer.METRICS_FILE
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if isinstance(row, dict):
            rows.append(row)
    return rows


def run_model(config: dict) -> tuple[torch.nn.Module, object]:
    """The model of ``config["model"]`` and the toy task's tokenizer, built as the warm-up builds them
    (:func:`arctl.backends.tiny.warmup._train_into`), its weights a random init that the caller replaces: the
    model of a run that starts from another run's weights (``trainer.init_from``), which takes nothing else
    from the warm-up (the tokenizer is the task vocabulary's, the same ids as the cached copy's)."""
    tok = build_tokenizer(toy_task(config["tiny"]["task"]).vocabulary())
    model = build_model(model_config(config["model"], len(tok), tok.pad_token_id, tok.eos_token_id), 0)
    return model.eval(), tok


def source_warmup(init_dir: Path) -> dict:
    """The warm-up record of a run that starts from the run in ``init_dir``: that run's (its ``warmup.json``,
    for a chain its own source's), the warm-up its weights come from; empty where it has none."""
    try:
        record = json.loads((Path(init_dir) / WARMUP_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def check_shapes(model: torch.nn.Module, weights: dict, source: str, init_dir: Path | None = None,
                 config: dict | None = None) -> None:
    """ValueError (one line) where ``weights`` (another run's, described by ``source``) do not fit ``model``: the
    first tensor whose shape differs, both shapes, and the ``model.*`` keys whose values differ from that run's
    (its ``init_dir/config.yaml``), instead of torch's many-line size mismatch after a warm-up (from a hunt)."""
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in weights.items()}
    if mine == theirs:
        return
    differ = [k for k in mine if k in theirs and mine[k] != theirs[k]]
    if differ:
        what = (f"{differ[0]} is {list(theirs[differ[0]])} there and {list(mine[differ[0]])} here"
                + (f", and {len(differ) - 1} other tensors differ" if len(differ) > 1 else ""))
    else:
        extra, lacking = sorted(set(theirs) - set(mine)), sorted(set(mine) - set(theirs))
        what = "; ".join(part for part in (
            f"{len(extra)} of its tensors are not in this run's model (e.g. {extra[0]})" if extra else "",
            f"this run's model has {len(lacking)} tensors they lack (e.g. {lacking[0]})" if lacking else "") if part)
    import yaml

    keys, task = "", False
    try:
        run = yaml.safe_load((Path(init_dir) / "config.yaml").read_text()) or {}
        there, here = run.get("model") or {}, (config or {}).get("model") or {}
        differ_keys = [f"model.{k}={there.get(k)} there, {here.get(k)} here" for k in sorted(set(there) | set(here))
                       if there.get(k) != here.get(k)]
        # the vocabulary (the embedding's rows) is the task's, not a model key: tiny.task differs (from a review:
        # a running_sum run of max_terms 20 from one of 12 was told to copy a model section that was the same)
        tasks = (run.get("tiny") or {}).get("task"), ((config or {}).get("tiny") or {}).get("task")
        if tasks[0] is not None and tasks[1] is not None and task_section(tasks[0]) != task_section(tasks[1]):
            task = True
            (name0, knobs0), (name1, knobs1) = task_section(tasks[0]), task_section(tasks[1])
            differ_keys.append(f"tiny.task.name={name0} there, {name1} here" if name0 != name1 else
                               ", ".join(f"tiny.task.{name1}.{k}={knobs0.get(k)} there, {knobs1.get(k)} here"
                                         for k in sorted(set(knobs0) | set(knobs1)) if knobs0.get(k) != knobs1.get(k)))
        keys = ", ".join(differ_keys)
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):
        pass  # (no config.yaml beside its weights: the shapes alone say it)
    advice = ("give this run that run's model section and task (the task sets the vocabulary)" if task
              else "give this run that run's model section")
    raise ValueError(f"tiny backend: {source} do not fit this run's model: {what}"
                     + (f"; {keys}" if keys else "") + f" — {advice}, or start it from a run of this model")


def start_from_run(model: torch.nn.Module, init_dir: Path, config: dict | None = None) -> dict:
    """Load the final weights of the run in ``init_dir`` (``trainer.init_from``: its newest intact
    checkpoint, which for a completed run is its last step) into ``model``, their shapes checked first
    (:func:`check_shapes`); the optimizer, the RNG streams and the step count stay this run's own. Returns what
    was loaded (run id, step, the checkpoint file, its sha256 and the sha256 of its weights,
    :func:`arctl.backends.tiny.checkpoint.weights_sha256`), which the run keeps in ``init.json``."""
    init_dir = Path(init_dir)
    found = newest_intact(init_dir)
    if found.state is None:
        raise ValueError(f"tiny backend: run {init_dir.name} has no checkpoint to start from ({init_dir})")
    if found.skipped:  # its final weights are damaged: an earlier step's are other weights (from a review)
        raise ValueError(f"tiny backend: run {init_dir.name}'s final weights cannot be started from: "
                         f"{found.warning()} — restore its checkpoint or rerun it ({init_dir})")
    check_shapes(model, found.state["model"], f"the weights of run {init_dir.name} (step {found.state['step']}, "
                 f"{found.path})", init_dir, config)
    model.load_state_dict(found.state["model"])
    return {"run_id": init_dir.name, "step": int(found.state["step"]), "checkpoint": str(found.path),
            "sha256": file_sha256(found.path), "weights_sha256": weights_sha256(found.state["model"])}


def started_from(init: dict, init_dir: Path, run_dir: Path | None = None) -> tuple[Path, dict]:
    """The checkpoint a resumed run started from (its ``init.json``: ``init``), as (path, state): the file of that
    name in the source's ``checkpoints/`` (the folder as this run finds it now, ``init_dir``: a moved workspace,
    another host's mount) or, where that holds other weights (the source was rerun since: ``--force`` moves its
    checkpoints to ``previous/<time>/``), in its archives, newest first. Matched by the sha256 of its weights
    (``weights_sha256``; a rerun that trained the same weights writes another file, with another W&B id: from a
    hunt, such a resume was refused); an ``init.json`` of an older arctl by the file's sha256. ValueError (one
    line) naming every folder looked in where none matches."""
    name = Path(init["checkpoint"]).name
    archives = sorted((p for p in (init_dir / "previous").glob("*") if p.is_dir()), reverse=True)
    places = [init_dir / "checkpoints", *(a / "checkpoints" for a in archives)]
    weights = init.get("weights_sha256")
    for path in (place / name for place in places):
        if not path.is_file():
            continue
        if weights is None and file_sha256(path) != init["sha256"]:
            continue
        try:
            state = load_checkpoint(path)
        except Exception:  # noqa: BLE001 - any way a file fails to load makes it unusable
            continue
        if weights is None or weights_sha256(state["model"]) == weights:
            return path, state
    digest = f"weights sha256 {weights[:12]}" if weights else f"file sha256 {init['sha256'][:12]}"
    where = ", ".join(str(p) for p in places)
    raise ValueError(f"tiny backend: the checkpoint this run started from (run {init['run_id']}'s {name}, {digest}) "
                     f"is gone or changed (run {init['run_id']} rerun?), and no {name} in {where} holds it: its KL "
                     f"reference cannot be rebuilt — restore that checkpoint, or {start_over(run_dir)}")


def reference_model(model: torch.nn.Module, init_dir: str | Path | None,
                    run_dir: Path | None = None, resumed: bool = False) -> torch.nn.Module:
    """The reference of the KL term (``optim.kl_coef > 0``): a frozen copy of the weights RL starts
    from, the warm-up's or, with ``trainer.init_from``, that run's final weights (verl's reference
    is ``model.path``: the same weights), which a run that starts has in ``model`` already
    (:func:`start_from_run`). Taken before a resumed run restores its checkpoint; a resumed run's is the
    checkpoint its ``init.json`` names (:func:`started_from`: found by its weights, in the source's
    archives too; gone: one line, not another reference; from a review, as verl's init_model does)."""
    ref = copy.deepcopy(model)
    record = Path(run_dir) / INIT_RECORD if run_dir is not None else None
    if init_dir and resumed and record is not None and record.is_file():  # (not resumed: it starts over)
        init = json.loads(record.read_text())
        path, state = started_from(init, Path(init_dir), run_dir)
        if path.parent != Path(init_dir) / "checkpoints":
            print(f"tiny: the KL reference is the checkpoint this run started from, kept in {path} (run "
                  f"{init['run_id']} was rerun since)", flush=True)
        ref.load_state_dict(state["model"])
    elif init_dir and resumed:  # a resumed run without init.json (an older arctl's): that run's final weights
        start_from_run(ref, Path(init_dir))
    return ref.eval().requires_grad_(False)


def record_warmup(run_dir: Path, warm: dict, wb=None) -> dict:
    """What the run started from, for every report of it: the warm-up's cache key, the sha256 of its
    weights and its accuracy per eval budget, in ``run_dir/warmup.json`` and the W&B run's config
    (``warmup``)."""
    record = {k: warm.get(k) for k in WARMUP_FIELDS}
    atomic_write(run_dir / WARMUP_RECORD, json.dumps(record, indent=1))
    if wb is not None:
        wb.config.update({WARMUP_SECTION: record}, allow_val_change=True)
    return record


MACHINE_RECORD = "machine.json"


def record_machine(run_dir: Path, wb=None) -> list[str]:
    """Where the run trained: the kind of machine of each attempt (:func:`arctl.backends.tiny.warmup.machine_kind`;
    one run id gives the same numbers on every machine of one kind, not across kinds), in order, each once
    in a row, in ``run_dir/machine.json`` (``{"kinds": [...]}``) and the W&B run's config (``machine``:
    the kinds joined by "; ", so a run resumed on another kind says so in every report of it)."""
    path = Path(run_dir) / MACHINE_RECORD
    try:
        kinds = [str(k) for k in json.loads(path.read_text())["kinds"]]
    except (OSError, ValueError, KeyError, TypeError):
        kinds = []
    if not kinds or kinds[-1] != machine_kind():
        kinds.append(machine_kind())
    atomic_write(path, json.dumps({"kinds": kinds}, indent=1))
    if wb is not None:
        wb.config.update({MACHINE_SECTION: "; ".join(kinds)}, allow_val_change=True)
    return kinds


def set_lr(optimizer: torch.optim.Optimizer, lr: float, step: int, warmup_steps: int) -> None:
    """The learning rate of RL step ``step`` (1, 2, ...) under ``optim.warmup_steps``, as verl sets it: its
    constant-with-warm-up schedule (a LambdaLR at ``min(1, k / W)``) starts at k = 0 and steps once after each
    RL step's update, so step s trains at ``lr * min(1, (s - 1) / W)`` (step 1 at 0). From a hunt: tiny trained
    step s at ``s / W``, a step ahead of verl through the warm-up (tests/tiny/test_settings.py compares them)."""
    scale = min(1.0, (step - 1) / warmup_steps) if warmup_steps > 0 else 1.0
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
            "(arctl/backends/tiny/conf/scale/tiny.yaml defines them)"
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


def open_wandb(config: dict, run_dir: Path, wandb_id: str | None, resume_at: int | None = None,
               history: list[dict] | tuple = ()):
    """The W&B run (offline by default) via :func:`arctl.track.writer.open_run`: a resumed run
    reuses its id (the checkpoint's) and rewinds its history to the steps it keeps."""
    from arctl.track import writer

    if (config.get("wandb") or {}).get("mode") == "disabled":
        return None
    if wandb_id is not None and not (config.get("wandb") or {}).get("id"):
        config = {**config, "wandb": {**(config.get("wandb") or {}), "id": wandb_id}}
    return writer.open_run(config, run_dir, resume_at=resume_at, history=history, restart=resume_at is None)


def kept_rows(run_dir: Path, resume_at: int | None) -> list[dict]:
    """The rows of ``run_dir/metrics.jsonl`` the run keeps (steps <= ``resume_at``, the checkpoint's;
    an attempt that kept nothing keeps only a step-0 row); the file is rewritten to hold exactly them."""
    path = run_dir / writer.METRICS_FILE
    if not path.exists():
        return []
    rows = [row for row in _metric_rows(run_dir) if isinstance(row.get(ms.STEP_KEY), int)]
    limit = 0 if resume_at is None else resume_at
    kept = [r for r in rows if r[ms.STEP_KEY] <= limit]
    atomic_write(path, "".join(json.dumps(r) + "\n" for r in kept))
    return kept


def log_metrics(run, run_dir: Path, step: int, metrics: dict, progress: Progress,
                stop: threading.Event | None = None) -> list[str]:
    """Log one row to ``run_dir/metrics.jsonl`` (first: the record a resume repairs W&B from) and
    to W&B (``_step`` = the step); update the progress display. A W&B failure while the run is
    stopping is reported, not raised, so that the stop checkpoint is still written: SLURM's TERM
    reaches wandb-core too, and the service may die before, during or after this call, or before
    the job's own handler has set ``stop`` (the failure waits for it:
    :func:`arctl.backends.base.stop_follows`). Returns what W&B lost: ``["step N"]``, else ``[]``."""
    from arctl.track.writer import log_row

    row = {ms.STEP_KEY: step, **metrics}
    path = run_dir / writer.METRICS_FILE
    try:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
    except OSError as err:  # a full disk's write error names no file: the line names it, and the space free there
        if (full := full_disk(err, path)) is not None:
            raise full from err
        raise
    if run is not None:
        try:
            log_row(run, row)
        except Exception as err:  # noqa: BLE001
            if stop is None or not stop_follows(stop.is_set):
                raise
            progress.update(step, metrics)
            return [f"step {step} ({type(err).__name__})"]
    progress.update(step, metrics)
    return []


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
        anytime = [v for k, v in metrics.items() if k.endswith(f"/{ms.NAME_ANYTIME_ACC}")]
        if anytime:
            self.anytime = anytime[0]
            final = [v for k, v in metrics.items() if k.endswith(f"/{ms.NAME_FINAL_ACC}")]
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
