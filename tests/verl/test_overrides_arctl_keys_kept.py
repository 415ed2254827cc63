"""A ``verl.overrides`` entry may not replace what arctl sets by naming something other than the key itself (from a
mutation hunt of the verl config path; each test here failed before the fix, every entry accepted):

- a *section* holding keys arctl sets (``actor_rollout_ref.actor.optim={lr:0.001,clip_grad:100.0}``): Hydra merges
  the mapping over arctl's values, so verl trained at lr 0.001 and clip 100 while the run's config, its run id and W&B
  said optim.lr=1e-06 and optim.grad_clip=1.0; a section holding an alias of one (``custom_reward_function={...}``);
- a *part* of one (``actor_rollout_ref.actor.optim.betas.0=0.5``: the list's first item);
- in an eval-only run, the eval-only mode's own entries (``trainer.resume_from_path``, ``trainer.val_only``), which
  arctl appends after what it derives and did not count: verl evaluated another checkpoint than
  ``verl.eval_checkpoint`` (the one arctl checked and records), or trained.

Each is refused in one line naming what to set instead; an entry of a key arctl does not set, inside those sections
too, still reaches verl."""

from __future__ import annotations

import json

import pytest

from arctl.backends.verl.overrides import VerlConfigError, build_verl_config, check_overrides
from arctl.backends.verl.run_config import run_overrides

OPTIM = "actor_rollout_ref.actor.optim"
EVAL_ONLY = ("verl.eval_only=true", "verl.eval_checkpoint=/runs/a/checkpoints/global_step_40")


def _config(*overrides: str) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides])
    return run.config


def _refusal(config: dict) -> str:
    with pytest.raises(VerlConfigError) as info:
        run_overrides(config, None)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_a_section_entry_would_train_at_its_own_values_and_is_refused_naming_arctls_keys_in_it():
    entry = f"{OPTIM}={{lr:0.001,clip_grad:100.0}}"
    config = _config()
    assert (config["optim"]["lr"], config["optim"]["grad_clip"]) == (1e-06, 1.0)
    # what verl composed from arctl's list with the entry appended (the list before the fix): a merge over arctl's
    composed = check_overrides([*run_overrides(config, None), entry]).actor_rollout_ref.actor.optim
    assert (composed.lr, composed.clip_grad, composed.weight_decay) == (0.001, 100.0, config["optim"]["weight_decay"])
    msg = _refusal(_config(f"verl.overrides=['{entry}']"))
    assert f"replaces the section {OPTIM}, which holds keys arctl sets (betas, clip_grad, lr, lr_warmup_steps, " \
           "weight_decay)" in msg, msg
    assert f"({OPTIM}.KEY=VALUE)" in msg and "optim.lr, optim.warmup_steps" in msg, msg


@pytest.mark.parametrize("entry, section, held", [
    ("actor_rollout_ref.rollout.val_kwargs={temperature:1.0,n:1}", "actor_rollout_ref.rollout.val_kwargs",
     "do_sample, n, temperature, top_p"),
    ("actor_rollout_ref={actor:{optim:{lr:0.001}}}", "actor_rollout_ref", "and "),  # ~40 keys: six shown
    ("+actor_rollout_ref.model.override_config={attn_implementation:eager}", "actor_rollout_ref.model.override_config",
     "attn_implementation")])
def test_every_section_holding_keys_arctl_sets_is_refused(entry, section, held):
    msg = _refusal(_config(f"verl.overrides=['{entry}']"))
    assert f"replaces the section {section}, which holds keys arctl sets (" in msg and held in msg, msg


def test_a_part_of_a_key_arctl_sets_is_refused():
    entry = f"{OPTIM}.betas.0=0.5"
    config = _config()
    assert check_overrides([*run_overrides(config, None), entry]).actor_rollout_ref.actor.optim.betas[0] == 0.5
    msg = _refusal(_config(f"verl.overrides=['{entry}']"))
    assert f"replaces part of {OPTIM}.betas, which arctl sets" in msg, msg


@pytest.mark.parametrize("entry, says", [
    ("custom_reward_function={path:/x.py,name:f}", "custom_reward_function holds custom_reward_function.name, which "
     "stands for reward.custom_reward_function.name, which arctl sets"),
    ("actor_rollout_ref.ref={rollout_n:3}", "actor_rollout_ref.ref holds actor_rollout_ref.ref.rollout_n, which "
     "stands for actor_rollout_ref.rollout.n, which arctl sets")])
