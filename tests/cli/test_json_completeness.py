"""``--json`` of run/sweep/resume says what the text says: a skipped run's experiment, arm and seed (the text's
skip line names them), and no figure to draw after a run waited for did not complete (the text leaves its
"draw the figure" line out).

From a hunt: skipped entries held only run_id and reason; after a failed run, --json still listed "figures".
"""

from __future__ import annotations

import json

import pytest

EXP = ("description: two quick runs\nfigure: main_training\nseeds: [0]\n"
       "overrides: [trainer.total_steps=2, wandb.mode=disabled]\n"
       "arms:\n  a: [algo=grpo, prior=base]\n  b: [algo=grpo-vr, prior=base]\n")


@pytest.fixture
def box(sandbox, monkeypatch):
    """The sandbox with the counting test backend (a debug run takes a second) and experiment ``jx``."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    (sandbox.specs / "experiments" / "jx.yaml").write_text(EXP)
    return sandbox


def launch(box, *args: str):
    return box.run("run", "jx", "--executor", "debug", "--workdir", str(box.ws), *args)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_skipped_run_s_entry_names_its_experiment_arm_and_seed(box, command):
    (box.specs / "sweeps" / "jxs.yaml").write_text("description: one\nexperiments: [jx]\nseeds: [0]\n")
    target = "jx" if command == "run" else "jxs"
    first = box.run(command, target, "--executor", "debug", "--workdir", str(box.ws), "--json")
    assert first.code == 0, first.err
    again = box.run(command, target, "--executor", "debug", "--workdir", str(box.ws), "--json")
    assert again.code == 0, again.err
    skipped = json.loads(again.out)["skipped"]
    assert sorted((s["experiment"], s["arm"], s["seed"]) for s in skipped) == [("jx", "a", 0), ("jx", "b", 0)]
    text = box.run(command, target, "--executor", "debug", "--workdir", str(box.ws)).out
    for s in skipped:  # what the text's skip line says of it
        assert f"skip    {s['run_id']}  ({s['experiment']}/{s['arm']}/s{s['seed']})" in text, text


def test_no_figure_is_listed_after_a_run_waited_for_did_not_complete(box, monkeypatch):
    done = launch(box, "--json", "--arm", "a")
    assert done.code == 0 and json.loads(done.out)["figures"], done.out  # completed: the figure is there
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "b")
    failed = launch(box, "--json", "--arm", "b")
    assert failed.code == 1 and failed.crash is None, failed.err + (failed.crash or "")
    doc = json.loads(failed.out)
    assert [r["state"] for r in doc["submitted"]] == ["FAILED"]
    assert doc["figures"] == [], doc["figures"]
    text = launch(box, "--arm", "b", "--force")
    assert text.code == 1 and "the figure" not in text.out, text.out
