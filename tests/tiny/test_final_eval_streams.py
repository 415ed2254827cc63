"""The final evaluation (``eval.grid`` and ``eval.budgets``) gives the same numbers at ``eval.budgets`` as a regular
evaluation of the same model: common random numbers across evaluations. From a hunt: one rollout over the grid drew
more summaries at every budget and the diagnostics continued that stream, so two runs whose models were bit-identical
read acc@48 .289 vs .273 and nvar/grpo@192 .54 vs .42; with L1 and budget forcing target 48's group grew to
[48, 54, 60, 66], forcing a thinking that ended at 47 tokens at the final step only."""

from __future__ import annotations

import math

import pytest
from micro import MICRO  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.algo.methods import control as bc
from arctl.algo.settings import BudgetControl
from arctl.backends.tiny.evaluate import evaluate
from arctl.track import metrics_schema as ms


def _model(config: dict, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    from arctl.algo.prompts import InsertedTokens
    from arctl.algo.settings import Objective
    from arctl.backends.tiny import evaluate as ev
    from arctl.backends.tiny.warmup import warmup_model

    model, tok, _ = warmup_model(config, tmp_path / "run", lambda m, t: ev.budget_accuracy(m, t, config, 4))
    return model, tok, InsertedTokens.from_tokenizer(tok, Objective.from_config(config).summary.inserted)


def _both(config: dict, tmp_path, monkeypatch) -> tuple[dict, dict, list[int], list[int]]:
    """A regular and a final evaluation of one model, as the trainer calls them."""
    model, tok, inserted = _model(config, tmp_path, monkeypatch)
    eval_budgets = list(config["eval"]["budgets"])
    grid = sorted(set(config["eval"]["grid"]) | set(eval_budgets))
    assert set(eval_budgets) < set(grid)  # the premise: the final evaluation covers more budgets
    regular = evaluate(model, tok, inserted, config, eval_budgets)
    final = evaluate(model, tok, inserted, config, grid)
    return regular, final, eval_budgets, grid


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_the_final_evaluation_gives_a_regular_evaluations_numbers_at_the_eval_budgets(tmp_path, monkeypatch):
    config = arm_config("main-ar-uniform", "ar-uniform",
                        overrides=[*MICRO, "eval.grid_size=8", "eval.num_problems=16", "tiny.diag_problems=4"])
    regular, final, eval_budgets, grid = _both(config, tmp_path, monkeypatch)
    ds = "toy"
    shared = [*(ms.eval_acc(ds, b) for b in eval_budgets), ms.eval_anytime_acc(ds), ms.eval_think_len(ds)]
    diagnostics = [k for k in regular if "/corr_v" in k or "/nvar/" in k]
    assert len(diagnostics) == 5 * len(eval_budgets)
    differ = [k for k in [*shared, *diagnostics] if not _same(regular[k], final[k])]
    assert not differ, {k: (regular[k], final[k]) for k in differ}
    # the grid's keys, over the merged accuracies
    assert {ms.eval_acc(ds, b) for b in grid} <= set(final)
    acc = [final[ms.eval_acc(ds, b)] for b in grid]
    assert final[ms.eval_grid_anytime_acc(ds)] == sum(acc) / len(acc)
    assert {ms.eval_curve_auc(ds), *(ms.eval_acc_at_frac(ds, f) for f in ms.ACC_FRACTIONS)} <= set(final)
    assert ms.eval_grid_anytime_acc(ds) not in regular


@pytest.mark.parametrize("arm", ["l1-exact"])
def test_l1_forcing_at_the_eval_budgets_is_the_same_at_the_final_evaluation(tmp_path, monkeypatch, arm):
    from arctl.backends.tiny import evaluate as ev

    config = arm_config("baselines-l1", arm, overrides=[*MICRO, "eval.grid_size=16", "eval.num_problems=16",
                                                       "tiny.diag_problems=4", "budget_control.forcing_extensions=2"])
    control = BudgetControl.from_config(config)
    eval_budgets = list(config["eval"]["budgets"])
    grid = sorted(set(config["eval"]["grid"]) | set(eval_budgets))
    # the premise: over the grid an eval budget's target group reaches past its largest eval budget
    regular_groups = bc.eval_target_groups(control, eval_budgets)
    group_max = {b: max(g) for _, g in bc.eval_target_groups(control, grid) for b in g}
    assert any(group_max[b] > max(g) for _, g in regular_groups for b in g)
    model, tok, inserted = _model(config, tmp_path, monkeypatch)
    real, forced_at = ev.rollout, []  # per forced rollout: its budgets and its forcing budget

    def rollout(*args, forcing=None, budgets=(), **kw):
        if forcing is not None:
            forced_at.append((list(budgets), forcing.budget))
        return real(*args, forcing=forcing, budgets=budgets, **kw)

    monkeypatch.setattr(ev, "rollout", rollout)
    found = []
    for budgets in (eval_budgets, grid):
        forced_at.clear()
        found.append((evaluate(model, tok, inserted, config, budgets),
                      {b: at for group, at in forced_at for b in group if b in eval_budgets}))
    (regular, regular_at), (final, final_at) = found
    # every eval budget is forced at the same budget at both: the largest of its target group's eval budgets
    assert regular_at == final_at == {b: max(g) for _, g in regular_groups for b in g}
    forced = ms.forced_dataset("toy")
    keys = [*(ms.eval_acc(ds, b) for ds in ("toy", forced) for b in eval_budgets),
            ms.eval_anytime_acc(forced), ms.eval_think_len(forced)]
    differ = [k for k in keys if not _same(regular[k], final[k])]
    assert not differ, {k: (regular[k], final[k]) for k in differ}
    assert {ms.eval_acc(forced, b) for b in grid} <= set(final)
    assert ms.eval_grid_anytime_acc(forced) in final
