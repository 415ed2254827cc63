"""Summaries decoded on a slice of the thinking's KV cache equal re-encoding the whole prefix."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.algo.prompts import InsertedTokens, summary_prompt
from arctl.backends.tiny import rollout as ro
from arctl.backends.tiny import task
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.tasks import toy_task
from arctl.backends.tiny.tokenizer import build_tokenizer, encode_words

MICRO_MODEL = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                   tie_embeddings=True, max_position_embeddings=256)


def _setup():
    tok = build_tokenizer(task.vocabulary(6))
    model = build_model(model_config(MICRO_MODEL, len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    problems = [task.Problem((1, 2)), task.Problem((3, 4, 5, 6)), task.Problem((7, 8, 9))]
    prompts = [encode_words(tok, task.prompt_words(p)) for p in problems for _ in range(2)]
    return tok, model, prompts


def _common_token(model, tok, prompts):
    """A token the random model emits often: used as end-of-thinking so that rows finish early."""
    th = ro.generate_thinking(model, prompts, 6, 0.0, None, -1, tok.pad_token_id)
    return int(torch.mode(th.think_ids[:, 1:].flatten()).values)


def _check_against_reencoding(model, th, branches, inserted, logits, pad_id):
    k = 0
    for b in branches:
        sp = summary_prompt(th.question(b.row), th.thinking(b.row), b.cut, inserted)
        assert list(sp.inserted) == b.inserted and sp.finished == b.finished
        for s in b.summaries:
            ids = torch.tensor([list(sp.input_ids) + s])
            with torch.no_grad():
                ref = model(input_ids=ids).logits[0, len(sp.input_ids) - 1 : -1]
            assert ref.argmax(-1).tolist() == s
            torch.testing.assert_close(logits[k], ref, atol=1e-5, rtol=1e-5)
            k += 1
    assert k == len(logits)


@pytest.mark.parametrize("style", ["anytime", "think_end"])
def test_kv_reused_summaries_equal_reencoding_truncated_and_finished(style):
    """Also with E1's layout (Elastic, ``summary.inserted=think_end``): after a finished thinking nothing
    is inserted, and the answer's first token is read at the thinking's own last token."""
    tok, model, prompts = _setup()
    end = _common_token(model, tok, prompts)
    inserted = (InsertedTokens.from_ids(encode_words(tok, ["...", "..."]), end, encode_words(tok, ["**Final", "Answer**"]))
                if style == "anytime" else InsertedTokens(truncated=(end,), finished=(), think_end=end))
    gen = torch.Generator().manual_seed(0)
    th = ro.generate_thinking(model, prompts, 12, 1.0, gen, end, tok.pad_token_id)
    assert th.finished.any() and (~th.finished).any()  # both kinds of prefix are exercised
    branches = ro.plan_branches(th, [3, 6, 9, 12], inserted)
    logits = ro.generate_summaries(model, th, branches, 2, 10, 0.0, None, tok.eos_token_id, tok.pad_token_id,
                                   max_rows=5, return_logits=True)
    _check_against_reencoding(model, th, branches, inserted, logits, tok.pad_token_id)
    assert any(b.finished for b in branches) and any(not b.finished for b in branches)


def test_rows_that_finish_early_leave_the_batch_and_the_others_stay_exact():
    tok, model, prompts = _setup()
    end = _common_token(model, tok, prompts)
    inserted = InsertedTokens.from_ids(encode_words(tok, ["...", "..."]), end, encode_words(tok, ["**Final", "Answer**"]))
    th = ro.generate_thinking(model, prompts, 12, 1.0, torch.Generator().manual_seed(0), end, tok.pad_token_id)
    # sampled summaries; a token in about half of them plays <eos>, so rows finish at different steps
    probe = ro.plan_branches(th, [3, 6, 9, 12], inserted)
    ro.generate_summaries(model, th, probe, 2, 11, 1.0, torch.Generator().manual_seed(1), -1, tok.pad_token_id, 64)
    summaries = [s for b in probe for s in b.summaries]
    eos = max({t for s in summaries for t in s}, key=lambda t: min(sum(t in s for s in summaries),
                                                                  sum(t not in s for s in summaries)))
    branches = ro.plan_branches(th, [3, 6, 9, 12], inserted)
    logits = ro.generate_summaries(model, th, branches, 2, 11, 1.0, torch.Generator().manual_seed(1), eos,
                                   tok.pad_token_id, max_rows=6, return_logits=True)
    # summary.max_tokens=11 caps inserted + summary: 6 summary tokens after a cut (5 inserted), 9 after a
    # finished thinking (2 inserted), as verl's rollout caps them (arctl.algo.prompts.summary_cap)
    caps = [11 - len(b.inserted) for b in branches for _ in b.summaries]
    lengths = [len(s) for b in branches for s in b.summaries]
    assert set(caps) == {6, 9} and all(n <= c for n, c in zip(lengths, caps)), (lengths, caps)
    assert any(n < c for n, c in zip(lengths, caps)) and any(n == c for n, c in zip(lengths, caps))  # stopped early / ran on
    k = 0
    for b in branches:
        sp = summary_prompt(th.question(b.row), th.thinking(b.row), b.cut, inserted)
        for s in b.summaries:
            assert (eos in s) == (s[-1] == eos) and s.count(eos) <= 1  # <eos> ends a summary and is kept
            with torch.no_grad():
                ref = model(input_ids=torch.tensor([list(sp.input_ids) + s])).logits[0, len(sp.input_ids) - 1 : -1]
            torch.testing.assert_close(logits[k], ref, atol=1e-5, rtol=1e-5)
            k += 1



def _varied_prompts(tok, rng: np.random.Generator, n: int) -> list[list[int]]:
    problems = [task.Problem(tuple(int(x) for x in rng.integers(0, 10, rng.integers(1, 7)))) for _ in range(n)]
    return [encode_words(tok, task.prompt_words(p)) for p in problems]


class _Ending:
    """``rollout.forward_step`` with ``boost`` added to the logit of token ``end``, so that sampled
    thinkings end at every length (a random model rarely emits any one token)."""

    def __init__(self, end: int, boost: float):
        self.end, self.boost, self.real, self.widths = end, boost, ro.forward_step, []

    def __call__(self, model, ids, *args):
        self.widths.append(ids.shape[0])
        logits = self.real(model, ids, *args).clone()
        logits[..., self.end] += self.boost
        return logits

    def __enter__(self):
        ro.forward_step = self
        return self

    def __exit__(self, *exc):
        ro.forward_step = self.real


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**16), st.sampled_from([1.5, 2.0, 3.0]))
def test_the_shrinking_thinking_batch_equals_lockstep_decoding(n, seed, boost):
    """Rows that end their thinking leave the decoding batch (their cache rows move behind it); the
    tokens, lengths, ends and every cache column a row wrote are bit-identical to the full-batch
    lockstep decoder (tests/support/lockstep.py), the random stream included."""
    from lockstep import lockstep_thinking, written_columns

    tok, model, _ = _setup()
    prompts = _varied_prompts(tok, np.random.default_rng(seed), n)
    with _Ending(7, boost):
        new = ro.generate_thinking(model, prompts, 16, 1.0, torch.Generator().manual_seed(seed), 7, tok.pad_token_id)
        ref = lockstep_thinking(model, prompts, 16, 1.0, torch.Generator().manual_seed(seed), 7, tok.pad_token_id)
    assert torch.equal(new.think_ids, ref.think_ids) and torch.equal(new.think_len, ref.think_len)
    assert torch.equal(new.finished, ref.finished)
    for a, b in zip(new.cache.layers, ref.cache.layers):
        assert a.keys.shape == b.keys.shape
        for r in range(n):
            cols = written_columns(ref, r)
            assert torch.equal(a.keys[r][:, cols], b.keys[r][:, cols]) and torch.equal(a.values[r][:, cols], b.values[r][:, cols])


def test_the_thinking_batch_shrinks_as_rows_end():
    """On 40 rows that end at many lengths the batch does shrink (the test above then compares a
    shrunk batch), never below MIN_DECODE_ROWS, and the summaries branching off the thinking's
    cache are those of the lockstep decoder's cache."""
    from lockstep import lockstep_thinking

    tok, model, _ = _setup()
    prompts = _varied_prompts(tok, np.random.default_rng(3), 40)
    with _Ending(7, 4.0) as ending:
        th = ro.generate_thinking(model, prompts, 16, 1.0, torch.Generator().manual_seed(0), 7, tok.pad_token_id)
        widths = list(ending.widths)
        ref = lockstep_thinking(model, prompts, 16, 1.0, torch.Generator().manual_seed(0), 7, tok.pad_token_id)
    assert widths[0] == 40 and min(widths) == ro.MIN_DECODE_ROWS and widths == sorted(widths, reverse=True)
    assert len(set(widths)) > 3 and int((~th.finished).sum()) < ro.MIN_DECODE_ROWS and int(th.think_len.min()) == 1
    inserted = InsertedTokens.from_ids(encode_words(tok, ["...", "..."]), 7, encode_words(tok, ["**Final", "Answer**"]))
    out = []
    for thinking in (th, ref):
        branches = ro.plan_branches(thinking, [4, 8, 12, 16], inserted)
        ro.generate_summaries(model, thinking, branches, 2, 8, 1.0, torch.Generator().manual_seed(1), tok.eos_token_id,
                              tok.pad_token_id, 64)
        out.append([b.summaries for b in branches])
    assert out[0] == out[1]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_the_batch_after_rows_end_keeps_every_active_row_first(flags):
    active = torch.tensor(flags)
    keep, out, into = ro._batch_after(active)
    k = len(keep)
    assert k == max(int(active.sum()), min(ro.MIN_DECODE_ROWS, len(flags)))
    assert set(active.nonzero()[:, 0].tolist()) <= set(keep.tolist()) and len(set(keep.tolist())) == k
    assert len(out) == len(into) and bool((out < k).all()) and bool((into >= k).all())
    # exchanging rows out <-> into puts exactly the kept rows in [0, k), row keep[i] at i
    now = torch.arange(len(flags))
    now[out], now[into] = into, out
    assert torch.equal(now[:k], keep) and sorted(now.tolist()) == list(range(len(flags)))

