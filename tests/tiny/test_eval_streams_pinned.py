"""Two samplings of the tiny evaluation that no other test pinned (a mutation hunt changed each and the suite
passed): the warm-up's record (``budget_accuracy``: one thinking sample per held-out problem) and the sampling
stream of the final evaluation's extra budgets (the grid's budgets beyond ``eval.budgets``: "a stream of their
own", docs/metrics.md). Both on the shipped warm-up, the one model every machine shares that scores between 0 and 1
at the micro evaluation's sizes: the micro warm-up scores 0 at every budget, where any sampling reads the same."""

from __future__ import annotations

import math

import pytest
import torch
from micro import MICRO_AT_TINY_BUDGETS  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.algo import metrics
from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny import evaluate as ev
from arctl.backends.tiny import warmup
from arctl.backends.tiny.rollout import rollout
from arctl.backends.tiny.settings import WARMUP_ENV, TinyRun
from arctl.track import metrics_schema as ms

# the micro RL and evaluation settings at the tiny scale's model, task and warm-up (the shipped warm-up's key),
# a grid of 8 budgets: 4 beyond eval.budgets [48, 96, 144, 192]
SHIPPED = [o for o in MICRO_AT_TINY_BUDGETS if not o.startswith(("model.", "tiny.task.", "tiny.warmup."))]
OVERRIDES = [*SHIPPED, "eval.num_problems=16", "eval.grid_size=8", "tiny.diag_problems=0"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """(config, model, tokenizer) of the shipped warm-up, installed into a cache of this module's."""
    config = arm_config("main-ar-uniform", "ar-uniform", overrides=OVERRIDES)
    # a config whose key moved off the shipped one would train a warm-up for minutes, scoring other numbers
    assert warmup.shipped_dir(warmup.warmup_key(config)) is not None, "no shipped warm-up for this config"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARCTL_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.delenv(WARMUP_ENV, raising=False)
        model, tok, info = warmup.warmup_model(config, tmp_path_factory.mktemp("run"), _no_training)
    assert info["source"] == "shipped"
    return config, model, tok


def _no_training(model, tok):
    raise AssertionError("the shipped warm-up is installed, not trained")


def test_the_warm_up_record_is_one_thinking_sample_per_held_out_problem(shipped):
    """``budget_accuracy`` (``warmup.json``'s accuracy per budget, the warm-up's rounds against ``min_acc``) samples
    each of its ``n_problems`` once, from the evaluation's stream (``tiny.eval_seed``), on problems of their own
    (salt 2): the same numbers as that rollout by hand. From a mutation hunt: two samples per problem (twice the
    warm-up's evaluation cost, a mean over other draws) passed every test."""
    config, model, tok = shipped
    run, n = TinyRun.from_config(config), 8
    budgets = sorted(run.eval_budgets)
    got = ev.budget_accuracy(model, tok, config, n)
    inserted = InsertedTokens.from_tokenizer(tok, warmup.inserted_style(config))
    by_hand = rollout(model, tok, inserted, run.task, ev.eval_problems(config, n, salt=2), 1, budgets, 1,
                      run.summary_max_tokens, run.eval_temperature, torch.Generator().manual_seed(run.eval_seed),
                      run.max_rows)
    assert tuple(by_hand.scores.shape) == (n, 1, len(budgets))
    assert got == {b: float(a) for b, a in zip(budgets, metrics.accuracy_per_budget(by_hand.scores))}
    assert all(math.isclose(a * n, round(a * n)) for a in got.values()), got  # one verdict per problem: k / n
    assert any(0 < a < 1 for a in got.values()), got  # the premise: a sampling change could show


# The extra budgets' stream is part of what reproduces a run: the final evaluation's grid numbers are logged metrics
# (docs/testbed.md, "Reproducible on every machine of a kind"; the claims and score curves read them), so a change
# of it moves every final grid accuracy off the budgets of eval.budgets and must be made on purpose: the seed of that
# stream for an evaluation's sampling seed, committed (a pure function of it: numpy's SeedSequence, the same on
# every machine). From a mutation hunt: `>> 1` -> `>> 2` in its derivation passed every test.
EXTRA_STREAM_SEED = {0: 2918264622725855778, 5: 8998383282213416150, 777: 4967648534138009667}


@pytest.mark.parametrize("seed", sorted(EXTRA_STREAM_SEED))
def test_the_extra_budgets_stream_seed_is_the_committed_one(seed):
    extra = ev._extra_seed(seed)
    assert extra == EXTRA_STREAM_SEED[seed]
    assert extra != seed
    torch.Generator().manual_seed(extra)  # a seed torch takes


@pytest.mark.parametrize("sample_seed", [None, 5])
def test_the_final_evaluations_extra_budgets_are_sampled_on_a_stream_of_their_own(shipped, sample_seed):
    """The grid's budgets beyond ``eval.budgets`` read what an evaluation of those budgets alone reads on the
    committed extra stream of the evaluation's sampling seed (``tiny.eval_seed`` by default), not what it reads
    on the sampling seed itself (the stream of ``eval.budgets``)."""
    config, model, tok = shipped
    run = TinyRun.from_config(config)
    seed = run.eval_seed if sample_seed is None else sample_seed
    grid = sorted(set(run.eval_grid) | set(run.eval_budgets))
    extra = sorted(set(grid) - set(run.eval_budgets))
    assert extra and seed in EXTRA_STREAM_SEED  # the premise: a final evaluation with extra budgets
    inserted = InsertedTokens.from_tokenizer(tok, warmup.inserted_style(config))

    def acc(budgets, stream):
        out = ev.evaluate(model, tok, inserted, config, budgets, sample_seed=stream)
        return {b: out[ms.eval_acc("toy", b)] for b in extra}

    final = acc(grid, sample_seed)
    assert final == acc(extra, EXTRA_STREAM_SEED[seed])
    assert final != acc(extra, seed)
    assert any(0 < a < 1 for a in final.values()), final  # the premise: another stream could show
