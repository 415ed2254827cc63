"""verl's validation of a method that prompts one target per eval budget (L1) gives the variance
diagnostics (``eval/{ds}/corr_v{1,2}@{b}``, ``nvar/*@{b}``, paper Fig. 2) of ONE thinking per sample
cut at every budget, as docs/metrics.md defines them and as the tiny backend computes them
(``arctl/backends/tiny/evaluate.py``: one rollout with the last target group's target, cut at every
budget) -- not of the different thinkings that each target group's ``score@{b}`` come from.

A deterministic fake policy stands in for the model: its thinking length depends on the prompted
target, and a sample is right at a cut iff the cut reaches the length the (question, sample) needs,
so the diagnostics of merged trees and of one tree's cuts differ (they did, before the fix)."""

from __future__ import annotations

import asyncio
import math

import pytest
import torch
from fake_policy import build_prompt, policy, sampler  # tests/support/fake_policy.py

from arctl.algo.methods import control as bc
from arctl.algo.metrics import eval_diagnostics
from arctl.algo.settings import BudgetControl
from arctl.backends.verl import agent_loop as al
from arctl.backends.verl.advantage import FORCED_PREFIX
from arctl.backends.verl.agent_loop import rollout_question
from arctl.track import metrics_schema as ms

BUDGETS = [2000, 4000, 6000, 8000]
Q, G, LAM, DS = 4, 8, 0.5, "aime24"
THINK_END = 5


def eval_metrics(*args, **kwargs):
    """verl's trainer_v1.eval_metrics, imported when called: trainer_v1 imports verl's transfer_queue, and a
    module that fails to import where verl is absent is an error, not the skip every test here gets."""
    from arctl.backends.verl.trainer_v1 import eval_metrics as metrics

    return metrics(*args, **kwargs)


def _policy(q: int, g: int, target: int | None) -> tuple[int, int]:
    return policy(q, g, target, max(BUDGETS))


def _sampler(q: int, g: int, calls: list):
    """``sample_tree`` of the agent loop on the fake policy; records (target, budgets, forced) per tree."""
    return sampler(q, g, calls, max(BUDGETS), record_forcing=True)


_build_prompt = build_prompt


def _validate(control: BudgetControl):
    """verl's validation of Q questions x G samples: (data sources, uids, infos, trees' calls per sample)."""
    sources, uids, infos, calls = [], [], {}, []
    for q in range(Q):
        for g in range(G):
            seen: list = []
            _, info, _ = asyncio.run(rollout_question(_sampler(q, g, seen), _build_prompt, BUDGETS, True, control,
                                                      "k", THINK_END, [9]))
            sources.append(DS)
            uids.append(f"q{q}")
            calls.append(seen)
            for k, v in info.items():
                infos.setdefault(k, []).append(v)
    return sources, uids, infos, calls


def _one_thinking_rule(target: int | None) -> dict[str, float]:
    """tiny's rule: per sample one thinking prompted with ``target``, its scores at every budget."""
    scores = torch.zeros(Q, G, len(BUDGETS), dtype=torch.float64)
    lens = torch.zeros(Q, G, dtype=torch.long)
    for q in range(Q):
        for g in range(G):
            length, need = _policy(q, g, target)
            lens[q, g] = length
            scores[q, g] = torch.tensor([1.0 if min(b, length) >= need else 0.0 for b in BUDGETS])
    return ms.eval_diagnostic_metrics(DS, eval_diagnostics(scores, lens, BUDGETS, LAM))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def _assert_diagnostics(out: dict[str, float], expected: dict[str, float]):
    assert {k for k in out if "/corr_" in k or "/nvar/" in k} == set(expected)
    wrong = {k: (out[k], v) for k, v in expected.items() if not _same(out[k], v)}
    assert not wrong, wrong


