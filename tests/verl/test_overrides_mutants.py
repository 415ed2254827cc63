"""Every arctl setting the verl backend maps reaches verl 0.9.1's composed config with the user's value (from a
mutation hunt of ``arctl.backends.verl.overrides``: an entry dropped or replaced by a constant, e.g. the optimiser's
weight decay or betas, the warm-up, the PPO epochs, the FSDP offloads, the data seed, the node count, the validation
sampling, passed every test, and verl would have trained with its own default at paper scale). Each value here
differs from arctl's default (and verl's, where verl has one), so a dropped entry and a constant both show; the
two offloads are set apart (one on, one off), so that one read for the other shows too."""

from __future__ import annotations

import functools

import pytest

from arctl.backends.verl.overrides import check_overrides, verl_overrides
from arctl.backends.verl.run_config import run_overrides

# arctl setting (command line) -> (verl key of the composed config, the value verl must read)
MAPPED = {
    "optim.weight_decay=0.05": ("actor_rollout_ref.actor.optim.weight_decay", 0.05),
    "optim.betas=[0.8,0.95]": ("actor_rollout_ref.actor.optim.betas", [0.8, 0.95]),
    "optim.warmup_steps=5": ("actor_rollout_ref.actor.optim.lr_warmup_steps", 5),
    "optim.grad_clip=0.5": ("actor_rollout_ref.actor.optim.clip_grad", 0.5),
    "optim.ppo_epochs=2": ("actor_rollout_ref.actor.ppo_epochs", 2),
    "optim.clip_ratio_high=0.28": ("actor_rollout_ref.actor.clip_ratio_high", 0.28),
    "verl.optimizer_offload=true": ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", True),
    "verl.param_offload=false": ("actor_rollout_ref.actor.fsdp_config.param_offload", False),  # each its own
    "verl.gradient_checkpointing=false": ("actor_rollout_ref.model.enable_gradient_checkpointing", False),
    "verl.gpu_memory_utilization=0.8": ("actor_rollout_ref.rollout.gpu_memory_utilization", 0.8),
    "verl.tensor_model_parallel_size=2": ("actor_rollout_ref.rollout.tensor_model_parallel_size", 2),
    "verl.val_before_train=false": ("trainer.val_before_train", False),
    "cluster.nodes=2": ("trainer.nnodes", 2),
    "eval.temperature=0.7": ("actor_rollout_ref.rollout.val_kwargs.temperature", 0.7),
    "eval.n_samples=16": ("actor_rollout_ref.rollout.val_kwargs.n", 16),
    "trainer.save_freq=7": ("trainer.save_freq", 7),
    "trainer.test_freq=11": ("trainer.test_freq", 11),
    "trainer.total_epochs=3": ("trainer.total_epochs", 3),
    "trainer.total_steps=17": ("trainer.total_training_steps", 17),
}


@functools.cache
def _config(*overrides: str, seed: int = 0) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides], seeds=[seed])
    return run.config


def _composed(config: dict, mode=None):
    from omegaconf import OmegaConf

    cfg = check_overrides(run_overrides(config, None) if mode else verl_overrides(config))
    return lambda key: OmegaConf.to_container(v) if OmegaConf.is_config(v := OmegaConf.select(cfg, key)) else v


def test_each_setting_a_user_changes_reaches_verl_with_its_value():
    """One paper config with every mapped setting away from its default: verl's composed config reads each."""
    read = _composed(_config(*MAPPED))
    wrong = {arg: (key, read(key)) for arg, (key, want) in MAPPED.items()
             if read(key) != (pytest.approx(want) if isinstance(want, float) else want)}
    assert not wrong, wrong


def test_each_seed_shuffles_its_training_data_with_its_own_seed():
    """verl's training sampler draws the data order from ``data.seed``: replicates of an arm must differ in it."""
    assert {s: _composed(_config(seed=s))("data.seed") for s in (0, 3)} == {0: 0, 3: 3}


def test_the_kl_term_takes_the_offload_setting_and_the_kl_type_into_the_reference_pass():
    """With a KL term verl builds a reference worker: it takes the run's parameter offload and arctl's KL estimator;
    the optimizer offload stays the run's own (off)."""
    read = _composed(_config("optim.kl_coef=0.01", "optim.kl_type=mse", "verl.param_offload=true"))
    assert read("actor_rollout_ref.actor.use_kl_loss") is True
    assert read("actor_rollout_ref.actor.kl_loss_type") == "mse"
    assert read("actor_rollout_ref.ref.fsdp_config.param_offload") is True
    assert read("actor_rollout_ref.actor.fsdp_config.param_offload") is True
    assert read("actor_rollout_ref.actor.fsdp_config.optimizer_offload") is False  # not the parameters' setting


