"""Budget-control baselines (issue 17, step 1): hand-worked cases from each paper and slow references.

Papers: ThinkPrune (Hou et al., 2025, arXiv 2504.01296); L1 / LCPO (Aggarwal & Welleck, 2025,
arXiv 2503.04697); Elastic Reasoning (Xu et al., 2025, arXiv 2505.05315); s1 budget forcing
(Muennighoff et al., 2025, arXiv 2501.19393); the score curve of AnytimeReasoner (this repo's paper).
"""

import random

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from s1_reference import ForcingState, budget_forcing_generate, budget_forcing_step, force_token_logits

from arctl.algo.methods.budget_forcing import BudgetForcing
from arctl.algo.methods.curve import accuracy_at_fraction, curve_auc
from arctl.algo.methods.l1 import (
    L1_ALPHA,
    L1_DELTA,
    L1_TARGET_RANGE,
    l1_exact_reward,
    l1_max_reward,
    l1_reward,
    sample_l1_targets,
)
from arctl.algo.methods.thinkprune import check_thinkprune_schedule, thinkprune_limit, thinkprune_reward
from arctl.algo.metrics import score_curve_area
from arctl.algo.prompts import InsertedTokens, summary_prompt

F64 = torch.float64


# ================================================================ ThinkPrune
def test_thinkprune_reward_by_hand():
    """ThinkPrune (arXiv 2504.01296), length-limited reward: r = 1[correct] if |y| <= L, else 0."""
    correct = torch.tensor([True, True, False, True, True])
    length = torch.tensor([3999, 4000, 100, 4001, 0])
    assert thinkprune_reward(correct, length, 4000).tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    # a scalar length is broadcast; float correctness keeps its dtype; 0/1 ints are accepted
    assert thinkprune_reward(torch.tensor([1.0, 0.0], dtype=F64), 10, 10).dtype == F64
    assert thinkprune_reward([1, 0, 1], [5, 5, 11], 10).tolist() == [1.0, 0.0, 0.0]


def test_thinkprune_schedule_by_hand():
    """ThinkPrune (arXiv 2504.01296), iterative pruning: rounds with limits 4000 -> 3000 -> 2000;
    round k is in force from its start step until the next round starts."""
    schedule = [(0, 4000), (100, 3000), (200, 2000)]
    got = {step: thinkprune_limit(step, schedule) for step in (0, 99, 100, 199, 200, 10**6)}
    assert got == {0: 4000, 99: 4000, 100: 3000, 199: 3000, 200: 2000, 10**6: 2000}
    # equal consecutive limits are allowed (non-increasing); lists and numpy ints are normalised
    assert check_thinkprune_schedule([[5, 3000], (np.int64(9), 3000)]) == ((5, 3000), (9, 3000))
    assert thinkprune_limit(5, [(5, 1000)]) == 1000


@pytest.mark.parametrize(
    ("schedule", "match"),
    [
        ([], "empty"),
        ([(0, 4000, 1)], "not a pair"),
        (["ab"], "not a pair"),
        ([(0, 4000), (0, 3000)], "strictly increasing"),
        ([(10, 4000), (5, 3000)], "strictly increasing"),
        ([(0, 3000), (10, 4000)], "non-increasing"),
        ([(0, 0)], "limit must be an integer >= 1"),
        ([(-1, 4000)], "start_step must be an integer >= 0"),
        ([(0, 2.5)], "limit must be an integer"),
        ([(True, 4000)], "start_step must be an integer"),
    ],
)
def test_thinkprune_schedule_errors(schedule, match):
    """ThinkPrune (arXiv 2504.01296): a schedule only ever tightens the limit; bad schedules say why."""
    with pytest.raises(ValueError, match=match):
        check_thinkprune_schedule(schedule)


def test_thinkprune_step_and_limit_errors():
    """ThinkPrune (arXiv 2504.01296): no limit is in force before the first round."""
    with pytest.raises(ValueError, match="before the first ThinkPrune round"):
        thinkprune_limit(3, [(10, 4000)])
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        thinkprune_limit(-1, [(0, 4000)])
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        thinkprune_reward([True], [3], 0)
    with pytest.raises(ValueError, match="length must be"):
        thinkprune_reward([True, False], [3, 4, 5], 10)


