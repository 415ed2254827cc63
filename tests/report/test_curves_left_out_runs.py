"""A training curve's left-out steps name the runs behind them, with how far each got. From a hunt on a
workspace read mid-sweep: "AR-base: 3 step(s) (60, 80, 100) that not every run of the arm logged are left out of
its mean curve (...)" while seed 2 had failed at step 59, and neither the warning, the footnote ("AR-base ×3")
nor runs.json said so."""

from __future__ import annotations

import json
import math
import os

import pytest
from wandb_workspace import (
    EVAL_EVERY,
    LAST_STEP,
    TRAIN_BUDGETS,
    TRAIN_DATASETS,
    _config,
    eval_row,
    run_id,
    train_row,
)

FAILED = run_id("main-ar-base", "ar-base", 2)  # failed (exit code 1) after step 13: last evaluation at step 10
PREEMPTED = run_id("main-ar-linear", "ar-linear", 1)  # closed cleanly after step 13; its job says preempted
NAN = run_id("main-grpo", "grpo", 1)  # logged NaN in its evaluation at the last step
STOPPED_AT = 13


def _run(root, experiment, arm, seed, last=LAST_STEP, *, exit_code=0, nan_at=None):
    """A real offline W&B run of ``trainer.total_steps`` LAST_STEP that logged steps 0..``last``."""
    import yaml

    from arctl.track.writer import open_run

    run_dir = root / "runs" / run_id(experiment, arm, seed)
    run_dir.mkdir(parents=True)
    cfg = {**_config(experiment, arm, seed, "arctl-test"), "trainer": {"total_steps": LAST_STEP}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = open_run(cfg, run_dir)
    for step in range(last + 1):
        row = {"trainer/global_step": step, **train_row(arm, seed, step)}
        if step % EVAL_EVERY == 0:
            evals = eval_row(arm, seed, step, TRAIN_DATASETS, TRAIN_BUDGETS)
            row.update({k: math.nan for k in evals} if step == nan_at else evals)
        run.log(row)
    run.finish(exit_code=exit_code)
    return run_dir


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    root = tmp_path_factory.mktemp("left-out") / "ws"
    for seed in (0, 1):
        _run(root, "main-grpo", "grpo", seed, nan_at=LAST_STEP if seed == 1 else None)
        _run(root, "main-ar-linear", "ar-linear", seed, STOPPED_AT if seed == 1 else LAST_STEP)
    for seed in (0, 1, 2):
        _run(root, "main-ar-base", "ar-base", seed, *((STOPPED_AT,) if seed == 2 else ()), exit_code=int(seed == 2))
    wandb.teardown()
    (root / "runs" / PREEMPTED / "status.json").write_text(json.dumps({"state": "preempted"}))
    return root


@pytest.fixture(scope="module")
def figure(ws, tmp_path_factory):
    from arctl.report.render import render_figure

    out = tmp_path_factory.mktemp("figure")
    return render_figure("main_training", out_dir=out, workdir=ws, progress=False, processes=1), out


def _left_out(arm: str, named: str) -> str:
    return (f"{arm}: 1 step(s) ({LAST_STEP}) that not every run of the arm logged are left out of its mean curve "
            f"(the run(s) without a value there: {named}; the CSV has them with their n)")


def test_the_left_out_steps_name_each_run_behind_them_with_how_far_it_got(figure):
    res, _ = figure
    assert _left_out("AR-base", f"{FAILED} (failed at step {STOPPED_AT} of {LAST_STEP}; last evaluation at step 10)") \
        in res.warnings
    # its W&B file closed cleanly short of its last step: its job's word says why
    assert _left_out("AR-linear", f"{PREEMPTED} (its job says preempted at step {STOPPED_AT} of {LAST_STEP}; "
                                  "last evaluation at step 10)") in res.warnings
    # a run that finished and logged NaN there is named as such
    assert _left_out("GRPO", f"{NAN} (logged NaN or an infinity at step {LAST_STEP})") in res.warnings


def test_runs_json_and_json_say_each_runs_state_and_last_step(figure):
    res, out = figure
    written = json.loads((out / "main_training.runs.json").read_text())["runs"]
    assert written == res.runs
    got = {r["run_id"]: (r["state"], r["last_step"]) for r in written}
    assert got.pop(FAILED) == ("failed", STOPPED_AT)
    assert got.pop(PREEMPTED) == ("its job says preempted", STOPPED_AT)
    assert got and set(got.values()) == {("finished", LAST_STEP)}  # the NaN run finished too
    assert len(got) == 5


def test_the_footnote_does_not_hide_a_run_that_did_not_finish(figure):
    res, _ = figure

    def bare(text: str) -> str:  # the footnote is wrapped to the figure's width, at a space or after a hyphen
        return "".join(text.split())

    note = bare(res.figure._supxlabel.get_text())
    assert bare(f"AR-base ×3 (main-ar-base; seed 2: failed at step {STOPPED_AT} of {LAST_STEP})") in note
    assert bare(f"AR-linear ×2 (main-ar-linear; seed 1: its job says preempted at step {STOPPED_AT} of {LAST_STEP})") \
        in note
    assert bare("GRPO ×2 (main-grpo),") in note  # the run that logged NaN finished: said in the warning, not here
