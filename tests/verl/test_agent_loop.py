"""The tree agent loop against a fake token-in/token-out server (a tiny Qwen2 behind verl's async
``generate`` interface): thinking sent once, one prefix group per distinct cut with A summaries per
budget it serves, branches equal to direct generation from the same tokens, per-summary rewards
kept, rows that the trainer packs back."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from arctl.algo.prompts import InsertedTokens, summary_prompt
from arctl.backends.verl.advantage import TreeRecord

TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


class FakeServer:
    """Greedy decoding with a HF model, token ids in and out, like verl's LLMServerClient.generate."""

    def __init__(self, model, eos_id, script=None):
        self.model, self.eos_id, self.script = model, eos_id, script
        self.requests: list[tuple[list[int], dict]] = []
        self.request_ids: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.requests.append((list(prompt_ids), dict(sampling_params)))
        self.request_ids.append(request_id)
        # like verl's client: the weight version (global step) that served the request, prefix-cache hits
        extra = {"min_global_steps": 10 + len(self.requests), "max_global_steps": 10 + len(self.requests),
                 "num_cached_tokens": len(prompt_ids) - 1}
        if self.script is not None and "stop_token_ids" in sampling_params:
            return SimpleNamespace(token_ids=list(self.script), log_probs=None, extra_fields=extra)
        return SimpleNamespace(token_ids=greedy(self.model, prompt_ids, sampling_params, self.eos_id),
                               log_probs=None, extra_fields=extra)


def greedy(model, prompt_ids, params, eos_id):
    stops = set(params.get("stop_token_ids") or []) | {eos_id}
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt_ids]), max_new_tokens=int(params["max_tokens"]), do_sample=False,
            eos_token_id=sorted(stops), pad_token_id=eos_id, attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
        )
    return out[0, len(prompt_ids):].tolist()


@pytest.fixture(scope="module")
def loop_factory(tokenizer, tiny_model, paper_config):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.agent_loop import TreeAgentLoop
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = TEMPLATE

    def make(layout="flex", budgets=(4, 9, 30), group_size=2, script=None, deterministic=False, control=None,
             inserted="anytime", decoupled=True, model_dir=None):
        cfg = copy.deepcopy(paper_config)
        cfg["summary"]["decoupled"] = decoupled
        cfg["summary"]["inserted"] = inserted
        cfg["budget_control"].update(control or {})
        cfg["trainer"]["deterministic"] = deterministic
        cfg["thinking"]["budgets"] = list(budgets)
        cfg["eval"]["budgets"] = list(budgets)
        cfg["summary"]["group_size"] = group_size
        cfg["summary"]["max_tokens"] = 32
        cfg["verl"]["tree_attention"] = layout
        composed = check_overrides(verl_overrides(cfg))
        server = FakeServer(tiny_model, tok.eos_token_id, script)
        loop_tok = tok
        if model_dir is not None:  # where verl loaded the tokenizer from: the model's files
            loop_tok = copy.deepcopy(tok)
            loop_tok.name_or_path = str(model_dir)
        loop = TreeAgentLoop(
            trainer_config=DictConfigWrap(composed), server_manager=server, tokenizer=loop_tok, processor=None,
            dataset_cls=None, data_config=DictConfigWrap(composed.data),
        )
        return loop, server, tok

    return make


def _run(loop, **kw):
    kwargs = dict(raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}],
                  reward_model={"ground_truth": "3"}, **kw)

    async def go():
        loop.loop = asyncio.get_running_loop()  # verl binds the loop at construction
        return await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False}, **kwargs)

    return asyncio.run(go())