@st.composite
def schedules(draw):
    k = draw(st.integers(1, 5))
    starts = sorted(draw(st.sets(st.integers(0, 1000), min_size=k, max_size=k)))
    limits = sorted(draw(st.lists(st.integers(1, 8000), min_size=k, max_size=k)), reverse=True)
    return list(zip(starts, limits))


@settings(max_examples=100, deadline=None)
@given(schedules(), st.integers(0, 1200))
def test_thinkprune_limit_matches_scan(schedule, step):
    """ThinkPrune (arXiv 2504.01296): the limit in force is that of the latest round started (slow scan)."""
    started = [limit for start, limit in schedule if start <= step]
    if not started:
        with pytest.raises(ValueError):
            thinkprune_limit(step, schedule)
    else:
        assert thinkprune_limit(step, schedule) == started[-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=20), st.integers(1, 50))
def test_thinkprune_reward_matches_loop(rows, limit):
    """ThinkPrune (arXiv 2504.01296): reward of every response, written as a loop."""
    correct = torch.tensor([c for c, _ in rows], dtype=torch.bool)
    length = torch.tensor([n for _, n in rows], dtype=torch.long)
    want = [float(c and n <= limit) for c, n in rows]
    assert thinkprune_reward(correct, length, limit).tolist() == want


# ================================================================ L1 / LCPO
def test_l1_exact_by_hand():
    """L1 (arXiv 2503.04697), LCPO reward Eq. 1 (L1-Exact): r = 1[correct] - alpha |n_gold - n_y|,
    alpha = 0.0003; wrong answers are penalised too."""
    correct = torch.tensor([True, True, True, False])
    used = torch.tensor([1000, 1500, 500, 1500])
    # 1 - 0; 1 - 0.0003*500 = 0.85; 0.85; 0 - 0.15
    want = torch.tensor([1.0, 0.85, 0.85, -0.15], dtype=F64)
    got = l1_exact_reward(correct.to(F64), used, 1000)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert l1_exact_reward(correct, used, 1000).dtype == torch.float32
    assert L1_ALPHA == 0.0003


def test_l1_max_by_hand():
    """L1 (arXiv 2503.04697), L1-Max reward Eq. 2: r = 1[correct] clip(alpha (n_gold - n_y) + delta, 0, 1),
    alpha = 0.0003, delta = 0.5."""
    correct = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0], dtype=F64)
    used = torch.tensor([1000, 0, 3000, 2000, 1000, 100])
    target = torch.tensor([1000, 1000, 1000, 1000, 1000, 4000])
    # at target: 0.5; 1000 under: 0.3 + 0.5 = 0.8; 2000 over: -0.6 + 0.5 -> 0; 1000 over: 0.2;
    # wrong: 0; 3900 under: 1.17 + 0.5 -> 1
    want = torch.tensor([0.5, 0.8, 0.0, 0.2, 0.0, 1.0], dtype=F64)
    torch.testing.assert_close(l1_max_reward(correct, used, target), want, rtol=0, atol=1e-12)
    assert L1_DELTA == 0.5


def test_l1_reward_registry():
    """L1 (arXiv 2503.04697), Eqs. 1-2: the reward form is chosen by name."""
    c, n, t = torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([1200, 800]), torch.tensor([1000, 1000])
    assert l1_reward(c, n, t, "exact").tolist() == l1_exact_reward(c, n, t).tolist()
    assert l1_reward(c, n, t, "max", alpha=0.001, delta=0.4).tolist() == l1_max_reward(c, n, t, 0.001, 0.4).tolist()
    with pytest.raises(ValueError, match="unknown L1 mode 'min'"):
        l1_reward(c, n, t, "min")
    with pytest.raises(ValueError, match="alpha must be finite and >= 0"):
        l1_exact_reward(c, n, t, alpha=-1.0)
    with pytest.raises(ValueError, match=r"n_target must be \[N\] = \[2\]"):
        l1_max_reward(c, n, [1, 2, 3])
    with pytest.raises(ValueError, match="0/1"):
        l1_max_reward([2, 0], n, t)


