"""`arctl run` says where the command line makes several arms one run: from a hunt, `arctl run r1-7b --scale paper
prior=uniform` started three identical 7B runs (AR-base, AR-linear, AR-uniform differing in their names only), and
`arctl run ablation-vr algo=grpo` three GRPO runs, without a word (a sweep says so of its grid points)."""

from __future__ import annotations

from bad_input import launch_args  # tests/support/bad_input.py

from arctl.compose import resolve_experiment
from arctl.launch.cells import same_arms_notes
from arctl.launch.launcher import items_from_resolved


def _notes(name: str, overrides: list[str], **kw) -> list[str]:
    return same_arms_notes(items_from_resolved(resolve_experiment(name, overrides, **kw), launching=False), overrides)


def test_a_group_choice_that_makes_arms_one_run_is_a_note():
    assert _notes("ablation-vr", ["algo=grpo"], scale="tiny", seeds=[0, 1]) == [
        "algo=grpo on the command line sets what the arms ablation-vr/grpo, ablation-vr/grpo-vr, "
        "ablation-vr/grpo-vr-decouple differ in: they are one run (seeds 0, 1), each launched under its own name with "
        "the same numbers"]
    (note,) = _notes("main-ar-uniform", [], scale="tiny") or ["none"]
    assert note == "none"  # one arm, no override


def test_no_note_where_the_arms_stay_different():
    assert _notes("ablation-vr", [], scale="tiny") == []
    assert _notes("ablation-vr", ["thinking.lam=0.7"], scale="tiny") == []


def test_the_prior_chosen_for_every_anytime_arm(sandbox):
    (sandbox.specs / "experiments" / "priors.yaml").write_text(
        "description: x\nseeds: [0]\narms:\n  base: [prior=base]\n  linear: [prior=linear]\n  uniform: [prior=uniform]\n"
        "  grpo: [algo=grpo, prior=base]\n")
    (note,) = _notes("priors", ["prior=uniform"], scale="tiny")
    assert note.startswith("prior=uniform on the command line sets what the arms priors/base, priors/linear, "
                           "priors/uniform differ in: they are one run"), note
    result = sandbox.run("run", "priors", "prior=uniform", "--dry-run", *launch_args(sandbox))
    assert result.code == 0 and result.crash is None, result.err
    err = " ".join(result.err.split())
    assert f"note: {note}" in err
    assert "note: prior=uniform is not read by priors/grpo: it is left as it was" in err  # one budget
    result = sandbox.run("run", "priors", "--dry-run", *launch_args(sandbox))
    assert result.code == 0 and "note:" not in result.err, result.err