def test_a_section_holding_an_alias_of_a_key_arctl_sets_is_refused(entry, says):
    msg = _refusal(_config(f"verl.overrides=['{entry}']"))
    assert f"is refused: {says}" in msg, msg
    assert msg.endswith("set verl.grader" if entry.startswith("custom") else "set rollout.n"), msg


@pytest.mark.parametrize("entry, key, verl_reads", [
    ("trainer.resume_from_path=/runs/b/checkpoints/global_step_8", "resume_from_path", "/runs/b/checkpoints/global_step_8"),
    ("trainer.val_only=false", "val_only", False)])
def test_an_entry_replacing_the_eval_only_modes_own_is_refused(entry, key, verl_reads):
    config = _config(*EVAL_ONLY)
    # the mode's own value, and what verl read with the entry after it (the list before the fix)
    assert check_overrides(run_overrides(config, None)).trainer[key] == \
        {"resume_from_path": "/runs/a/checkpoints/global_step_40", "val_only": True}[key]
    assert check_overrides([*run_overrides(config, None), entry]).trainer[key] == verl_reads
    msg = _refusal(_config(*EVAL_ONLY, f"verl.overrides=['{entry}']"))
    assert f"replaces trainer.{key}, which arctl sets for an eval-only run" in msg, msg
    assert "set verl.eval_checkpoint" in msg, msg


def test_entries_of_keys_arctl_does_not_set_still_reach_verl_inside_its_sections():
    entries = [f"{OPTIM}.min_lr_ratio=0.1", "actor_rollout_ref.rollout.val_kwargs.top_k=5",
               "+actor_rollout_ref.model.override_config.rope_theta=20000.0", "trainer.log_val_generations=7"]
    config = _config(f"verl.overrides={json.dumps(entries)}")
    _, composed = build_verl_config(config)
    assert composed.actor_rollout_ref.actor.optim.min_lr_ratio == 0.1
    assert composed.actor_rollout_ref.actor.optim.lr == config["optim"]["lr"]
    assert composed.actor_rollout_ref.rollout.val_kwargs.top_k == 5
    assert composed.actor_rollout_ref.model.override_config.rope_theta == 20000.0
    assert composed.trainer.log_val_generations == 7
    # an eval-only run takes the same entries (its mode's keys are refused, not its sections' other keys)
    assert run_overrides(_config(*EVAL_ONLY, f"verl.overrides={json.dumps(entries)}"), None)[-4:] == entries


@pytest.mark.parametrize("entry", ["trainer.val_only=true", "trainer.resume_from_path=/runs/b/checkpoints/global_step_8"])
def test_a_training_run_may_not_set_the_eval_only_modes_entries(entry):
    """From the same hunt: in a training run `trainer.val_only=true` ended the run after its first validation, and
    `trainer.resume_from_path` was accepted and never read (verl.resume_mode is auto); both are the eval-only mode's,
    which verl.eval_only and verl.eval_checkpoint ask for."""
    with pytest.raises(VerlConfigError, match=r"only for an eval-only run .*verl\.eval_only=true verl\.eval_checkpoint"):
        run_overrides(_config(f"verl.overrides=['{entry}']"), None)


@pytest.mark.parametrize("entry, says", [
    (f"{OPTIM}.lr=0.001", f"replaces {OPTIM}.lr, which arctl sets from optim.lr; set optim.lr instead"),
    ("actor_rollout_ref.rollout.n=4", "which arctl sets from rollout.n; set rollout.n instead"),
    ("trainer.save_freq=5", "which arctl sets from trainer.save_freq; set trainer.save_freq instead"),
    (f"{OPTIM}.betas.0=0.5", f"replaces part of {OPTIM}.betas, which arctl sets from optim.betas; set optim.betas "
                             "instead"),
])
def test_a_replaced_key_names_the_arctl_setting_to_change(entry, says):
    """The arctl setting a verl key is copied from (overrides.ARCTL_SOURCE), where the message said only "set the arctl
    key it comes from (`arctl show EXP --scale paper`)"."""
    assert says in _refusal(_config(f"verl.overrides=['{entry}']"))


def test_a_key_computed_from_several_settings_keeps_the_general_advice():
    msg = _refusal(_config("verl.overrides=['data.max_response_length=100']"))
    assert "replaces data.max_response_length, which arctl sets from the run's config" in msg, msg
    assert "the response length from the budgets" in msg, msg


def test_a_section_names_the_settings_its_keys_come_from():
    msg = _refusal(_config(f"verl.overrides=['{OPTIM}={{lr:0.001}}']"))
    assert ("set the arctl settings they come from instead (optim.betas, optim.grad_clip, optim.lr, optim.warmup_steps, "
            "optim.weight_decay)") in msg, msg
