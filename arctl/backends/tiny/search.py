"""The ``search`` toy task: find the one item that passes a two-step test, eliminating the others.

A problem shows a multiplier ``k`` (1, 3, 7 or 9), an addend ``c``, a target ``t`` and ``K`` labelled
digits; exactly one item's digit ``d`` has ``(d*k + c) % 10 == t``. The prompt::

    mul7 add4 tgt9 a 3 b 8 c 5 d 2 ? <think>

A reference thinking tests the items in order, seven tokens a test: the label, its digit (copied
from after the same label in the prompt), ``d*k`` as ONE token and its last digit, ``p+c`` as ONE
token and its last digit, the verdict (every token a one-step lookup)::

    a 3 3*7 1 1+4 5 no  b 8 8*7 6 6+4 0 no  hmm  c 5 5*7 5 5+4 9 yes  </think>

It ends at the first ``yes``. What makes it a scale model of long reasoning:

- **partial progress**: a cut after ``e`` eliminations leaves ``K - e`` candidates, so a summary that
  reads which items are out answers right with probability about ``1/(K - e)``, rising at every test,
  and the chance that the answer was found rises with the budget: an early budget's score predicts a
  later one's;
- **slips and verification**: a result digit is written wrong with probability ``slip_prob`` (a
  wrong ``no`` drops the answer from the search, a wrong ``yes`` ends it on a wrong item); a
  ``yes`` is re-checked before concluding with probability ``check_yes_prob`` and a ``no`` with
  ``check_prob`` (``chk`` + the four computation tokens + the verdict: the check's verdict stands,
  and a check that says ``no`` continues the search); a check's digits slip with
  ``check_slip_prob`` (careful: 0 by default). Checks of a ``yes`` catch the wrong ones and are
  worth their tokens; checks of a ``no`` rarely catch anything: a length penalty has real
  verification to lose and some to cut (docs/testbed.md, round 4);
- **waste**: ``hmm`` after a test with probability ``filler_prob``, never useful;
- **a summary skill at every cut**: the reference summary after a cut answers the first item not yet
  tested, except with probability ``lazy_summary_prob`` a uniform guess among all items: reading the
  partial state is worth learning, after any prefix.

The summary is ``\\boxed{label} <eos>`` (two tokens against ~90 of thinking: the paper's proportion of
summary to thinking tokens). The verifier reads the summary only.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

NAME = "search"
LABELS = tuple(string.ascii_lowercase + string.ascii_uppercase)
MAX_ITEMS = len(LABELS)
MULTIPLIERS = (1, 3, 7, 9)  # coprime to 10: d -> d*k % 10 is a bijection, so one digit passes
THINK_OPEN, THINK_CLOSE, QUESTION_END, EOS = "<think>", "</think>", "?", "<eos>"
CHECK, FILLER, YES, NO = "chk", "hmm", "yes", "no"


def mul_word(k: int) -> str:
    return f"mul{k}"


def add_word(c: int) -> str:
    return f"add{c}"


def target_word_of(t: int) -> str:
    return f"tgt{t}"


def times_word(d: int, k: int) -> str:
    return f"{d}*{k}"


def plus_word(p: int, c: int) -> str:
    return f"{p}+{c}"


def answer_word(label: str) -> str:
    return f"\\boxed{{{label}}}"


ANSWER_WORDS = {answer_word(lab): lab for lab in LABELS}


@dataclass(frozen=True)
class Problem:
    """``digits[i]`` is item ``LABELS[i]``'s digit; exactly one passes ``(d*k + c) % 10 == t``."""

    k: int
    c: int
    t: int
    digits: tuple[int, ...]

    def passes(self, d: int) -> bool:
        return (d * self.k + self.c) % 10 == self.t

    @property
    def answer_index(self) -> int:
        (index,) = [i for i, d in enumerate(self.digits) if self.passes(d)]
        return index

    @property
    def answer(self) -> str:
        """The label of the item that passes."""
        return LABELS[self.answer_index]

    @property
    def size(self) -> int:
        return len(self.digits)


def passing_digit(k: int, c: int, t: int) -> int:
    (d,) = [d for d in range(10) if (d * k + c) % 10 == t]
    return d


def make_problems(rng: np.random.Generator, n: int, min_items: int, max_items: int) -> list[Problem]:
    """``n`` problems with a uniform number of items in ``[min_items, max_items]``, the passing item
    at a uniform position, the other items' digits uniform among the nine that fail."""
    if not 2 <= min_items <= max_items <= MAX_ITEMS:
        raise ValueError(f"search task items must satisfy 2 <= min_items <= max_items <= {MAX_ITEMS}, "
                         f"got {min_items}..{max_items}")
    out = []
    for _ in range(n):
        size = int(rng.integers(min_items, max_items + 1))
        k, c, t = int(rng.choice(MULTIPLIERS)), int(rng.integers(0, 10)), int(rng.integers(0, 10))
        good = passing_digit(k, c, t)
        bad = [d for d in range(10) if d != good]
        digits = [int(bad[i]) for i in rng.integers(0, 9, size=size)]
        digits[int(rng.integers(0, size))] = good
        out.append(Problem(k, c, t, tuple(digits)))
    return out


def prompt_words(problem: Problem, target_word: str | None = None) -> list[str]:
    """The question, then an optional target-length word (L1) and ``<think>``."""
    words = [mul_word(problem.k), add_word(problem.c), target_word_of(problem.t)]
    for i, d in enumerate(problem.digits):
        words += [LABELS[i], str(d)]
    words.append(QUESTION_END)
    return words + ([target_word] if target_word is not None else []) + [THINK_OPEN]