def reference_l1(correct, used, target, mode, alpha, delta):
    """Eqs. 1-2 of L1 for one response, in plain Python."""
    if mode == "exact":
        return float(correct) - alpha * abs(target - used)
    return float(correct) * min(1.0, max(0.0, alpha * (target - used) + delta))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 8000), st.integers(1, 8000)), min_size=1, max_size=16),
    st.sampled_from(["exact", "max"]),
    st.floats(0.0, 0.01),
    st.floats(-1.0, 1.5),
)
def test_l1_matches_reference(rows, mode, alpha, delta):
    """L1 (arXiv 2503.04697), Eqs. 1-2, against a per-response Python reference."""
    correct = torch.tensor([c for c, _, _ in rows], dtype=F64)
    used = torch.tensor([u for _, u, _ in rows])
    target = torch.tensor([t for _, _, t in rows])
    got = l1_reward(correct, used, target, mode, alpha, delta)
    want = torch.tensor([reference_l1(c, u, t, mode, alpha, delta) for c, u, t in rows], dtype=F64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.integers(0, 8000), st.integers(100, 4000))
def test_l1_max_with_released_slope_matches_released_form(correct, used, target):
    """L1 (arXiv 2503.04697) Eq. 2 with alpha = 1/1000 is the released code's L1-Max form
    ``(clip(-(n_y - n_gold)/500, -1, 1) + 1) / 2`` times correctness (documented difference: the
    paper reports alpha = 0.0003)."""
    released = (max(-1.0, min(1.0, -(used - target) / 500)) + 1) / 2 * float(correct)
    got = l1_max_reward(torch.tensor([float(correct)], dtype=F64), [used], [target], alpha=1 / 1000, delta=0.5)
    assert got.item() == pytest.approx(released, abs=1e-12)


def test_l1_targets_by_hand():
    """L1 (arXiv 2503.04697), Sec. 3: n_gold ~ U(n_min, n_max) per question, integers with both ends
    included (n_min = 100, n_max = 4000 in the paper)."""
    assert L1_TARGET_RANGE == (100, 4000)
    a = sample_l1_targets(np.random.default_rng(0), 1000)
    b = sample_l1_targets(np.random.default_rng(0), 1000)
    assert a.dtype == np.int64 and a.shape == (1000,)
    assert np.array_equal(a, b)  # the generator alone decides
    assert a.min() >= 100 and a.max() <= 4000
    small = sample_l1_targets(np.random.default_rng(1), 500, low=1, high=3)
    assert set(small.tolist()) == {1, 2, 3}  # both ends included
    assert sample_l1_targets(np.random.default_rng(2), 4, low=7, high=7).tolist() == [7, 7, 7, 7]
    picks = sample_l1_targets(np.random.default_rng(3), 400, choices=[512, 1024, 2048, 3600])
    assert set(picks.tolist()) == {512, 1024, 2048, 3600}
    assert sample_l1_targets(np.random.default_rng(4), 0).shape == (0,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(low=10, high=5), "range is empty"),
        (dict(choices=[]), "choices is empty"),
        (dict(choices=[100], low=1), "not both"),
        (dict(low=0), "low must be an integer >= 1"),
        (dict(choices=[100, -5]), "L1 target choice"),
    ],
)
def test_l1_target_errors(kwargs, match):
    """L1 (arXiv 2503.04697), Sec. 3: target lengths are positive token counts."""
    with pytest.raises(ValueError, match=match):
        sample_l1_targets(np.random.default_rng(0), 3, **kwargs)


def test_l1_targets_need_a_generator():
    """L1 (arXiv 2503.04697): sampling is reproducible only through an explicit numpy Generator."""
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        sample_l1_targets(np.random.RandomState(0), 3)  # type: ignore[arg-type]


# ================================================================ Elastic Reasoning
# The arm (experiments/baselines-elastic.yaml) is GRPO at one thinking budget t with the summary cap s;
# its cut is the one both backends make, arctl.algo.prompts.summary_prompt. With E1's inserted tokens
# (`</think>` alone after a cut thinking, nothing after a finished one; arctl's own are the ellipsis,
# `</think>` and the answer header) it is the released two-phase rollout's.
END = 9  # the end-of-thinking id in the toy vocabularies below
E1 = InsertedTokens.from_ids(ellipsis=(), think_end=END, header=())
QUESTION = (100, 101)


