"""A ``verl.overrides`` entry that would replace a key arctl sets is refused naming the arctl setting to change
instead (``set optim.lr instead``), where before it said only "set the arctl key it comes from (`arctl show EXP
--scale paper`)", leaving the user to find which. The map of verl key -> arctl setting
(:data:`arctl.backends.verl.overrides.ARCTL_SOURCE`) is checked here against what arctl really derives: changing
each setting changes its verl key's value, and nothing else the map names from another setting."""

from __future__ import annotations

import copy

import pytest

from arctl.backends.verl.overrides import ARCTL_SOURCE, VerlConfigError, verl_overrides
from arctl.backends.verl.run_config import run_overrides

OPTIM = "actor_rollout_ref.actor.optim"


@pytest.fixture(scope="module")
def base() -> dict:
    """A paper-scale run whose every mapped key is set: a KL term, a dual clip, a step count, determinism."""
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=[
        "cluster=slurm", "optim.kl_coef=0.001", "optim.dual_clip=3.0", "trainer.total_steps=10",
        "trainer.deterministic=true"])
    return run.config


def _entries(config: dict) -> dict[str, str]:
    return {k.lstrip("+"): v for k, _, v in (item.partition("=") for item in verl_overrides(config, None))}


def _get(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def _set(config: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    node = config
    for part in path:
        node = node[part]
    node[last] = value


def _other(value):
    """A value of the same kind that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.5 if value else 0.25
    if isinstance(value, list):
        return [_other(v) for v in value] if value else ["console"]
    if isinstance(value, str):
        return {"auto": "disable", "vllm": "sglang", "k1": "low_var_kl"}.get(value, value + "-other")
    if value is None:
        return ["console"]
    raise AssertionError(f"no other value for {value!r}")


def test_every_mapped_key_is_set_in_the_base_config(base):
    assert set(ARCTL_SOURCE) <= set(_entries(base)), set(ARCTL_SOURCE) - set(_entries(base))


@pytest.mark.parametrize("setting", sorted(set(ARCTL_SOURCE.values())))
def test_changing_a_setting_changes_exactly_the_verl_keys_the_map_says_come_from_it(base, setting):
    before = _entries(base)
    changed = copy.deepcopy(base)
    _set(changed, setting, _other(_get(base, setting)))
    after = _entries(changed)
    mine = {k for k, s in ARCTL_SOURCE.items() if s == setting}
    moved = {k for k in ARCTL_SOURCE if before.get(k) != after.get(k)}
    assert mine <= moved, (setting, mine - moved)
    # a key the map gives to another setting did not follow this one (else the map names the wrong setting)
    assert moved <= mine, (setting, moved - mine)


def _refusal(config: dict) -> str:
    with pytest.raises(VerlConfigError) as info:
        run_overrides(config, None)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def _with(base: dict, entry: str) -> dict:
    config = copy.deepcopy(base)
    config["verl"]["overrides"] = [entry]
    return config


@pytest.mark.parametrize("entry, says", [
    (f"{OPTIM}.lr=0.001", f"replaces {OPTIM}.lr, which arctl sets from optim.lr; set optim.lr instead"),
    ("actor_rollout_ref.rollout.n=4", "which arctl sets from rollout.n; set rollout.n instead"),
    ("trainer.save_freq=5", "which arctl sets from trainer.save_freq; set trainer.save_freq instead"),
    (f"{OPTIM}.betas.0=0.5", f"replaces part of {OPTIM}.betas, which arctl sets from optim.betas; set optim.betas "
                             "instead"),
])
def test_a_replaced_key_names_the_arctl_setting_to_change(base, entry, says):
    assert says in _refusal(_with(base, entry))


def test_a_key_computed_from_several_settings_keeps_the_general_advice(base):
    msg = _refusal(_with(base, "data.max_response_length=100"))
    assert "replaces data.max_response_length, which arctl sets from the run's config" in msg, msg
    assert "the response length from the budgets" in msg, msg


def test_a_section_names_the_settings_its_keys_come_from(base):
    msg = _refusal(_with(base, f"{OPTIM}={{lr:0.001}}"))
    assert ("set the arctl settings they come from instead (optim.betas, optim.grad_clip, optim.lr, optim.warmup_steps, "
            "optim.weight_decay)") in msg, msg