def _slip(rng: np.random.Generator, right: int, slip_prob: float) -> int:
    if rng.random() < slip_prob:
        return int((right + rng.integers(1, 10)) % 10)
    return right


def computation_words(problem: Problem, i: int, rng: np.random.Generator, slip_prob: float) -> list[str]:
    """``d*k p p+c q verdict`` for item ``i``; each result digit slips with ``slip_prob`` (a slip in
    ``p`` carries into the second step, as a wrong intermediate would)."""
    d = problem.digits[i]
    p = _slip(rng, d * problem.k % 10, slip_prob)
    q = _slip(rng, (p + problem.c) % 10, slip_prob)
    return [times_word(d, problem.k), str(p), plus_word(p, problem.c), str(q), YES if q == problem.t else NO]


ORDERS = ("sequential", "random")


def thinking_words(problem: Problem, rng: np.random.Generator, slip_prob: float, check_prob: float,
                   filler_prob: float, *, check_yes_prob: float, check_slip_prob: float,
                   order: str) -> list[str]:
    """A reference thinking ending in ``</think>``: items tested in ``order`` (``sequential``: as
    listed; ``random``: a uniform permutation drawn first) until a verdict (the check's, when one
    follows) is ``yes``. A ``no`` is re-checked with ``check_prob``, a ``yes`` with
    ``check_yes_prob`` (one draw either way); a check's results slip with ``check_slip_prob``."""
    if order not in ORDERS:
        raise ValueError(f"search order must be one of {', '.join(ORDERS)}, got {order!r}")
    items = range(problem.size) if order == "sequential" else [int(i) for i in rng.permutation(problem.size)]
    words: list[str] = []
    for i in items:
        test = computation_words(problem, i, rng, slip_prob)
        words += [LABELS[i], str(problem.digits[i]), *test]
        if rng.random() < (check_yes_prob if test[-1] == YES else check_prob):
            test = computation_words(problem, i, rng, check_slip_prob)
            words += [CHECK, *test]
        if rng.random() < filler_prob:
            words.append(FILLER)
        if test[-1] == YES:
            break
    return words + [THINK_CLOSE]


@dataclass(frozen=True)
class State:
    """What a thinking prefix has established: ``tested`` labels in order, ``found`` the label whose
    last verdict is ``yes`` (None if none), ``finished`` whether it reached ``</think>``."""

    tested: tuple[str, ...]
    found: str | None
    finished: bool


def read_state(problem: Problem, thinking: list[str]) -> State:
    """Parse a thinking prefix (a reference's or a model's): a test counts once its verdict is
    written; a check's verdict replaces its test's. Words that do not fit the format are skipped."""
    tested: list[str] = []
    verdicts: dict[str, str] = {}
    current: str | None = None
    finished = False
    for word in thinking:
        if word == THINK_CLOSE:
            finished = True
            break
        if word in LABELS[: problem.size]:
            current = word
        elif word in (YES, NO) and current is not None:
            if current not in verdicts:
                tested.append(current)
            verdicts[current] = word
    found = next((lab for lab in reversed(tested) if verdicts[lab] == YES), None)
    return State(tuple(tested), found, finished)


def summary_words(problem: Problem, state: State, rng: np.random.Generator, lazy_prob: float,
                  order: str) -> list[str]:
    """The reference summary: the found item; else an item not yet tested (``sequential`` order: the
    first one; ``random``: a uniform one), or with ``lazy_prob`` (and when every item was tested) a
    uniform guess among all items."""
    labels = LABELS[: problem.size]
    if state.found is not None:
        pick = state.found
    else:
        untested = [lab for lab in labels if lab not in state.tested]
        if untested and rng.random() >= lazy_prob:
            pick = untested[0] if order == "sequential" else untested[int(rng.integers(0, len(untested)))]
        else:
            pick = labels[int(rng.integers(0, len(labels)))]
    return [answer_word(pick), EOS]


def chance_accuracy(min_items: int, max_items: int) -> float:
    """A uniform guess among a problem's ``K`` items is right with probability ``1/K``; ``K`` is
    uniform in ``[min_items, max_items]`` (:func:`make_problems`)."""
    return float(np.mean([1 / k for k in range(min_items, max_items + 1)]))


def verify(summary: list[str], problem: Problem) -> float:
    """1.0 iff the summary holds an answer word (the last one wins), no ``</think>``, and that
    answer is the passing item; else 0.0. Never raises."""
    try:
        if THINK_CLOSE in summary:
            return 0.0
        found = [ANSWER_WORDS[w] for w in summary if w in ANSWER_WORDS]
        return float(bool(found) and found[-1] == problem.answer)
    except Exception:  # noqa: BLE001 - a verifier scores malformed input 0
        return 0.0


def vocabulary() -> list[str]:
    """Every word the task can produce (without the tokenizer's special tokens)."""
    words = [QUESTION_END, THINK_OPEN, THINK_CLOSE, CHECK, FILLER, YES, NO]
    words += [mul_word(k) for k in MULTIPLIERS] + [add_word(c) for c in range(10)]
    words += [target_word_of(t) for t in range(10)]
    words += list(LABELS)
    words += [times_word(d, k) for d in range(10) for k in MULTIPLIERS]
    words += [plus_word(p, c) for p in range(10) for c in range(10)]
    words += [str(d) for d in range(10)]
    words += list(ANSWER_WORDS)
    return words
