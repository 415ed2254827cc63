"""`arctl sweep` says where its grid, its overrides or the command line make differently named arms one run, and
where the sweep replaces a value an arm writes itself; `arctl run` and `arctl sweep` say where an experiment's arms
are written alike. From a hunt: a sweep over `my-lam` (arms lam=0.5 and lam=0.9) with `grid: {thinking.lam: [0.3]}`
trained the lam9 arm at 0.3 under its own name (the same numbers twice, the figure labelling it lam9) without a word,
where `arctl run my-lam thinking.lam=0.3` said so; two arms identical in the spec were trained twice silently."""

from __future__ import annotations

import json

import pytest
from bad_input import launch_args  # tests/support/bad_input.py

LAMS = ("description: x\nseeds: [0, 1]\narms:\n  lo: [algo=anytime, prior=uniform, thinking.lam=0.5]\n"
        "  hi: [algo=anytime, prior=uniform, thinking.lam=0.9]\n  grpo: [algo=grpo, prior=base]\n")
ONE_RUN = ("they are one run (seeds 0, 1), each launched under its own name with the same numbers")


def _notes(result) -> list[str]:
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    return [" ".join(line.split()) for line in result.err.replace("\nnote:", "\n\x00note:").split("\x00")
            if line.strip().startswith("note:")]


@pytest.fixture
def lams(sandbox):
    (sandbox.specs / "experiments" / "lams.yaml").write_text(LAMS)
    return sandbox


@pytest.mark.parametrize(("sweep", "args", "cause", "replaced"), [
    ("experiments: [lams]\ngrid: {thinking.lam: [0.3]}\n", [], "thinking.lam=0.3 in the sweep's grid",
     "the sweep's grid over thinking.lam replaces lams/lo's thinking.lam=0.5, lams/hi's thinking.lam=0.9: every "
     "cell of those arms takes the sweep's value"),
    ("experiments: [lams]\noverrides: [thinking.lam=0.3]\n", [], "thinking.lam=0.3 in the sweep's overrides",
     "the sweep's override thinking.lam=0.3 replaces lams/lo's thinking.lam=0.5, lams/hi's thinking.lam=0.9: every "
     "cell of those arms takes the sweep's value"),
    ("experiments: [lams]\n", ["thinking.lam=0.3"], "thinking.lam=0.3 on the command line", None),
], ids=["grid", "sweep-overrides", "command-line"])
def test_what_makes_the_arms_one_run_is_a_note(lams, sweep, args, cause, replaced):
    (lams.specs / "sweeps" / "t.yaml").write_text(sweep)
    notes = _notes(lams.run("sweep", "t", *args, "--dry-run", *launch_args(lams)))
    # one line for both seeds
    assert f"note: {cause} sets what the arms lams/lo, lams/hi differ in: {ONE_RUN}" in notes, notes
    assert (f"note: {replaced}" in notes) if replaced else not any("replaces lams/" in n for n in notes), notes
    assert len(notes) == len(set(notes)) == 1 + bool(replaced), notes
    result = lams.run("sweep", "t", *args, "--dry-run", "--json", *launch_args(lams))
    assert json.loads(result.out) and "note:" not in result.out  # notes on stderr, the JSON document alone on stdout
    assert f"note: {cause} sets" in " ".join(result.err.split())


def test_a_grid_point_per_note_and_none_where_the_arms_stay_apart(lams):
    (lams.specs / "sweeps" / "t.yaml").write_text("experiments: [lams]\nseeds: [0]\ngrid: {thinking.lam: [0.3, 0.5]}\n")
    notes = _notes(lams.run("sweep", "t", "--dry-run", *launch_args(lams)))
    assert [n for n in notes if "differ in" in n] == [
        f"note: thinking.lam={v} in the sweep's grid sets what the arms lams/lo, lams/hi differ in: they are one run "
        "(seed 0), each launched under its own name with the same numbers" for v in ("0.3", "0.5")], notes
    # lo's own 0.5 is a point of the grid (run, no note); hi's 0.9 is never run
    assert ("note: the sweep's grid over thinking.lam replaces lams/hi's thinking.lam=0.9: every cell of that arm "
            "takes the sweep's value") in notes and len(notes) == 3, notes
    (lams.specs / "sweeps" / "t.yaml").write_text("experiments: [lams]\ngrid: {optim.lr: [1e-6]}\n")
    assert _notes(lams.run("sweep", "t", "--dry-run", *launch_args(lams))) == []
    assert _notes(lams.run("run", "lams", "--dry-run", *launch_args(lams))) == []


def test_arms_written_alike_are_a_note_from_run_and_sweep(sandbox):
    (sandbox.specs / "experiments" / "twins.yaml").write_text(
        "description: x\nseeds: [0, 1]\narms:\n  a: &a [algo=anytime, prior=uniform, thinking.lam=0.5]\n  b: *a\n"
        "  c: [algo=anytime, thinking.lam=0.5, prior=uniform]\n  grpo: [algo=grpo, prior=base]\n")
    (sandbox.specs / "sweeps" / "tw.yaml").write_text("experiments: [twins]\n")
    note = ("note: the arms twins/a, twins/b, twins/c are written alike in experiment twins (the same settings): "
            f"{ONE_RUN}")
    assert _notes(sandbox.run("run", "twins", "--dry-run", *launch_args(sandbox))) == [note]
    assert _notes(sandbox.run("sweep", "tw", "--dry-run", *launch_args(sandbox))) == [note]
    (sandbox.specs / "sweeps" / "tw.yaml").write_text("experiments: [twins]\nshare_arms: true\n")
    assert _notes(sandbox.run("sweep", "tw", "--dry-run", *launch_args(sandbox))) == [
        note.replace("each launched under its own name with the same numbers", "launched once (share_arms)")]


def test_one_arm_in_several_experiments_is_no_note(sandbox):
    """The shipped ablations sweep lists GRPO in each of its experiments on purpose (each a comparison of its own)."""
    assert _notes(sandbox.run("sweep", "ablations", "--dry-run", "--seeds", "0", *launch_args(sandbox))) == []
