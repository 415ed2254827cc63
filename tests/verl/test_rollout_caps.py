"""One config, two rollouts, the same caps: every arm the ``baselines`` sweep compares, composed at
tiny scale, is rolled out for training by the tiny backend (``train_rollout``, the trainer's own
call) and by verl's tree agent loop (``TreeAgentLoop.run`` on a token server), with the same
tokenizer and a policy that never stops by itself. Each thinking then runs to its cap and each
summary to its cap, so the lengths *are* the caps: both backends give every tree the same
thinking length, the same cuts, the same inserted tokens and the same summary lengths, and these
are the hand-worked numbers of each method (ThinkPrune's round limit, Elastic's t and s, the
largest budget, ``summary.max_tokens`` counting the inserted tokens). The evaluation likewise
(``evaluate`` / verl's validation rollout): per L1 target group and per pass (plain, s1-forced) the
same thinking cap and the same answer caps at every distinct cut, and the variance diagnostics' one
thinking (tiny's diagnostics rollout, verl's last plain tree) cut at every budget."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from micro import MICRO_AT_TINY_BUDGETS  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.compose import resolve_sweep

TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"

# the hand-worked caps of each compared arm at tiny scale (b_m = 192, summary.max_tokens = 8; the
# anytime layout inserts `... ... </think> **Final Answer**` (5 toy words) after a cut, leaving 3):
# (thinking tokens, [(cut, inserted tokens, summary tokens) per training budget])
EXPECTED = {
    ("main-grpo", "grpo"): (192, [(192, 5, 3)]),
    ("main-ar-uniform", "ar-uniform"): (192, [(48, 5, 3), (96, 5, 3), (144, 5, 3), (192, 5, 3)]),
    # ThinkPrune stops generating at its round's limit: b_m/2, 3b_m/8, b_m/4 (paper 4000, 3000, 2000)
    ("baselines-thinkprune", "thinkprune-r1"): (96, [(96, 5, 3)]),
    ("baselines-thinkprune", "thinkprune-r2"): (72, [(72, 5, 3)]),
    ("baselines-thinkprune", "thinkprune"): (48, [(48, 5, 3)]),
    ("baselines-l1", "l1-exact"): (192, [(192, 5, 3)]),
    ("baselines-l1", "l1-max"): (192, [(192, 5, 3)]),
    # Elastic (E1): the thinking cut at t = b_m/8, `</think>` alone inserted, the solution within s = b_m/8
    ("baselines-elastic", "elastic"): (24, [(24, 1, 23)]),
}


def _compared_arms():
    """(experiment, arm) of every cell of the baselines sweep (its cells' seeds aside)."""
    return sorted({(r.experiment, r.arm) for r in resolve_sweep("baselines", scale="tiny", seeds=[0])})


def test_every_compared_arm_has_hand_worked_caps():
    assert set(_compared_arms()) == set(EXPECTED)


def _config(name: str, arm: str) -> dict:
    cfg = arm_config(name, arm, scale="tiny", overrides=MICRO_AT_TINY_BUDGETS)
    cfg["data"]["train_batch_size"], cfg["rollout"]["n"], cfg["summary"]["group_size"] = 2, 2, 2
    cfg["trainer"]["total_steps"] = 3
    return cfg


def _never_stop(stops):
    """A sampler that never draws the stopping tokens (``</think>``, EOS): every thinking and every
    summary runs to its cap."""
    from arctl.backends.tiny import rollout as ro

    plain = ro.sample

    def sample(logits, *args, **kwargs):
        logits = logits.clone()
        logits[..., list(stops)] = float("-inf")
        return plain(logits, *args, **kwargs)

    return sample


def _tiny(cfg, monkeypatch):
    """The arm's toy tokenizer, a random model of its shape, its inserted tokens; the sampler never stops."""
    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.tiny import rollout as ro
    from arctl.backends.tiny.model import build_model, model_config
    from arctl.backends.tiny.settings import TinyRun
    from arctl.backends.tiny.tokenizer import build_tokenizer

    tok = build_tokenizer(TinyRun.from_config(cfg).task.vocabulary())
    model = build_model(model_config(cfg["model"], len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    inserted = InsertedTokens.from_tokenizer(tok, cfg["summary"]["inserted"])
    monkeypatch.setattr(ro, "sample", _never_stop({inserted.think_end, tok.eos_token_id}))
    return tok, model, inserted


def _tiny_trees(cfg, step, monkeypatch):
    """Per thinking row of the tiny training rollout: (thinking tokens, sorted (budget, cut,
    inserted, summary lengths))."""
    import numpy as np

    from arctl.backends.tiny.trainer import train_rollout

    tok, model, inserted = _tiny(cfg, monkeypatch)
    out, _targets = train_rollout(model, tok, inserted, cfg, step, torch.Generator().manual_seed(0))
    rows = {}
    for br in out.branches:
        for j in br.budgets:
            rows.setdefault(br.row, []).append((j, br.cut, len(br.inserted), tuple(len(s) for s in br.summaries)))
    assert not bool(np.any(out.thinking.finished.numpy()))
    return tok, [(int(out.thinking.think_len[r]), tuple(sorted(v))) for r, v in sorted(rows.items())]


class _Server:
    """verl's token server, answering every request with ``max_tokens`` tokens of one word that
    neither ends the thinking nor the summary; it records the requests."""

    def __init__(self, token: int):
        self.token, self.requests = token, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.requests.append((list(prompt_ids), dict(sampling_params)))
        return SimpleNamespace(token_ids=[self.token] * int(sampling_params["max_tokens"]), log_probs=None,
                               extra_fields={})


def _verl_run(cfg, tok, **kwargs):
    """verl's tree agent loop, composed from the arm's config as the verl backend composes it, with the
    toy tokenizer, run on one question (``kwargs``: the row's fields); returns (outputs, requests)."""
    from omegaconf import open_dict
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.agent_loop import TreeAgentLoop
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    cfg = {**cfg, "model": {**cfg["model"], "path": "/unused"}}  # verl's config wants a model; no model is loaded
    composed = check_overrides(verl_overrides(cfg))
    word = tok.convert_tokens_to_ids("chk")
    assert word not in (tok.eos_token_id, tok.unk_token_id, tok.convert_tokens_to_ids("</think>"))
    server = _Server(word)
    tok.chat_template = TEMPLATE
    loop = TreeAgentLoop(trainer_config=DictConfigWrap(composed), server_manager=server, tokenizer=tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(composed.data))
    with open_dict(loop.arctl):  # the trainer sets the run's length (ArctlPPOTrainer.on_init_end)
        loop.arctl.total_steps = int(cfg["trainer"]["total_steps"])

    async def go():
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False},
                              raw_prompt=[{"role": "user", "content": "chk"}], reward_model={"ground_truth": "0"},
                              uid="q0", **kwargs)

    return asyncio.run(go()), server.requests


def _verl_tree(cfg, tok, step):
    """verl's agent loop on the same config and tokenizer: (thinking tokens, sorted (budget, cut,
    inserted, summary lengths)) of its packed tree, and the server's requests."""
    from arctl.backends.verl.advantage import TreeRecord

    outputs, requests = _verl_run(cfg, tok, global_steps=step)
    assert len(outputs) == 1  # the packed layout: one row per tree
    rec = TreeRecord.from_dict(outputs[0].extra_fields["arctl"])
    a = rec.group_size
    per_budget = {}
    for k, (start, sstart, end) in enumerate(rec.spans):
        j = k // a
        per_budget.setdefault(j, []).append((sstart - start, end - sstart))
    tree = tuple(sorted((j, rec.cuts[j], ins[0][0], tuple(n for _, n in ins)) for j, ins in per_budget.items()))
    assert all(len({i for i, _ in ins}) == 1 for ins in per_budget.values())
    assert not rec.finished
    return (rec.think_len, tree), requests


@pytest.mark.parametrize("name,arm", sorted(EXPECTED), ids=[f"{n}/{a}" for n, a in sorted(EXPECTED)])
def test_both_backends_roll_out_a_compared_arm_to_the_same_caps(name, arm, monkeypatch):
    cfg = _config(name, arm)
    think, cuts = EXPECTED[(name, arm)]
    a = cfg["summary"]["group_size"]
    hand = (think, tuple((j, cut, ins, (n,) * a) for j, (cut, ins, n) in enumerate(cuts)))
    step = 2  # of 3: the step both backends read a per-step generation limit at (verl: its batch's global_steps)
    tok, tiny = _tiny_trees(cfg, step, monkeypatch)
    assert len(tiny) == cfg["data"]["train_batch_size"] * cfg["rollout"]["n"]
    assert set(tiny) == {hand}, (tiny[0], hand)
    verl, requests = _verl_tree(cfg, tok, step)
    assert verl == hand, (verl, hand)
    # what verl asked its server for: the thinking once, at its cap; each summary at max_tokens - inserted
    thinking = [p for _, p in requests if "stop_token_ids" in p]
    assert [p["max_tokens"] for p in thinking] == [think]
    summaries = sorted(p["max_tokens"] for _, p in requests if "stop_token_ids" not in p)
    assert summaries == sorted(n for _, _, _, ns in hand[1] for n in ns)


def _tiny_eval_trees(cfg, monkeypatch):
    """The tiny evaluation's rollouts at ``eval.budgets``, in order (each L1 target group, then the
    forced pass): per rollout, (thinking tokens, sorted (cut + inserted tokens, summary tokens)) of
    its trees (all alike: the policy never stops)."""
    from arctl.backends.tiny import evaluate as ev

    tok, model, inserted = _tiny(cfg, monkeypatch)
    seen, plain = [], ev.rollout

    def recording(*args, **kwargs):
        out = plain(*args, **kwargs)
        rows = {}
        for br in out.branches:
            rows.setdefault(br.row, []).extend((br.cut + len(br.inserted), len(s)) for s in br.summaries)
        trees = {(int(out.thinking.think_len[r]), tuple(sorted(v))) for r, v in rows.items()}
        assert len(trees) == 1, trees
        seen.append(trees.pop())
        return out

    monkeypatch.setattr(ev, "rollout", recording)
    ev.evaluate(model, tok, inserted, cfg, list(cfg["eval"]["budgets"]))
    return tok, seen


def _verl_eval_trees(cfg, tok):
    """verl's validation rollout of one question on the same config and tokenizer, from its server's
    requests: per tree (thinking request's max_tokens, sorted (summary prompt past the question,
    summary max_tokens))."""
    _, requests = _verl_run(cfg, tok, extra_info={"split": "test"})  # a validation row
    trees = []
    for prompt, params in requests:  # a tree's thinking request, then its summaries' (trees one after another)
        if "stop_token_ids" in params:
            trees.append((prompt, params["max_tokens"], []))
        else:
            question = trees[-1][0]
            assert prompt[: len(question)] == question
            trees[-1][2].append((len(prompt) - len(question), params["max_tokens"]))
    return [(think, tuple(sorted(summaries))) for _, think, summaries in trees]


# the evaluation differs between compared arms by the L1 target groups, Elastic's layout and cap, and
# no generation limit (ThinkPrune's last round evaluates to b_m like GRPO): one arm of each
EVALUATED = [("main-grpo", "grpo"), ("baselines-thinkprune", "thinkprune"), ("baselines-l1", "l1-exact"),
             ("baselines-elastic", "elastic")]


@pytest.mark.parametrize("name,arm", EVALUATED, ids=[f"{n}/{a}" for n, a in EVALUATED])
def test_both_backends_evaluate_a_compared_arm_within_the_same_caps(name, arm, monkeypatch):
    """The evaluation at ``eval.budgets`` with the sweep's budget forcing (s1, two extensions): per
    L1 target group (one without L1) and per pass (plain, forced), the thinking runs to the group's
    largest budget and every distinct cut gets one answer of ``summary.max_tokens`` minus the
    inserted tokens, in both backends. The variance diagnostics' thinking (the last group's target)
    runs to the largest budget and is cut at every budget: tiny's diagnostics rollout, and verl's last
    plain tree, which with several L1 groups is cut at the other groups' budgets too."""
    cfg = _config(name, arm)
    cfg["budget_control"]["forcing_extensions"] = 2  # sweeps/baselines.yaml
    cfg["tiny"]["diag_problems"], cfg["eval"]["n_samples"] = 1, 1
    tok, tiny = _tiny_eval_trees(cfg, monkeypatch)
    verl = _verl_eval_trees(cfg, tok)
    from arctl.algo.methods import control as bc
    from arctl.algo.settings import BudgetControl

    budgets = list(cfg["eval"]["budgets"])
    groups = bc.eval_target_groups(BudgetControl.from_config(cfg), budgets)
    ins = 1 if cfg["summary"]["inserted"] == "think_end" else 5  # `</think>` (E1) or the anytime words
    cap = cfg["summary"]["max_tokens"]  # 8; Elastic's s = 24
    hand = [(max(g), tuple(sorted((b + ins, cap - ins) for b in g))) for _, g in groups]
    every_cut = (max(budgets), tuple(sorted((b + ins, cap - ins) for b in budgets)))
    assert tiny == hand + [every_cut] + hand  # plain, the diagnostics rollout, then forced
    assert verl == hand[:-1] + [every_cut] + hand  # the last plain tree is the diagnostics' thinking
    # L1 at budgets 48..192 with targets 24..96: target 48 for budget 48, target 96 for 96, 144, 192
    assert [t for t, _ in groups] == ([48, 96] if name == "baselines-l1" else [None])
