"""Experiments' arms named without composing them, and composed once, when a test first needs them.

Collecting the tests must not run Hydra: parametrize over :func:`experiment_arms` (a YAML read per
experiment) and call :func:`arm_config` inside the test (cached per experiment, scale and overrides).
"""

from __future__ import annotations

import copy
from functools import cache

from arctl.compose.experiment import list_experiments, load_experiment


def experiment_arms() -> list[tuple[str, str]]:
    """(experiment, arm) of every experiment spec, in spec order."""
    return [(name, arm) for name in list_experiments() for arm in load_experiment(name).arms]


@cache
def _resolved(name: str, scale: str | None, overrides: tuple[str, ...], _methods: int) -> dict[str, dict]:
    from arctl.compose import resolve_experiment

    out: dict[str, dict] = {}
    for run in resolve_experiment(name, scale=scale, overrides=list(overrides)):
        out.setdefault(run.arm, run.config)  # the first seed of each arm
    return out


def arm_config(name: str, arm: str, scale: str | None = None, overrides: list[str] | tuple[str, ...] = ()) -> dict:
    """The resolved config of the arm's first seed (a copy: tests may change it), composed again when a test has
    registered a method since (its settings' section is in the config: a cached one leaked it into later tests)."""
    from arctl.algo.methods.registry import generation

    return copy.deepcopy(_resolved(name, scale, tuple(overrides), generation())[arm])
