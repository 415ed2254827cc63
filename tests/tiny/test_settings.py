"""The tiny backend reads the run config through one typed view (arctl.backends.tiny.settings)."""

import pytest
from resolved import arm_config  # tests/support/resolved.py

from arctl.backends.tiny.settings import TinyRun


def test_every_key_is_read_once_and_typed():
    cfg = arm_config("main-ar-uniform", "ar-uniform", scale="tiny")
    run = TinyRun.from_config(cfg)
    assert run.lr == cfg["optim"]["lr"] and isinstance(run.lr, float)
    assert run.betas == tuple(cfg["optim"]["betas"]) and run.total_steps == cfg["trainer"]["total_steps"]
    assert run.eval_grid == tuple(cfg["eval"]["grid"]) and run.eval_budgets == tuple(cfg["eval"]["budgets"])
    knobs = cfg["tiny"]["task"][cfg["tiny"]["task"]["name"]]
    assert (run.task.name, run.task.min_items, run.task.max_items) == ("search", knobs["min_items"], knobs["max_items"])
    assert run.update_micro_batch == cfg["tiny"]["update_micro_batch"] and run.eval_num_problems == 1024


def test_a_missing_key_names_itself():
    cfg = arm_config("main-ar-uniform", "ar-uniform", scale="tiny")
    del cfg["tiny"]["keep_checkpoints"]
    with pytest.raises(ValueError, match=r"lacks tiny\.keep_checkpoints; resolve the run with --scale tiny"):
        TinyRun.from_config(cfg)


def test_a_prompt_target_method_needs_1_to_9_fixed_targets_and_the_error_names_its_key(monkeypatch):
    """The tiny task writes a target as one word (its rank): the error names the method's own key."""
    from arctl.algo.methods import registry
    from arctl.backends.tiny import BACKEND

    cfg = arm_config("baselines-l1", "l1-exact", scale="tiny")
    assert BACKEND.config_problem(cfg) is None
    cfg["budget_control"]["l1_targets"] = list(range(10, 110, 10))
    what, key, hint = BACKEND.config_problem(cfg)
    assert "needs 1 to 9 of them" in what and key == "budget_control.l1_targets" and hint.startswith(f"e.g. {key}=")

    class Aim(registry.ControlMethod):  # a plugin method with a prompt target and no fixed list
        name, writes_target = "aim", True

    monkeypatch.setattr(registry, "_REGISTERED", {**registry._REGISTERED, "aim": Aim()})
    cfg["budget_control"]["method"] = "aim"
    what, key, hint = BACKEND.config_problem(cfg)
    assert "method=aim's prompt target" in what and key == "budget_control.aim" and "1 to 9" in hint