def test_thinking_once_then_one_prefix_group_per_distinct_cut(loop_factory, tiny_model):
    loop, server, tok = loop_factory(budgets=(4, 9, 30), group_size=2)
    outputs = _run(loop)
    assert len(outputs) == 1  # packed layout: one row per tree
    rec = TreeRecord.from_dict(outputs[0].extra_fields["arctl"])
    prompt = outputs[0].prompt_ids
    assert prompt == tok.apply_chat_template([{"role": "user", "content": "What is 1 + 2?"}], tokenize=True,
                                             add_generation_prompt=True) or prompt
    thinking_requests = [r for r in server.requests if "stop_token_ids" in r[1]]
    assert len(thinking_requests) == 1 and thinking_requests[0][0] == prompt
    assert thinking_requests[0][1]["max_tokens"] == 30
    thinking = outputs[0].response_ids[: rec.think_len]
    ins = InsertedTokens.from_tokenizer(tok)
    cuts = [min(b, len(thinking)) for b in (4, 9, 30)]
    assert rec.cuts == cuts
    summary_requests = [tuple(r[0]) for r in server.requests if "stop_token_ids" not in r[1]]
    # each distinct prefix requested group_size times per budget it serves, nothing else
    expected = {tuple(summary_prompt(prompt, thinking, c, ins).input_ids): 2 * cuts.count(c) for c in cuts}
    assert {p: summary_requests.count(p) for p in set(summary_requests)} == expected
    assert len(rec.spans) == 2 * 3 and [len(r) for r in rec.rewards] == [2, 2, 2]
    # branches equal direct generation from the same tokens
    for k, (start, sstart, end) in enumerate(rec.spans):
        cut = rec.cuts[k // 2]
        sp = summary_prompt(prompt, thinking, cut, ins)
        assert outputs[0].response_ids[start:sstart] == list(sp.inserted)
        direct = greedy(tiny_model, list(sp.input_ids), {"max_tokens": 32 - sp.inserted_len}, tok.eos_token_id)
        assert outputs[0].response_ids[sstart:end] == direct
        assert outputs[0].response_mask[start:sstart] == [0] * (sstart - start)
        assert outputs[0].response_mask[sstart:end] == [1] * (end - sstart)
    assert outputs[0].response_mask[: rec.think_len] == [1] * rec.think_len
    # weight versions for verl's staleness tags: first and last request of the tree
    assert outputs[0].extra_fields["min_global_steps"] == 11
    assert outputs[0].extra_fields["max_global_steps"] == 10 + len(server.requests)


def test_finished_thinking_merges_later_budgets_and_per_leaf_rewards_are_explicit(loop_factory, tokenizer):
    tok = tokenizer
    end = tok.convert_tokens_to_ids("</think>")
    think = tok.encode("Let me think. 1 + 2 = 3.", add_special_tokens=False) + [end]
    loop, server, tok = loop_factory(budgets=(4, len(think) + 2, 40), group_size=2, script=think)
    # the summaries: make the server answer correctly for the full-thinking prefix only
    correct = tok.encode("\\boxed{3}", add_special_tokens=False) + [tok.eos_token_id]
    wrong = tok.encode("\\boxed{2}", add_special_tokens=False) + [tok.eos_token_id]
    calls = {"n": 0}

    async def scripted(request_id, *, prompt_ids, sampling_params, **kw):
        server.requests.append((list(prompt_ids), dict(sampling_params)))
        if "stop_token_ids" in sampling_params:
            return SimpleNamespace(token_ids=list(think))
        calls["n"] += 1
        k = len(loop.inserted.finished)
        full = list(prompt_ids[len(prompt_ids) - k - len(think) : len(prompt_ids) - k]) == think
        return SimpleNamespace(token_ids=correct if full and calls["n"] % 2 else wrong)

    server.generate = scripted
    outputs = _run(loop)
    rec = TreeRecord.from_dict(outputs[0].extra_fields["arctl"])
    assert rec.finished and rec.think_len == len(think)
    assert rec.cuts == [4, len(think), len(think)]  # budgets 2 and 3 share the full thinking
    assert calls["n"] == 6  # group_size 2 for each of the 3 budgets: the shared prefix gets 2 x 2
    assert rec.rewards[0] == (0.0, 0.0)
    # per summary, not the last output's score; each budget has its own 2 summaries of the shared prefix
    assert sorted(rec.rewards[1]) == [0.0, 1.0] and sorted(rec.rewards[2]) == [0.0, 1.0]
    info = outputs[0].extra_fields["reward_extra_info"]
    assert info[f"score@{len(think) + 2}"] == info["score@40"] == 0.5


def test_a_thinking_ended_by_any_of_the_models_eos_ids_scores_zero(loop_factory, tokenizer, tmp_path):
    """The authors' rule scores every summary of a thinking that ended with EOS 0. A model's generation
    config can list EOS ids beside the tokenizer's (Llama 3 Instruct: 128001/128008/128009, the tokenizer
    128009), and the server stops at each of them (vLLM; arctl's CPU server too): the rule reads them all,
    from the model's generation_config.json, else its config.json (as verl and vLLM read them). Before, only
    the tokenizer's counted, so a thinking ended by another one was graded as cut."""
    from transformers import GenerationConfig, Qwen2Config

    tok = tokenizer
    other = tok.encode("Let", add_special_tokens=False)[0]  # the model's second EOS id here
    (tmp_path / "generation").mkdir()
    GenerationConfig(eos_token_id=[tok.eos_token_id, other]).save_pretrained(tmp_path / "generation")
    Qwen2Config(vocab_size=len(tok), eos_token_id=[other, tok.eos_token_id]).save_pretrained(tmp_path / "config")
    Qwen2Config(vocab_size=len(tok), eos_token_id=tok.eos_token_id).save_pretrained(tmp_path / "one")
    think = tok.encode("Let me think. 1 + 2 = 3.", add_special_tokens=False)[1:] + [other]
    correct = tok.encode("\\boxed{3}", add_special_tokens=False) + [tok.eos_token_id]
    for folder, eos in (("generation", True), ("config", True), ("one", False)):
        loop, server, _ = loop_factory(budgets=(4, len(think) + 2), group_size=2, script=think,
                                       model_dir=tmp_path / folder)

        async def scripted(request_id, *, prompt_ids, sampling_params, **kw):
            return SimpleNamespace(token_ids=list(think) if "stop_token_ids" in sampling_params else correct)

        server.generate = scripted
        rec = TreeRecord.from_dict(_run(loop)[0].extra_fields["arctl"])
        assert rec.think_len == len(think) and not rec.finished and rec.eos is eos, folder
        assert rec.rewards[1] == ((0.0, 0.0) if eos else (1.0, 1.0)), folder  # the full thinking's summaries


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_elastics_inserted_think_end_alone_in_the_rollout(loop_factory, tokenizer, layout):
    """summary.inserted=think_end (Elastic Reasoning's E1): the solution of a cut thinking follows an
    inserted </think> alone, that of a finished thinking its own </think> (nothing inserted); the
    solution cap counts the inserted token (summary.max_tokens = 32)."""
    end = tokenizer.convert_tokens_to_ids("</think>")
    think = tokenizer.encode("Let me think. 1 + 2 = 3.", add_special_tokens=False) + [end]
    loop, server, tok = loop_factory(layout=layout, budgets=(4, 40), group_size=2, script=think, inserted="think_end")
    assert (loop.inserted.truncated, loop.inserted.finished) == ((end,), ())
    outputs = _run(loop)
    prompt = outputs[0].prompt_ids
    summary_requests = [(tuple(r[0]), r[1]["max_tokens"]) for r in server.requests if "stop_token_ids" not in r[1]]
    assert sorted(set(summary_requests)) == sorted({(tuple(prompt + think[:4] + [end]), 31), (tuple(prompt + think), 32)})
    rec = TreeRecord.from_dict(outputs[0].extra_fields["arctl"])
    assert rec.cuts == [4, len(think)] and rec.finished
    # packed: one row, each branch at its span; duplicate: the thinking row, then one row per summary
    # (its response: the thinking cut, the inserted tokens, the summary; spans stay the packed tree's)
    rows = [(o, k, rec.spans[k][0]) for o in outputs[:1] for k in range(len(rec.spans))] if layout == "flex" else [
        (o, 2 * r.leaf[0] + r.leaf[1], r.cuts[r.leaf[0]]) for o in outputs[1:] for r in [TreeRecord.from_dict(o.extra_fields["arctl"])]]
    assert len(rows) == 4
    for o, k, at in rows:
        start, sstart, stop = rec.spans[k]
        cut, n_sum = rec.cuts[k // 2], stop - sstart
        inserted = [end] if cut == 4 else []
        assert sstart - start == len(inserted) and n_sum > 0
        assert o.response_ids[at:at + len(inserted)] == inserted
        assert o.response_mask[at:at + len(inserted) + n_sum] == [0] * len(inserted) + [1] * n_sum
        if layout == "duplicate":
            assert o.response_ids[:cut] == think[:cut] and o.response_mask == [0] * (cut + len(inserted)) + [1] * n_sum


def test_a_trees_requests_share_one_sticky_request_id(loop_factory):
    # verl's router keeps requests with one id on one vLLM replica (and gives vLLM a fresh id per
    # call): every summary then reaches the replica whose prefix cache holds the thinking
    loop, server, tok = loop_factory(budgets=(4, 9, 30), group_size=2)
    outputs = _run(loop)
    first = set(server.request_ids)
    assert len(server.request_ids) == 1 + 2 * 3 and len(first) == 1  # thinking + 6 summaries, one id
    _run(loop)
    second = set(server.request_ids) - first
    assert len(second) == 1  # the next tree has its own id
    # the summary requests' prefix-cache hits travel with the tree (the fake server reports len - 1)
    extra = outputs[0].extra_fields
    prompts = [len(p) for p, params in server.requests[1:7]]
    assert extra["arctl_summary_requests"] == 6
    assert extra["arctl_summary_prompt_tokens"] == sum(prompts)
    assert extra["arctl_summary_cached_tokens"] == sum(prompts) - 6


def test_deterministic_rollout_gets_distinct_deterministic_ids_per_sample(loop_factory):
    """Under rollout.full_determinism verl hands the id to vLLM unchanged (and routes by its hash);
    vLLM refuses duplicates in flight. verl's v1 worker never sets ``priority``, so ids built from
    it were ``det-0-k`` for every tree (issue 26: one replica for all, colliding ids); they come from
    the sample (its question's uid and session) and repeat exactly when the same sample reruns."""
    loop, server, tok = loop_factory(budgets=(4, 9), group_size=2, deterministic=True)
    per_tree = {}
    for uid, session in (("q1", 0), ("q1", 1), ("q2", 0)):
        start = len(server.request_ids)
        _run(loop, uid=uid, session_id=session)
        per_tree[(uid, session)] = server.request_ids[start:]
    for (uid, session), ids in per_tree.items():
        assert ids == [f"det-{uid}-{session}-{k}" for k in range(len(ids))]
    every = [i for ids in per_tree.values() for i in ids]
    assert len(every) == len(set(every))  # no two requests of any trees share an id
    start = len(server.request_ids)
    _run(loop, uid="q1", session_id=1)
    assert server.request_ids[start:] == per_tree[("q1", 1)]  # deterministic


def test_deterministic_requests_each_get_a_seed_of_their_own(loop_factory):
    """From a review of the GPU path: under rollout.full_determinism verl gives every request of a vLLM
    replica one seed (``replica_rank + seed``, a setdefault), and a tree's requests run on one replica with
    one prefix: every summary of a group came back identical (each decoupled summary's advantage exactly 0)
    and a question's thinking samples on one replica were duplicates. Each request now carries its own seed,
    derived from the run's seed and its deterministic id: distinct, and the same when the sample reruns."""
    loop, server, tok = loop_factory(budgets=(4, 9), group_size=2, deterministic=True)
    seeds = {}
    for uid, session in (("q1", 0), ("q1", 1)):
        start = len(server.requests)
        _run(loop, uid=uid, session_id=session)
        seeds[(uid, session)] = [params.get("seed") for _, params in server.requests[start:]]
    every = [s for ss in seeds.values() for s in ss]
    assert None not in every and len(every) == len(set(every)), seeds  # thinking and summaries: all distinct
    start = len(server.requests)
    _run(loop, uid="q1", session_id=1)
    assert [params.get("seed") for _, params in server.requests[start:]] == seeds[("q1", 1)]
    loop, server, tok = loop_factory(budgets=(4, 9), group_size=2)
    _run(loop)
    assert all("seed" not in params for _, params in server.requests)  # sampling as verl does it


def test_summary_cache_metrics_count_each_tree_once():
    from arctl.backends.verl.trainer_v1 import summary_cache_metrics

    tree = {"arctl": {"row": "thinking"}, "arctl_summary_requests": 4, "arctl_summary_prompt_tokens": 400,
            "arctl_summary_cached_tokens": 300}
    branch = {**tree, "arctl": {"row": "branch"}}
    other = {**tree, "arctl_summary_cached_tokens": 100}
    out = summary_cache_metrics([tree, branch, branch, other])
    assert out == {"perf/summary_cached_tokens": 400 / 8, "perf/summary_prefix_cache_hit": 400 / 800}
    assert summary_cache_metrics([{**tree, "arctl_summary_cached_tokens": None}]) == {}  # not reported


def test_validation_is_recognised_from_the_row():
    from omegaconf import OmegaConf

    from arctl.backends.verl.agent_loop import is_validation

    arctl = OmegaConf.create({"eval_only": False, "eval_datasets": ["aime24"]})
    assert is_validation({"extra_info": {"split": "test"}}, arctl)
    assert not is_validation({"extra_info": {"split": "train"}, "data_source": "aime24"}, arctl)
    assert is_validation({"data_source": "aime24"}, arctl) and not is_validation({"data_source": "deepscaler"}, arctl)
    assert is_validation({"validate": True, "extra_info": {"split": "train"}}, arctl)
    assert is_validation({"extra_info": {"split": "train"}}, OmegaConf.create({"eval_only": True}))


def test_the_trainers_mark_says_validation_whatever_the_rows_split():
    """From a review: verl 0.9.1 drops its ``validate`` flag before the agent loop, and the row's split
    decided: a validation file sliced from DeepScaleR's training set (split "train") was rolled out as
    training (training budgets, A summaries), a training file made by `arctl data prepare` from an eval
    set (split "test") as validation (one thinking row: nothing trained). arctl's trainer now marks every
    row it sends; the mark reaches the agent loop's kwargs through verl's tensordict as verl's
    AgentLoopWorkerTQ.generate_sequences unpacks a row (NonTensorStack per row, NonTensorData per batch)."""
    from omegaconf import OmegaConf
    from tensordict import NonTensorData, NonTensorStack
    from verl.utils import tensordict_utils as tu

    from arctl.backends.verl.advantage import VALIDATE_KEY
    from arctl.backends.verl.agent_loop import is_validation
    from arctl.backends.verl.trainer_v1 import _MarkedLoader

    arctl = OmegaConf.create({"eval_only": False, "eval_datasets": ["aime24"]})
    assert is_validation({"extra_info": {"split": "train"}, VALIDATE_KEY: True}, arctl)
    assert not is_validation({"extra_info": {"split": "test"}, "data_source": "aime24", VALIDATE_KEY: False}, arctl)

    def rows(batch):  # verl 0.9.1's AgentLoopWorkerTQ.generate_sequences, row by row
        out = []
        for i in range(len(batch)):
            row = {}
            for k, v in batch.items():
                row[k] = v[i].data if isinstance(v, NonTensorStack) else v.data if isinstance(v, NonTensorData) else v[i]
            out.append(row)
        return out

    loader = [{"raw_prompt": np.array([[{"role": "user", "content": "q"}]] * 2, dtype=object),
               "extra_info": np.array([{"split": "train"}] * 2, dtype=object), "index": torch.arange(2)}]
    (val,) = [tu.get_tensordict(b) for b in _MarkedLoader(loader)]
    assert [is_validation(r, arctl) for r in rows(val)] == [True, True] and len(_MarkedLoader(loader)) == 1
    train = tu.get_tensordict({"raw_prompt": loader[0]["raw_prompt"], "index": torch.arange(2),
                               "extra_info": np.array([{"split": "test"}] * 2, dtype=object),
                               "data_source": np.array(["aime24"] * 2, dtype=object)})
    tu.assign_non_tensor_data(train, VALIDATE_KEY, False)  # what the trainer's _fetch_one_gen_batch adds
    assert [is_validation(r, arctl) for r in rows(train)] == [False, False]


def test_duplicate_layout_rows_and_validation_rows(loop_factory):
    loop, server, tok = loop_factory(layout="duplicate", budgets=(4, 9, 30), group_size=2)
    outputs = _run(loop)
    recs = [TreeRecord.from_dict(o.extra_fields["arctl"]) for o in outputs]
    assert [r.row for r in recs] == ["thinking"] + ["branch"] * (2 * 3)  # A = 2 per budget, 3 budgets
    thinking = outputs[0].response_ids
    for o, r in zip(outputs[1:], recs[1:]):
        j, a = r.leaf
        cut = r.cuts[j]
        start, sstart, end = r.spans[j * 2 + a]
        n_ins, n_sum = sstart - start, end - sstart
        assert o.response_ids[:cut] == thinking[:cut]
        assert o.response_mask == [0] * (cut + n_ins) + [1] * n_sum  # thinking trained once, in its own row
    # validation: eval budgets, one summary per cut, the thinking row only
    server.requests.clear()
    val = _run(loop, extra_info={"split": "test", "index": 0}, data_source="aime24")  # how verl's val rows look
    assert len(val) == 1
    assert sum("stop_token_ids" not in r[1] for r in server.requests) == len(
        set(TreeRecord.from_dict(val[0].extra_fields["arctl"]).cuts))


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_a_coupled_arm_sends_only_its_trained_summaries_into_the_loss(loop_factory, paper_config, layout):
    """Coupled (GRPO+BRPO's arm): the largest budget's summaries are trained, the others' only scored. A
    packed row keeps their tokens with a response mask of 0; the duplicated layout sends no row for them,
    so a tree is the ``rows_per_tree`` rows the trainer scales verl's mini-batch by (1 + A, not 1 + m x A)."""
    from arctl.backends.verl.overrides import rows_per_tree

    loop, _, _ = loop_factory(layout=layout, budgets=(4, 9, 30), group_size=2, decoupled=False)
    outputs = _run(loop)
    recs = [TreeRecord.from_dict(o.extra_fields["arctl"]) for o in outputs]
    assert all(r.rewards and len(r.rewards) == 3 and len(r.spans) == 6 for r in recs)  # every budget scored
    if layout == "duplicate":
        cfg = copy.deepcopy(paper_config)  # what the loop was built from (loop_factory)
        cfg["thinking"]["budgets"], cfg["verl"]["tree_attention"] = [4, 9, 30], "duplicate"
        cfg["summary"].update(group_size=2, decoupled=False)
        assert len(outputs) == rows_per_tree(cfg) == 3
        assert [r.row for r in recs] == ["thinking", "branch", "branch"] and [r.leaf for r in recs[1:]] == [(2, 0), (2, 1)]
        return
    (row,), (rec,) = outputs, recs
    on = {i for i, m in enumerate(row.response_mask) if m}
    trained = set(range(rec.think_len))
    for k, (_start, sstart, end) in enumerate(rec.spans):
        if k // 2 == 2:
            trained |= set(range(sstart, end))
    assert on == trained and any(end > sstart for _, sstart, end in rec.spans[:4])  # others' tokens, masked out


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_outputs_through_verls_transfer_queue_postprocess_into_the_advantage_step(loop_factory, monkeypatch, layout):
    """Agent-loop outputs -> verl's AgentLoopWorkerTQ._agent_loop_postprocess (which copies the last
    output's score onto the others) -> TransferQueue rows -> ArctlPPOTrainer._compute_advantage:
    the per-leaf rewards survive in the tree record and the advantages equal tree_advantages."""
    import verl.trainer.ppo.v1.agent_loop_tq as tqmod

    from arctl.algo.settings import Objective, Thinking
    from arctl.backends.verl import trainer_v1
    from arctl.backends.verl.advantage import record_advantages, response_advantages

    loop, server, tok = loop_factory(layout=layout, budgets=(4, 9, 30), group_size=2)
    stored: dict[str, dict] = {}

    async def fake_put(keys, fields, tags, partition_id):
        assert all(t["min_global_steps"] is not None and t["max_global_steps"] is not None for t in tags)
        for i, k in enumerate(keys):
            stored[k] = {name: fields[name][i] for name in fields.keys()}
            stored[k]["extra_fields"] = fields["extra_fields"][i]

    monkeypatch.setattr(tqmod.tq, "async_kv_batch_put", fake_put)
    worker_cls = tqmod.AgentLoopWorkerTQ.__ray_metadata__.modified_class
    worker = object.__new__(worker_cls)
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.processor = None
    rewards_by_session = {}
    for session, ground_truth in enumerate(["3", "7"]):
        server.requests.clear()

        async def go(session=session, ground_truth=ground_truth):
            loop.loop = asyncio.get_running_loop()
            kwargs = dict(raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}],
                          reward_model={"ground_truth": ground_truth})
            outs = await loop.run({"temperature": 1.0, "logprobs": False}, **kwargs)
            # flip some rewards so the two trees differ (the fake model's answers are garbage)
            rec = outs[0].extra_fields["arctl"]
            rec["rewards"] = [[float((j + a + session) % 2) for a in range(len(r))]
                              for j, r in enumerate(rec["rewards"])]
            for o in outs[1:]:
                o.extra_fields["arctl"]["rewards"] = rec["rewards"]
            rewards_by_session[session] = rec["rewards"]
            await worker._agent_loop_postprocess(outs, validate=False, uid="q", session_id=session, global_steps=1,
                                                 **kwargs)

        asyncio.run(go())
    keys = sorted(stored)
    # verl overwrote every row's score with the last output's; the record keeps each leaf's reward
    if layout == "duplicate":
        last = [k for k in keys if k.startswith("q_0_")][-1]
        assert all(float(stored[k]["rm_scores"].sum()) == float(stored[last]["rm_scores"].sum())
                   for k in keys if k.startswith("q_0_"))
    monkeypatch.setattr(trainer_v1, "tq", _DictTQ(stored))
    trainer = trainer_v1.ArctlPPOTrainer.__new__(trainer_v1.ArctlPPOTrainer)
    objective = Objective(Thinking(budgets=(4, 9, 30), prior="uniform", baseline="brpo", lam=0.5))
    objective = dataclasses.replace(objective, summary=dataclasses.replace(objective.summary, group_size=2))
    from arctl.algo.settings import BudgetControl

    trainer.arctl_objective, trainer.arctl_control = objective, BudgetControl()  # as __init__ sets them
    trainer.global_steps, trainer.total_training_steps = 1, 3  # as verl's fit() sets them
    metrics = {}
    trainer._compute_advantage(_Batch(keys), metrics)
    trees = [k for k in keys if k.endswith("_0")]
    recs = [TreeRecord.from_dict(stored[k]["extra_fields"]["arctl"]) for k in trees]
    assert [list(r.rewards) for r in recs] == [
        [tuple(x) for x in rewards_by_session[0]], [tuple(x) for x in rewards_by_session[1]]]
    advs = record_advantages(recs, ["q", "q"], objective)
    for k in keys:
        rec = TreeRecord.from_dict(stored[k]["extra_fields"]["arctl"])
        tree = advs[int(k.split("_")[1])]
        n = int(stored[k]["response_mask"].shape[0])
        assert stored[k]["advantages"].tolist() == pytest.approx(response_advantages(rec, tree, n).tolist(), abs=1e-6)
    assert "train/anytime_score" in metrics and "train/adv_var/brpo" in metrics
    if layout == "flex":  # the old-log-prob pass first writes tree positions and the mask encoding
        from arctl.backends.verl.trainer_v1 import tree_tensors

        trainer._put_tree_tensors(_Batch(keys))
        for k in keys:
            rec = TreeRecord.from_dict(stored[k]["extra_fields"]["arctl"])
            want = tree_tensors(stored[k]["prompts"].tolist(), stored[k]["responses"].tolist(), rec)
            for name in ("position_ids", "tree_cut", "tree_branch_start"):
                assert torch.equal(stored[k][name], want[name]), name
            assert stored[k]["position_ids"].max() < stored[k]["input_ids"].numel()  # branches reuse positions


