"""The toy tasks of the tiny backend, chosen by ``tiny.task.name``; each task's knobs are under
``tiny.task.<name>``.

- ``search`` (default, :mod:`arctl.backends.tiny.search`): find the one item that passes a two-step
  test, eliminating the others; partial progress at every test, slips that checks can catch, filler,
  and a summary that must read the partial state. The scale model of docs/testbed.md.
- ``running_sum`` (:mod:`arctl.backends.tiny.task`): the first toy, a running sum mod 10, kept for
  comparison (docs/testbed.md says what it lacks).

A task is what the warm-up, the rollout, the trainer and the evaluation ask of it
(:class:`ToyTask`): its vocabulary, problems, prompts, reference thinking and summaries, verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from arctl.backends.tiny import search
from arctl.backends.tiny import task as running_sum
from arctl.config.ranges import PROB, I, Range

DEFAULT = "search"


class ToyTask(Protocol):
    name: str
    VOCAB_KNOBS: tuple[str, ...]  # the knobs its vocabulary (the model's embedding rows) depends on

    def vocabulary(self) -> list[str]: ...

    def make_problems(self, rng: np.random.Generator, n: int) -> list: ...

    def prompt_words(self, problem, target_word: str | None = None) -> list[str]: ...

    def reference_thinking(self, problem, rng: np.random.Generator) -> list[str]:
        """A reference thinking ending in ``</think>`` (warm-up)."""

    def reference_summary(self, problem, thinking: list[str], finished: bool, rng: np.random.Generator) -> list[str]:
        """A reference summary after ``thinking`` (a reference prefix; ``finished``: it reached its end)."""

    def verify(self, summary: list[str], problem) -> float: ...

    def chance_accuracy(self) -> float:
        """The accuracy of a uniform guess among the answers a problem admits, averaged over the
        task's problems (logged as ``eval/{ds}/chance_acc``: a budget not above it taught nothing)."""


def _knob(section: Mapping[str, Any], key: str, name: str) -> Any:
    if key not in section:
        raise ValueError(f"tiny task {name!r} needs tiny.task.{name}.{key} (arctl/backends/tiny/conf/scale/tiny.yaml)")
    return section[key]


class SearchTask:
    name = "search"
    VOCAB_KNOBS: tuple[str, ...] = ()  # the knobs its vocabulary depends on (none: one vocabulary)
    # every knob, with its range when numeric (``order`` is a choice, checked here): the validation of
    # tiny.task.search.<knob> is derived from this table (arctl/compose/limits.py)
    KNOBS: dict[str, Range | None] = {
        "min_items": I(2, search.MAX_ITEMS), "max_items": I(2, search.MAX_ITEMS), "order": None,
        "slip_prob": PROB, "check_prob": PROB, "check_yes_prob": PROB, "check_slip_prob": PROB,
        "filler_prob": PROB, "lazy_summary_prob": PROB}

    def __init__(self, section: Mapping[str, Any]):
        g = lambda k: _knob(section, k, self.name)  # noqa: E731
        self.min_items, self.max_items = int(g("min_items")), int(g("max_items"))
        self.slip_prob, self.check_prob = float(g("slip_prob")), float(g("check_prob"))
        self.filler_prob, self.lazy_prob = float(g("filler_prob")), float(g("lazy_summary_prob"))
        self.check_yes_prob, self.check_slip_prob = float(g("check_yes_prob")), float(g("check_slip_prob"))
        self.order = str(g("order"))
        if self.order not in search.ORDERS:
            raise ValueError(f"tiny.task.search.order={self.order!r}: use one of {', '.join(search.ORDERS)}")
        search.make_problems(np.random.default_rng(0), 0, self.min_items, self.max_items)  # checks the range

    def vocabulary(self) -> list[str]:
        return search.vocabulary()

    def make_problems(self, rng, n):
        return search.make_problems(rng, n, self.min_items, self.max_items)

    def prompt_words(self, problem, target_word=None):
        return search.prompt_words(problem, target_word)

    def reference_thinking(self, problem, rng):
        return search.thinking_words(problem, rng, self.slip_prob, self.check_prob, self.filler_prob,
                                     check_yes_prob=self.check_yes_prob, check_slip_prob=self.check_slip_prob,
                                     order=self.order)

    def reference_summary(self, problem, thinking, finished, rng):
        return search.summary_words(problem, search.read_state(problem, thinking), rng, self.lazy_prob,
                                   self.order)

    def verify(self, summary, problem):
        return search.verify(summary, problem)

    def chance_accuracy(self):
        return search.chance_accuracy(self.min_items, self.max_items)


