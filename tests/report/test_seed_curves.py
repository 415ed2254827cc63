"""all_seed_curves (one pass over the history) against a per-(metric, arm) pivot_table loop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.report.stats import mean_ci95
from arctl.report.training_curves import all_seed_curves


def _reference(history, metric, arm):
    sub = history[(history["metric"] == metric) & (history["arm"] == arm)]
    if not len(sub):
        return None
    wide = sub.pivot_table(index="step", columns="run_id", values="value", aggfunc="last", observed=True)
    mean, ci, n = mean_ci95(wide.to_numpy(), axis=1)
    return wide.index.to_numpy(), mean, ci, n


@st.composite
def _histories(draw):
    rnd = draw(st.randoms(use_true_random=False))
    rows = []
    for r in range(draw(st.integers(1, 7))):
        arm = rnd.choice(["grpo", "ar-base", "ar-uniform"])
        for metric in rnd.sample(["eval/a/anytime_acc", "eval/a/final_acc", "eval/b/think_len"], rnd.randint(1, 3)):
            for step in sorted(rnd.sample(range(0, 60, 5), rnd.randint(1, 8))):
                rows.append((f"run{r}", arm, "exp", r, step, metric, rnd.uniform(-1, 1)))
    h = pd.DataFrame(rows, columns=["run_id", "arm", "experiment", "seed", "step", "metric", "value"])
    for c in ("run_id", "arm", "experiment", "metric"):
        h[c] = h[c].astype("category")
    return h.sample(frac=1.0, random_state=rnd.randrange(2**31)).reset_index(drop=True)  # any row order


@settings(max_examples=100, deadline=None)
@given(_histories())
def test_all_seed_curves_equal_the_pivot_table_loop(history):
    metrics = list(history["metric"].cat.categories)
    got = all_seed_curves(history, metrics)
    for metric in metrics:
        for arm in history["arm"].cat.categories:
            ref = _reference(history, metric, arm)
            if ref is None:
                assert (metric, arm) not in got
                continue
            for a, b in zip(got[(metric, arm)], ref):
                np.testing.assert_array_equal(a, b)


def test_hand_worked_two_seeds():
    h = pd.DataFrame({
        "run_id": ["r0", "r0", "r1", "r1"], "arm": ["grpo"] * 4, "experiment": ["e"] * 4, "seed": [0, 0, 1, 1],
        "step": [0, 10, 0, 10], "metric": ["m"] * 4, "value": [0.2, 0.4, 0.4, 0.8],
    }).astype({"run_id": "category", "arm": "category", "experiment": "category", "metric": "category"})
    steps, mean, ci, n = all_seed_curves(h, ["m"])[("m", "grpo")]
    np.testing.assert_array_equal(steps, [0, 10])
    np.testing.assert_allclose(mean, [0.3, 0.6])
    # s = |a - b| / sqrt(2); half-width = t_{0.975,1} * s / sqrt(2) = t * |a - b| / 2, t = tan(0.475 pi) = 12.7062 (Cauchy)
    t = math.tan(0.475 * math.pi)
    np.testing.assert_allclose(ci, [t * 0.1, t * 0.2])
    np.testing.assert_array_equal(n, [2, 2])