class _Batch:
    def __init__(self, keys):
        self.keys, self.tags, self.partition_id = list(keys), [{}] * len(keys), "train"

    def __len__(self):
        return len(self.keys)


class _DictTQ:
    def __init__(self, rows):
        self.rows = rows

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in select_fields} for k in keys])

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, k in enumerate(keys):
            for name in fields.keys():
                self.rows[k][name] = fields[name][i]
        return _Batch(keys)


# ------------------------------------------------------------------------------ compared methods
def _thinking_prompts(server):
    return [r[0] for r in server.requests if "stop_token_ids" in r[1]]


def test_l1_writes_the_questions_target_into_its_prompt_and_record(loop_factory):
    from arctl.algo.methods import control as bc
    from arctl.algo.settings import BudgetControl
    from arctl.backends.verl.agent_loop import question_key

    control = {"method": "l1", "l1_mode": "max", "l1_targets": [4, 9, 30]}
    loop, server, tok = loop_factory(budgets=(4, 9, 30), group_size=2, control=control)
    outputs = _run(loop)
    rec = TreeRecord.from_dict(outputs[0].extra_fields["arctl"])
    kwargs = dict(raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}])
    want = bc.question_target(BudgetControl(**{**control, "l1_targets": (4, 9, 30)}), question_key(kwargs, 0), 30)
    assert rec.target == want
    text = f"What is 1 + 2? Think for maximum {want} tokens."
    ids = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True, add_generation_prompt=True)
    assert _thinking_prompts(server) == [list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)]
    # evaluation: one thinking per target, each cut at the budgets it serves
    loop, server, tok = loop_factory(budgets=(4, 9, 30), group_size=2, control=control)
    outputs = _run(loop, validate=True)
    prompts = [tok.decode(p) for p in _thinking_prompts(server)]
    assert [f"Think for maximum {t} tokens." in p for p in prompts for t in (4, 9, 30)].count(True) == 3
    info = outputs[0].extra_fields["reward_extra_info"]
    assert sorted(k for k in info if k.startswith("score@")) == ["score@30", "score@4", "score@9"]


