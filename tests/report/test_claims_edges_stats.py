"""The claims report's edges (from the hunt "stats"): its JSON is JSON where a seed has NaN (claims.json and every
``--json``), with each arm's own number kept beside a missing difference; a precondition "at the start of training"
reads only an evaluation at step 0; claim 8's bound tolerates rounding."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.claims import (
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    Claim,
    ClaimsSpec,
    RunView,
    Stat,
    check_claims,
    run_views,
)
from arctl.report.claims import Test as Check  # (as Test, pytest would try to collect it)

runner = CliRunner()
STATS = {
    "anytime": Stat("anytime", "final", key="eval/{dataset}/grid_anytime_acc", label="anytime"),
    "corr": Stat("corr", "band", key="eval/{dataset}/corr_v1@{budget}", band="high", fraction=0.5),
}


def strict(text: str):
    """``text`` parsed as RFC 8259 JSON: a bare NaN / Infinity token (what node's JSON.parse refuses) raises."""
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def no_command(arm: str, seeds=None) -> str:
    return f"arctl sweep paper  # {arm} {seeds}"


def spec(tests, pre=()) -> ClaimsSpec:
    return ClaimsSpec(Path("claims.yaml"), ("paper",), STATS, (Claim("1", "t", "", tuple(tests), tuple(pre)),))


# ---------------------------------------------------------------------------------------------
# 1. JSON: a non-finite number is null
def test_json_text_writes_a_non_finite_number_as_null_and_numpy_scalars_as_numbers():
    from arctl.config.json_text import json_text

    data = {"nan": float("nan"), "inf": [float("inf"), -math.inf, 1.5], "np": (np.float32("nan"), np.float64(0.25)),
            "int": np.int64(3), "nested": {"x": {"y": float("nan")}}, "path": Path("a/b"), "flag": True, "none": None}
    assert strict(json_text(data, indent=1)) == {"nan": None, "inf": [None, None, 1.5], "np": [None, 0.25], "int": 3,
                                                 "nested": {"x": {"y": None}}, "path": "a/b", "flag": True, "none": None}
    assert strict(json_text({"s": "é"})) == {"s": "é"} and json_text({"s": "é"}).isascii()  # ASCII only, as before


def test_print_json_writes_json_that_a_strict_parser_reads(capsys):
    """Every ``--json`` goes through print_json: a NaN (a diverged run's metric) was a bare ``NaN`` token."""
    from arctl.cli.common import print_json

    print_json({"value": float("nan"), "values": [1.0, float("inf")], "when": Path("x")})
    out = capsys.readouterr().out
    assert strict(out) == {"value": None, "values": [1.0, None], "when": "x"} and out.endswith("}\n")


def _view(arm: str, seed: int, anytime: float) -> RunView:
    return RunView(f"exp_{arm}_s{seed}", "exp", arm, seed, {"eval/toy/grid_anytime_acc": anytime}, {}, 4, 4)


def test_a_comparison_keeps_each_arms_own_number_where_the_other_arms_is_nan():
    """A diverged seed (NaN) beside a finite one: the difference is missing, the finite arm's number is shown (it
    was NaN too: the per-seed tables showed GRPO as "–" at a seed where its run has a value)."""
    runs = [_view("grpo", s, 0.40 + 0.01 * s) for s in range(3)]
    runs += [_view("ar", s, v) for s, v in enumerate([0.45, 0.47, float("nan")])]
    (result,) = check_claims(spec([Check("compare", a="ar", b="grpo", stat="anytime")]), runs, no_command)
    (t,) = result.tests
    assert math.isnan(t.per_seed[2]["a"]) and t.per_seed[2]["b"] == pytest.approx(0.42) and math.isnan(t.per_seed[2]["value"])
    assert t.per_seed[1] == {"a": 0.47, "b": pytest.approx(0.41), "value": pytest.approx(0.06)}
    # the note says the seed was left out (from the hunt: an inconclusive test's Holm note replaced that line)
    assert t.n == 2 and "seed(s) 2 left out: a run of theirs has no finite value" in t.note


def test_claims_json_and_report_json_are_json_where_a_seed_logged_nan(tmp_path, monkeypatch):
    """End to end on real offline W&B runs: AR-linear's seed 2 logs NaN anytime accuracy at its final evaluation
    (a diverged run). ``--json`` and claims.json both parse strictly, the NaN is null and GRPO's number is there."""
    import os

    import wandb
    import wandb_workspace as ws_fixture  # tests/support/wandb_workspace.py

    real = ws_fixture.grid_anytime_acc
    monkeypatch.setattr(ws_fixture, "grid_anytime_acc", lambda arm, seed, ds, step: float("nan")
                        if (arm, seed) == ("ar-linear", 2) else real(arm, seed, ds, step))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    ws = tmp_path / "ws"
    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-linear", "ar-linear")):
        for seed in range(3):
            ws_fixture._write_run(ws, experiment, arm, seed, list(range(ws_fixture.LAST_STEP + 1)))
    wandb.teardown()
    for run in (ws / "runs").iterdir():
        (run / "status.json").write_text(json.dumps({"state": "completed"}))
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", "--claims", "priors", "--scale", "tiny", "--workdir", str(ws), "--out", str(out),
                              "--json"], env={**os.environ})
    assert res.exit_code == 0, res.output
    for doc in (strict(res.stdout), strict((out / "claims.json").read_text())):
        tests = [t for c in doc["claims"] for t in c["tests"]]
        linear = next(t for t in tests if t["label"].startswith("AR-linear > GRPO: anytime"))
        assert linear["n"] == 2 and linear["per_seed"]["2"]["a"] is None and linear["per_seed"]["2"]["value"] is None
        grpo = real("grpo", 2, "aime24", 20), real("grpo", 2, "amc22", 20), real("grpo", 2, "math500", 20)
        assert linear["per_seed"]["2"]["b"] == pytest.approx(sum(grpo) / 3)


