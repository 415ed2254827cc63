"""What an eval-only run loads, and what every run's rollout builds from the tokenizer, is checked before the job
queues (from a hunt of the eval-only mode, each passed `arctl run ... --dry-run` and failed inside the job after Ray
and vLLM had started):

- a ``global_step_N`` folder of an arctl run without its completion marker (a save killed, or still being written)
  was taken for a checkpoint arctl did not save: "PytorchStreamReader failed reading zip archive" after 69 s;
- a checkpoint of another seed (or arm, experiment, training setting) was evaluated as this cell's;
- a model whose tokenizer lacks ``</think>``: "tokenizer has no '</think>' token" in the first rollout, after 109 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arctl.backends.verl import checkpoints
from arctl.backends.verl.run_config import launch_problem


def _config(*overrides: str, seed: int = 0) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides], seeds=[seed])
    return run.config


def _evaluate(ckpt: Path, *overrides: str, seed: int = 0) -> dict:
    return _config("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}", *overrides, seed=seed)


def _trained_run(root: Path, config: dict | None, steps=(2,), partial: int | None = None) -> Path:
    """A run folder as a training run leaves it: ``config.yaml`` (``config``, with its id; None: no config),
    complete checkpoints at ``steps`` (8 shards, the paper's 8 GPUs) and, at ``partial``, a save that did not
    finish: a truncated shard and no completion marker. Returns its checkpoints folder."""
    ckpt_dir = root / "checkpoints"
    for step in (*steps, *([partial] if partial else [])):
        actor = checkpoints.folder(ckpt_dir, step) / "actor"
        actor.mkdir(parents=True)
        for rank in range(8):
            (actor / f"model_world_size_8_rank_{rank}.pt").write_bytes(b"PK\x03\x04" + b"x" * 64)
        if step != partial:
            checkpoints.mark_complete(ckpt_dir, step)
    if partial:
        (checkpoints.folder(ckpt_dir, partial) / "actor" / "model_world_size_8_rank_0.pt").write_bytes(b"PK")
    if config is not None:
        (root / "config.yaml").write_text(yaml.safe_dump({**config, "run_id": root.name}, sort_keys=False))
    return ckpt_dir


# --- 3. a save that did not finish, inside an arctl run


@pytest.mark.parametrize("with_config", [True, False], ids=["run-folder", "beside-a-marked-step"])
def test_a_half_written_checkpoint_of_an_arctl_run_is_refused_naming_the_newest_complete(data, tmp_path, with_config):
    ckpt_dir = _trained_run(tmp_path / "runs" / "trained", _config() if with_config else None, steps=(2,), partial=4)
    ckpt = checkpoints.folder(ckpt_dir, 4)
    problem = launch_problem(_evaluate(ckpt), tmp_path / "run")
    assert problem is not None and "\n" not in problem, problem
    assert problem.startswith(f"verl.eval_checkpoint={ckpt} cannot be loaded: its save did not finish (no completion "
                              f"marker) ({checkpoints.MARKER}: a save killed, or still being written)"), problem
    assert f"the newest complete one there is {checkpoints.folder(ckpt_dir, 2)}" in problem
    # the complete one it names is accepted; damaged after its save, it is refused for that (its marker is there)
    assert launch_problem(_evaluate(checkpoints.folder(ckpt_dir, 2)), tmp_path / "run") is None
    (checkpoints.folder(ckpt_dir, 2) / "actor" / "model_world_size_8_rank_3.pt").write_bytes(b"PK")
    problem = launch_problem(_evaluate(checkpoints.folder(ckpt_dir, 2)), tmp_path / "run")
    assert problem is not None and "actor/model_world_size_8_rank_3.pt has 2 bytes, 68 when saved — give a " \
        f"complete global_step_N folder; {ckpt_dir} holds no complete one" in problem, problem


def test_a_save_in_progress_of_a_run_with_no_complete_checkpoint_says_so(data, tmp_path):
    ckpt_dir = _trained_run(tmp_path / "runs" / "running", _config(), steps=(), partial=2)
    problem = launch_problem(_evaluate(checkpoints.folder(ckpt_dir, 2)), tmp_path / "run")
    assert problem is not None and "its save did not finish" in problem, problem
    assert problem.endswith(f"{ckpt_dir} holds no complete one (seen from here; where only the compute nodes see "
                            "it, ARCTL_VERL_LAUNCH_CHECK=0 skips this check)"), problem


def test_a_checkpoint_outside_any_arctl_run_is_still_accepted_without_a_marker(data, tmp_path):
    """verl's own checkpoints (saved outside arctl) have no marker: left to verl, as before."""
    ckpt_dir = _trained_run(tmp_path / "elsewhere", None, steps=(), partial=4)
    assert launch_problem(_evaluate(checkpoints.folder(ckpt_dir, 4)), tmp_path / "run") is None


# --- 5. a checkpoint of another cell, or another training


def test_a_checkpoint_of_another_seed_or_training_is_refused_naming_the_first_key_that_differs(data, tmp_path):
    run = tmp_path / "runs" / "main-grpo_grpo_s0_0123456789"
    ckpt = checkpoints.folder(_trained_run(run, _config()), 2)
    problem = launch_problem(_evaluate(ckpt, "thinking.budgets=[1000,2000]", seed=1), tmp_path / "run")
    assert problem is not None and "\n" not in problem, problem
    assert problem.startswith(f"verl.eval_checkpoint={ckpt} was trained by run {run.name} with seed=0, and this run "
                              "has seed=1: its evaluation would be recorded as another cell's"), problem
    problem = launch_problem(_evaluate(ckpt, "thinking.budgets=[1000,2000]"), tmp_path / "run")
    assert problem is not None and "with thinking.budgets=[8000], and this run has " \
        "thinking.budgets=[1000,2000]" in problem, problem
    problem = launch_problem(_evaluate(ckpt, "optim.lr=2e-6"), tmp_path / "run")
    assert problem is not None and "with optim.lr=1e-06, and this run has optim.lr=2e-06" in problem, problem


def test_a_checkpoint_evaluated_under_its_own_cell_passes_whatever_the_evaluation_sets(data, tmp_path):
    """docs/algorithm.md's final evaluation: the same cell, other eval samples, datasets, grid, budget forcing,
    cluster, W&B and inference settings; a config.yaml written before a key existed is compared on the rest."""
    saved = _config()
    del saved["summary"]["inserted"]  # a run frozen before the key existed
    ckpt = checkpoints.folder(_trained_run(tmp_path / "runs" / "main-grpo_grpo_s0_0123456789", saved), 2)
    evaluation = ("eval.n_samples=320", "eval.final_datasets=[aime24,amc22]", "eval.grid=[1000,2000]",
                  "budget_control.forcing_extensions=1", "wandb.mode=offline", "cluster.time_min=30",
                  "verl.gpu_memory_utilization=0.8", "trainer.test_freq=5")
    assert launch_problem(_evaluate(ckpt, *evaluation), tmp_path / "run") is None


# --- 4. a tokenizer the rollout cannot build its inserted tokens from


def _model_folder(path: Path, think: bool) -> Path:
    """A local model folder: a config that fits the paper's rows and a word-level tokenizer with an unk token,
    with or without ``<think>``/``</think>``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    words = ["<unk>", "<eos>", "...", "Final", "Answer", "*", "\n", *(["<think>", "</think>"] if think else [])]
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>").save_pretrained(path)
    Qwen2Config(num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=131072).save_pretrained(path)
    return path


@pytest.mark.parametrize("inserted", ["anytime", "think_end"])
def test_a_model_whose_tokenizer_has_no_think_end_is_refused(data, tmp_path, inserted):
    from arctl.algo.prompts import think_end_id

    model = _model_folder(tmp_path / "nothink", think=False)
    with pytest.raises(ValueError) as refused:  # what the rollout raises at its first step
        from transformers import AutoTokenizer

        think_end_id(AutoTokenizer.from_pretrained(model, local_files_only=True))
    for config in (_config(f"model.path={model}", f"summary.inserted={inserted}"),  # training
                   _config(f"model.path={model}", f"summary.inserted={inserted}", "verl.eval_only=true",
                           "verl.eval_checkpoint=model")):  # an eval-only run of the model itself
        problem = launch_problem(config, tmp_path / "run")
        assert problem is not None and "\n" not in problem, problem
        assert problem.startswith(f"the tokenizer of {model} cannot give the rollout its inserted tokens "
                                  f"(summary.inserted={inserted}): {refused.value}; the rollout would fail"), problem
    good = _model_folder(tmp_path / "think", think=True)
    assert launch_problem(_config(f"model.path={good}"), tmp_path / "run") is None


def test_a_model_named_by_its_hub_id_or_without_a_readable_tokenizer_is_left_to_the_job(data, tmp_path):
    from transformers import Qwen2Config

    config_only = tmp_path / "config-only"
    Qwen2Config(num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=131072).save_pretrained(config_only)
    assert launch_problem(_config(f"model.path={config_only}"), tmp_path / "run") is None
    assert launch_problem(_config("model.path=someone/not-downloaded-model"), tmp_path / "run") is None
