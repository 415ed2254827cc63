"""Evaluation on a fixed held-out problem set: accuracy at every budget, anytime and final
accuracy, mean thinking length, and the variance diagnostics of ``arctl.algo.metrics`` (which need
a group of thinking samples per problem, so they come from a smaller grouped evaluation).

The evaluation draws its own sampling noise from a generator seeded by ``tiny.eval_seed``: every
arm and every evaluation see the same problems and the same random stream (common random numbers),
and evaluation never touches the training RNG.
"""

from __future__ import annotations

import numpy as np
import torch

from arctl.algo import metrics
from arctl.algo.methods import control as bc
from arctl.algo.prompts import InsertedTokens
from arctl.algo.settings import BudgetControl, Objective
from arctl.backends.tiny.rollout import rollout
from arctl.backends.tiny.settings import DATASET, TinyRun
from arctl.backends.tiny.tasks import target_word
from arctl.backends.tiny.tokenizer import encode_words
from arctl.backends.tiny.warmup import inserted_style
from arctl.track import metrics_schema as ms


def eval_problems(config: dict, n: int, salt: int = 0) -> list:
    return _problems(TinyRun.from_config(config), n, salt)


def _problems(run: TinyRun, n: int, salt: int = 0) -> list:
    rng = np.random.default_rng([run.eval_seed, salt])
    return run.task.make_problems(rng, n)


def evaluate(model, tok, inserted: InsertedTokens, config: dict, budgets: list[int], dataset: str = DATASET,
             sample_seed: int | None = None) -> dict:
    """Schema metrics ``eval/{dataset}/...`` at ``budgets``: accuracy per budget, anytime accuracy over
    ``eval.budgets`` and, when ``budgets`` cover ``eval.grid``, over the grid too, with the grid's
    curve AUC and accuracy at ``ACC_FRACTIONS`` of its largest budget
    (``arctl.track.metrics_schema.anytime_eval_metrics``); the variance diagnostics (paper Fig. 2) at
    ``eval.budgets`` always.

    The compared methods (``budget_control``): an L1 model is prompted per budget with its target
    (one rollout per target, :func:`arctl.algo.methods.control.eval_target_groups`; the diagnostics
    at the largest budget's target); with budget forcing the same evaluation runs again with s1's
    rule and is logged under ``eval/{dataset}-forced/``.

    ``budgets`` beyond ``eval.budgets`` (the final evaluation's grid) do not change what is computed at
    ``eval.budgets``: those keys (accuracy, anytime accuracy, thinking length, diagnostics) come from
    the same rollouts as at a regular evaluation, bit for bit, and only the extra budgets are sampled
    in rollouts of their own (the same problems, a sampling stream of their own,
    :data:`EXTRA_BUDGETS_SALT`); the grid keys are over the merged accuracies. From a hunt: one
    rollout over the grid drew other summaries at every budget and moved the diagnostics' stream, so
    the same model read acc@48 .289 at a regular and .273 at the final evaluation.

    ``sample_seed`` (default ``tiny.eval_seed``) seeds the sampling stream alone: a re-evaluation on
    the same problems with another stream (``benchmarks/eval_noise.py``: how much of a comparison is
    evaluation noise)."""
    control, run = BudgetControl.from_config(config), TinyRun.from_config(config)
    seed = run.eval_seed if sample_seed is None else int(sample_seed)
    budgets, extra = _split(run, budgets)
    out, gen = _accuracy(model, tok, inserted, run, budgets, dataset, control, forcing=False, seed=seed, extra=extra)
    n_diag = run.diag_problems
    if n_diag > 0 and run.rollout_n > 1:  # the diagnostics continue the main rollout's sampling stream (a group
        # of one has no V2 but the sample itself: corr 1, variance 0, as the verl backend skips them)
        # at eval.budgets whatever budgets the accuracy covers: the estimator (its prior, V1's earlier budgets,
        # BRPO's mixing) depends on the budget set, and a key means one thing at every evaluation (from a hunt:
        # the final evaluation computed them over the 32-budget grid, where nvar/grpo@192 read 2.88 against .52
        # over the 4 budgets on one model; the verl backend's validation and the authors' use the 4)
        diag_budgets, g = sorted(run.eval_budgets), run.rollout_n
        target = bc.eval_target_groups(control, diag_budgets)[-1][0]
        problems = _problems(run, n_diag, salt=1)
        diag = rollout(
            model, tok, inserted, run.task, problems, g, generator=gen,
            target_words=_words(control, target, len(problems)),
            **_common(run, diag_budgets),
        )
        lens = diag.thinking.think_len.view(-1, g)
        found = metrics.eval_diagnostics(diag.scores, lens, diag_budgets, Objective.from_config(config).thinking.lam)
        out.update(ms.eval_diagnostic_metrics(dataset, found))
    if control.forcing_extensions > 0:
        out.update(_accuracy(model, tok, inserted, run, budgets, ms.forced_dataset(dataset), control, forcing=True,
                             seed=seed, extra=extra)[0])
    return out