@pytest.mark.parametrize(
    ("thinking", "t", "kept", "inserted"),
    [
        ([1, 2, END], 4, (1, 2, END), ()),  # finished within t: the solution follows the model's </think>
        ([1, 2, 3, END], 4, (1, 2, 3, END), ()),  # </think> as the t-th token still counts as finished
        ([1, 2, 3, 4, END], 4, (1, 2, 3, 4), (END,)),  # </think> one token late: cut at t, insert it
        ([1, 2, 3, 4, 5, 6], 4, (1, 2, 3, 4), (END,)),  # never finished: cut at t, insert </think>
        ([1, 2], 4, (1, 2), (END,)),  # stopped without </think> (EOS, length): still closed by </think>
        ([], 4, (), (END,)),  # nothing generated: still closed by </think>
        ([END], 0, (), (END,)),  # t = 0: no thinking at all
    ],
)
def test_elastic_cut_by_hand(thinking, t, kept, inserted):
    """Elastic Reasoning (arXiv 2505.05315), Sec. 3 separate budgeting: thinking stops at </think> or
    after t tokens, in which case </think> is appended; inserted tokens are never trained."""
    prompt = summary_prompt(QUESTION, thinking, t, E1)
    assert prompt.input_ids == QUESTION + kept + inserted
    assert (prompt.cut, prompt.inserted, prompt.finished) == (len(kept), inserted, not inserted)
    assert prompt.trainable == (False,) * len(QUESTION) + (True,) * len(kept) + (False,) * len(inserted)


def reference_elastic_rollout(thinking, end, t):
    """Phase 1 of the released rollout, token by token: generate at most t tokens, stopping after
    </think>; append </think> if the last token is not one."""
    out = []
    for token in thinking:
        if len(out) == t:
            break
        out.append(token)
        if token == end:
            return out, False
    return out + [end], True


# a thinking as generated: tokens until </think> (which ends the generation) or until it stops without
generated_thinking = st.builds(lambda body, closed: body + [END] * closed,
                               st.lists(st.sampled_from([1, 2, 3]), max_size=12), st.booleans())


@settings(max_examples=100, deadline=None)
@given(generated_thinking, st.integers(0, 14))
def test_elastic_cut_matches_rollout_reference(thinking, t):
    """Elastic Reasoning (arXiv 2505.05315), budget-constrained rollout, against a token-by-token
    simulation of the thinking phase; the kept thinking never exceeds t tokens."""
    prompt = summary_prompt(QUESTION, thinking, t, E1)
    prefix, truncated = reference_elastic_rollout(thinking, END, t)
    assert list(prompt.input_ids[len(QUESTION):]) == prefix
    assert prompt.finished is not truncated
    assert prompt.cut <= t and prompt.input_ids[-1] == END


# ================================================================ s1 budget forcing
WAIT = 7  # a one-token cue "Wait"
EOS = 0


def scripted(tokens):
    """A toy model that proposes ``tokens`` in order (one per call, whatever the prefix)."""
    it = iter(tokens)
    return lambda prefix: next(it)


def test_budget_forcing_extends_then_accepts_by_hand():
    """s1 (arXiv 2501.19393), Sec. 3.1 budget forcing: an end-of-thinking generated before the budget
    is suppressed and "Wait" appended, up to max_extensions times; then it is accepted."""
    cfg = BudgetForcing(budget=6, end_think_id=END, cue_ids=(WAIT,), max_extensions=1)
    # model: 1 2 </think> -> Wait replaces it; 3 4 </think> -> accepted (no extension left); answer 5 EOS
    out, state = budget_forcing_generate(scripted([1, 2, END, 3, 4, END, 5, EOS]), cfg, 20, stop_ids=[EOS])
    assert out == [1, 2, WAIT, 3, 4, END, 5, EOS]
    assert state == ForcingState(thinking_len=5, extensions=1, pending=(), closed=True)


