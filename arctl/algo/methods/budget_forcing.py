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

This module holds the settings (:class:`BudgetForcing`) and the rule's one decision that the
decoders need (:func:`extends`); the tiny backend's batched sampler and verl's request loop apply
it. The per-token state machine above, one sequence at a time, is the obviously-correct reference
both are tested against (``tests/support/s1_reference.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arctl.algo.methods._checks import as_int


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


def extends(thinking_len: int, extensions: int, cfg: BudgetForcing) -> bool:
    """Whether an end-of-thinking the model emits after ``thinking_len`` thinking tokens, with
    ``extensions`` suppressions used, is replaced by the cue: extensions remain and the cue fits
    with at least one model token after it (``thinking_len + len(cue_ids) < budget``). The rule's
    one home: the batched tiny sampler, verl's request loop and the per-token reference use it."""
    return int(extensions) < cfg.max_extensions and int(thinking_len) + len(cfg.cue_ids) < cfg.budget
