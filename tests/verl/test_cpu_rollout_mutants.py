"""The CPU rollout server (arctl/backends/verl/cpu_rollout.py) where test_cpu_rollout.py left a change
silent (a mutation hunt): a request that continues a whole earlier generation (the summary of a thinking
that ended before its budget) is generated from its whole context, each request samples with a seed of its
own, and an aborted request says so."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch


@pytest.fixture(scope="module")
def server(r1_dir):
    from arctl.backends.verl.cpu_rollout import CPURolloutServer

    config = SimpleNamespace(prompt_length=32, response_length=48, max_model_len=None, seed=0)
    return CPURolloutServer(config, SimpleNamespace(local_path=str(r1_dir), path=str(r1_dir)))


@pytest.fixture(scope="module")
def random_server(r1_dir):
    """A server whose model is a plain random Qwen2 (R1-like's model puts most of its probability on a few
    tokens whatever the context, so a lost context token would barely move its log-probabilities)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from arctl.backends.verl.cpu_rollout import CPURolloutServer

    config = SimpleNamespace(prompt_length=32, response_length=48, max_model_len=None, seed=0)
    server = CPURolloutServer(config, SimpleNamespace(local_path=str(r1_dir), path=str(r1_dir)))
    torch.manual_seed(0)
    server.model = Qwen2ForCausalLM(Qwen2Config(vocab_size=server.model.config.vocab_size, hidden_size=32,
                                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                intermediate_size=64, attn_implementation="sdpa")).eval()
    return server


def _generate(server, prompt, request_id="req-1", **params):
    return asyncio.run(server.generate(prompt, {"temperature": 0.0, **params}, request_id))


def test_a_request_continuing_a_whole_generation_sees_its_last_token(random_server):
    """The tree's summary of a thinking that ended before the largest budget is ``prompt + whole thinking +
    inserted``: it shares every token of the thinking request, the ``</think>`` it stopped at included, whose
    KV the server never computed (a stop token is not fed back). The summary must still be generated from its
    whole context: its tokens and log-probabilities are those of a plain forward pass over the sequence."""
    random_server.prefix_cache.clear()
    prompt = list(range(10, 22))
    free = _generate(random_server, prompt, max_tokens=4, ignore_eos=True)
    stop = free.token_ids[0]
    random_server.prefix_cache.clear()  # only the thinking's entry below
    first = _generate(random_server, prompt, max_tokens=4, stop_token_ids=[stop])  # a thinking ended by its stop token
    assert first.token_ids == [stop]
    branch = prompt + first.token_ids + [40, 41]
    second = _generate(random_server, branch, max_tokens=4, ignore_eos=True, logprobs=True)
    with torch.no_grad():
        logits = random_server.model(input_ids=torch.tensor([branch + second.token_ids])).logits[0].float()
    raw = torch.log_softmax(logits, dim=-1)
    want = [float(raw[len(branch) - 1 + i, t]) for i, t in enumerate(second.token_ids)]
    assert second.log_probs == pytest.approx(want, abs=1e-4)


def test_each_request_samples_with_a_seed_of_its_own(server):
    """Without a seed in its parameters a request's sampling stream comes from the run's seed and its own id:
    the same id gives the same tokens, two ids (a tree's summaries under full determinism, or two thinking
    samples) different ones. One seed for all would make every summary of a group token-identical (each
    summary's advantage exactly 0)."""
    prompt = list(range(10, 22))
    runs = {rid: _generate(server, prompt, rid, temperature=1.0, max_tokens=24, ignore_eos=True).token_ids
            for rid in ("det-a-0", "det-a-1", "det-a-2")}
    assert _generate(server, prompt, "det-a-1", temperature=1.0, max_tokens=24, ignore_eos=True).token_ids == runs["det-a-1"]
    assert len({tuple(t) for t in runs.values()}) == 3


def test_a_request_aborted_before_it_ends_reports_the_abort(server):
    """verl's abort (async training's weight sync) stops the request in progress: its output says ``aborted``,
    which the tree loop refuses (a thinking cut there would be graded as cut by a budget)."""
    server._aborting = True
    try:
        out = _generate(server, list(range(10, 20)), max_tokens=4)
    finally:
        server._aborting = False
    assert out.stop_reason == "aborted" and out.token_ids == []


def test_ignore_eos_generates_past_the_eos(server):
    """verl's ``ignore_eos`` (as vLLM's): the request runs to ``max_tokens`` through any EOS. The same request
    id samples the same stream, so with ``ignore_eos`` the output is the one without it, continued past its
    EOS."""
    prompt = list(range(1000, 1008))
    for rid in (f"eos-{k}" for k in range(20)):  # a request that stops at its EOS (R1-like's model favours it)
        stopped = _generate(server, prompt, rid, temperature=1.0, max_tokens=20)
        if stopped.token_ids[-1] in server.eos_ids and len(stopped.token_ids) < 20:
            break
    else:
        pytest.fail("no request of 20 stopped at an EOS")
    through = _generate(server, prompt, rid, temperature=1.0, max_tokens=20, ignore_eos=True)
    assert len(through.token_ids) == 20 and through.token_ids[: len(stopped.token_ids)] == stopped.token_ids
