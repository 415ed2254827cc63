"""The variance diagnostics (``eval/{ds}/corr_v{1,2}@{b}``, ``nvar/*@{b}``, paper Fig. 2) are computed over
``eval.budgets`` at every evaluation, the final one included. From a hunt of the docs against the code: the final
evaluation, whose accuracy covers the 32-budget grid, computed them over the grid (a prior of 1/32 a budget, V1
over 31 earlier budgets, BRPO's mixing k/32): on one model nvar/grpo@192 read 2.88 there against .52 over the 4
budgets, and claim 7's tests read those last values while its precondition reads the first evaluation's."""

from __future__ import annotations

from micro import MICRO  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.algo import metrics as algo_metrics
from arctl.backends.tiny.evaluate import evaluate


def test_the_final_evaluations_diagnostics_are_over_the_eval_budgets_not_the_grid(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    from arctl.algo.prompts import InsertedTokens
    from arctl.algo.settings import Objective
    from arctl.backends.tiny import evaluate as ev
    from arctl.backends.tiny.warmup import warmup_model

    config = arm_config("main-ar-uniform", "ar-uniform",
                        overrides=[*MICRO, "eval.grid_size=8", "eval.num_problems=4", "tiny.diag_problems=2"])
    eval_budgets, grid = sorted(config["eval"]["budgets"]), sorted(config["eval"]["grid"])
    assert set(eval_budgets) < set(grid)  # the premise: the final evaluation's accuracy covers more budgets
    model, tok, _ = warmup_model(config, tmp_path / "run", lambda m, t: ev.budget_accuracy(m, t, config, 4))
    inserted = InsertedTokens.from_tokenizer(tok, Objective.from_config(config).summary.inserted)
    seen = []
    real = algo_metrics.eval_diagnostics

    def diagnostics(scores, lens, budgets, lam):
        seen.append(list(budgets))
        assert scores.shape[-1] == len(budgets)  # the rollout was cut at those budgets too
        return real(scores, lens, budgets, lam)

    monkeypatch.setattr(ev.metrics, "eval_diagnostics", diagnostics)
    final = evaluate(model, tok, inserted, config, sorted(set(grid) | set(eval_budgets)))
    assert seen == [eval_budgets]
    assert {k for k in final if "/nvar/" in k or "/corr_v" in k} == {
        f"eval/toy/{name}@{b}" for b in eval_budgets
        for name in ("corr_v1", "corr_v2", "nvar/brpo", "nvar/grpo", "nvar/v1")}
    assert {f"eval/toy/acc@{b}" for b in grid} <= set(final)  # the accuracy still over the grid
