"""A ``verl.overrides`` entry that would replace a key arctl sets is refused naming the arctl setting to change
instead (``set optim.lr instead``: tests/verl/test_overrides_arctl_keys_kept.py), where before it said only "set the
arctl key it comes from (`arctl show EXP --scale paper`)", leaving the user to find which. The map of verl key -> arctl setting
(:data:`arctl.backends.verl.overrides.ARCTL_SOURCE`) is checked here against what arctl really derives: changing
each setting changes its verl key's value, and nothing else the map names from another setting."""

from __future__ import annotations

import copy

import pytest

from arctl.backends.verl.overrides import ARCTL_SOURCE, verl_overrides


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