def test_budget_forcing_closes_at_budget_by_hand():
    """s1 (arXiv 2501.19393), Sec. 3.1: at the budget the end-of-thinking delimiter is forced."""
    cfg = BudgetForcing(budget=4, end_think_id=END, cue_ids=(WAIT,), max_extensions=0)
    out, state = budget_forcing_generate(scripted([1, 2, 3, 4, 5, 6]), cfg, 6)
    assert out == [1, 2, 3, 4, END, 5]  # the model's 5th token comes after the forced </think>
    assert state.closed and state.thinking_len == 4
    # max_extensions = 0: an early end-of-thinking is the model's to keep
    out, _ = budget_forcing_generate(scripted([1, END, 5]), cfg, 3)
    assert out == [1, END, 5]
    # budget 0: close at once
    out, _ = budget_forcing_generate(scripted([5]), BudgetForcing(0, END, (WAIT,), 3), 2)
    assert out == [END, 5]


def test_budget_forcing_multi_token_cue_and_close_by_hand():
    """s1 (arXiv 2501.19393), Sec. 3.1: a multi-token cue ("Wa", "it") and a closing sequence
    (</think> + "Final Answer:") are emitted token by token; the cue counts toward the budget."""
    cue, final = (7, 8), 5
    cfg = BudgetForcing(budget=5, end_think_id=END, cue_ids=cue, max_extensions=2, close_ids=(END, final))
    # 1 (len 1); </think> -> 7 8 (len 3); 2 (len 4); </think>: 4 + 2 tokens of cue do not fit before 5 -> accepted
    out, state = budget_forcing_generate(scripted([1, END, 2, END, 3]), cfg, 6)
    assert out == [1, 7, 8, 2, END, 3]
    assert state.extensions == 1 and state.thinking_len == 4
    # 1; </think> -> 7 8; 2 3 (len 5 = budget) -> forced </think> "Final Answer:"; answer 4
    out, state = budget_forcing_generate(scripted([1, END, 2, 3, 4]), cfg, 8)
    assert out == [1, 7, 8, 2, 3, END, final, 4]
    assert state == ForcingState(thinking_len=5, extensions=1, pending=(), closed=True)


def test_budget_forcing_logits_api_by_hand():
    """s1 (arXiv 2501.19393), Sec. 3.1, per token from a decode loop: greedy logits in, token out;
    a forced token comes with a one-hot logits row; the sampler is asked only when the model chooses."""
    cfg = BudgetForcing(budget=6, end_think_id=END, cue_ids=(WAIT,), max_extensions=1)
    script, vocab = [1, 2, END, 3, 4, END, 5, EOS], 10
    calls = []

    def sample(row):
        calls.append(1)
        return int(row.argmax())

    state, out, forced = ForcingState(), [], []
    for want in script:
        row = torch.full((vocab,), -1.0)
        row[want] = 2.0  # the toy model's favourite next token
        step = budget_forcing_step(row, state, cfg, sample)
        out.append(step.token)
        forced.append(step.forced)
        if step.forced:
            assert torch.equal(step.logits, force_token_logits(row, step.token))
            assert int(step.logits.argmax()) == step.token and torch.isinf(step.logits).sum() == vocab - 1
        else:
            assert step.logits is row
        state = step.state
    assert out == [1, 2, WAIT, 3, 4, END, 5, EOS]
    assert forced == [False, False, True, False, False, False, False, False]
    assert len(calls) == len(script)  # no forced token from a queue here, so every step sampled
    # a queued token does not consult the sampler
    cfg2 = BudgetForcing(budget=6, end_think_id=END, cue_ids=(7, 8), max_extensions=1)
    row = torch.zeros(vocab)
    row[END] = 1.0
    s1 = budget_forcing_step(row, ForcingState(), cfg2, sample)
    calls.clear()
    s2 = budget_forcing_step(row, s1.state, cfg2, sample)
    assert (s1.token, s2.token, calls) == (7, 8, [])
    with pytest.raises(ValueError, match="one row"):
        budget_forcing_step(torch.zeros(2, vocab), ForcingState(), cfg)