def test_budget_forcing_evaluates_again_with_the_cue_in_place_of_an_early_end(loop_factory, tokenizer):
    end = tokenizer.convert_tokens_to_ids("</think>")
    think = tokenizer.encode("Let me think.", add_special_tokens=False) + [end]
    control = {"forcing_extensions": 2, "forcing_cue": "Wait"}
    loop, server, tok = loop_factory(budgets=(4, 40), group_size=1, script=think, control=control)
    outputs = _run(loop, validate=True)
    info = outputs[0].extra_fields["reward_extra_info"]
    assert {"score@4", "score@40", "think_len", "forced_score@4", "forced_score@40", "forced_think_len"} <= set(info)
    cue = tok.encode("Wait", add_special_tokens=False)
    prompts = _thinking_prompts(server)
    assert len(prompts) == 1 + 3  # unforced; forced: the first thinking, then one continuation per cue
    n = len(think) - 1
    assert prompts[2] == prompts[1] + think[:n] + cue and prompts[3] == prompts[2] + think[:n] + cue
    assert info["think_len"] == len(think) and info["forced_think_len"] == 3 * n + 2 * len(cue) + 1
    # training never forces
    loop, server, tok = loop_factory(budgets=(4, 40), group_size=1, script=think, control=control)
    _run(loop)
    assert len(_thinking_prompts(server)) == 1


