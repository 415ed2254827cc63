"""An eval-only run (``verl.eval_only=true``, Tables 1-2 at paper scale) computes the variance diagnostics
(``eval/{ds}/corr_v{1,2}@{b}``, ``nvar/{brpo,grpo,v1}@{b}``, paper Fig. 2) over ``eval.budgets``, as every
training evaluation and the tiny backend's final evaluation do (docs/metrics.md): the estimator (its uniform
prior, V1's earlier budgets, BRPO's mixing) depends on the budget set. From a hunt: eval-only validation covered
``eval.grid`` alone and ``trainer_v1.eval_metrics`` computed the diagnostics over every budget it found, the 32 grid
budgets; an L1 run's diagnostic tree was cut at the grid too. Its validation now covers the grid and the eval
budgets; its accuracies and anytime keys are as before."""

from __future__ import annotations

import asyncio
import copy
import math
import random
from types import SimpleNamespace

import pytest
import torch
from fake_policy import build_prompt, policy, sampler  # tests/support/fake_policy.py
from omegaconf import OmegaConf

from arctl.algo.methods import control as bc
from arctl.algo.metrics import eval_diagnostics
from arctl.algo.settings import BudgetControl
from arctl.backends.verl import agent_loop as al
from arctl.backends.verl.agent_loop import _budgets_for, rollout_question
from arctl.track import metrics_schema as ms

EVAL = [2000, 4000, 6000]  # eval.budgets: not all on the grid, and the grid reaches past them
GRID = [1000, 3000, 4000, 5000, 7000, 8000]
UNION = sorted(set(EVAL) | set(GRID))
Q, G, LAM, DS, THINK_END = 4, 8, 0.5, "aime24", 5


def eval_metrics(*args, **kwargs):
    """trainer_v1.eval_metrics, imported when called (trainer_v1 imports verl's transfer_queue)."""
    from arctl.backends.verl.trainer_v1 import eval_metrics as metrics

    return metrics(*args, **kwargs)


def _diag_keys(out: dict) -> set[str]:
    return {k for k in out if "/corr_" in k or "/nvar/" in k}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def test_eval_only_validation_covers_the_grid_and_the_eval_budgets():
    arctl = OmegaConf.create({"eval_budgets": EVAL, "eval_grid": GRID, "eval_only": True})
    assert _budgets_for(arctl, validate=True) == (UNION, 1)
    arctl.eval_only = False  # a training run validates at eval.budgets, as before
    assert _budgets_for(arctl, validate=True) == (EVAL, 1)


def test_diagnostics_of_a_grid_evaluation_are_those_at_the_eval_budgets():
    """One thinking per sample scored at every validated budget (a method without prompt targets): the diagnostics
    are those of the same samples scored at eval.budgets alone; acc@b and the anytime keys are the grid's, as
    before."""
    rng = random.Random(0)
    uids, infos = [], {f"score@{b}": [] for b in UNION}
    infos["think_len"] = []
    for q in range(Q):
        p = rng.random()
        for _ in range(G):
            length, right = rng.randint(500, 9000), rng.random() < p
            uids.append(q)
            infos["think_len"].append(float(min(length, max(UNION))))
            for b in UNION:
                infos[f"score@{b}"].append(float(right and rng.random() < min(1.0, b / length)))
    sources = [DS] * len(uids)
    out = eval_metrics(sources, uids, infos, LAM, EVAL, GRID, group_size=G)
    at_eval = eval_metrics(sources, uids, {k: v for k, v in infos.items() if not k.startswith("score@")
                                           or int(k.split("@")[1]) in EVAL}, LAM, EVAL, GRID, group_size=G)
    expected = _diag_keys(at_eval)
    assert expected and {ms.parse_metric(k).budget for k in expected} == set(EVAL)
    assert _diag_keys(out) == expected
    wrong = {k: (out[k], at_eval[k]) for k in expected if not _same(out[k], at_eval[k])}
    assert not wrong, wrong
    assert {k for k in out if "/acc@" in k} == {ms.eval_acc(DS, b) for b in UNION}
    assert ms.eval_grid_anytime_acc(DS) in out and ms.eval_curve_auc(DS) in out
    assert out[ms.eval_anytime_acc(DS)] == pytest.approx(sum(out[ms.eval_acc(DS, b)] for b in EVAL) / len(EVAL))
    # an evaluation that missed an eval budget logs no diagnostics (another budget set, another estimator)
    part = {k: v for k, v in infos.items() if k != f"score@{EVAL[0]}"}
    assert not _diag_keys(eval_metrics(sources, uids, part, LAM, EVAL, GRID, group_size=G))


# --- L1 (one prompt target per budget): the diagnostic tree is the last eval-budget group's, cut at eval.budgets


def _policy(q: int, g: int, target: int | None) -> tuple[int, int]:
    return policy(q, g, target, max(UNION))


def _sampler(q: int, g: int, calls: list):
    return sampler(q, g, calls, max(UNION), clamp=True)


_build_prompt = build_prompt