def test_verl_filters_prompts_over_the_prompt_length_instead_of_failing_the_run():
    """``data.truncation=error`` stops the run at the first over-long prompt unless verl filters them first."""
    read = _composed(_config())
    assert read("data.filter_overlong_prompts") is True and read("data.truncation") == "error"


def test_an_eval_only_run_of_the_model_itself_resumes_nothing_and_reads_the_final_datasets(tmp_path, monkeypatch):
    """``verl.eval_checkpoint=model``: no resume (a run dir's checkpoint would be evaluated instead of model.path), and
    the eval-only run reads ``eval.final_datasets``, not the training-time ``eval.datasets``."""
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path))
    config = _config("verl.eval_only=true", "verl.eval_checkpoint=model", "eval.datasets=[aime24]",
                     "eval.final_datasets=[math500]")
    read = _composed(config, mode=True)
    assert read("trainer.resume_mode") == "disable" and read("trainer.val_only") is True
    assert read("data.val_files") == [str(tmp_path / "math500" / "test.parquet")]
    assert read("arctl.eval_datasets") == ["math500"]


def test_a_deterministic_run_asks_verl_for_full_determinism_and_others_do_not():
    """``trainer.deterministic=true`` is verl's ``rollout.full_determinism`` (seeded vLLM requests, a rerun samples
    the same trees); a run without it keeps verl's default (off)."""
    assert _composed(_config("trainer.deterministic=true"))("actor_rollout_ref.rollout.full_determinism") is True
    assert _composed(_config())("actor_rollout_ref.rollout.full_determinism") is False


def test_the_documented_verl_defaults_reach_verl():
    """docs/verl-backend.md's defaults of the ``verl:`` keys, as verl reads them in a paper run that sets none:
    8 GPUs per node where cluster.gpus_per_node is 0, one packed tree per micro-batch, 2 checkpoints kept."""
    read = _composed(_config("cluster.gpus_per_node=0", "cluster=local"))
    assert read("trainer.n_gpus_per_node") == 8
    assert read("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == 1
    assert read("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu") == 1
    assert read("actor_rollout_ref.actor.use_dynamic_bsz") is False
    assert read("actor_rollout_ref.actor.ppo_max_token_len_per_gpu") == 32768
    assert read("actor_rollout_ref.rollout.gpu_memory_utilization") == pytest.approx(0.6)
    assert read("actor_rollout_ref.rollout.tensor_model_parallel_size") == 1
    assert read("arctl.keep_checkpoints") == 2


def test_the_response_cap_holds_the_grids_largest_thinking_where_eval_budgets_stop_below_it():
    """Elastic Reasoning trains with a 1,024-token thinking and is evaluated on the grid up to the scale's 8,000: with
    ``eval.budgets=[1024]`` the grid alone reaches 8,000, and verl's response cap (and vLLM's context) must hold that
    thinking and a summary, or the grid's evaluation is cut near 2k tokens."""
    from arctl.compose import resolve_experiment

    config = resolve_experiment("baselines-elastic", scale="paper", overrides=["cluster=slurm", "eval.budgets=[1024]"])[0].config
    assert max(config["eval"]["grid"]) == 8000 and config["eval"]["budgets"] == [1024]
    read = _composed(config)
    longest = 8000 + int(config["summary"]["max_tokens"])
    assert read("data.max_response_length") >= longest
    assert read("actor_rollout_ref.rollout.max_model_len") >= read("actor_rollout_ref.rollout.prompt_length") + longest


def test_an_l1_prompt_has_room_for_its_target_instruction_in_the_rollout():
    """L1 appends its target-length instruction after verl filtered the prompts by ``data.max_prompt_length``: the
    rollout's prompt length (and vLLM's context) must add its tokens, or verl's agent loop left-truncates the longest
    prompts, cutting the start of the problem (a warning only)."""
    from arctl.algo.methods.l1 import L1_PROMPT_TOKENS
    from arctl.compose import resolve_experiment

    config = resolve_experiment("baselines-l1", scale="paper", overrides=["cluster=slurm"])[0].config
    read = _composed(config)
    assert read("actor_rollout_ref.rollout.prompt_length") == read("data.max_prompt_length") + L1_PROMPT_TOKENS
    assert read("actor_rollout_ref.rollout.max_model_len") == (read("actor_rollout_ref.rollout.prompt_length")
                                                               + read("data.max_response_length"))