def test_verl_forcing_emits_what_the_per_token_rule_emits():
    """generate_thinking's request loop (verl) equals the s1 state machine on the same model
    proposals: the model proposes script[t] at thinking position t, and a request stops at </think>."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from s1_reference import budget_forcing_generate

    from arctl.algo.methods.budget_forcing import BudgetForcing
    from arctl.backends.verl.agent_loop import generate_thinking

    end, cue = 5, (6, 4)

    @settings(max_examples=80, deadline=None)
    @given(st.integers(2, 14), st.integers(0, 3), st.lists(st.sampled_from([end, 7, 8]), min_size=15, max_size=15))
    def check(budget, max_ext, script):
        cfg = BudgetForcing(budget, end, cue, max_ext)

        async def generate(prompt, params):
            pos = len(prompt) - 1  # one prompt token: the thinking so far is the rest
            out = []
            while len(out) < params["max_tokens"]:
                out.append(script[pos + len(out)])
                if out[-1] == end:
                    break
            return out

        got = asyncio.run(generate_thinking(generate, [99], budget, end, {}, cfg))
        want, _ = budget_forcing_generate(lambda out: script[len(out)], cfg, budget + 1, stop_ids=[end])
        if len(want) == budget + 1:
            want = want[:-1]  # the close forced at the budget is the cut
        assert got == want, (budget, max_ext, script, got, want)

    check()


def test_the_tree_loop_is_built_as_verls_worker_builds_it_with_an_r1_distill_tokenizer(r1_dir, paper_config):
    """Issue 26: verl's AgentLoopWorker instantiates the loop through hydra with ``hf_model_type`` from
    config.json ("qwen2" for R1-Distill-Qwen), so verl chose its Qwen Continuous-Token builder, which
    requires <|im_end|>: ValueError in every rollout worker. The loop now gives verl's builder the
    family the tokenizer speaks (DeepSeek), and the prompt it builds is R1-Distill's chat format."""
    import hydra
    from transformers import AutoConfig, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    tok = AutoTokenizer.from_pretrained(r1_dir)
    hf_model_type = AutoConfig.from_pretrained(r1_dir).model_type  # what verl's worker passes
    assert hf_model_type == "qwen2" and tok.unk_token is None and "<|im_end|>" not in tok.get_vocab()
    cfg = copy.deepcopy(paper_config)
    cfg["model"]["path"] = str(r1_dir)
    composed = check_overrides(verl_overrides(cfg))
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry["arctl_tree"], trainer_config=DictConfigWrap(config=composed),
        server_manager=None, tokenizer=tok, processor=None, hf_model_type=hf_model_type, dataset_cls=None,
        data_config=DictConfigWrap(composed.data), tools=ToolListWrap([]),
    )
    assert type(loop.continuous_token_builder).__name__ == "DeepSeekContinuousTokenBuilder"

    async def prompt():
        loop.loop = asyncio.get_running_loop()
        return await loop.ct_build_initial_tokens([{"role": "user", "content": "What is 1 + 0?"}])

    ids = list(asyncio.run(prompt()))
    assert ids == tok.apply_chat_template([{"role": "user", "content": "What is 1 + 0?"}], tokenize=True,
                                          add_generation_prompt=True)["input_ids"]
    assert tok.decode(ids[-3:]) == "<｜Assistant｜><think>\n"