def test_budget_forcing_settings_errors():
    """s1 (arXiv 2501.19393): extensions need a cue, the cue must not close the thinking, and the
    forced closing sequence must contain the end-of-thinking delimiter."""
    with pytest.raises(ValueError, match="cue_ids is empty"):
        BudgetForcing(budget=10, end_think_id=END, cue_ids=(), max_extensions=1)
    with pytest.raises(ValueError, match="must not contain the end-of-thinking"):
        BudgetForcing(budget=10, end_think_id=END, cue_ids=(END,), max_extensions=1)
    with pytest.raises(ValueError, match="close_ids \\[5\\] must contain the end-of-thinking"):
        BudgetForcing(budget=10, end_think_id=END, cue_ids=(WAIT,), max_extensions=1, close_ids=(5,))
    with pytest.raises(ValueError, match="budget must be an integer >= 0"):
        BudgetForcing(budget=-1, end_think_id=END, cue_ids=(WAIT,), max_extensions=1)
    assert BudgetForcing(budget=3, end_think_id=END, cue_ids=(), max_extensions=0).closing == (END,)


def reference_s1(propose, budget, end, cue, max_ext, close, max_new, stops):
    """s1's chunked evaluation loop: generate until the model ends thinking or the budget is spent;
    on an early end, append the cue and go on while extensions remain and the cue fits; at the
    budget append the closing sequence; then let the model answer. Cue tokens count as thinking."""
    out, think, ext = [], 0, 0
    while True:  # thinking, one chunk per iteration
        ended = False
        while think < budget and len(out) < max_new:
            token = propose(out)
            if token == end:
                ended = True
                break
            out.append(token)
            think += 1
            if token in stops:
                return out
        if len(out) >= max_new:
            return out[:max_new]
        if not ended:  # budget spent
            out += list(close)
            break
        if ext < max_ext and think + len(cue) < budget:
            out += list(cue)
            think += len(cue)
            ext += 1
            continue
        out.append(end)
        break
    while len(out) < max_new:  # answer
        token = propose(out)
        out.append(token)
        if token in stops:
            break
    return out[:max_new]


@st.composite
def forcing_cases(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    p_end = draw(st.sampled_from([0.05, 0.2, 0.5]))
    cue = tuple(draw(st.lists(st.sampled_from([6, 7, 8]), min_size=1, max_size=3)))
    close = tuple(draw(st.sampled_from([(), (END,), (5, END), (END, 5, 5)])))
    cfg = BudgetForcing(
        budget=draw(st.integers(0, 25)),
        end_think_id=END,
        cue_ids=cue,
        max_extensions=draw(st.integers(0, 4)),
        close_ids=close,
    )
    return seed, p_end, cfg, draw(st.integers(0, 40)), draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(forcing_cases())
def test_budget_forcing_matches_s1_loop(case):
    """s1 (arXiv 2501.19393), Sec. 3.1: the per-token state machine produces exactly the tokens of
    the chunked s1-style loop, for a toy model that depends on its whole prefix."""
    seed, p_end, cfg, max_new, use_eos = case

    def propose(prefix):
        rng = random.Random(hash((seed, tuple(prefix))))
        if rng.random() < p_end:
            return END
        return rng.choice([1, 2, 3, 4, 6, 7, EOS] if use_eos else [1, 2, 3, 4, 6, 7])

    stops = [EOS] if use_eos else []
    got, state = budget_forcing_generate(propose, cfg, max_new, stop_ids=stops)
    want = reference_s1(propose, cfg.budget, END, cfg.cue_ids, cfg.max_extensions, cfg.closing, max_new, stops)
    assert got == want
    assert state.thinking_len <= cfg.budget and state.extensions <= cfg.max_extensions


# ================================================================ score-curve summaries
BUDGETS = [1000, 2000, 4000]
ACC = [0.2, 0.5, 0.8]


def test_curve_auc_by_hand():
    """AnytimeReasoner paper, Sec. 2.1 (Eq. 3, Fig. 1): the area under the score curve, here over
    [0, b_m] / b_m with the curve flat at acc(b_1) below b_1."""
    # flat [0, 1000]: 200; trapezoids: 1000 * 0.35 = 350 and 2000 * 0.65 = 1300; (200+350+1300)/4000
    assert curve_auc(ACC, BUDGETS).item() == pytest.approx(1850 / 4000, abs=1e-15)
    assert curve_auc(torch.tensor([0.3, 0.3, 0.3], dtype=F64), BUDGETS).item() == pytest.approx(0.3, abs=1e-15)
    assert curve_auc([0.4], [8000]).item() == pytest.approx(0.4)
    # relation to metrics.score_curve_area (area over [b_1, b_m] / (b_m - b_1)): (b_1 acc_1 + 3000 * it) / b_m
    inner = score_curve_area(ACC, BUDGETS).item()
    assert curve_auc(ACC, BUDGETS).item() == pytest.approx((1000 * 0.2 + 3000 * inner) / 4000, abs=1e-15)
    assert curve_auc(ACC, BUDGETS).dtype == F64


def test_accuracy_at_fraction_by_hand():
    """AnytimeReasoner paper, Sec. 2.1 (Fig. 1): accuracy at a fraction of the largest budget, read off
    the piecewise-linear score curve (flat below b_1)."""
    got = {f: accuracy_at_fraction(ACC, BUDGETS, f).item() for f in (0.125, 0.25, 0.375, 0.5, 0.75, 1.0)}
    want = {0.125: 0.2, 0.25: 0.2, 0.375: 0.35, 0.5: 0.5, 0.75: 0.65, 1.0: 0.8}
    assert got == pytest.approx(want, abs=1e-12)
    assert accuracy_at_fraction([0.4], [8000], 0.1).item() == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: accuracy_at_fraction(ACC, BUDGETS, 0.0), r"fraction must be in \(0, 1\]"),
        (lambda: accuracy_at_fraction(ACC, BUDGETS, 1.5), r"fraction must be in \(0, 1\]"),
        (lambda: curve_auc(ACC, [1000, 4000, 2000]), "strictly increasing"),
        (lambda: curve_auc(ACC, [1000, 2000]), r"both be \[m\]"),
        (lambda: curve_auc([0.1, float("nan"), 0.2], BUDGETS), "finite"),
        (lambda: curve_auc([], []), "budgets is empty"),
    ],
)
def test_curve_errors(call, match):
    """AnytimeReasoner paper, Sec. 2.1: a score curve is one accuracy per increasing budget."""
    with pytest.raises(ValueError, match=match):
        call()


