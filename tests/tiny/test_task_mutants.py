"""The toy tasks' problem generators draw what their rules say (docs/testbed.md), checked by counting: the
running sum's digits are uniform over 0-9, each term an item ``a3`` of the prompt. From a mutation hunt
(2026-12-07): digits drawn from 0-8 (the prompt words ``a9`` ... and the steps ``p+9`` never seen) passed every
test."""

from __future__ import annotations

import numpy as np
import pytest

from arctl.backends.tiny import task


def test_the_running_sums_digits_are_uniform_over_all_ten():
    problems = task.make_problems(np.random.default_rng(0), 2000, 2, 20)
    digits = np.array([d for p in problems for d in p.digits])
    counts = np.bincount(digits, minlength=10)
    assert len(counts) == 10 and counts.min() > 0
    share = counts / counts.sum()  # ~22,000 digits: each share 0.1 within 4 standard errors (0.008)
    assert np.allclose(share, 0.1, atol=4 * np.sqrt(0.1 * 0.9 / counts.sum()))
    words = {w for p in problems for w in task.prompt_words(p)}
    assert {task.item_word(lab, 9) for lab in "abc"} <= words


@pytest.mark.parametrize(("terms", "says"), [
    ({"min_terms": 2, "max_terms": 27}, "max_terms <= 26, got 2..27"),  # one label a term: 26 letters
    ({"min_terms": 7, "max_terms": 5}, "min_terms <= max_terms"),
])
def test_a_running_sum_whose_terms_cannot_be_labelled_is_refused_before_the_job(terms, says):
    """``tiny.task.running_sum.max_terms`` ranges to 1000 in the settings table, but a term is labelled by one of 26
    letters: the backend's check of a run config refuses more (``arctl run``: one ``error:`` line, exit 2), where
    the job would fail on its first prompt. From a mutation hunt: without the task's own check both passed."""
    from resolved import arm_config  # tests/support/resolved.py

    from arctl.backends.tiny import BACKEND

    cfg = arm_config("main-ar-uniform", "ar-uniform", scale="tiny-running-sum")
    assert BACKEND.config_problem(cfg) is None
    cfg["tiny"]["task"]["running_sum"].update(terms)
    what, key, _ = BACKEND.config_problem(cfg)
    assert key == "tiny.task" and says in what


def test_a_running_sum_of_one_term_is_a_setting_the_spec_layer_accepts():
    """``min_terms=1`` (a one-term sum: the task's generator allows it, ``1 <= min_terms``) composes; 0 is refused
    there. From a mutation hunt: the settings table's lower bound 1 -> 2 refused it and passed every test."""
    from arctl.compose import resolve_experiment
    from arctl.compose.errors import SpecError

    (run, *_) = resolve_experiment("main-ar-uniform", scale="tiny-running-sum",
                                   overrides=["tiny.task.running_sum.min_terms=1"])
    assert run.config["tiny"]["task"]["running_sum"]["min_terms"] == 1
    problems = task.make_problems(np.random.default_rng(0), 50, 1, 3)
    assert {len(p.digits) for p in problems} == {1, 2, 3}
    with pytest.raises(SpecError, match="min_terms"):
        resolve_experiment("main-ar-uniform", scale="tiny-running-sum", overrides=["tiny.task.running_sum.min_terms=0"])


@pytest.mark.parametrize("knobs", [5, "16", [2, 3]])
def test_a_task_section_that_is_not_a_mapping_is_one_value_error_naming_it(knobs):
    """``tiny.task.search=5`` (a value where the task's knobs belong) is a ValueError naming the key, which the
    backend's config check turns into one ``error:`` line; from a mutation hunt: without that check it was a
    TypeError from deeper down (``set(5)``), which the check does not catch."""
    from arctl.backends.tiny.tasks import toy_task

    with pytest.raises(ValueError, match=r"tiny\.task\.search must hold the 'search' task's knobs"):
        toy_task({"name": "search", "search": knobs})
