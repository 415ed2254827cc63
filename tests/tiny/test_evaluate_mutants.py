"""What the tiny evaluation samples, on the shipped warm-up (the one model every machine shares that scores between
0 and 1 at these sizes): a regular evaluation is one rollout of the held-out problems with ``eval.n_samples``
thinking samples each at ``eval.temperature`` and one summary per cut, from the stream ``tiny.eval_seed``; the
variance diagnostics are a rollout of problems of their own (``tiny.diag_problems`` x ``rollout.n``) that
continues that stream, each sample read with its own thinking length; an L1 model's budget reads the same numbers
whichever other budgets are evaluated beside it (every target's rollout restarts the stream: common random numbers),
its thinking length is the largest target's and its diagnostics are at the largest budget's target; the forced pass
of budget forcing samples the plain pass's stream. From a mutation hunt (2026-12-07): eval.temperature ignored,
two summaries per cut, eval.n_samples ignored, the diagnostics on the evaluation's problems or on a fresh stream,
their lengths grouped across problems, the L1 target groups on one running stream, L1's thinking length of the
smallest target, its diagnostics at the smallest target, the forced pass on another stream: each passed every test."""

from __future__ import annotations

import math

import pytest
import torch
from micro import MICRO_AT_TINY_BUDGETS  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.algo import metrics
from arctl.algo.methods import control as bc
from arctl.algo.prompts import InsertedTokens
from arctl.algo.settings import BudgetControl, Objective
from arctl.backends.tiny import evaluate as ev
from arctl.backends.tiny import warmup
from arctl.backends.tiny.rollout import rollout
from arctl.backends.tiny.settings import WARMUP_ENV, TinyRun
from arctl.backends.tiny.tasks import target_word
from arctl.backends.tiny.tokenizer import encode_words
from arctl.track import metrics_schema as ms

# the micro RL and evaluation settings at the tiny scale's model, task and warm-up (the shipped warm-up's key)
SHIPPED = [o for o in MICRO_AT_TINY_BUDGETS if not o.startswith(("model.", "tiny.task.", "tiny.warmup."))]
DS = "toy"


def _shipped(experiment: str, arm: str, overrides: list[str], cache) -> tuple[dict, object, object, InsertedTokens]:
    config = arm_config(experiment, arm, overrides=[*SHIPPED, *overrides])
    assert warmup.shipped_dir(warmup.warmup_key(config)) is not None, "no shipped warm-up for this config"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARCTL_CACHE", str(cache / "cache"))
        mp.delenv(WARMUP_ENV, raising=False)
        model, tok, info = warmup.warmup_model(config, cache / "run", _not_measured(config))
    assert info["source"] == "shipped"  # installed, not trained
    return config, model, tok, InsertedTokens.from_tokenizer(tok, warmup.inserted_style(config))


def _not_measured(config):
    """The run's measure of its warm-up's accuracy (under these micro eval settings, not the shipped record's, the
    warm-up measures its own): not what these tests read."""
    return lambda model, tok: {int(b): 0.0 for b in config["eval"]["budgets"]}


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """AR-uniform with 2 thinking samples per problem at temperature 0.7, diagnostics on 6 problems x 4 samples."""
    return _shipped("main-ar-uniform", "ar-uniform",
                    ["eval.num_problems=8", "eval.n_samples=2", "eval.temperature=0.7", "tiny.diag_problems=6",
                     "rollout.n=4"], tmp_path_factory.mktemp("plain"))


def test_a_regular_evaluation_is_one_rollout_of_the_held_out_problems(plain):
    """Accuracy per budget and thinking length: ``eval.num_problems`` problems x ``eval.n_samples`` thinking samples
    at ``eval.temperature``, one summary per cut (each sample's accuracy a 0/1 verdict), on the stream
    ``tiny.eval_seed``: the numbers of that rollout by hand."""
    config, model, tok, inserted = plain
    run = TinyRun.from_config(config)
    budgets = sorted(run.eval_budgets)
    assert run.eval_n_samples == 2 and run.eval_temperature == 0.7  # the premise: neither is a default
    got = ev.evaluate(model, tok, inserted, config, budgets)
    by_hand = rollout(model, tok, inserted, run.task, ev.eval_problems(config, 8), 2, budgets, 1,
                      run.summary_max_tokens, 0.7, torch.Generator().manual_seed(run.eval_seed), run.max_rows)
    assert tuple(by_hand.scores.shape) == (8, 2, len(budgets))
    want = {b: float(a) for b, a in zip(budgets, metrics.accuracy_per_budget(by_hand.scores))}
    assert {b: got[ms.eval_acc(DS, b)] for b in budgets} == want
    assert all(math.isclose(a * 16, round(a * 16)) for a in want.values())  # 16 verdicts of 0 or 1 a budget
    assert any(0 < a < 1 for a in want.values()), want  # the premise: another sampling could show
    assert got[ms.eval_think_len(DS)] == float(by_hand.thinking.think_len.double().mean())
    assert got[ms.eval_anytime_acc(DS)] == pytest.approx(sum(want.values()) / len(want))


