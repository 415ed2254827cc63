"""A method's hooks and flags, checked where a run is composed (from a hunt of the extension points): a flag that
disagrees with the hooks a method overrides, a hook that fails or gives something a backend cannot use, a plugin's
setting that the chosen method does not read, a run whose plugin is gone, a plugin that prints at import. Each was
a run that trained something else under the method's name, or a job that failed on the cluster, or a misleading
line; each is now one error line before anything runs (or, for shaped rewards that are no numbers, in the job)."""

from __future__ import annotations

import json
import math
import sys
import textwrap

import pytest
from plugin_site import PLUGINS
from plugin_site import run_arctl as arctl

from arctl.algo.methods import control as bc
from arctl.algo.methods import registry
from arctl.algo.settings import BudgetControl
from arctl.compose.errors import SpecError

DRY = ("run", "ablation-vr", "--arm", "grpo", "--dry-run")


@pytest.fixture
def register(monkeypatch):
    """``register(method)``: ``method`` registered in this process for the test only."""
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    yield registry.register_method
    registry._GENERATION[0] += 1  # the schema is built again without them (a generation is never counted twice)


def _compose(name: str, *overrides: str, scale: str | None = None):
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("ablation-vr", [f"budget_control.method={name}", *overrides], scale=scale, seeds=[0],
                                arms=["grpo"])
    return run.config