def test_finished_thinking_shares_one_summary_group_across_later_budgets():
    tok, model, prompts = _setup()
    end = _common_token(model, tok, prompts)
    inserted = InsertedTokens.from_ids([], end, encode_words(tok, ["**Final", "Answer**"]))
    th = ro.generate_thinking(model, prompts, 12, 1.0, torch.Generator().manual_seed(0), end, tok.pad_token_id)
    budgets = [3, 6, 9, 12]
    for row in range(len(prompts)):
        brs = [b for b in ro.plan_branches(th, budgets, inserted) if b.row == row]
        covered = sorted(j for b in brs for j in b.budgets)
        assert covered == [0, 1, 2, 3]  # every budget exactly once
        length = int(th.think_len[row])
        assert len(brs) == len({min(b, length) for b in budgets})


def test_budget_scores_is_the_mean_reward_of_the_covering_group():
    b1 = ro.Branch(row=0, cut=2, finished=False, budgets=[0], inserted=[1], rewards=[1.0, 0.0])
    b2 = ro.Branch(row=0, cut=3, finished=True, budgets=[1, 2], inserted=[1], rewards=[1.0, 1.0])
    b3 = ro.Branch(row=1, cut=5, finished=False, budgets=[0, 1, 2], inserted=[1], rewards=[0.0, 0.0])
    assert ro.budget_scores([b1, b2, b3], 2, 3).tolist() == [[0.5, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_the_eval_cost_benchmark_counts_the_floor_it_divides_by():
    """benchmarks/bench_tiny.py eval at micro shapes (so it cannot rot): the token counts are the
    evaluation's own (every branch's inserted prompt and summary tokens; the thinking once)."""
    import importlib.util
    from pathlib import Path

    from micro import MICRO

    from arctl.compose import resolve_experiment

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tiny.py"
    spec = importlib.util.spec_from_file_location("bench_tiny", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    tok = build_tokenizer(toy_task(config["tiny"]["task"]).vocabulary())
    model = build_model(model_config(config["model"], len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    budgets = list(config["thinking"]["budgets"])
    r = bench.eval_cost(model, tok, config, budgets, n_problems=6, repeats=1)
    assert r["branches"] <= 6 * len(budgets) and r["thinking_tokens"] > 6
    assert r["summary_tokens"] >= r["branches"] * (1 + 1)  # at least the inserted prompt and one token each
    assert r["floor_s"] == pytest.approx(r["t_think_s"] * (1 + r["summary_tokens"] / r["thinking_tokens"]))
    assert r["ratio"] == pytest.approx(r["t_eval_s"] / r["floor_s"])


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_batched_budget_forcing_equals_the_per_token_rule(data):
    """The tiny sampler's forcing (one row per problem, batched) emits exactly what the s1 state
    machine (tests/support/s1_reference.py, one sequence at a time) emits for the same model
    proposals: a scripted model whose greedy token at thinking position t is script[row][t]."""
    from s1_reference import budget_forcing_generate

    from arctl.algo.methods.budget_forcing import BudgetForcing

    tok, model, _ = _setup()
    end, cue, pad = 5, 6, tok.pad_token_id
    n, budget = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 12))
    max_ext = data.draw(st.integers(0, 3))
    scripts = [data.draw(st.lists(st.sampled_from([end, 7, 8]), min_size=budget + 1, max_size=budget + 1)) for _ in range(n)]
    vocab = len(tok)

    def scripted(model_, ids, positions, key_valid, cache):
        emitted = key_valid.shape[1] - 1  # thinking tokens before the one these logits choose (1 prompt token)
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        for r in range(ids.shape[0]):
            logits[r, -1, scripts[r][emitted]] = 1.0
        return logits

    original = ro.forward_step
    ro.forward_step = scripted
    try:
        cfg = BudgetForcing(budget, end, (cue,), max_ext)
        th = ro.generate_thinking(model, [[9]] * n, budget, 0.0, None, end, pad, forcing=cfg)
    finally:
        ro.forward_step = original
    for r in range(n):
        want, _ = budget_forcing_generate(lambda out, r=r: scripts[r][len(out)], cfg, budget + 1, stop_ids=[end])
        if len(want) == budget + 1:
            want = want[:-1]  # the close forced at the budget is the tiny rollout's cut
        assert th.thinking(r) == want, (scripts[r], th.thinking(r), want)
        assert want.count(cue) - scripts[r][: len(want)].count(cue) <= max_ext


def test_a_generation_limit_stops_the_thinking_below_the_largest_budget():
    """``think_max`` (a compared method's generation limit: ThinkPrune's round) stops every thinking
    there; budgets past it share the capped prefix."""
    from micro import MICRO

    from arctl.compose import resolve_experiment

    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    toy = toy_task(config["tiny"]["task"])
    tok = build_tokenizer(toy.vocabulary())
    model = build_model(model_config(config["model"], len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    problems = toy.make_problems(np.random.default_rng(0), 3)
    inserted = InsertedTokens.from_tokenizer(tok)

    def go(**kw):
        return ro.rollout(model, tok, inserted, toy, problems, 2, [8, 16, 48], 1, 8, 1.0,
                          torch.Generator().manual_seed(0), 64, **kw)

    free, capped = go(), go(think_max=16)
    assert int(free.thinking.think_len.max()) > 16 and int(capped.thinking.think_len.max()) <= 16
    assert all(b.cut <= 16 for b in capped.branches) and {b.cut for b in capped.branches if 2 in b.budgets} <= set(range(17))
