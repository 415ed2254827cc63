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
from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny import task
from arctl.backends.tiny.rollout import rollout
from arctl.track import metrics_schema as ms


def eval_problems(config: dict, n: int, salt: int = 0) -> list[task.Problem]:
    knobs = config["tiny"]["task"]
    rng = np.random.default_rng([int(config["tiny"]["eval_seed"]), salt])
    return task.make_problems(rng, n, int(knobs["min_terms"]), int(knobs["max_terms"]))


def evaluate(model, tok, inserted: InsertedTokens, config: dict, budgets: list[int], dataset: str = "toy") -> dict:
    """Schema metrics ``eval/{dataset}/...`` at ``budgets``: accuracy per budget, anytime accuracy over
    ``eval.budgets`` and, when ``budgets`` cover ``eval.grid``, over the grid too, with the grid's
    curve AUC and accuracy at ``ACC_FRACTIONS`` of its largest budget
    (``arctl.track.metrics_schema.anytime_eval_metrics``)."""
    ev, tiny = config["eval"], config["tiny"]
    n_problems = int(ev["num_problems"] or 1024)
    common = dict(
        budgets=list(budgets), group_size=1, summary_max_tokens=int(config["summary"]["max_tokens"]),
        temperature=float(ev["temperature"]), max_rows=int(tiny["max_rows"]),
    )
    gen = torch.Generator().manual_seed(int(tiny["eval_seed"]))
    main = rollout(model, tok, inserted, eval_problems(config, n_problems), int(ev["n_samples"]), generator=gen, **common)
    acc = {int(b): float(a) for b, a in zip(budgets, metrics.accuracy_per_budget(main.scores))}
    out = {ms.eval_acc(dataset, b): a for b, a in acc.items()}
    out.update(ms.anytime_eval_metrics(dataset, acc, ev["budgets"], ev.get("grid")))
    out[ms.eval_think_len(dataset)] = float(main.thinking.think_len.double().mean())

    n_diag = int(tiny["diag_problems"])
    if n_diag > 0:
        diag = rollout(
            model, tok, inserted, eval_problems(config, n_diag, salt=1), int(config["rollout"]["n"]), generator=gen, **common
        )
        g = int(config["rollout"]["n"])
        lens = diag.thinking.think_len.view(-1, g)
        found = metrics.eval_diagnostics(diag.scores, lens, budgets, float(config["thinking"]["lam"]))
        out.update(ms.eval_diagnostic_metrics(dataset, found))
    return out


def max_budget_accuracy(model, tok, config: dict, n_problems: int) -> float:
    """Accuracy at the largest eval budget on ``n_problems`` held-out problems (warm-up check)."""
    inserted = InsertedTokens.from_tokenizer(tok)
    gen = torch.Generator().manual_seed(int(config["tiny"]["eval_seed"]))
    out = rollout(
        model, tok, inserted, eval_problems(config, n_problems, salt=2), 1, [int(max(config["eval"]["budgets"]))],
        1, int(config["summary"]["max_tokens"]), float(config["eval"]["temperature"]), gen, int(config["tiny"]["max_rows"]),
    )
    return float(out.scores.mean())
