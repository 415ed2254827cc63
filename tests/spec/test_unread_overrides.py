"""A command-line setting that only some runs of a launch read: the others are resolved without it (their config
and run id as if it had not been typed), and the CLI says which (a note). From a hunt: `arctl run ablation-dense
reward.alpha=0.3` gave GRPO and GRPO-dense, which have no length penalty, new run ids: they trained again with the
same numbers. And the scale's keys that are only another key's default are refused on the command line."""

from __future__ import annotations

import json

import pytest
from bad_input import launch_args  # tests/support/bad_input.py

from arctl.compose import SpecError, resolve_experiment
from arctl.compose.resolve import resolve_sweep, scale_defaults, sweep_unread_notes, unread_notes
from arctl.launch.run_id import make_run_id


def _ids(runs) -> dict[str, str]:
    return {r.arm: make_run_id(r.config) for r in runs}


def test_arms_that_do_not_read_a_command_line_setting_keep_their_run():
    plain = _ids(resolve_experiment("ablation-dense", scale="tiny"))
    runs = resolve_experiment("ablation-dense", ["reward.alpha=0.3"], scale="tiny")
    ids = _ids(runs)
    assert ids["grpo"] == plain["grpo"] and ids["grpo-dense"] == plain["grpo-dense"]  # no length penalty: unread
    assert ids["grpo-lp-v1"] != plain["grpo-lp-v1"] and ids["grpo-lp-v2"] != plain["grpo-lp-v2"]
    alphas = {r.arm: r.config["reward"]["alpha"] for r in runs}
    assert alphas == {"grpo": 0.2, "grpo-dense": 0.2, "grpo-lp-v1": 0.3, "grpo-lp-v2": 0.3}
    assert {r.arm: r.user_overrides for r in runs}["grpo"] == []
    (note,) = unread_notes(runs, ["reward.alpha=0.3"])
    assert note.startswith("reward.alpha=0.3 is not read by ablation-dense/grpo, ablation-dense/grpo-dense: they "
                           "are left as they were"), note
    assert unread_notes(resolve_experiment("ablation-dense", scale="tiny"), []) == []


def test_one_arm_chosen_that_does_not_read_it_is_the_run_the_whole_launch_makes():
    plain = _ids(resolve_experiment("ablation-dense", scale="tiny", arms=["grpo"]))
    runs = resolve_experiment("ablation-dense", ["reward.alpha=0.3"], scale="tiny", arms=["grpo"])
    assert _ids(runs) == plain
    assert unread_notes(runs, ["reward.alpha=0.3"]) == [
        "reward.alpha=0.3 is not read by ablation-dense/grpo: it is left as it was, as if it had not been typed "
        "(the same config and run id)"]
    with pytest.raises(SpecError, match="reward.alpha=0.3 is read only by a length penalty"):
        resolve_experiment("main-grpo", ["reward.alpha=0.3"], scale="tiny")  # no arm of it reads it


def test_a_prior_chosen_on_the_command_line_leaves_the_one_budget_arm_as_it_was():
    plain = _ids(resolve_experiment("ablation-dense", scale="tiny", arms=["grpo"]))
    runs = resolve_experiment("ablation-dense", ["prior=uniform"], scale="tiny")
    assert _ids(runs)["grpo"] == plain["grpo"]
    assert {r.arm: r.config["thinking"]["prior"] for r in runs}["grpo-dense"] == "uniform"