def test_verls_qwen_builder_is_what_refused_the_r1_tokenizer(r1_dir):
    """The failure the loop avoids, as verl 0.9.1 produces it (if verl changes, this test says so)."""
    from transformers import AutoTokenizer
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    with pytest.raises(ValueError, match="im_end"):
        create_continuous_token_builder(AutoTokenizer.from_pretrained(r1_dir), hf_model_type="qwen2")


@pytest.mark.parametrize("split,partition", [("train", "train"), ("test", "val")])
def test_a_failing_tree_tags_its_question_with_the_error_and_raises(loop_factory, monkeypatch, split, partition):
    """The trainer fails the step with this line (test_rollout_failures.py); verl's worker still gets
    the exception and marks the group failed."""
    import transfer_queue

    recorded = []

    async def put(key, partition_id, fields=None, tag=None):
        recorded.append((key, partition_id, tag))

    async def refuse(request_id, *, prompt_ids, sampling_params, **kwargs):
        raise ValueError("prompt length 9000 leaves no room\nwithin max_model_len 8192")

    monkeypatch.setattr(transfer_queue, "async_kv_put", put)
    loop, server, _ = loop_factory()
    server.generate = refuse
    with pytest.raises(ValueError, match="no room"):
        _run(loop, uid="q7", session_id=1, extra_info={"split": split})
    assert recorded == [("q7", partition, {"arctl_error": "ValueError: prompt length 9000 leaves no room within "
                                                          "max_model_len 8192"})]


