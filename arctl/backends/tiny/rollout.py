"""Rollout: G thinking samples per prompt with a KV cache, then summaries branching off that cache.

Thinking is generated in lockstep on left-padded prompts up to the largest budget (a row stops at
``</think>`` and leaves the decoding batch: a step computes only the rows still thinking, with the
numbers and the random stream of the full batch, to the bit). For every distinct cut of a thinking
(``arctl.algo.prompts.distinct_cuts``: budgets the thinking finished before share one prefix) the
summary prompt's inserted tokens (``arctl.algo.prompts``) and ``group_size`` summaries are decoded
on a slice of the thinking's KV cache: the prefix is never re-encoded. Attention uses an explicit
boolean [N, 1, q, k] mask (padding and cut-off columns masked, every query sees itself) and explicit
position ids, so a branch computes exactly what a fresh, unpadded ``question + thinking[:cut] +
inserted`` would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache, DynamicLayer

from arctl.algo.methods.budget_forcing import BudgetForcing, extends
from arctl.algo.prompts import InsertedTokens, distinct_cuts, summary_cap
from arctl.backends.tiny import decode
from arctl.backends.tiny.model import additive_mask
from arctl.backends.tiny.prefix_attention import NAME as PREFIX_ATTENTION
from arctl.backends.tiny.prefix_attention import SharedPrefix, shared_prefix
from arctl.backends.tiny.tokenizer import decode_words, encode_words


class BufferLayer(DynamicLayer):
    """A KV-cache layer preallocated for ``capacity`` tokens and written in place (a
    ``DynamicLayer`` re-concatenates its whole cache at every decoding step: quadratic copying)."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = int(capacity), 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        self.dtype, self.device = key_states.dtype, key_states.device
        self.buf_k = key_states.new_zeros(b, h, self.capacity, d)
        self.buf_v = value_states.new_zeros(b, h, self.capacity, value_states.shape[-1])
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self.length + n > self.capacity:
            raise RuntimeError(f"KV buffer of {self.capacity} tokens overflows")
        self.buf_k[:, :, self.length : self.length + n] = key_states
        self.buf_v[:, :, self.length : self.length + n] = value_states
        self.length += n
        return self.keys, self.values

    @property
    def keys(self) -> torch.Tensor:
        return self.buf_k[:, :, : self.length]

    @keys.setter
    def keys(self, value) -> None:  # DynamicLayer's constructor assigns None
        pass

    @property
    def values(self) -> torch.Tensor:
        return self.buf_v[:, :, : self.length]

    @values.setter
    def values(self, value) -> None:
        pass

    def get_seq_length(self) -> int:
        return self.length


def buffer_cache(model, capacity: int) -> Cache:
    """An empty KV cache of ``capacity`` tokens per layer for ``model``."""
    return Cache(layers=[BufferLayer(capacity) for _ in range(model.config.num_hidden_layers)])


@dataclass
class Thinking:
    """G thinking samples of each prompt, rows ordered prompt-major (row = prompt * G + g)."""

    prompt_ids: torch.Tensor  # [N, P] left-padded question ids
    prompt_valid: torch.Tensor  # [N, P] bool
    think_ids: torch.Tensor  # [N, T] generated ids (pad after the end)
    think_len: torch.Tensor  # [N] tokens generated (a final </think> included)
    finished: torch.Tensor  # [N] bool: ended with </think>
    cache: Cache  # keys/values of columns [0, P + think_len.max())

    def question(self, row: int) -> list[int]:
        return self.prompt_ids[row][self.prompt_valid[row]].tolist()

    def thinking(self, row: int) -> list[int]:
        return self.think_ids[row, : int(self.think_len[row])].tolist()