EXTRA_BUDGETS_SALT = 1  # the extra budgets' sampling stream: a generator seeded with (sampling seed, this salt)


def _split(run: TinyRun, budgets: list[int]) -> tuple[list[int], list[int]]:
    """``(budgets, extra)``: ``(eval.budgets as a regular evaluation passes them, the other budgets)``
    when ``budgets`` cover ``eval.budgets`` and more; else ``(budgets, [])``, one pass as given."""
    regular = list(run.eval_budgets)
    extra = sorted({int(b) for b in budgets} - {int(b) for b in regular})
    if not extra or not {int(b) for b in regular} <= {int(b) for b in budgets}:
        return list(budgets), []
    return regular, extra


def _extra_seed(seed: int) -> int:
    """The seed of the extra budgets' sampling stream, a function of the evaluation's sampling seed."""
    return int(np.random.SeedSequence([int(seed), EXTRA_BUDGETS_SALT]).generate_state(1, np.uint64)[0] >> 1)


def _common(run: TinyRun, budgets: list[int]) -> dict:
    return dict(budgets=list(budgets), group_size=1, summary_max_tokens=run.summary_max_tokens,
                temperature=run.eval_temperature, max_rows=run.max_rows)


def _words(control: BudgetControl, target: int | None, n: int) -> list[str | None] | None:
    """The L1 target word of every problem (None without a target)."""
    if target is None:
        return None
    return [target_word(target, bc.target_choices(control))] * n


def _accuracy(model, tok, inserted: InsertedTokens, run: TinyRun, budgets: list[int], dataset: str,
              control: BudgetControl, forcing: bool, seed: int, extra: list[int] = ()) -> tuple[dict, torch.Generator]:
    """Accuracy at every budget on the held-out problems (one rollout per L1 target, each from the
    sampling stream ``seed``), the anytime summaries and the mean thinking length (of the largest
    budget's rollout); and the sampling generator as the last rollout left it. The ``extra`` budgets
    come from rollouts of their own (stream :func:`_extra_seed`), which change neither the generator
    nor the thinking length; the summaries are over both."""
    acc, think_len, gen = _rollouts(model, tok, inserted, run, budgets, control, forcing, seed)
    if extra:
        acc.update(_rollouts(model, tok, inserted, run, extra, control, forcing, _extra_seed(seed))[0])
    acc = {b: acc[b] for b in sorted(acc)}
    out = {ms.eval_acc(dataset, b): a for b, a in acc.items()}
    out.update(ms.anytime_eval_metrics(dataset, acc, list(run.eval_budgets), list(run.eval_grid) or None))
    out[ms.eval_think_len(dataset)] = think_len
    out[ms.eval_chance_acc(dataset)] = float(run.task.chance_accuracy())
    return out, gen


def _rollouts(model, tok, inserted: InsertedTokens, run: TinyRun, budgets: list[int], control: BudgetControl,
              forcing: bool, seed: int) -> tuple[dict[int, float], float, torch.Generator]:
    """Accuracy per budget, the mean thinking length of the last rollout, and its generator: one rollout
    per L1 target group of ``budgets`` (forced at the group's largest budget), each from stream ``seed``."""
    problems = _problems(run, run.eval_num_problems)
    acc: dict[int, float] = {}
    think_len = float("nan")
    for target, group in bc.eval_target_groups(control, budgets):
        cfg = None
        if forcing:
            cue = encode_words(tok, [control.forcing_cue])
            cfg = bc.forcing_config(control, max(group), inserted.think_end, cue)
        # every group (and the forced pass) sees the same sampling stream: common random numbers
        gen = torch.Generator().manual_seed(seed)
        main = rollout(model, tok, inserted, run.task, problems, run.eval_n_samples, generator=gen,
                       target_words=_words(control, target, len(problems)), forcing=cfg, **_common(run, group))
        acc.update({int(b): float(a) for b, a in zip(group, metrics.accuracy_per_budget(main.scores))})
        think_len = float(main.thinking.think_len.double().mean())
    return acc, think_len, gen


def budget_accuracy(model, tok, config: dict, n_problems: int) -> dict[int, float]:
    """Accuracy at every eval budget on ``n_problems`` held-out problems (the warm-up's record), after
    the run's inserted tokens (``summary.inserted``, as the warm-up trained them)."""
    inserted = InsertedTokens.from_tokenizer(tok, inserted_style(config))
    run = TinyRun.from_config(config)
    gen = torch.Generator().manual_seed(run.eval_seed)
    budgets = sorted(run.eval_budgets)
    out = rollout(
        model, tok, inserted, run.task, _problems(run, n_problems, salt=2), 1, budgets,
        1, run.summary_max_tokens, run.eval_temperature, gen, run.max_rows,
    )
    return {int(b): float(a) for b, a in zip(budgets, metrics.accuracy_per_budget(out.scores))}
