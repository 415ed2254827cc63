"""The s1 budget-forcing rule as a per-token state machine, one sequence at a time (the reference the
tiny backend's batched sampler and verl's request loop are tested against; the rule is described in
:mod:`arctl.algo.methods.budget_forcing`, whose :func:`extends` it uses).

Use from a decode loop: ``step = budget_forcing_step(logits_row, state, cfg)``; append
``step.token``; continue with ``step.state``. ``step.logits`` is the row to hand to an external
sampler (one-hot on the forced token when the rule decided it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from arctl.algo.methods._checks import as_int
from arctl.algo.methods.budget_forcing import BudgetForcing, extends


def greedy_token(logits: torch.Tensor) -> int:
    """Argmax of a logits row [V] (s1 evaluates with greedy decoding)."""
    return int(torch.argmax(logits))


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
