"""The toy verifiable task: a labelled running sum modulo 10, written as word tokens.

A problem with ``n`` terms (difficulty = n steps) is the prompt ``a3 b7 c2 ? <think>``; the
reference thinking adds one term per step, ``label prev+digit newsum`` where ``prev+digit`` is ONE
token (every step is then a one-token lookup), with optional filler steps ``chk label prev+digit
newsum`` that re-check the last step and only waste budget::

    a 0+3 3 b 3+7 0 chk b 3+7 0 c 0+2 2 </think>

After the thinking (or after a cut) comes the summary: it may finish a few remaining terms itself
in the same step format, then answers ``\\boxed{d} <eos>``. A summary after a cut therefore beats
chance when few terms remain, so decoupled summary training has signal, and accuracy grows with
the thinking budget. The verifier reads the summary only.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

LABELS = tuple(string.ascii_lowercase)
MAX_TERMS = len(LABELS)
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
QUESTION_END = "?"
FILLER = "chk"
EOS = "<eos>"


def pair_word(prev: int, digit: int) -> str:
    """The single token ``prev+digit`` of one step."""
    return f"{prev}+{digit}"


def item_word(label: str, digit: int) -> str:
    """The single prompt token of one term, e.g. ``c2``."""
    return f"{label}{digit}"


def answer_word(answer: int) -> str:
    """The single answer token ``\\boxed{d}``."""
    return f"\\boxed{{{answer}}}"


ANSWER_WORDS = {answer_word(d): d for d in range(10)}


@dataclass(frozen=True)
class Problem:
    """One running-sum problem: its digits (one per term) and the answer ``sum(digits) % 10``."""

    digits: tuple[int, ...]

    @property
    def answer(self) -> int:
        return sum(self.digits) % 10

    @property
    def prefix_sums(self) -> tuple[int, ...]:
        """Running sums after each term (mod 10)."""
        out, s = [], 0
        for d in self.digits:
            s = (s + d) % 10
            out.append(s)
        return tuple(out)


def make_problems(rng: np.random.Generator, n: int, min_terms: int, max_terms: int) -> list[Problem]:
    """``n`` problems with a uniform number of terms in ``[min_terms, max_terms]``."""
    if not 1 <= min_terms <= max_terms <= MAX_TERMS:
        raise ValueError(f"tiny task terms must satisfy 1 <= min_terms <= max_terms <= {MAX_TERMS}, got {min_terms}..{max_terms}")
    counts = rng.integers(min_terms, max_terms + 1, size=n)
    return [Problem(tuple(int(d) for d in rng.integers(0, 10, size=int(c)))) for c in counts]


def prompt_words(problem: Problem, target_word: str | None = None) -> list[str]:
    """The question: one token per term, then ``?``, an optional target-length word (L1), ``<think>``."""
    words = [item_word(LABELS[i], d) for i, d in enumerate(problem.digits)] + [QUESTION_END]
    return words + ([target_word] if target_word is not None else []) + [THINK_OPEN]


def target_word(target: int, choices: list[int] | tuple[int, ...]) -> str:
    """L1's target length as one existing word of the toy vocabulary: its rank among ``choices``
    (``"1"`` for the smallest; at most 9 choices). A new word would change the vocabulary, hence
    the warm-up every arm shares."""
    ranked = sorted(int(c) for c in choices)
    if int(target) not in ranked or len(ranked) > 9:
        raise ValueError(f"tiny task: L1 target {target} must be one of at most 9 choices {ranked}")
    return str(ranked.index(int(target)) + 1)


def step_words(problem: Problem, i: int) -> list[str]:
    """The three tokens of step ``i`` (0-based): ``label prev+digit newsum``."""
    prev = problem.prefix_sums[i - 1] if i > 0 else 0
    return [LABELS[i], pair_word(prev, problem.digits[i]), str(problem.prefix_sums[i])]


def thinking_words(problem: Problem, rng: np.random.Generator, filler_prob: float) -> list[str]:
    """A reference thinking trace ending in ``</think>``; each step is followed by a filler
    re-check with probability ``filler_prob``."""
    words: list[str] = []
    for i in range(len(problem.digits)):
        step = step_words(problem, i)
        words += step
        if rng.random() < filler_prob:
            words += [FILLER, *step]
    return words + [THINK_CLOSE]


def steps_done(problem: Problem, thinking: list[str]) -> int:
    """Number of leading terms whose step ``label prev+digit newsum`` appears complete and correct
    in a reference thinking prefix (fillers skipped)."""
    done, pos = 0, 0
    while done < len(problem.digits):
        step = step_words(problem, done)
        while pos < len(thinking) and thinking[pos] == FILLER:
            pos += 1
        if thinking[pos : pos + 3] != step:
            break
        pos += 3
        done += 1
        # skip a complete filler re-check of the step just done
        if thinking[pos : pos + 4] == [FILLER, *step]:
            pos += 4
    return done


def summary_words(problem: Problem, done: int, finish_steps: int) -> list[str]:
    """Reference summary after ``done`` terms were worked out in the thinking: up to
    ``finish_steps`` remaining steps, then the answer and ``<eos>``."""
    todo = min(len(problem.digits) - done, max(finish_steps, 0))
    words: list[str] = []
    for i in range(done, done + todo):
        words += step_words(problem, i)
    return words + [answer_word(problem.answer), EOS]


def verify(summary: list[str], answer: int) -> float:
    """1.0 iff the summary holds an answer token (the last one wins), holds no ``</think>`` and
    that answer equals ``answer``; else 0.0. Never raises."""
    try:
        if THINK_CLOSE in summary:
            return 0.0
        found = [ANSWER_WORDS[w] for w in summary if w in ANSWER_WORDS]
        return float(bool(found) and found[-1] == int(answer))
    except Exception:  # noqa: BLE001 - a verifier scores malformed input 0
        return 0.0


def vocabulary(max_terms: int = MAX_TERMS) -> list[str]:
    """Every word the task can produce (without the tokenizer's special tokens)."""
    labels = LABELS[:max_terms]
    words = [QUESTION_END, THINK_OPEN, THINK_CLOSE, FILLER]
    words += [item_word(lab, d) for lab in labels for d in range(10)]
    words += list(labels)
    words += [pair_word(p, d) for p in range(10) for d in range(10)]
    words += [str(d) for d in range(10)]
    words += list(ANSWER_WORDS)
    return words