# ---------------------------------------------------------------------------------------------
# 2. the start of training is step 0
def _history(first_steps: dict[int, int]):
    """Runs of arm ar (seeds -> the step of their first evaluation), evaluated every 20 steps to 100: corr(V1, R)
    rises with training, -0.1 at step 0."""
    rows, table = [], []
    for seed, first in first_steps.items():
        rid = f"exp_ar_s{seed}"
        table.append({"run_id": rid, "seed": seed, "arm": "ar", "experiment": "exp", "state": "finished"})
        rows += [(rid, st, "train/loss", 1.0) for st in range(1, 101)]
        for st in range(first, 101, 20):
            rows += [(rid, st, f"eval/toy/corr_v1@{b}", -0.1 + 0.004 * st + 0.01 * seed) for b in (10, 20, 30, 40)]
            rows += [(rid, st, "eval/toy/grid_anytime_acc", 0.4 + 0.001 * st)]
    return pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"]), pd.DataFrame(table)


def test_a_precondition_reads_only_an_evaluation_at_step_0():
    """verl with verl.val_before_train=false first evaluates at trainer.test_freq (20): that is the trained model's
    number, and the precondition read it as the start of training. Now such seeds are unmeasured, named with the step
    and the setting that evaluates at step 0; the claim is not testable here ("cannot be checked")."""
    views = run_views(*_history({0: 20, 1: 20, 2: 20}))
    pre = Check("sign", arms=("ar",), stat="corr", direction="less")  # corr at step 20 is -0.02..0: it would "hold"
    (result,) = check_claims(spec([Check("sign", arms=("ar",), stat="anytime")], [pre]), views, no_command)
    precondition, test = result.tests
    assert precondition.n == 0 and precondition.mean is None and precondition.per_seed == {}
    assert precondition.note.startswith("seed(s) 0-2 left out: their first evaluation is at step 20, after training "
                                        "began, not at its start")
    assert "verl.val_before_train=true" in precondition.note and "trainer.test_freq > 0" in precondition.note
    assert result.verdict == NOT_TESTABLE and "cannot be checked: seed(s) 0-2 left out" in test.note
    assert {v.first_step for v in views} == {20}


def test_a_seed_first_evaluated_late_is_named_beside_the_seeds_measured_at_step_0():
    views = run_views(*_history({0: 0, 1: 0, 2: 40}))
    pre = Check("sign", arms=("ar",), stat="corr", direction="less")
    (result,) = check_claims(spec([Check("sign", arms=("ar",), stat="anytime")], [pre]), views, no_command)
    precondition = result.tests[0]
    assert sorted(precondition.per_seed) == [0, 1] and precondition.mean == pytest.approx(-0.095)
    assert "measured -0.095 over 2 seed(s)" in precondition.note
    assert "; seed(s) 2 left out: their first evaluation is at step 40, after training began" in precondition.note
    assert {v.seed: v.first_step for v in views} == {0: 0, 1: 0, 2: 40}


# ---------------------------------------------------------------------------------------------
# 3. the bound tolerates rounding
def _bound_run(seed: int, acc: list[float]) -> RunView:
    """One evaluation at step 100 with the 32-budget grid's accuracies ``acc``: J_anytime logged as sum(acc) / m,
    as track.metrics_schema's anytime_eval_metrics does, J the accuracy at the largest budget."""
    vals = {"eval/aime24/grid_anytime_acc": sum(acc) / len(acc), "eval/aime24/final_acc": acc[-1]}
    return RunView(f"exp_ar_s{seed}", "exp", "ar", seed, {}, {100: vals}, None, len(acc))


def test_the_bound_counts_a_rounding_difference_as_no_violation():
    """AIME's 30 problems at 3/30 on every one of 32 budgets (a flat curve): sum / 32 is an ulp above 3/30 itself.
    The bound held in fact and was said to fail ("Check first: claim 8 ... fails")."""
    flat = [3 / 30] * 32
    assert sum(flat) / 32 > flat[-1]  # the rounding this is about
    bound = Check("bound", arms=("ar",))
    (result,) = check_claims(spec([bound]), [_bound_run(0, flat)], no_command)
    assert result.verdict == HOLDS and result.tests[0].note.startswith("1 evaluations checked, 0 violate it")
    # a real violation, however small beside the numbers, still fails and its margin is printed with its digits
    dipped = [0.5] * 31 + [0.5 - 1e-6]
    (result,) = check_claims(spec([bound]), [_bound_run(0, dipped)], no_command)
    assert result.verdict == FAILS and re.search(r"1 violate it; smallest J - J_anytime = -9\.68\de-07,", result.tests[0].note)