@pytest.mark.parametrize("step,limit", [(1, 9), (2, 4)])
def test_thinkprune_stops_generating_at_the_rounds_limit(loop_factory, step, limit):
    """ThinkPrune's rollout stops at the round's limit (limits 9 -> 4 over 2 steps): the thinking
    request asks for at most the limit, not b_m = 30, at the step verl's batch carries
    (``global_steps``) of the run's ``arctl.total_steps`` (the trainer sets it in on_init_end)."""
    from omegaconf import open_dict

    loop, server, _ = loop_factory(budgets=(4, 9, 30), control={"method": "thinkprune", "thinkprune_limits": [9, 4]})
    with open_dict(loop.arctl):
        loop.arctl.total_steps = 2
    outputs = _run(loop, global_steps=step)
    thinking_requests = [r for r in server.requests if "stop_token_ids" in r[1]]
    assert thinking_requests[0][1]["max_tokens"] == limit
    assert TreeRecord.from_dict(outputs[0].extra_fields["arctl"]).think_len <= limit


def test_a_step_limit_without_the_step_is_one_error(loop_factory):
    from arctl.algo.settings import BudgetControl
    from arctl.backends.verl.agent_loop import generation_limit

    thinkprune = BudgetControl(method="thinkprune", thinkprune_limits=(9, 4))
    assert generation_limit(thinkprune, {"global_steps": 2}, {"total_steps": 2}) == 4
    assert generation_limit(BudgetControl(), {}, {}) is None  # no method: no step needed
    with pytest.raises(ValueError, match="limits the thinking per training step.*global_steps=None"):
        generation_limit(thinkprune, {}, {"total_steps": 2})


