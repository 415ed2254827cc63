"""Summary prompts of decoupled thinking/summary generation (paper Sec. 3.3 and App. A).

After thinking ``z`` is cut at a budget, the summary policy is prompted with
- truncated thinking: ``question + z[:cut] + "...\\n\\n...\\n\\n</think>" + "\\n\\n**Final Answer**\\n"``;
- finished thinking (it ended with ``</think>`` within the budget): ``question + z + "\\n\\n**Final Answer**\\n"``.
The inserted tokens are never trained. Token ids are never hard-coded: the end-of-thinking id is
looked up in the tokenizer, or the caller passes precomputed inserted ids (word-level toy tokenizers).
Those are the AnytimeReasoner authors' inserted texts (``summary.inserted=anytime``, the default);
Elastic Reasoning's E1 appends ``</think>`` alone to a cut thinking and nothing to a finished one
(``summary.inserted=think_end``, :data:`INSERTED_STYLES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

THINK_START = "<think>"
THINK_END = "</think>"
ELLIPSIS_TEXT = "...\n\n...\n\n"
TRUNCATED_TEXT = ELLIPSIS_TEXT + THINK_END
FINAL_ANSWER_TEXT = "\n\n**Final Answer**\n"
INSERTED_STYLES = ("anytime", "think_end")
"""What goes between a thinking prefix and its summary (``summary.inserted``): ``anytime`` the
AnytimeReasoner authors' texts (cut: ellipsis + ``</think>`` + final-answer header; finished: the
header), ``think_end`` Elastic Reasoning's budget-constrained rollout (E1: cut, ``</think>`` alone;
finished, nothing: the solution follows the model's own ``</think>``)."""


def _encode(tokenizer: Any, text: str) -> list[int]:
    try:
        ids = tokenizer.encode(text, add_special_tokens=False)
    except TypeError:  # minimal tokenizers without the keyword
        ids = tokenizer.encode(text)
    return [int(i) for i in ids]


def think_end_id(tokenizer: Any, token: str = THINK_END) -> int:
    """The id of the end-of-thinking token in ``tokenizer`` (raises ValueError if it has none)."""
    tid = tokenizer.convert_tokens_to_ids(token)
    unk = getattr(tokenizer, "unk_token_id", None)
    if tid is None or (unk is not None and tid == unk and token != getattr(tokenizer, "unk_token", None)):
        raise ValueError(f"tokenizer has no {token!r} token; add it to the vocabulary or pass inserted ids explicitly")
    return int(tid)


@dataclass(frozen=True)
class InsertedTokens:
    """Token ids inserted between a thinking prefix and its summary.

    ``truncated``: ellipsis + ``</think>`` + final-answer header; ``finished``: the header only;
    ``think_end``: the id of ``</think>``.
    """

    truncated: tuple[int, ...]
    finished: tuple[int, ...]
    think_end: int

    def __post_init__(self) -> None:
        if self.think_end not in self.truncated:
            raise ValueError(f"truncated inserted ids {list(self.truncated)} must contain the </think> id {self.think_end}")

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: Any,
        style: str = "anytime",
        ellipsis_text: str = ELLIPSIS_TEXT,
        header_text: str = FINAL_ANSWER_TEXT,
        think_end: str = THINK_END,
    ) -> InsertedTokens:
        """Encode the inserted texts of ``style`` (:data:`INSERTED_STYLES`) with ``tokenizer`` (HF
        PreTrainedTokenizerFast or similar)."""
        end = think_end_id(tokenizer, think_end)
        if style == "think_end":
            return cls(truncated=(end,), finished=(), think_end=end)
        if style != "anytime":
            raise ValueError(f"summary.inserted={style!r} is not one of {', '.join(INSERTED_STYLES)}")
        header = tuple(_encode(tokenizer, header_text))
        return cls(truncated=tuple(_encode(tokenizer, ellipsis_text)) + (end,) + header, finished=header, think_end=end)

    @classmethod
    def from_ids(cls, ellipsis: Sequence[int], think_end: int, header: Sequence[int]) -> InsertedTokens:
        """Build from ids the caller computed (e.g. a word-level toy vocabulary)."""
        head = tuple(int(i) for i in header)
        return cls(truncated=tuple(int(i) for i in ellipsis) + (int(think_end),) + head, finished=head, think_end=int(think_end))