@dataclass
class Branch:
    """One summary group: the thinking of ``row`` cut at ``cut`` tokens, covering ``budgets``
    (indices into the budget list), with ``summaries`` (token id lists) and their ``rewards``."""

    row: int
    cut: int
    finished: bool
    budgets: list[int]
    inserted: list[int]
    summaries: list[list[int]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    verifier: list[float] | None = None  # the verifier's rewards when a compared method replaced ``rewards``


def sample(logits: torch.Tensor, temperature: float, generator: torch.Generator | None,
           rows: torch.Tensor | None = None, n_rows: int | None = None) -> torch.Tensor:
    """Next tokens [N] from logits [N, V] at ``temperature`` (0 = greedy). With ``rows`` [N] (the batch
    rows' places among ``n_rows``), ``n_rows`` uniforms are drawn and the batch uses its rows' ones:
    the random stream of a batch that kept every row. :class:`LogitsNotFinite` where a row's logits are not finite
    (NaN, +inf: no distribution to sample; a search of its NaN CDF gave the last token, silently); a row of finite
    logits that the temperature scales past a float's range (a temperature near 0) takes its argmax."""
    if temperature <= 0:
        _finite(torch.isnan(logits).any(-1) | torch.isposinf(logits).any(-1))
        return logits.argmax(-1)
    # inverse-CDF sampling: one uniform per row (torch.multinomial draws one per row and token)
    cdf = torch.softmax(logits.float() / temperature, dim=-1).cumsum(-1)
    broken = ~torch.isfinite(cdf[:, -1])  # NaN/inf logits: the search below took the last token (from a hunt)
    if broken.any():  # the logits themselves, or finite ones a temperature near 0 scaled past a float's range
        _finite(torch.isnan(logits).any(-1) | torch.isposinf(logits).any(-1))
    u = torch.rand(cdf.shape[0] if rows is None else n_rows, 1, generator=generator)
    u = (u if rows is None else u[rows]) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u, right=True)[:, 0].clamp_max(cdf.shape[-1] - 1)
    # (from a review: rollout.temperature=1e-39 read a warm-up's weights as diverged) such a row's distribution is
    # its argmax's, as at temperature 0
    return torch.where(broken, logits.argmax(-1), tokens) if broken.any() else tokens


class LogitsNotFinite(FloatingPointError):
    """The policy's logits are not finite (NaN, +inf): its weights diverged; there is nothing to sample."""


def _finite(bad: torch.Tensor) -> None:
    """:class:`LogitsNotFinite` (one line) where a row of ``bad`` [N] is set."""
    if bad.any():
        raise LogitsNotFinite(f"the policy's logits are not finite (NaN/inf) in {int(bad.sum())} of {bad.shape[0]} "
                              "row(s) sampled: its weights diverged")


def attention_mask(key_valid: torch.Tensor, n_new: int) -> torch.Tensor:
    """Boolean [N, 1, n_new, S] mask for the last ``n_new`` of S columns: causal, valid keys only,
    and each query always sees itself (no fully masked row, so padding never yields NaN)."""
    s = key_valid.shape[1]
    cols = torch.arange(s)
    q = torch.arange(s - n_new, s)
    causal = cols[None, :] <= q[:, None]
    mask = causal[None] & key_valid[:, None, :]
    mask |= (cols[None, :] == q[:, None])[None]
    return mask[:, None]


def forward_step(model, ids, positions, key_valid, cache) -> torch.Tensor:
    """Run ``ids`` [N, k] at ``positions`` [N, k] against ``cache``; returns logits [N, k, V]. Inside a
    :func:`shared_prefix` block, without gradients, through :func:`arctl.backends.tiny.decode.logits`
    (the same logits to the bit, without Hugging Face's per-call overhead)."""
    allowed = attention_mask(key_valid, ids.shape[1])
    mask = additive_mask(allowed, model.dtype)
    if model.config._attn_implementation == PREFIX_ATTENTION and not torch.is_grad_enabled() and decode.supports(model):
        return decode.logits(model, ids, positions, mask, cache)
    out = model(input_ids=ids, position_ids=positions, attention_mask=mask, past_key_values=cache, use_cache=True)
    return out.logits


def left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    valid = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            valid[i, width - len(s) :] = True
    return ids, valid