def test_the_diagnostics_are_a_rollout_of_their_own_problems_continuing_the_stream(plain):
    """``tiny.diag_problems`` problems of their own (none of the evaluation's), ``rollout.n`` thinking samples each,
    sampled after the evaluation's rollout on the same generator; each sample's score read with its own thinking
    length (paper Fig. 2's quantities at ``eval.budgets``)."""
    config, model, tok, inserted = plain
    run = TinyRun.from_config(config)
    budgets = sorted(run.eval_budgets)
    got = ev.evaluate(model, tok, inserted, config, budgets)
    diag_problems, eval_problems = ev.eval_problems(config, 6, salt=1), ev.eval_problems(config, 8)
    assert not set(diag_problems) & set(eval_problems)
    gen = torch.Generator().manual_seed(run.eval_seed)
    common = dict(budgets=budgets, group_size=1, summary_max_tokens=run.summary_max_tokens, temperature=0.7,
                  max_rows=run.max_rows)
    rollout(model, tok, inserted, run.task, eval_problems, 2, generator=gen, **common)
    diag = rollout(model, tok, inserted, run.task, diag_problems, 4, generator=gen, **common)
    want = metrics.eval_diagnostics(diag.scores, diag.thinking.think_len.view(6, 4), budgets,
                                    Objective.from_config(config).thinking.lam)
    want = ms.eval_diagnostic_metrics(DS, want)
    assert set(want) <= set(got)
    differ = {k: (got[k], v) for k, v in want.items() if not _same(got[k], v)}
    assert not differ, differ
    assert sum(not math.isnan(v) for v in want.values()) >= 10, want  # the premise: numbers that could differ


@pytest.fixture(scope="module")
def l1(tmp_path_factory):
    """L1-Exact (a target word per budget in the prompt) with s1 budget forcing, diagnostics on 6 x 4."""
    return _shipped("baselines-l1", "l1-exact",
                    ["eval.num_problems=8", "tiny.diag_problems=6", "rollout.n=4",
                     "budget_control.forcing_extensions=2"], tmp_path_factory.mktemp("l1"))


def test_an_l1_models_budget_reads_the_same_whatever_budgets_are_evaluated_beside_it(l1):
    """One rollout per L1 target, each from the stream ``tiny.eval_seed``: a budget's accuracy (plain and forced) is
    the one an evaluation of that budget alone reads; the thinking length is the largest target's."""
    config, model, tok, inserted = l1
    run = TinyRun.from_config(config)
    budgets = sorted(run.eval_budgets)
    groups = bc.eval_target_groups(BudgetControl.from_config(config), budgets)
    assert len(groups) > 1  # the premise: several targets
    together = ev.evaluate(model, tok, inserted, config, budgets)
    forced = ms.forced_dataset(DS)
    reads = []
    for _, group in groups:
        alone = ev.evaluate(model, tok, inserted, config, group)
        for ds in (DS, forced):
            for b in group:
                assert together[ms.eval_acc(ds, b)] == alone[ms.eval_acc(ds, b)], (ds, b)
                reads.append(alone[ms.eval_acc(ds, b)])
    assert together[ms.eval_think_len(DS)] == alone[ms.eval_think_len(DS)]  # the last group: the largest target's
    assert len(set(reads)) > 2, reads  # the premise: numbers that could differ


def test_an_l1_models_plain_and_forced_passes_sample_one_stream(l1):
    """An L1 model with budget forcing: per target group a rollout of the held-out problems prompted with the
    group's target, from the stream ``tiny.eval_seed``: unforced for ``eval/{ds}/``, and the same with s1's rule
    (forced at the group's largest budget) for ``eval/{ds}-forced/``: the numbers of those rollouts by hand."""
    config, model, tok, inserted = l1
    run, control = TinyRun.from_config(config), BudgetControl.from_config(config)
    budgets = sorted(run.eval_budgets)
    got = ev.evaluate(model, tok, inserted, config, budgets)
    cue = encode_words(tok, [control.forcing_cue])
    for ds, forcing in ((DS, False), (ms.forced_dataset(DS), True)):
        want = {}
        for target, group in bc.eval_target_groups(control, budgets):
            words = [target_word(target, bc.target_choices(control))] * 8
            rule = bc.forcing_config(control, max(group), inserted.think_end, cue) if forcing else None
            out = rollout(model, tok, inserted, run.task, ev.eval_problems(config, 8), 1, group, 1,
                          run.summary_max_tokens, run.eval_temperature, torch.Generator().manual_seed(run.eval_seed),
                          run.max_rows, target_words=words, forcing=rule)
            want.update({b: float(a) for b, a in zip(group, metrics.accuracy_per_budget(out.scores))})
        assert {b: got[ms.eval_acc(ds, b)] for b in budgets} == want, ds
        assert any(0 < a < 1 for a in want.values()), want


def test_an_l1_models_diagnostics_are_at_the_largest_budgets_target(l1, monkeypatch):
    """The diagnostics' rollout (the one of ``tiny.diag_problems`` problems) prompts every problem with the target
    of the largest eval budget (the verl backend's and the docs' choice: one target for the whole curve)."""
    config, model, tok, inserted = l1
    run, control = TinyRun.from_config(config), BudgetControl.from_config(config)
    budgets = sorted(run.eval_budgets)
    seen = []
    real = ev.rollout

    def spy(model, tok, inserted, task, problems, *args, target_words=None, **kw):
        seen.append((problems, target_words))
        return real(model, tok, inserted, task, problems, *args, target_words=target_words, **kw)

    monkeypatch.setattr(ev, "rollout", spy)
    ev.evaluate(model, tok, inserted, config, budgets)
    diag_problems = ev.eval_problems(config, 6, salt=1)
    (words,) = [w for p, w in seen if p == diag_problems]
    largest = bc.eval_target_groups(control, budgets)[-1][0]
    assert words == [target_word(largest, bc.target_choices(control))] * 6
    assert largest != bc.eval_target_groups(control, budgets)[0][0]  # the premise
