"""Budget forcing (s1, Muennighoff et al., 2025, arXiv 2501.19393, Sec. 3.1) as a decoding rule.

s1 controls the thinking length at test time: to enforce a *maximum*, append the end-of-thinking
delimiter (optionally followed by "Final Answer:") once the budget is used; to enforce a *minimum*,
suppress the end-of-thinking delimiter when the model generates it and append "Wait" instead, so the
model keeps reasoning (s1 does this a chosen number of times). Here both are one per-token state
machine over a thinking budget:

1. tokens queued by an earlier decision (the rest of a multi-token cue or closing sequence) are
   emitted first;
2. when the thinking has used the whole ``budget``, the closing sequence ``close_ids`` (default: the
   end-of-thinking token alone) is forced;
3. otherwise the model's token is sampled; if it is the end-of-thinking token while fewer than
   ``max_extensions`` extensions were used and the cue fits (at least one model token must fit
   after it), the cue ``cue_ids`` ("Wait") replaces it;
4. after the thinking closed (by the model or by force) nothing is changed.

Counting: the thinking length counts every emitted thinking token, cue tokens included (the budget
is a hard cap on the thinking the answer sees); the end-of-thinking token and ``close_ids`` are not
counted. s1's released evaluation loop subtracts only generated tokens from the budget; the
difference is ``len(cue_ids)`` per extension.

Use from a decode loop: ``step = budget_forcing_step(logits_row, state, cfg)``; append
``step.token``; continue with ``step.state``. ``step.logits`` is the row to hand to an external
sampler (one-hot on the forced token when the rule decided it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from arctl.algo.methods._checks import as_int


def greedy_token(logits: torch.Tensor) -> int:
    """Argmax of a logits row [V] (s1 evaluates with greedy decoding)."""
    return int(torch.argmax(logits))


@dataclass(frozen=True)
class BudgetForcing:
    """Settings of budget forcing.

    ``budget``: maximum thinking tokens; ``end_think_id``: the end-of-thinking token id (e.g. the id
    of ``</think>``); ``cue_ids``: token ids appended instead of a suppressed end-of-thinking (e.g.
    the ids of "Wait"); ``max_extensions``: how many times the end-of-thinking may be suppressed (0:
    maximum-only forcing); ``close_ids``: what is forced at the budget, containing ``end_think_id``
    (default ``(end_think_id,)``; e.g. end-of-thinking + "Final Answer:" ids as in s1, or an
    ellipsis before it).
    """

    budget: int
    end_think_id: int
    cue_ids: tuple[int, ...]
    max_extensions: int
    close_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        as_int(self.budget, "budget", 0)
        as_int(self.end_think_id, "end_think_id", 0)
        as_int(self.max_extensions, "max_extensions", 0)
        object.__setattr__(self, "cue_ids", tuple(as_int(t, "cue token id", 0) for t in self.cue_ids))
        object.__setattr__(self, "close_ids", tuple(as_int(t, "close token id", 0) for t in self.close_ids))
        if not self.cue_ids and self.max_extensions > 0:
            raise ValueError("cue_ids is empty: give the ids of the continuation cue (e.g. 'Wait') to extend thinking")
        if self.end_think_id in self.cue_ids:
            raise ValueError(f"cue_ids {list(self.cue_ids)} must not contain the end-of-thinking id {self.end_think_id}")
        if self.close_ids and self.end_think_id not in self.close_ids:
            raise ValueError(f"close_ids {list(self.close_ids)} must contain the end-of-thinking id {self.end_think_id}")

    @property
    def closing(self) -> tuple[int, ...]:
        """The sequence forced at the budget."""
        return self.close_ids or (int(self.end_think_id),)


@dataclass(frozen=True)
class ForcingState:
    """Where a generation stands: ``thinking_len`` thinking tokens emitted (cues included),
    ``extensions`` end-of-thinking suppressions used, ``pending`` tokens queued to be emitted next,
    ``closed`` whether the thinking has ended (the model's end-of-thinking or the forced close)."""

    thinking_len: int = 0
    extensions: int = 0
    pending: tuple[int, ...] = ()
    closed: bool = False


@dataclass(frozen=True)
class ForcingStep:
    """One decoding step: the ``token`` to append, whether the rule ``forced`` it (queued, closing
    or cue; False when it is the model's own sample), the logits row [V] to sample it from (one-hot
    when forced; None when no logits were given) and the next ``state``."""

    token: int
    forced: bool
    logits: torch.Tensor | None
    state: ForcingState


def _emit(state: ForcingState, queue: tuple[int, ...], counts: bool) -> tuple[int, ForcingState]:
    """Emit ``queue[0]``, queue the rest; ``counts``: the token is part of the thinking."""
    return queue[0], replace(state, pending=queue[1:], thinking_len=state.thinking_len + int(counts))


def _advance(state: ForcingState, cfg: BudgetForcing, propose: Callable[[], int]) -> tuple[int, bool, ForcingState]:
    """The rule: (token, forced, new state). ``propose`` gives the model's token and is called only
    when the rule does not decide the token itself."""
    if state.pending:
        # a queued cue is thinking (the thinking is still open); a queued close is not
        token, new = _emit(state, state.pending, counts=not state.closed)
        return token, True, new
    if state.closed:
        return int(propose()), False, state
    if state.thinking_len >= cfg.budget:
        token, new = _emit(replace(state, closed=True), cfg.closing, counts=False)
        return token, True, new
    proposed = int(propose())
    if proposed != cfg.end_think_id:
        return proposed, False, replace(state, thinking_len=state.thinking_len + 1)
    if extends(state.thinking_len, state.extensions, cfg):
        token, new = _emit(replace(state, extensions=state.extensions + 1), cfg.cue_ids, counts=True)
        return token, True, new
    return proposed, False, replace(state, closed=True)


def extends(thinking_len: int, extensions: int, cfg: BudgetForcing) -> bool:
    """Whether an end-of-thinking the model emits after ``thinking_len`` thinking tokens, with
    ``extensions`` suppressions used, is replaced by the cue: extensions remain and the cue fits
    with at least one model token after it (``thinking_len + len(cue_ids) < budget``). The rule's
    one home: the per-token state machine, the batched tiny sampler and verl's request loop use it."""
    return int(extensions) < cfg.max_extensions and int(thinking_len) + len(cfg.cue_ids) < cfg.budget


def force_token_logits(logits: torch.Tensor, token: int) -> torch.Tensor:
    """A logits row [V] that samples ``token`` with probability 1: 0 there, -inf elsewhere."""
    out = torch.full_like(logits, float("-inf"))
    out[..., int(token)] = 0.0
    return out


def budget_forcing_step(
    logits: torch.Tensor,
    state: ForcingState,
    cfg: BudgetForcing,
    sample: Callable[[torch.Tensor], int] = greedy_token,
) -> ForcingStep:
    """Apply budget forcing to the next-token ``logits`` row [V] of one sequence.

    ``sample`` picks the model's token from the row (default greedy); it is called only when the
    rule leaves the choice to the model. Returns the token to append and the next state.
    """
    if logits.dim() != 1:
        raise ValueError(f"logits must be one row [V], got shape {tuple(logits.shape)}")
    token, forced, new = _advance(state, cfg, lambda: sample(logits))
    return ForcingStep(token, forced, force_token_logits(logits, token) if forced else logits, new)


def budget_forcing_generate(
    propose: Callable[[Sequence[int]], int],
    cfg: BudgetForcing,
    max_new_tokens: int,
    stop_ids: Sequence[int] = (),
    state: ForcingState | None = None,
) -> tuple[list[int], ForcingState]:
    """Decode with budget forcing: ``propose(tokens so far)`` is the model's next token (e.g. the
    argmax of its logits). Stops after ``max_new_tokens`` tokens or after the model emits a token
    of ``stop_ids`` (e.g. EOS). Returns the generated tokens [L] and the final state."""
    n = as_int(max_new_tokens, "max_new_tokens", 0)
    stops = {int(s) for s in stop_ids}
    out: list[int] = []
    st = state or ForcingState()
    while len(out) < n:
        token, forced, st = _advance(st, cfg, lambda: propose(list(out)))
        out.append(token)
        if not forced and token in stops:
            break
    return out, st
