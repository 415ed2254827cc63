"""The CPU rollout server of ``verl.device=cpu`` (arctl/backends/verl/cpu_rollout.py) against plain
references: greedy generation through its prefix cache equals ``model.generate`` without one, a request
sharing a prefix reuses its KV and says how much (as vLLM's ``num_cached_tokens``), stop tokens stay in
the output, ``max_tokens`` is clamped to the context; sampling keeps exactly the tokens top-k / top-p
allow and reports the unprocessed log-probability."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def server(r1_dir):
    from arctl.backends.verl.cpu_rollout import CPURolloutServer

    config = SimpleNamespace(prompt_length=32, response_length=48, max_model_len=None, seed=0)
    return CPURolloutServer(config, SimpleNamespace(local_path=str(r1_dir), path=str(r1_dir)))


def _generate(server, prompt, **params):
    return asyncio.run(server.generate(prompt, {"temperature": 0.0, "logprobs": True, **params}, "req-1"))


def _reference(model, prompt, max_new, stops):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                             eos_token_id=sorted(stops), pad_token_id=sorted(stops)[0],
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    return out[0, len(prompt):].tolist()


def test_greedy_generation_through_the_prefix_cache_equals_plain_generation(server):
    import r1_like  # tests/support/r1_like.py

    tok = r1_like.build_tokenizer()
    think_end = tok.convert_tokens_to_ids("</think>")
    text = tok.apply_chat_template([{"role": "user", "content": "What is 1 + 1?"}], tokenize=False,
                                   add_generation_prompt=True)
    prompt = tok.encode(text, add_special_tokens=False)
    server.prefix_cache.clear()
    first = _generate(server, prompt, max_tokens=12, stop_token_ids=[think_end])
    stops = server.eos_ids | {think_end}
    assert first.token_ids == _reference(server.model, prompt, 12, stops)
    assert first.extra_fields["num_cached_tokens"] == 0
    assert len(first.log_probs) == len(first.token_ids)
    # a stop token ends the request and is kept in the output, as vLLM keeps it
    stopped = _generate(server, prompt, max_tokens=12, stop_token_ids=[first.token_ids[0]])
    assert stopped.token_ids == first.token_ids[:1] and len(first.token_ids) > 1
    # a summary request: the thinking prefix plus inserted text -> the prompt's and the thinking's KV are reused
    # (from a review: only prompts were kept, and every summary recomputed its thinking)
    assert len(first.token_ids) > 5
    branch = prompt + first.token_ids[:5] + tok.encode("...\n\n", add_special_tokens=False)
    second = _generate(server, branch, max_tokens=8)
    assert second.extra_fields["num_cached_tokens"] >= len(prompt) + 5
    assert second.token_ids == _reference(server.model, branch, 8, server.eos_ids)
    # the same branch again: all but its last token come from the cache, same tokens
    again = _generate(server, branch, max_tokens=8)
    assert again.extra_fields["num_cached_tokens"] == len(branch) - 1 and again.token_ids == second.token_ids


def test_new_weights_drop_the_cache_and_max_tokens_is_clamped_to_the_context(server):
    prompt = list(range(10, 30))
    _generate(server, prompt, max_tokens=2)
    loaded = server.update_weights({k: v.clone() for k, v in server.model.state_dict().items()}, global_steps=4)
    assert loaded == len(server.model.state_dict()) and server.global_steps == 4
    out = _generate(server, prompt, max_tokens=1000, ignore_eos=True)
    assert out.extra_fields["num_cached_tokens"] == 0  # the cached KV belonged to the old weights
    assert len(out.token_ids) == 32 + 48 - len(prompt)  # prompt_length + response_length
    assert out.extra_fields["global_steps"] == 4
    with pytest.raises(ValueError, match="no room within max_model_len"):
        _generate(server, list(range(80)), max_tokens=1)


def _kept_reference(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> set[int]:
    """The tokens sampling may return, by definition: the top_k highest, then the smallest set of
    the most probable whose probability (renormalised) reaches top_p."""
    scores = logits / temperature
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    if 0 < top_k < len(order):
        order = order[:top_k]
    probs = torch.softmax(scores[order], dim=-1).tolist()
    kept, mass = [], 0.0
    for i, p in zip(order, probs):
        kept.append(i)
        mass += p
        if 0 < top_p < 1 and mass >= top_p:
            break
    return set(kept)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), top_k=st.sampled_from([-1, 1, 2, 5]), top_p=st.sampled_from([0.3, 0.7, 0.95, 1.0]),
       temperature=st.sampled_from([0.5, 1.0, 2.0]))
def test_sampling_keeps_what_top_k_and_top_p_allow(seed, top_k, top_p, temperature):
    from arctl.backends.verl.cpu_rollout import sample_next

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(12, generator=g) * 3
    allowed = _kept_reference(logits, temperature, top_k, top_p)
    raw = torch.log_softmax(logits, -1)
    for k in range(20):
        token, logp = sample_next(logits, temperature, top_p, top_k, torch.Generator().manual_seed(seed * 31 + k))
        assert token in allowed
        assert logp == pytest.approx(float(raw[token]))  # vLLM's logprob: the unprocessed distribution
    assert sample_next(logits, 0.0, top_p, top_k, g)[0] == int(torch.argmax(logits))  # greedy


def test_a_request_that_ended_before_an_abort_came_is_completed(server, monkeypatch):
    """From a review: the stop reason was read after decoding, so a request that ended on its stop token just as
    an abort came was reported aborted (and an async client resumed it past its stop token)."""
    from arctl.backends.verl import cpu_rollout

    real = cpu_rollout.sample_next

    def then_abort(*args):
        token, logp = real(*args)
        server._aborting = True  # the abort arrives as the request's last token is sampled
        return token, logp

    first = _generate(server, list(range(10, 20)), max_tokens=1)
    monkeypatch.setattr(cpu_rollout, "sample_next", then_abort)
    try:
        out = _generate(server, list(range(10, 20)), max_tokens=4, stop_token_ids=[first.token_ids[0]])
    finally:
        server._aborting = False
    assert out.token_ids == first.token_ids and out.stop_reason == "completed"


def test_the_prefix_cache_is_cleared_between_a_lookups_steps_not_during_them():
    """From a review: verl's sleep/clear calls come from the event loop while a request decodes in a thread;
    a clear during longest()'s walk raised "OrderedDict mutated during iteration"."""
    import threading

    from arctl.backends.verl.cpu_rollout import PrefixCache

    cache = PrefixCache()
    cache._items[(1, 2, 3)] = None
    with cache._lock:  # a lookup in progress
        clearing = threading.Thread(target=cache.clear)
        clearing.start()
        clearing.join(0.3)
        assert clearing.is_alive() and (1, 2, 3) in cache._items  # waits for the lookup
    clearing.join(5)
    assert not clearing.is_alive() and not cache._items