def test_an_l1_eval_only_runs_diagnostics_are_one_thinkings_cuts_at_the_eval_budgets():
    """Validation on the grid and the eval budgets: the tree of the eval budgets' last target (6000, not the grid's
    8000) is cut at its own budgets and the eval budgets; the diagnostics are the tiny backend's rule at
    eval.budgets (one thinking prompted with that target, its length, cut at every eval budget)."""
    control = BudgetControl(method="l1")
    target = bc.eval_target_groups(control, EVAL)[-1][0]
    assert target != bc.eval_target_groups(control, UNION)[-1][0]
    sources, uids, infos, calls = [], [], {}, []
    for q in range(Q):
        for g in range(G):
            seen: list = []
            _, info, _ = asyncio.run(rollout_question(_sampler(q, g, seen), _build_prompt, UNION, True, control,
                                                      "k", THINK_END, [9], diag_budgets=EVAL))
            sources.append(DS)
            uids.append(f"q{q}")
            calls.append(seen)
            for k, v in info.items():
                infos.setdefault(k, []).append(v)
    assert calls[0] == [(t, sorted(set(grp) | set(EVAL)) if t == target else grp)
                        for t, grp in bc.eval_target_groups(control, UNION)]
    assert {k for k in infos if k.startswith(al.DIAG_PREFIX)} == (
        {f"{al.DIAG_PREFIX}score@{b}" for b in EVAL} | {f"{al.DIAG_PREFIX}think_len"})
    out = eval_metrics(sources, uids, infos, LAM, EVAL, GRID, group_size=G)
    scores = torch.zeros(Q, G, len(EVAL), dtype=torch.float64)
    lens = torch.zeros(Q, G, dtype=torch.long)
    for q in range(Q):
        for g in range(G):
            length, need = _policy(q, g, target)
            length = min(length, max(EVAL))
            lens[q, g] = length
            scores[q, g] = torch.tensor([1.0 if min(b, length) >= need else 0.0 for b in EVAL])
    expected = ms.eval_diagnostic_metrics(DS, eval_diagnostics(scores, lens, EVAL, LAM))
    assert _diag_keys(out) == set(expected)
    wrong = {k: (out[k], v) for k, v in expected.items() if not _same(out[k], v)}
    assert not wrong, wrong
    # think_len stays the last group's thinking (the grid's largest budget), each budget's accuracy its own group's
    assert infos["think_len"] == [float(min(_policy(q, g, max(UNION))[0], max(UNION))) for q in range(Q)
                                  for g in range(G)]
    assert {k for k in out if "/acc@" in k} == {ms.eval_acc(DS, b) for b in UNION}


# --- the agent loop of an eval-only run, end to end (a scripted server)


class ScriptedServer:
    """verl's generate: a thinking of ``length`` tokens (cut at max_tokens), a summary of one token."""

    def __init__(self, token: int, length: int, summary: list[int]):
        self.token, self.length, self.summary = token, length, summary
        self.thinking_requests: list[list[int]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        if "stop_token_ids" in sampling_params:
            self.thinking_requests.append(list(prompt_ids))
            ids = [self.token] * min(self.length, int(sampling_params["max_tokens"]))
        else:
            ids = list(self.summary)
        return SimpleNamespace(token_ids=ids, log_probs=None, extra_fields={})


@pytest.mark.parametrize("method", ["none", "l1"])
def test_an_eval_only_loop_scores_the_grid_and_the_eval_budgets(tokenizer, paper_config, method):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.agent_loop import TreeAgentLoop
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    budgets, grid = [4, 9, 30], [5, 10, 20, 40]
    cfg = copy.deepcopy(paper_config)
    cfg["thinking"]["budgets"] = budgets
    cfg["eval"].update(budgets=budgets, grid=grid)
    cfg["summary"].update(group_size=2, max_tokens=8)
    cfg["budget_control"]["method"] = method
    composed = check_overrides(verl_overrides(cfg))
    composed.arctl.eval_only = True  # as run_config.eval_only_overrides sets it
    assert list(composed.arctl.eval_grid) == grid
    server = ScriptedServer(tok.encode("...", add_special_tokens=False)[0], 35, [tok.eos_token_id])
    loop = TreeAgentLoop(trainer_config=DictConfigWrap(composed), server_manager=server, tokenizer=tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(composed.data))

    async def go():
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False},
                              raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}],
                              reward_model={"ground_truth": "3"}, validate=True)

    (out,) = asyncio.run(go())
    info = out.extra_fields["reward_extra_info"]
    union = sorted(set(budgets) | set(grid))
    assert sorted(int(k.split("@")[1]) for k in info if k.startswith("score@")) == union
    diag = {k for k in info if k.startswith(al.DIAG_PREFIX)}
    if method == "none":  # one thinking covers every budget: the trainer reads the eval budgets' score@
        assert not diag and len(server.thinking_requests) == 1
    else:  # one thinking per target; the eval budgets' last target (30) cut at the eval budgets
        assert diag == {f"{al.DIAG_PREFIX}score@{b}" for b in budgets} | {f"{al.DIAG_PREFIX}think_len"}
        assert len(server.thinking_requests) == len(union)
        assert info[f"{al.DIAG_PREFIX}think_len"] == 30 and info["think_len"] == 35