def reference_curve(acc, budgets, x):
    """The score curve at budget x: flat below b_1, linear between neighbouring grid budgets."""
    if x <= budgets[0]:
        return acc[0]
    for j in range(len(budgets) - 1):
        if budgets[j] <= x <= budgets[j + 1]:
            w = (x - budgets[j]) / (budgets[j + 1] - budgets[j])
            return (1 - w) * acc[j] + w * acc[j + 1]
    return acc[-1]


@st.composite
def curves(draw):
    m = draw(st.integers(1, 6))
    budgets = sorted(draw(st.sets(st.integers(1, 600), min_size=m, max_size=m)))
    acc = draw(st.lists(st.floats(0.0, 1.0), min_size=m, max_size=m))
    return acc, budgets


@settings(max_examples=100, deadline=None)
@given(curves())
def test_curve_auc_matches_midpoint_sum(curve):
    """AnytimeReasoner paper, Sec. 2.1 (Fig. 1): the area is the mean of the curve over [0, b_m],
    checked by the midpoint rule on unit steps (exact: the grid budgets are integers)."""
    acc, budgets = curve
    total = sum(reference_curve(acc, budgets, k + 0.5) for k in range(budgets[-1]))
    assert curve_auc(acc, budgets).item() == pytest.approx(total / budgets[-1], abs=1e-9)
    assert min(acc) - 1e-12 <= curve_auc(acc, budgets).item() <= max(acc) + 1e-12


@settings(max_examples=100, deadline=None)
@given(curves(), st.floats(1e-6, 1.0))
def test_accuracy_at_fraction_matches_reference(curve, fraction):
    """AnytimeReasoner paper, Sec. 2.1: accuracy at fraction * b_m, against a scan over the segments."""
    acc, budgets = curve
    want = reference_curve(acc, budgets, fraction * budgets[-1])
    assert accuracy_at_fraction(acc, budgets, fraction).item() == pytest.approx(want, abs=1e-9)
