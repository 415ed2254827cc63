"""What a launch's runs resolve to, from a mutation hunt of arctl/compose/resolve.py.

Each case was a change of the module that the spec tests let through; each is what a user sees of a run:

- the seeds a sweep lists are its cells' seeds; ``--seed`` and ``--arm`` choose an experiment's runs;
- each seed's run has its own seed in every key that reads it (``wandb.name: ${arm}-s${seed}``, the W&B name);
- precedence: a grid point beats the sweep's ``overrides``, the command line beats both (keys and config groups),
  an arm's setting beats its experiment's ``scales.<scale>`` section;
- a model the user chooses at the tiny scale is the user's (refused there, never silently the tiny model);
- a sweep's runs are grouped in W&B under the sweep, but for a ``wandb.group`` the user gave;
- a run records the command line's overrides apart from the sweep's.
"""

from __future__ import annotations

import pytest
from bad_input import Sandbox

from arctl.compose import resolve_experiment, resolve_sweep
from arctl.compose.errors import SpecError

EXPERIMENT = ("description: two arms\ngroups: {algo: grpo, prior: base}\nseeds: [0]\n"
              "arms:\n  a: [optim.lr=1e-6]\n  b: [optim.lr=2e-6]\n")


def _write(sandbox: Sandbox, kind: str, name: str, text: str) -> None:
    (sandbox.specs / kind / f"{name}.yaml").write_text(text)


def _cells(runs) -> list[tuple]:
    return [(r.arm, r.seed, r.config["seed"], r.config["wandb"]["name"]) for r in runs]


def test_an_experiments_seeds_and_arms_are_those_asked_for_each_with_its_own_seed(sandbox):
    """``arctl launch e --arm b --seed 4 --seed 7``: two runs of arm b, W&B names ``b-s4`` and ``b-s7`` (each seed's
    config reads its own seed, the plan composes the arm once for all of them)."""
    _write(sandbox, "experiments", "e", EXPERIMENT)
    runs = resolve_experiment("e", scale="tiny", arms=["b"], seeds=[4, 7])
    assert _cells(runs) == [("b", 4, 4, "b-s4"), ("b", 7, 7, "b-s7")]
    assert [r.config["optim"]["lr"] for r in runs] == [2e-6, 2e-6]


def test_a_sweeps_cells_take_its_seeds_its_group_and_its_grid_over_its_overrides(sandbox):
    """A sweep ``s`` with ``seeds: [5, 6]``, ``overrides: [algo=grpo-vr, optim.lr=3e-6]`` and a grid over ``optim.lr``: its
    cells are seeds 5 and 6 (not the experiment's 0), each grid point's learning rate (the grid is applied after
    the sweep's overrides), grouped in W&B as ``s``."""
    _write(sandbox, "experiments", "e", EXPERIMENT)
    _write(sandbox, "sweeps", "s", "experiments: [e]\nseeds: [5, 6]\noverrides: [algo=grpo-vr, optim.lr=3e-6]\n"
           "grid: {optim.lr: [4e-6, 5e-6]}\n")
    runs = resolve_sweep("s", [], "tiny")
    assert sorted({(r.arm, r.seed) for r in runs}) == [("a", 5), ("a", 6), ("b", 5), ("b", 6)]
    assert sorted({r.config["optim"]["lr"] for r in runs}) == [4e-6, 5e-6]
    assert {r.config["wandb"]["group"] for r in runs} == {"s"}
    assert all(r.config["wandb"]["name"] == f"{r.arm}-s{r.seed}" for r in runs)
    assert {r.config["thinking"]["baseline"] for r in runs} == {"brpo"}  # algo=grpo-vr
    assert all(r.user_overrides == [] and r.sweep_overrides for r in runs)


def test_the_command_line_beats_a_sweeps_grid_and_group_and_keeps_its_wandb_group(sandbox):
    """``arctl sweep s algo=grpo wandb.group=mine trainer.total_steps=4``: every cell is GRPO (the sweep says
    ``algo=grpo-vr``) of 4 steps (the sweep says 3), is
    in the user's W&B group, and records only those as the user's overrides."""
    _write(sandbox, "experiments", "e", EXPERIMENT)
    _write(sandbox, "sweeps", "s", "experiments: [e]\nseeds: [5]\noverrides: [algo=grpo-vr, trainer.total_steps=3]\n"
           "grid: {optim.lr: [4e-6, 5e-6]}\n")
    user = ["algo=grpo", "wandb.group=mine", "trainer.total_steps=4"]
    runs = resolve_sweep("s", list(user), "tiny")
    assert {r.config["thinking"]["baseline"] for r in runs} == {"v2"}  # algo=grpo
    assert {r.config["wandb"]["group"] for r in runs} == {"mine"}
    assert {r.config["trainer"]["total_steps"] for r in runs} == {4}  # the sweep says 3
    assert all(r.user_overrides == user for r in runs)


def test_an_arms_own_setting_beats_the_experiments_scale_section(sandbox):
    """``scales: {tiny: [optim.lr=5e-6]}`` and arm ``a: [optim.lr=1e-6]``: at ``--scale tiny`` arm a trains at
    1e-6 (the arm is applied after the scale's section), arm b, which sets none, at 5e-6."""
    _write(sandbox, "experiments", "e", "description: x\ngroups: {algo: grpo, prior: base}\nseeds: [0]\n"
           "scales:\n  tiny: [optim.lr=5e-6]\narms:\n  a: [optim.lr=1e-6]\n  b: []\n")
    assert [(r.arm, r.config["optim"]["lr"]) for r in resolve_experiment("e", scale="tiny")] == [("a", 1e-6),
                                                                                                ("b", 5e-6)]


def test_a_users_model_at_the_tiny_scale_is_the_users_not_silently_the_tiny_one(sandbox):
    """The tiny scale fixes the model unless the user chooses one: ``--scale tiny model=r1-distill-qwen-1.5b`` is the
    user's model, which the tiny backend cannot build: refused, saying so, never a run of the tiny model instead."""
    _write(sandbox, "experiments", "e", EXPERIMENT)
    with pytest.raises(SpecError, match="keep the tiny scale's model"):
        resolve_experiment("e", scale="tiny", overrides=["model=r1-distill-qwen-1.5b"])