@pytest.mark.parametrize("targets", [None, (2000, 6000)], ids=["target-per-budget", "l1-targets"])
def test_l1_validation_diagnostics_are_one_thinkings_cuts(targets):
    """The demo's setting (paper scale: the eval target is the budget itself, four groups; and a
    target list whose last group holds two budgets): eval_metrics on verl's validation infos gives
    the diagnostics of the last group's thinking cut at every budget, the tiny backend's rule."""
    control = BudgetControl(method="l1", l1_targets=targets)
    groups = bc.eval_target_groups(control, BUDGETS)
    assert len(groups) > 1
    sources, uids, infos, calls = _validate(control)
    out = eval_metrics(sources, uids, infos, LAM, BUDGETS, BUDGETS, group_size=G)
    last = groups[-1][0]
    _assert_diagnostics(out, _one_thinking_rule(last))
    # one tree per group; the last one (the diagnostics' thinking) cut at every budget
    assert calls[0] == [(t, BUDGETS if n == len(groups) - 1 else g, False) for n, (t, g) in enumerate(groups)]
    # the accuracies stay each group's own thinking's; the last group's budgets are the same cuts
    for b in BUDGETS:
        target = next(t for t, g in groups if b in g)
        right = [float(min(b, _policy(q, g, target)[0]) >= _policy(q, g, target)[1]) for q in range(Q) for g in range(G)]
        assert out[ms.eval_acc(DS, b)] == pytest.approx(sum(right) / len(right))
    for b in groups[-1][1]:
        assert infos[f"score@{b}"] == infos[f"{al.DIAG_PREFIX}score@{b}"]
    # think_len: the last group's thinking (the diagnostics'), in both backends
    lens = [_policy(q, g, last)[0] for q in range(Q) for g in range(G)]
    assert infos["think_len"] == [float(n) for n in lens]
    assert out[ms.eval_think_len(DS)] == pytest.approx(sum(lens) / len(lens))


def test_one_target_group_validates_as_before():
    """Without a prompt target (one group) one tree covers every budget: no ``diag_score`` infos, and
    the diagnostics come from its ``score@{b}``."""
    control = BudgetControl(method="none")
    sources, uids, infos, calls = _validate(control)
    assert set(infos) == {f"score@{b}" for b in BUDGETS} | {"think_len"}
    assert all(c == [(None, BUDGETS, False)] for c in calls)
    out = eval_metrics(sources, uids, infos, LAM, BUDGETS, BUDGETS, group_size=G)
    _assert_diagnostics(out, _one_thinking_rule(None))


def test_forced_evaluation_keeps_one_tree_per_group_and_no_diagnostics():
    """With s1 budget forcing the forced pass samples each group's tree on its own budgets, writes
    no ``diag_`` infos and logs no diagnostics; the unforced diagnostics are unchanged by it."""
    control = BudgetControl(method="l1", forcing_extensions=2)
    groups = bc.eval_target_groups(control, BUDGETS)
    sources, uids, infos, calls = _validate(control)
    forced_calls = [c for c in calls[0] if c[2]]
    assert forced_calls == [(t, g, True) for t, g in groups]
    assert not any(k.startswith(f"{FORCED_PREFIX}{al.DIAG_PREFIX}") or k.startswith(f"{al.DIAG_PREFIX}{FORCED_PREFIX}")
                   for k in infos)
    assert set(k for k in infos if k.startswith(FORCED_PREFIX)) == (
        {f"{FORCED_PREFIX}score@{b}" for b in BUDGETS} | {f"{FORCED_PREFIX}think_len"})
    out = eval_metrics(sources, uids, infos, LAM, BUDGETS, BUDGETS, group_size=G)
    forced = ms.forced_dataset(DS)
    assert ms.eval_acc(forced, max(BUDGETS)) in out
    assert not any(k.startswith(f"eval/{forced}/") and ("/corr_" in k or "/nvar/" in k) for k in out)
    _assert_diagnostics({k: v for k, v in out.items() if k.startswith(f"eval/{DS}/")}, _one_thinking_rule(groups[-1][0]))