@torch.no_grad()
def generate_thinking(
    model,
    prompts: list[list[int]],
    max_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    think_end: int,
    pad_id: int,
    forcing: BudgetForcing | None = None,
) -> Thinking:
    """Sample one thinking per entry of ``prompts`` (repeat prompts for G samples), at most
    ``max_tokens`` tokens, stopping a row at ``</think>``. Every sampled token, the last one
    included, is in the returned cache.

    ``forcing`` (s1 budget forcing, a one-token cue): an early ``</think>`` is replaced by the cue
    while :func:`arctl.algo.methods.budget_forcing.extends` allows it (``forcing.budget`` is
    ``max_tokens``); the cut at the budget is the forced end."""
    if forcing is not None and (len(forcing.cue_ids) != 1 or forcing.budget != max_tokens):
        raise ValueError("tiny budget forcing needs a one-token cue and the thinking cap as its budget")
    ids, valid = left_pad(prompts, pad_id)
    n = ids.shape[0]
    positions = (valid.long().cumsum(1) - 1).clamp_min(0)
    cache = buffer_cache(model, ids.shape[1] + max_tokens)
    think = torch.full((n, max_tokens), pad_id, dtype=torch.long)
    think_len = torch.zeros(n, dtype=torch.long)
    finished = torch.zeros(n, dtype=torch.bool)
    extensions = [0] * n
    # The decoding batch: rows whose thinking ended leave it (their cache rows move behind it), so a
    # step computes only the rows still thinking. ``order[i]`` is the prompt row held by cache row i;
    # the batch is cache rows [0, len(active)). Per-batch-row state: active, key_valid, next_pos, logits.
    order = torch.arange(n)
    active = torch.ones(n, dtype=torch.bool)
    key_valid = valid.clone()
    with shared_prefix(model, None):  # no prefix: the fast one-token decoding attention
        logits = forward_step(model, ids, positions, key_valid, cache)[:, -1]
        full = [(layer, layer.buf_k, layer.buf_v) for layer in cache.layers if layer.is_initialized]
        next_pos = valid.sum(1)
        for t in range(max_tokens):
            rows = order[: len(active)]
            drawn = sample(logits, temperature, generator, rows, n)
            tok = torch.where(active, drawn, torch.full_like(next_pos, pad_id))
            if forcing is not None:  # every active row has t thinking tokens
                for r in (active & (tok == think_end)).nonzero()[:, 0].tolist():
                    row = int(rows[r])  # the prompt row of batch row r
                    if extends(t, extensions[row], forcing):
                        tok[r], extensions[row] = forcing.cue_ids[0], extensions[row] + 1
            think[rows, t] = tok
            col = active.clone()
            ended = active & (tok == think_end)
            key_valid = torch.cat([key_valid, col[:, None]], dim=1)
            logits = forward_step(model, tok[:, None], next_pos[:, None], key_valid, cache)[:, -1]
            next_pos = next_pos + col.long()
            think_len[rows] += col.long()
            finished[rows] |= ended
            active &= ~ended
            if not active.any():
                break
            if len(active) > MIN_DECODE_ROWS and int(active.sum()) <= len(active) * 7 // 8:
                keep, out, into = _batch_after(active)
                width = cache.layers[0].length  # columns written so far
                for layer, k, v in full:
                    for buf in (k, v):  # exchange rows leaving the batch's range with rows kept beyond it
                        leaving = buf[out, :, :width]
                        buf[out, :, :width] = buf[into, :, :width]
                        buf[into, :, :width] = leaving
                    layer.buf_k, layer.buf_v = k[: len(keep)], v[: len(keep)]
                order[out], order[into] = order[into], order[out]
                active, key_valid, next_pos, logits = active[keep], key_valid[keep], next_pos[keep], logits[keep]
    back, same = torch.argsort(order), torch.equal(order, torch.arange(n))
    while full:  # cache rows in prompt order again, one layer at a time
        layer, k, v = full.pop(0)
        layer.buf_k, layer.buf_v = (k, v) if same else (k[back], v[back])
        del k, v
    return Thinking(ids, valid, think, think_len, finished, cache)


# The thinking's decoding batch never shrinks below this many rows: a linear layer over 1-3 rows takes
# another kernel path than over more (other float sums: on an AVX512 machine with its own kernels and
# forced down to AVX2 and baseline ones, ATEN_CPU_CAPABILITY / MKL_ENABLE_INSTRUCTIONS / ONEDNN_MAX_CPU_ISA),
# while >= 4 rows give every row the full batch's bits; 8 leaves a margin (tests/tiny/test_rollout.py).
MIN_DECODE_ROWS = 8