class RunningSumTask:
    name = "running_sum"
    VOCAB_KNOBS: tuple[str, ...] = ("max_terms",)  # the knobs its vocabulary depends on (:func:`task.vocabulary`)
    KNOBS: dict[str, Range | None] = {
        "min_terms": I(1, running_sum.MAX_TERMS), "max_terms": I(1, running_sum.MAX_TERMS), "filler_prob": PROB,
        "summary_finish_steps": I(0, 1000), "summary_continue_prob": PROB}

    def __init__(self, section: Mapping[str, Any]):
        g = lambda k: _knob(section, k, self.name)  # noqa: E731
        self.min_terms, self.max_terms = int(g("min_terms")), int(g("max_terms"))
        self.filler_prob = float(g("filler_prob"))
        self.finish_steps, self.continue_prob = int(g("summary_finish_steps")), float(g("summary_continue_prob"))
        running_sum.make_problems(np.random.default_rng(0), 0, self.min_terms, self.max_terms)

    def vocabulary(self) -> list[str]:
        return running_sum.vocabulary(self.max_terms)

    def make_problems(self, rng, n):
        return running_sum.make_problems(rng, n, self.min_terms, self.max_terms)

    def prompt_words(self, problem, target_word=None):
        return running_sum.prompt_words(problem, target_word)

    def reference_thinking(self, problem, rng):
        return running_sum.thinking_words(problem, rng, self.filler_prob)

    def reference_summary(self, problem, thinking, finished, rng):
        done = len(problem.digits) if finished else running_sum.steps_done(problem, thinking)
        finish = self.finish_steps if rng.random() < self.continue_prob else 0
        return running_sum.summary_words(problem, done, finish)

    def verify(self, summary, problem):
        return running_sum.verify(summary, problem.answer)

    def chance_accuracy(self):
        return 1 / len(running_sum.ANSWER_WORDS)  # the answer is one digit


TASKS: dict[str, type] = {SearchTask.name: SearchTask, RunningSumTask.name: RunningSumTask}


def knob_ranges() -> dict[str, Range]:
    """``tiny.task.<name>.<knob>`` -> its range, for every numeric knob of every task."""
    return {f"tiny.task.{name}.{knob}": r for name, cls in TASKS.items() for knob, r in cls.KNOBS.items()
            if r is not None}


def task_section(section: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(name, knobs) of a ``tiny.task`` section: ``name`` selects the task, ``tiny.task.<name>`` holds
    its knobs (every task's knobs may be present; only the selected task's count)."""
    name = str(section.get("name") or DEFAULT)
    if name not in TASKS:
        raise ValueError(f"tiny.task.name={name!r} is not a toy task; use one of {', '.join(sorted(TASKS))}")
    unknown = sorted(set(section) - set(TASKS) - {"name"})
    if unknown:
        raise ValueError(f"tiny.task.{unknown[0]} is neither tiny.task.name nor a task's knobs "
                         f"(tiny.task.<{'|'.join(sorted(TASKS))}>.<knob>)")
    knobs = section.get(name) or {}
    if not isinstance(knobs, Mapping):
        raise ValueError(f"tiny.task.{name} must hold the {name!r} task's knobs")
    bad = sorted(set(knobs) - set(TASKS[name].KNOBS))
    if bad:
        raise ValueError(f"tiny.task.{name}.{bad[0]} is not a knob of the {name!r} task "
                         f"(its knobs: {', '.join(TASKS[name].KNOBS)})")
    return name, knobs


def toy_task(section: Mapping[str, Any]) -> ToyTask:
    """The task a ``tiny.task`` section selects, with its knobs (:func:`task_section`)."""
    name, knobs = task_section(section)
    return TASKS[name](knobs)


def target_word(target: int, choices) -> str:
    """L1's target length as one existing word of every toy vocabulary: its rank among ``choices``
    (``"1"`` for the smallest; at most 9 choices)."""
    return running_sum.target_word(target, choices)
