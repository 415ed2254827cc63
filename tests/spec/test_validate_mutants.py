"""Validation tests from a mutation hunt of arctl/compose/validate.py and arctl/compose/resolvers.py: each one the
good or bad config a rule was not yet tested on, where a mutant of the rule still passed the suite (a valid spec
refused, a bad one accepted silently, an error line that names the wrong key). Through ``arctl show``, what a user
runs before a launch: a refusal is one ``error:`` line, exit code 2, nothing written (``sandbox.check_refused``)."""

from __future__ import annotations

import json

import pytest


def _shown(sandbox, experiment: str, *overrides: str) -> list[dict]:
    """The configs ``arctl show EXPERIMENT --scale tiny --json OVERRIDES`` prints (it must succeed)."""
    res = sandbox.run("show", experiment, "--scale", "tiny", "--json", *overrides)
    assert res.code == 0 and res.crash is None, res.err + (res.crash or "")
    return [row["config"] for row in json.loads(res.out)]


def test_a_custom_prior_may_give_a_budget_probability_zero(sandbox):
    """A custom prior's probabilities are each >= 0 (the schema's range): a zero leaves a budget out of the prior.
    Only a negative one is refused (the refused case was the only one tested: a rule that refused 0 too passed)."""
    cfg = _shown(sandbox, "main-ar-uniform", "thinking.prior=custom", "thinking.probs=[0.5,0.5,0,0]")[0]
    assert cfg["thinking"]["prior"] == "custom" and cfg["thinking"]["probs"] == [0.5, 0.5, 0, 0]


@pytest.mark.parametrize("line", [
    'wandb login --relogin --host https://wandb.example.com "$WANDB_API_KEY"',
    "wandb login --host https://wandb.example.com",
])
def test_wandb_login_to_a_server_of_ones_own_is_no_written_key(sandbox, line):
    """``wandb login --host URL`` logs in to a W&B server of one's own: the URL is the option's value, not the key
    (the key comes from the shell). A rule that took the first argument after the options for the key refused the
    line, as a W&B key written out."""
    cfg = _shown(sandbox, "main-grpo", f"cluster.setup=['{line}']")[0]
    assert cfg["cluster"]["setup"] == [line]


@pytest.mark.parametrize("probs, total", [("[0.25,0.25,0.25,0.249]", "0.999"), ("[0.25,0.25,0.25,0.251]", "1.001")])
def test_a_custom_prior_a_thousandth_off_one_is_refused_naming_its_probabilities(sandbox, probs, total):
    """A custom prior's probabilities must sum to 1 (within 1e-6, a rounding's error): a prior 0.001 off is a
    mistake said in one line naming thinking.probs, not a run whose sampler weighs the budgets otherwise than
    written (the tests had a sum 0.05 off only: a tolerance of 1e-2 passed; and matched the message, not the key)."""
    err = sandbox.check_refused("show", "main-ar-uniform", "--scale", "tiny", "thinking.prior=custom",
                                f"thinking.probs={probs}").err
    assert f": thinking.probs: thinking.probs=[0.25, 0.25, 0.25, 0.{probs[-4:-1]}] sums to {total}, not 1" in err, err


def test_a_preemption_warning_as_long_as_the_time_limit_is_refused(sandbox):
    """SLURM's warning before the time limit must come after the job starts: cluster.preempt_warning_s below
    cluster.time_min's seconds. A warning of the whole limit (60 s of a 1-minute job) is refused in one line naming
    the key; 59 s is accepted (the tests had 0 only: a rule that let the warning equal the limit passed)."""
    err = sandbox.check_refused("show", "main-grpo", "--scale", "tiny", "cluster.time_min=1",
                                "cluster.preempt_warning_s=60").err
    assert ": cluster.preempt_warning_s: cluster.preempt_warning_s=60 is invalid" in err and "below the time" in err, err
    cfg = _shown(sandbox, "main-grpo", "cluster.time_min=1", "cluster.preempt_warning_s=59")[0]
    assert (cfg["cluster"]["time_min"], cfg["cluster"]["preempt_warning_s"]) == (1, 59)


def test_thinkprune_limits_may_repeat_a_limit(sandbox):
    """ThinkPrune's limits are non-increasing (each round prunes as far or further): a round that keeps the limit
    of the one before ([96,96,48]) is accepted; only a limit above the one before is refused (the tests had the
    refused case only: a rule that refused a repeated limit too passed)."""
    cfg = _shown(sandbox, "baselines-thinkprune", "--arm", "thinkprune-r1",
                 "budget_control.thinkprune_limits=[96,96,48]")[0]
    assert cfg["budget_control"]["thinkprune_limits"] == [96, 96, 48]
    err = sandbox.check_refused("show", "baselines-thinkprune", "--scale", "tiny", "--arm", "thinkprune-r1",
                                "budget_control.thinkprune_limits=[96,120,48]").err
    assert ": budget_control.thinkprune_limits: budget_control.thinkprune_limits=[96, 120, 48] must be a non-empty, " \
           "non-increasing list" in err, err


def test_a_setup_line_writing_out_a_secret_of_the_shortest_length_is_refused(sandbox, monkeypatch):
    """A literal of 8 characters (SECRET_MIN_CHARS, the shortest value taken for a secret) given to a secret's name
    in cluster.setup is written out: refused in one line that names the variable and not its value. One character
    shorter is a flag's value and composes (the tests had 31-character literals only: a rule that took 8 for a
    flag passed)."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)  # only the line's spelling tells
    err = sandbox.check_refused("show", "main-grpo", "cluster.setup=['export GITHUB_TOKEN=ghp_abcd']").err
    assert "cluster.setup[0] writes out GITHUB_TOKEN (not shown)" in err and "ghp_abcd" not in err, err
    cfg = _shown(sandbox, "main-grpo", "cluster.setup=['export GITHUB_TOKEN=ghp_abc']")[0]
    assert cfg["cluster"]["setup"] == ["export GITHUB_TOKEN=ghp_abc"]


def test_a_part_of_the_largest_budget_is_rounded_to_the_nearest_token(sandbox):
    """The scale's settings that are parts of its largest budget b_m (``arctl.part``) are rounded to the nearest
    whole token, not cut down: with scale.budgets=[10,20,30], Elastic's t = s = b_m/8 = 3.75 is 4 and ThinkPrune's
    last limit b_m/4 = 7.5 is 8 (the tests had parts that are whole numbers only: truncation passed)."""
    elastic = _shown(sandbox, "baselines-elastic", "--arm", "elastic", "scale.budgets=[10,20,30]")[0]
    assert (elastic["thinking"]["budgets"], elastic["summary"]["max_tokens"]) == ([4], 4)
    pruned = _shown(sandbox, "baselines-thinkprune", "--arm", "thinkprune-r1", "scale.budgets=[10,20,30]")[0]
    assert pruned["budget_control"]["thinkprune_limits"] == [15, 11, 8]