def test_the_server_stops_at_the_tokenizers_eos_and_every_one_of_the_generation_configs(r1_dir, tmp_path):
    """As vLLM (``SamplingParams.update_from_generation_config``): the tokenizer's EOS and every id the
    model's generation config lists. Before, a generation config's list replaced the tokenizer's EOS."""
    import shutil

    from transformers import AutoTokenizer, GenerationConfig

    from arctl.backends.verl.cpu_rollout import CPURolloutServer

    model_dir = tmp_path / "model"
    shutil.copytree(r1_dir, model_dir)
    eos = AutoTokenizer.from_pretrained(model_dir).eos_token_id
    GenerationConfig(eos_token_id=[eos + 1, eos + 2]).save_pretrained(model_dir)
    config = SimpleNamespace(prompt_length=32, response_length=48, max_model_len=None, seed=0)
    server = CPURolloutServer(config, SimpleNamespace(local_path=str(model_dir), path=str(model_dir)))
    assert server.eos_ids == {eos, eos + 1, eos + 2}


def test_weights_that_leave_a_parameter_out_or_do_not_fit_are_refused(server, r1_dir, tmp_path):
    """The trainer's weights arrive in one piece (every rank gathers them): a parameter not sent would keep
    its old values in the rollout while training moved on, silently (load_state_dict(strict=False) said
    nothing). A tied weight counts as sent under either of its names."""
    import shutil

    from transformers import AutoModelForCausalLM

    from arctl.backends.verl.cpu_rollout import CPURolloutServer

    state = {k: v.clone() for k, v in server.model.state_dict().items()}
    dropped = next(k for k in state if "layers.1." in k)
    with pytest.raises(ValueError, match=f"not sent .*{dropped}"):
        server.update_weights({k: v + 1 for k, v in state.items() if k != dropped})
    assert all(torch.equal(v, state[k]) for k, v in server.model.state_dict().items())  # refused before loading
    with pytest.raises(ValueError, match="not the model's .*value_head"):
        server.update_weights({**state, "value_head.weight": torch.zeros(1)})

    tied_dir = tmp_path / "tied"
    shutil.copytree(r1_dir, tied_dir)
    model = AutoModelForCausalLM.from_pretrained(r1_dir)
    model.config.tie_word_embeddings = True
    AutoModelForCausalLM.from_config(model.config).save_pretrained(tied_dir)
    config = SimpleNamespace(prompt_length=32, response_length=48, max_model_len=None, seed=0)
    tied = CPURolloutServer(config, SimpleNamespace(local_path=str(tied_dir), path=str(tied_dir)))
    assert tied.model.lm_head.weight is tied.model.model.embed_tokens.weight
    full = {k: v.clone() for k, v in tied.model.state_dict().items()}
    for left in ("lm_head.weight", "model.embed_tokens.weight"):  # either name carries the tied weight
        assert tied.update_weights({k: v for k, v in full.items() if k != left}) == len(full) - 1