def test_a_sweep_resolves_its_cells_that_do_not_read_it_without_it(sandbox):
    path = sandbox.specs / "sweeps" / "mine.yaml"
    path.write_text("description: x\nexperiments: [main-grpo, ablation-dense]\nseeds: [0]\n")
    plain = {(r.experiment, r.arm): make_run_id(r.config) for r in resolve_sweep("mine", scale="tiny")}
    runs = resolve_sweep("mine", ["reward.alpha=0.3"], scale="tiny")
    ids = {(r.experiment, r.arm): make_run_id(r.config) for r in runs}
    same = {k for k in ids if ids[k] == plain[k]}
    assert same == {("main-grpo", "grpo"), ("ablation-dense", "grpo"), ("ablation-dense", "grpo-dense")}
    (note,) = unread_notes(runs, ["reward.alpha=0.3"])
    assert "main-grpo/grpo, ablation-dense/grpo, ablation-dense/grpo-dense" in note
    result = sandbox.run("sweep", "mine", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and "is not read by" not in result.err, result.err
    result = sandbox.run("sweep", "mine", "reward.alpha=0.3", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and f"note: {note}" in " ".join(result.err.split()), result.err


@pytest.mark.parametrize("spec", ["grid:\n  reward.alpha: [0.1, 0.3]\n", "overrides: [reward.alpha=0.3]\n"])
def test_a_sweeps_own_setting_that_some_cells_do_not_read_leaves_them_one_run_each(sandbox, spec):
    """From a hunt: a sweep file's grid over reward.alpha beside arms without a length penalty gave GRPO and
    GRPO+dense a run id per value, each trained again with the same numbers (at paper scale, GPU hours per
    value); the command line's override was already left out of the arms that do not read it."""
    path = sandbox.specs / "sweeps" / "mine.yaml"
    path.write_text(f"description: x\nexperiments: [main-grpo, ablation-dense]\nseeds: [0]\n{spec}")
    plain = {(r.experiment, r.arm): make_run_id(r.config) for r in resolve_experiment("main-grpo", scale="tiny")
             + resolve_experiment("ablation-dense", scale="tiny", seeds=[0])}
    runs = resolve_sweep("mine", scale="tiny")
    unread = {("main-grpo", "grpo"), ("ablation-dense", "grpo"), ("ablation-dense", "grpo-dense")}
    ids: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        ids.setdefault((run.experiment, run.arm), set()).add(make_run_id(run.config))
        reads = (run.experiment, run.arm) not in unread
        assert (run.sweep_not_read == []) is reads, (run.name, run.sweep_not_read)
        assert run.config["reward"]["alpha"] == (0.2 if not reads else
                                                 float(run.sweep_overrides[-1].split("=")[1]))
    points = 2 if "grid" in spec else 1
    assert {k: len(v) for k, v in ids.items()} == {k: 1 if k in unread else points for k in plain}
    assert all(ids[k] == {plain[k]} for k in unread)  # the run a launch without the setting makes
    assert all(plain[k] not in ids[k] for k in plain if k not in unread)
    notes = sweep_unread_notes(runs)
    result = sandbox.run("sweep", "mine", "--dry-run", "--json", *launch_args(sandbox))
    said = " ".join(result.err.split())
    assert result.code == 0, result.err
    if "grid" in spec:  # the cells each value made one run of: one note of the grid points merged
        assert notes == [] and ("note: the sweep's grid points reward.alpha=0.1 / reward.alpha=0.3 are one run of "
                                "main-grpo/grpo/s0, ablation-dense/grpo/s0, ablation-dense/grpo-dense/s0, launched "
                                "once") in said, result.err
    else:  # one cell each, resolved without it
        assert notes == ["the sweep's reward.alpha=0.3 is not read by main-grpo/grpo, ablation-dense/grpo, "
                         "ablation-dense/grpo-dense: they are left as they were, as if it had not been written (the "
                         "config and run id of a launch without it)"]
        assert f"note: {notes[0]}" in said and "grid points" not in said, result.err
        from arctl.report.cells import cell_composer  # a report composes the cell as the launch made its run

        compose = cell_composer(["mine"])
        assert compose("main-grpo", "grpo", 0, "tiny")["reward.alpha"] == 0.2
        assert compose("ablation-dense", "grpo-lp-v1", 0, "tiny")["reward.alpha"] == 0.3
    planned = {r["run_id"] for r in json.loads(result.out)["runs"]}
    assert planned == set().union(*ids.values())
    assert sweep_unread_notes(resolve_sweep("mine", ["reward.length_penalty=v1"], scale="tiny")) == []


def test_the_run_an_arm_starts_from_is_resolved_as_a_launch_of_it_makes_it(sandbox):
    """The penalty arm reads reward.alpha, the arm it starts from does not: that run is the one a launch of its
    arm makes, whose id the penalty arm's depends on (trainer.init_run)."""
    from arctl.compose.resolve import resolve_init_from

    (sandbox.specs / "experiments" / "chain.yaml").write_text(
        "description: x\nseeds: [0]\narms:\n  a: [algo=grpo, prior=base]\n"
        "  b: [algo=grpo, prior=base, reward.length_penalty=v1, trainer.init_from=a]\n")
    (b,) = resolve_experiment("chain", ["reward.alpha=0.3"], scale="tiny", arms=["b"])
    assert b.config["reward"]["alpha"] == 0.3
    start = resolve_init_from(b)
    (a,) = resolve_experiment("chain", scale="tiny", arms=["a"])
    assert make_run_id(start.config) == make_run_id(a.config) and start.config["reward"]["alpha"] == 0.2


def test_an_arm_that_starts_from_one_reading_the_setting_keeps_it(sandbox):
    """From a review: arm b (no length penalty) starts from arm a (with one); a grid over reward.alpha made b start
    from a third run of a at the default alpha, launched once for every value, where each b starts from the a of
    its value; `arctl run chain reward.alpha=0.3` likewise trained a at 0.3 and at the default."""
    from arctl.compose.resolve import resolve_init_from

    (sandbox.specs / "experiments" / "chain.yaml").write_text(
        "description: x\nseeds: [0]\narms:\n  a: [algo=grpo, prior=base, reward.length_penalty=v1]\n"
        "  b: [algo=grpo, prior=base, trainer.init_from=a]\n")
    (sandbox.specs / "sweeps" / "chg.yaml").write_text(
        "description: x\nexperiments: [chain]\nseeds: [0]\ngrid: {reward.alpha: [0.1, 0.3]}\n")
    for runs, values in ((resolve_experiment("chain", ["reward.alpha=0.3"], scale="tiny"), [0.3]),
                         (resolve_sweep("chg", scale="tiny"), [0.1, 0.3])):
        starts = {make_run_id(r.config): r.config["reward"]["alpha"] for r in runs if r.arm == "a"}
        followers = [r for r in runs if r.arm == "b"]
        assert sorted(starts.values()) == values and len(followers) == len(values)
        assert sorted(starts[make_run_id(resolve_init_from(b).config)] for b in followers) == values
    result = sandbox.run("sweep", "chg", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0, result.err
    planned = json.loads(result.out)["runs"]
    assert sorted((r["arm"], r["config"]["reward"]["alpha"]) for r in planned) == [
        ("a", 0.1), ("a", 0.3), ("b", 0.1), ("b", 0.3)]
    assert "are one run of" not in result.err, result.err


def test_the_scales_keys_that_are_only_another_keys_default_are_refused_on_the_command_line(sandbox):
    defaults = scale_defaults()
    assert {k: defaults.get(k) for k in ("scale.rollout_n", "scale.preempt_warning_s", "scale.cpus_per_task")} == {
        "scale.rollout_n": "rollout.n", "scale.preempt_warning_s": "cluster.preempt_warning_s",
        "scale.cpus_per_task": "cluster.cpus_per_task"}
    # what _finalize derives other values from is the scale's own: the budgets (evaluation budgets, the Dr. GRPO
    # constant) and the summary cap (the Dr. GRPO constant, at a scale that derives it)
    assert "scale.budgets" not in defaults and "scale.summary_max_tokens" not in defaults
    for text, key in (("scale.rollout_n=16", "rollout.n"), ("scale.preempt_warning_s=120", "cluster.preempt_warning_s"),
                      ("scale.cpus_per_task=2", "cluster.cpus_per_task"),):
        with pytest.raises(SpecError) as info:
            resolve_experiment("main-grpo", [text], scale="tiny")
        assert str(info.value) == (f"command line: override {text!r}: {text.split('=')[0]} is {key}'s "
                                   f"default — set {key}"), str(info.value)
    err = sandbox.check_refused("run", "main-grpo", "scale.rollout_n=16", *launch_args(sandbox)).err
    assert "scale.rollout_n is rollout.n's default" in err
    assert resolve_experiment("main-grpo", ["rollout.n=16", "scale.budgets=[8,16,24,32]"], scale="tiny")


def test_show_says_what_run_says_of_a_setting_an_arm_does_not_read():
    """`arctl show` printed the arm's config without the setting and without a word, where `arctl run` said why
    (a note on stderr; --json's stdout stays the document)."""
    import json

    from typer.testing import CliRunner

    from arctl.cli.main import app

    res = CliRunner().invoke(app, ["show", "ablation-dense", "--scale", "tiny", "reward.alpha=0.3", "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)) == 4
    assert res.stderr.startswith("note: reward.alpha=0.3 is not read by ablation-dense/grpo, ablation-dense/grpo-dense:")
    plain = CliRunner().invoke(app, ["show", "ablation-dense", "--scale", "tiny"])
    assert plain.exit_code == 0 and "note:" not in plain.stderr