def _batch_after(active: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The decoding batch after rows ended. It keeps every active row, and finished ones (lowest
    first) up to :data:`MIN_DECODE_ROWS` rows; the kept rows become batch rows [0, k): the rows
    ``out`` (< k, not kept) exchange places with the rows ``into`` (>= k, kept). Returns (``keep``: the
    old batch row of each new one, ``out``, ``into``)."""
    idle = (~active).nonzero()[:, 0]
    stay = active.clone()
    stay[idle[: max(0, min(MIN_DECODE_ROWS, len(active)) - int(active.sum()))]] = True
    k = int(stay.sum())
    out, into = (~stay[:k]).nonzero()[:, 0], k + stay[k:].nonzero()[:, 0]
    now = torch.arange(len(active))
    now[out], now[into] = into, out
    return now[:k], out, into


def plan_branches(thinking: Thinking, budgets: list[int], inserted: InsertedTokens, per_budget: bool = False) -> list[Branch]:
    """The summary groups of every thinking row, in increasing cut.

    ``per_budget=False`` (evaluation): one branch per distinct cut (budgets >= the thinking's length
    share one). ``per_budget=True`` (training, the authors' sampling): one branch per budget, so a
    prefix that ``|J|`` budgets share gets ``|J|`` consecutive branches with the same cut (``|J| x A``
    summaries, A per budget: ``arctl.algo.tree_loss``)."""
    out = []
    for row in range(thinking.think_ids.shape[0]):
        length = int(thinking.think_len[row])
        done = bool(thinking.finished[row])
        for cut, js in distinct_cuts(length, budgets):
            fin = done and cut >= length
            ins = list(inserted.finished if fin else inserted.truncated)
            for part in ([[j] for j in js] if per_budget else [js]):
                out.append(Branch(row, cut, fin, part, list(ins)))
    return out


def keep_rows(cache: Cache, rows: torch.Tensor) -> None:
    """Keep only ``rows`` of a :func:`buffer_cache` (in place)."""
    for layer in cache.layers:
        layer.buf_k, layer.buf_v = layer.buf_k[rows], layer.buf_v[rows]


def _repeat_cache(model, cache: Cache, repeats: int, capacity: int) -> Cache:
    """A new cache of ``capacity`` tokens holding every row of ``cache`` ``repeats`` times in place."""
    new = buffer_cache(model, capacity)
    for i, layer in enumerate(cache.layers):
        new.update(layer.keys.repeat_interleave(repeats, 0), layer.values.repeat_interleave(repeats, 0), i)
    return new


@torch.no_grad()
def generate_summaries(
    model,
    thinking: Thinking,
    branches: list[Branch],
    group_size: int,
    max_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    eos_id: int,
    pad_id: int,
    max_rows: int,
    return_logits: bool = False,
) -> list[torch.Tensor]:
    """Fill ``branch.summaries`` with ``group_size`` samples (``<eos>`` ends one and is kept; finished
    rows leave the batch), in chunks of whole branches of at most ``max_rows`` rows. ``max_tokens``
    (``summary.max_tokens``) caps a branch's inserted and summary tokens together
    (:func:`arctl.algo.prompts.summary_cap`, as verl's rollout does).

    Every row attends to its thinking's cached prefix in place (``prefix_attention``: no copy of
    the thinking per row). A branch's inserted tokens are encoded once and shared by its
    ``group_size`` samples. With ``return_logits``, returns per summary row the logits [len, V]
    that produced its tokens."""
    per_chunk = max(1, max_rows // max(1, group_size))
    layers_kv = [(layer.keys, layer.values) for layer in thinking.cache.layers]
    logits_out: list[torch.Tensor] = []
    p = thinking.prompt_ids.shape[1]
    for start in range(0, len(branches), per_chunk):
        br = branches[start : start + per_chunk]
        rows = torch.tensor([b.row for b in br], dtype=torch.long)
        # a branch without inserted tokens (E1's answer after a finished thinking) reads its first token
        # at the thinking's last token: that token is fed again, as the branch's one "inserted" token, on
        # the prefix before it (its keys and values are the thinking's own at that position)
        again = torch.tensor([0 if b.inserted else 1 for b in br], dtype=torch.long)
        fed = [b.inserted if b.inserted else [int(thinking.think_ids[b.row, b.cut - 1])] for b in br]
        cuts = torch.tensor([b.cut for b in br], dtype=torch.long) - again
        width = p + int(cuts.max())
        prefix_valid = torch.cat([thinking.prompt_valid[rows], torch.arange(width - p)[None, :] < cuts[:, None]], dim=1)
        prefix = SharedPrefix.build(layers_kv, rows, prefix_valid, model.dtype)
        ins_ids, ins_valid = left_pad(fed, pad_id)
        start_pos = thinking.prompt_valid[rows].sum(1) + cuts
        ins_pos = start_pos[:, None] + (ins_valid.long().cumsum(1) - 1).clamp_min(0)
        # the inserted prompt: once per branch, then shared by its group_size samples
        branch_cache = buffer_cache(model, ins_ids.shape[1])
        with shared_prefix(model, prefix):
            logits = forward_step(model, ins_ids, ins_pos, ins_valid, branch_cache)[:, -1]
        prefix = prefix.expand(group_size)
        cache = _repeat_cache(model, branch_cache, group_size, ins_ids.shape[1] + max_tokens)
        key_valid = ins_valid.repeat_interleave(group_size, 0)
        logits = logits.repeat_interleave(group_size, 0)
        next_pos = (start_pos + ins_valid.sum(1)).repeat_interleave(group_size, 0)
        n = len(br) * group_size
        caps = torch.tensor([summary_cap(max_tokens, len(b.inserted)) for b in br]).repeat_interleave(group_size)
        steps = int(caps.max())
        out = torch.full((n, steps), pad_id, dtype=torch.long)
        lens = torch.zeros(n, dtype=torch.long)
        alive = torch.arange(n)  # the summary rows still decoding (finished rows are dropped)
        row_logits: list[list[torch.Tensor]] = [[] for _ in range(n)] if return_logits else []
        with shared_prefix(model, prefix):
            for s in range(steps):
                if return_logits:
                    for k, r in enumerate(alive.tolist()):
                        row_logits[r].append(logits[k].clone())
                tok = sample(logits, temperature, generator)
                out[alive, s] = tok
                lens[alive] += 1
                going = (tok != eos_id) & (lens[alive] < caps[alive])
                if s == steps - 1 or not going.any():
                    break
                if not going.all():
                    keep = going.nonzero()[:, 0]
                    alive, tok, next_pos, key_valid = alive[keep], tok[keep], next_pos[keep], key_valid[keep]
                    keep_rows(cache, keep)
                    prefix.keep_rows(keep)
                key_valid = torch.cat([key_valid, key_valid.new_ones(len(alive), 1)], dim=1)
                logits = forward_step(model, tok[:, None], next_pos[:, None], key_valid, cache)[:, -1]
                next_pos = next_pos + 1
        for k in range(n):
            ids = out[k, : int(lens[k])].tolist()
            br[k // group_size].summaries.append(ids)
            if return_logits:
                logits_out.append(torch.stack(row_logits[k]))
    return logits_out


@dataclass
class Rollout:
    """Everything one rollout produced: ``scores[b, g, j]`` is the mean reward of the summaries
    of thinking sample g of problem b cut at budget j."""

    thinking: Thinking
    branches: list[Branch]
    scores: torch.Tensor  # [B, G, m] float64
    answers: list[int]  # per problem


def budget_scores(branches: list[Branch], n_rows: int, m: int) -> torch.Tensor:
    """[n_rows, m] float64: the mean reward of the branch covering each budget."""
    out = torch.zeros(n_rows, m, dtype=torch.float64)
    for b in branches:
        out[b.row, b.budgets] = sum(b.rewards) / len(b.rewards)
    return out


def rollout(
    model,
    tok,
    inserted: InsertedTokens,
    toy,
    problems: list,
    n_samples: int,
    budgets: list[int],
    group_size: int,
    summary_max_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    max_rows: int,
    per_budget: bool = False,
    target_words: list[str | None] | None = None,
    forcing: BudgetForcing | None = None,
    think_max: int | None = None,
) -> Rollout:
    """Think, branch and summarise ``problems`` of the toy task ``toy``; rewards from its verifier.
    ``per_budget``: ``group_size`` summaries for every budget, also where budgets share a prefix
    (training); else per distinct prefix (evaluation) (:func:`plan_branches`). ``target_words``: one
    L1 target word per problem (:func:`arctl.backends.tiny.tasks.target_word`); ``forcing``: budget forcing
    of the thinking; ``think_max``: stop generating the thinking there, below the largest budget (a
    compared method's generation limit: ThinkPrune's round)."""
    words = target_words or [None] * len(problems)
    prompts = [encode_words(tok, toy.prompt_words(p, w)) for p, w in zip(problems, words) for _ in range(n_samples)]
    length = int(max(budgets)) if think_max is None else min(int(max(budgets)), int(think_max))
    think = generate_thinking(model, prompts, length, temperature, generator, inserted.think_end,
                              tok.pad_token_id, forcing)
    branches = plan_branches(think, list(budgets), inserted, per_budget)
    generate_summaries(
        model, think, branches, group_size, summary_max_tokens, temperature, generator,
        tok.eos_token_id, tok.pad_token_id, max_rows=max_rows,
    )
    answers = [p.answer for p in problems]
    for b in branches:
        problem = problems[b.row // n_samples]
        b.rewards = [toy.verify(decode_words(tok, s), problem) for s in b.summaries]
    scores = budget_scores(branches, len(prompts), len(budgets)).view(len(problems), n_samples, len(budgets))
    return Rollout(think, branches, scores, answers)
