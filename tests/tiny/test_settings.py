"""The tiny backend reads the run config through one typed view (arctl.backends.tiny.settings)."""

import pytest
from method_registry import isolate_methods  # tests/support/method_registry.py
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

    isolate_methods(monkeypatch)
    registry._REGISTERED["aim"] = Aim()
    cfg["budget_control"]["method"] = "aim"
    what, key, hint = BACKEND.config_problem(cfg)
    assert "method=aim's prompt target" in what and key == "budget_control.aim" and "1 to 9" in hint


@pytest.mark.parametrize("warmup", [0, 1, 3, 5])
def test_the_learning_rate_warms_up_as_verls_schedule_steps_it(warmup):
    """From a hunt: with optim.warmup_steps=W the tiny backend trained RL step s at lr*min(1, s/W), verl at
    lr*min(1, (s-1)/W): its LambdaLR starts at 0 and steps once after each RL step's update (engine_workers,
    update_lr_scheduler on the last mini-batch), so its first step trains at 0. The two backends now agree."""
    from extras import NO_VERL, verl_missing  # tests/support/extras.py

    if verl_missing():
        pytest.skip(NO_VERL)  # (run by the fresh-machine test's second pass, with verl)
    import torch
    from verl.utils.torch_functional import get_constant_schedule_with_warmup

    from arctl.backends.tiny.trainer import set_lr

    lr, steps = 1e-3, 8
    verl_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    schedule = get_constant_schedule_with_warmup(verl_opt, num_warmup_steps=warmup)
    tiny_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    verl_lrs, tiny_lrs = [], []
    for step in range(1, steps + 1):
        for _ in range(2):  # two mini-batches per RL step, as at the paper scale
            verl_lrs.append(verl_opt.param_groups[0]["lr"])
            verl_opt.step()
        schedule.step()  # once per RL step, after its update
        set_lr(tiny_opt, lr, step, warmup)
        tiny_lrs += [tiny_opt.param_groups[0]["lr"]] * 2
    assert tiny_lrs == pytest.approx(verl_lrs, abs=0, rel=1e-12)
    if warmup:
        assert tiny_lrs[0] == 0.0 and tiny_lrs[-1] == lr