def _refused(name: str, *needles: str, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(SpecError) as err:
        _compose(name, *overrides)
    text = str(err.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


def _method(name: str, base=registry.ControlMethod, **body):
    return type(name.title(), (base,), {"name": name, **body})()


def _target(self, control, key, max_budget):
    return max_budget // 2


def _shaped(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
    return rows


# ----------------------------------------------------------------------------------------- 1-2: flags and hooks
def test_a_question_target_without_writes_target_is_none_on_both_backends_and_refused(register):
    """The tiny backend read the flag (no target), verl called the hook (its target, then the default instruction
    raised NotImplementedError in the job): the facade both call now answers by the flag, and the mismatch is
    refused."""
    register(_method("forgot", question_target=_target))
    assert bc.question_target(BudgetControl(method="forgot"), "q", 64) is None
    _refused("forgot", "'forgot' overrides question_target but sets no writes_target = True")


def test_writes_target_without_its_hooks_is_refused(register):
    register(_method("notext", writes_target=True, question_target=_target))  # no instruction: verl's job raised
    register(_method("notarget", writes_target=True, instruction=lambda self, control, target: f"{target}"))
    _refused("notext", "'notext' sets writes_target = True but does not override instruction")
    _refused("notarget", "'notarget' sets writes_target = True but does not override question_target")


def test_a_shape_rewards_without_shapes_rewards_is_refused(register):
    """Both backends skip shape_rewards unless the flag is set: the run trained plain GRPO under the method's name."""
    register(_method("noflag", shape_rewards=_shaped))
    _refused("noflag", "'noflag' overrides shape_rewards but sets no shapes_rewards = True", "plain GRPO")


def test_a_method_whose_flags_agree_with_its_hooks_is_composed(register):
    def instruction(self, control, target):
        return f"Think for {target} tokens."

    register(_method("aims", writes_target=True, shapes_rewards=True, question_target=_target,
                     instruction=instruction, shape_rewards=_shaped, prompt_tokens=12))
    cfg = _compose("aims", scale="paper")  # (the tiny task writes a target as its rank among fixed targets)
    control = BudgetControl.from_config(cfg)
    assert bc.question_target(control, "q", 64) == 32 and bc.instruction(control, 32) == "Think for 32 tokens."


# ---------------------------------------------------------------------------------- 3: the hooks called once
def test_a_hook_that_fails_or_gives_what_no_backend_can_use_is_one_line_at_composition(register):
    register(_method("badsig", step_limit=lambda self, control, step: None))
    _refused("badsig", "'badsig': its step_limit raised TypeError")
    register(_method("dropcol", shapes_rewards=True,
                     shape_rewards=lambda self, control, rows, *rest: [row[:-1] for row in rows]))
    _refused("dropcol", "'dropcol': its shape_rewards changed the shape of a tree's rewards")
    register(_method("negroom", prompt_tokens=-40))  # verl's rollout.prompt_length < data.max_prompt_length
    _refused("negroom", "'negroom': its prompt_tokens is -40, not a number of tokens >= 0")
    register(_method("badgen", generation_limit=lambda self, control, step, total: 0.5))
    _refused("badgen", "'badgen': its generation_limit gave 0.5")
    register(_method("badtext", writes_target=True, question_target=_target,
                     instruction=lambda self, control, target: None))
    _refused("badtext", "'badtext': its instruction gave None, not a text")
    register(_method("badgroups", eval_target_groups=lambda self, control, budgets: [(None, budgets[:1])]))
    _refused("badgroups", "'badgroups': its eval_target_groups gave", "holding each of the budgets")
    register(_method("badchoices", target_choices=lambda self, control: (0, 8)))
    _refused("badchoices", "'badchoices': its target_choices gave 0")


def test_the_shipped_and_test_methods_pass_the_hooks_check(register):
    """What validation asks of a plugin, the built-ins and the test suite's methods answer (validation leaves the
    built-ins' hooks out: they are arctl's, tested here, and import torch)."""
    from resolved import arm_config  # tests/support/resolved.py

    # the shipped arms first, before a test method is registered: arm_config caches each config for the session,
    # and one composed with `halve` registered would carry its section into later tests (from a CI run)
    for experiment, arm in (("baselines-l1", "l1-exact"), ("baselines-l1", "l1-max"),
                            ("baselines-thinkprune", "thinkprune-r1"), ("baselines-thinkprune", "thinkprune-r2"), ("baselines-elastic", "elastic"),
                            ("main-grpo", "grpo")):
        for scale in ("tiny", "paper"):
            cfg = arm_config(experiment, arm, scale=scale)
            control = BudgetControl.from_config(cfg)
            assert bc.hooks_problem(control, cfg["thinking"]["budgets"], cfg["eval"]["budgets"],
                                    cfg["trainer"]["total_steps"], cfg["summary"]["group_size"]) is None, (arm, scale)
    sys.path.insert(0, str(PLUGINS / "fake_method"))
    try:
        import arctl_fake_method
    finally:
        sys.path.pop(0)
    register(arctl_fake_method.METHOD)
    assert _compose("halve")["budget_control"]["method"] == "halve"


# ----------------------------------------------------------------------------------- 4: rewards that are no numbers
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_shaped_rewards_that_are_not_finite_are_an_error_naming_the_hook(register, bad):
    """A NaN reward trained nothing and the run ended COMPLETED; now the job fails on it, and validation refuses a
    method whose rewards of the probe tree are not finite."""
    register(_method("nanny", shapes_rewards=True,
                     shape_rewards=lambda self, control, rows, *rest: [[bad for _ in row] for row in rows]))
    with pytest.raises(ValueError, match="'nanny': its shape_rewards gave a reward that is not a finite number"):
        bc.shape_rewards(BudgetControl(method="nanny"), ((1.0, 0.0),), [4], [[1, 1]], 6, True)
    _refused("nanny", "its shape_rewards gave a reward that is not a finite number")


# ------------------------------------------------------------------ 5, 7, 8: through the command line, installed
def test_a_plugins_setting_that_the_chosen_method_does_not_read_is_refused(site, tmp_path):
    """It was dropped silently: the run was plain GRPO's, under its id; the built-ins' keys were refused so."""
    out = arctl(site, *DRY, "budget_control.halve.factor=0.3", cwd=tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-3000:]
    assert ("budget_control.halve.factor is read only by budget_control.method=halve, and this run's is "
            "budget_control.method=none") in lines[0]
    chosen = arctl(site, *DRY, "budget_control.method=halve", "budget_control.halve.factor=0.3", cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr[-3000:]


def test_a_run_whose_plugin_is_gone_is_told_so_first(register):
    """Resuming a run whose plugin is not installed said its setting "takes no number"."""
    from arctl.compose.validate import validate_resolved

    sys.path.insert(0, str(PLUGINS / "fake_method"))
    try:
        import arctl_fake_method
    finally:
        sys.path.pop(0)
    register(arctl_fake_method.METHOD)
    cfg = _compose("halve", "budget_control.halve.factor=0.25")
    validate_resolved(cfg)
    registry._REGISTERED.pop("halve")
    registry._GENERATION[0] += 1
    with pytest.raises(SpecError, match="unknown budget_control.method 'halve'"):
        validate_resolved(cfg)


def test_what_a_plugin_prints_at_import_leaves_json_alone(site, tmp_path):
    (site / "arctl_printer.py").write_text(textwrap.dedent("""\
        print("hello from my plugin")
        from arctl.algo.methods.registry import ControlMethod

        class M(ControlMethod):
            name = "printer"

        METHOD = M()
        """))
    info = site / "arctl_printer-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arctl-printer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[arctl.methods]\nprinter = arctl_printer:METHOD\n")
    out = arctl(site, *DRY, "--json", "--workdir", str(tmp_path / "ws"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["runs"] and "hello from my plugin" in out.stderr