@dataclass(frozen=True)
class SummaryPrompt:
    """A built summary prompt: ``input_ids = question + thinking[:cut] + inserted``.

    ``trainable[i]`` is True for thinking tokens only (question and inserted tokens are never trained);
    ``question_len``, ``cut`` and ``inserted_len`` locate the three parts; ``finished`` tells which
    inserted text was used.
    """

    input_ids: tuple[int, ...]
    trainable: tuple[bool, ...]
    question_len: int
    cut: int
    inserted_len: int
    finished: bool

    @property
    def inserted(self) -> tuple[int, ...]:
        return self.input_ids[len(self.input_ids) - self.inserted_len :]


def opens_thinking_problem(tokenizer: Any, prompt_ids: Sequence[int]) -> str | None:
    """Why a question's prompt (the chat template's, generation prompt added) does not open the thinking, or
    None: where the tokenizer has a ``<think>`` token, the prompt must end with it and a newline, as R1-Distill's
    template renders (``<｜Assistant｜><think>\\n``). Its templates older than about February 2025 end at
    ``<｜Assistant｜>``: the model then often answers without thinking, which changes every thinking length
    and every budget's cut, silently. A tokenizer without ``<think>`` (a model that does not think in tags) has
    nothing to check."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    if THINK_START not in vocab:
        return None
    tail = tokenizer.decode(list(prompt_ids)[-8:], skip_special_tokens=False)
    if tail.rstrip(" ").endswith(THINK_START + "\n"):
        return None
    return (f"the chat template's prompt ends {tail[-40:]!r}, not with {THINK_START!r} and a newline: the tokenizer has "
            f"{THINK_START}, and without it opening the prompt (R1-Distill's templates before ~2025-02) the model often "
            "answers without thinking; use a tokenizer_config.json whose chat template ends the generation prompt with "
            f"'{THINK_START}\\n' (the model's current revision); a model that opens its thinking itself, e.g. Qwen3, "
            "may ignore this")


def summary_cap(max_tokens: int, inserted_len: int) -> int:
    """Tokens a summary may generate after its branch's ``inserted_len`` inserted tokens:
    ``summary.max_tokens`` caps a branch's inserted and summary tokens together, as in the authors'
    code (summaries "capped at 128 tokens in all"; the loss constant counts a branch as
    ``summary.max_tokens``), at least 1. Both backends size their summary rollouts with it."""
    return max(1, int(max_tokens) - int(inserted_len))


def is_finished(thinking_ids: Sequence[int], cut: int, think_end: int) -> bool:
    """True when the whole thinking fits in ``cut`` tokens and ends with ``</think>``."""
    return len(thinking_ids) > 0 and cut >= len(thinking_ids) and int(thinking_ids[-1]) == think_end


def summary_prompt(
    question_ids: Sequence[int], thinking_ids: Sequence[int], cut: int, inserted: InsertedTokens
) -> SummaryPrompt:
    """Build the summary prompt for ``thinking_ids`` cut at ``cut`` tokens.

    A thinking that ends with ``</think>`` within ``cut`` is *finished* (header only); anything else
    (cut inside the thinking, or a thinking that stopped without ``</think>``, e.g. at EOS or the
    length limit) is *truncated* (ellipsis + ``</think>`` + header), as in the authors' code.
    """
    if cut < 0:
        raise ValueError(f"cut must be >= 0, got {cut}")
    finished = is_finished(thinking_ids, cut, inserted.think_end)
    kept = [int(t) for t in thinking_ids[: min(cut, len(thinking_ids))]]
    ins = inserted.finished if finished else inserted.truncated
    q = [int(t) for t in question_ids]
    ids = tuple(q + kept + list(ins))
    trainable = tuple([False] * len(q) + [True] * len(kept) + [False] * len(ins))
    return SummaryPrompt(ids, trainable, len(q), len(kept), len(ins), finished)


def distinct_cuts(think_len: int, budgets: Sequence[int]) -> list[tuple[int, list[int]]]:
    """Group budgets by the prefix they produce: ``[(cut, [budget indices])]`` in increasing cut.

    Budgets at or beyond the thinking's length share the full thinking (one merged summary group).
    """
    groups: dict[int, list[int]] = {}
    for j, b in enumerate(budgets):
        groups.setdefault(min(int(b), int(think_len)), []).append(j)
    return sorted(groups.items())