def test_a_loop_that_cannot_be_built_records_its_error_when_run(loop_factory, monkeypatch):
    """From a review: verl builds the loop before run(), so an error of its construction (a tokenizer without
    </think>) skipped rollout_failures and the step failed with "see the agent-loop worker's log"."""
    import transfer_queue

    from arctl.backends.verl import agent_loop

    recorded = []

    async def put(key, partition_id, fields=None, tag=None):
        recorded.append((key, partition_id, tag))

    def no_think_end(cls, tokenizer, style=None):
        raise ValueError("the tokenizer has no '</think>' token")

    monkeypatch.setattr(transfer_queue, "async_kv_put", put)
    monkeypatch.setattr(agent_loop.InsertedTokens, "from_tokenizer", classmethod(no_think_end))
    loop, _, _ = loop_factory()  # built: no exception yet
    with pytest.raises(ValueError, match="no '</think>' token"):
        _run(loop, uid="q3", session_id=1, extra_info={"split": "train"})
    assert recorded == [("q3", "train", {"arctl_error": "ValueError: the tokenizer has no '</think>' token"})]


def test_the_chat_format_is_read_from_a_tokenizers_vocabulary_once():
    """From a review: verl builds a loop per sample, and each read the tokenizer's whole vocabulary (151k
    entries, ~110 ms a sample on R1-Distill's)."""
    from arctl.backends.verl.agent_loop import DEEPSEEK_EOS, continuous_token_model_type

    class Tok:
        reads = 0

        def __init__(self, vocab):
            self.vocab = vocab

        def get_vocab(self):
            type(self).reads += 1
            return self.vocab

    r1, qwen = Tok({DEEPSEEK_EOS: 1}), Tok({"<|im_end|>": 2})
    for _ in range(3):
        assert continuous_token_model_type(r1, "qwen2") == "deepseek_v3"
        assert continuous_token_model_type(qwen, "qwen2") == "qwen2"
        assert continuous_token_model_type(Tok({}), "qwen2") is None  # a new tokenizer is read afresh
    assert Tok.reads == 2 + 3


def test_an_aborted_request_fails_its_tree(loop_factory):
    """verl hands an aborted request back as it stands where it does not resume it (async training without
    partial rollout): its tokens would have been taken as a whole thinking, graded as cut by the budget."""
    loop, server, _ = loop_factory()

    async def aborting(request_id, *, prompt_ids, sampling_params, **kw):
        return SimpleNamespace(token_ids=[5, 6, 7], stop_reason="aborted", extra_fields={})

    server.generate = aborting
    with pytest.raises(RuntimeError, match="aborted request .* after 3 tokens"):
        _run(loop)


def test_a_row_without_a_ground_truth_fails_its_tree_naming_the_row_before_generating(loop_factory):
    """From a hunt: a training file without reward_model.ground_truth trained to COMPLETED with every reward 0."""
    loop, server, _ = loop_factory()

    async def go():
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0, "logprobs": False}, raw_prompt=[{"role": "user", "content": "q"}],
                              data_source="deepscaler", extra_info={"split": "train", "index": 5})

    with pytest.raises(ValueError, match=r"^the row of data_source 'deepscaler', extra_info.index 5 has no "
                                         r"reward_model.ground_truth"):
        asyncio.run(go())
    assert server.requests == []
