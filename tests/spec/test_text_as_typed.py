"""A command-line value of a key that holds text is the text typed, not what Hydra's grammar reads it as (from a
hunt: `wandb.group=1.10` grouped the run under '1.1', `wandb.project=2e5` logged to '200000.0', `cluster.qos=1_000`
asked SLURM for '1000')."""

from __future__ import annotations

import pytest

from arctl.compose import resolve_experiment


@pytest.mark.parametrize(("typed", "key", "value"), [
    ("wandb.group=1.10", ("wandb", "group"), "1.10"),
    ("wandb.project=2e5", ("wandb", "project"), "2e5"),
    ("cluster.qos=1_000", ("cluster", "qos"), "1_000"),
    ("wandb.notes=true", ("wandb", "notes"), "true"),
    ("wandb.group='1.10'", ("wandb", "group"), "1.10"),  # quoted: as before
    ("wandb.group=abc", ("wandb", "group"), "abc"),
])
def test_a_text_key_gets_the_text_typed(typed, key, value):
    [run] = resolve_experiment("main-grpo", [typed])
    section, name = key
    assert run.config[section][name] == value
    assert typed in run.user_overrides  # recorded as typed


def test_a_number_key_is_still_a_number_and_the_same_text_gives_the_same_run():
    [run] = resolve_experiment("main-grpo", ["optim.lr=1e-6"])
    assert run.config["optim"]["lr"] == 1e-6
    from arctl.launch.run_id import make_run_id

    assert make_run_id(resolve_experiment("main-grpo", ["wandb.group=1.10"])[0].config) == \
        make_run_id(resolve_experiment("main-grpo", ["wandb.group='1.10'"])[0].config)
