"""What would fail as a verl job starts is refused before it is submitted (from a review of the GPU path):
verl's own config check, the parallel layout verl's workers check only on their GPUs, and the inputs.
Before, each was found by the job after it had queued for its GPUs and started Ray."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arctl.backends.verl.run_config import launch_problem
from arctl.cli.main import app


def _config(*overrides: str) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides])
    return run.config


def test_the_paper_runs_pass_where_their_inputs_are(data, tmp_path):
    from arctl.compose import resolve_experiment

    for name in ("main-grpo", "main-ar-uniform"):
        for run in resolve_experiment(name, scale="paper", overrides=["cluster=slurm"]):
            assert launch_problem(run.config, tmp_path / "run") is None, name


@pytest.mark.parametrize(("override", "says"), [
    ("cluster.nodes=3", "real_train_batch_size (512) must be divisible by minimal possible batch size (24)"),
    ("cluster.gpus_per_node=6", "must be divisible by minimal possible batch size (6)"),
    ("verl.overrides=['trainer.save_frq=10']", "verl rejects an override in 'trainer.save_frq=10'"),
    ("verl.tensor_model_parallel_size=3", "the rollout's parallel size 3 (tensor 3 x data 1 x pipeline 1) does not "
                                          "divide the 8 GPUs"),
    # from a review of what fails only on the GPUs: at the first log-prob pass or as the workers start
    ("verl.micro_batch_size_per_gpu=3", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=3 "
                                        "(verl.micro_batch_size_per_gpu) does not divide the 64 rows each of the 8 "
                                        "data-parallel ranks gets per batch"),
    # from a review: keys verl derives by interpolation from one arctl sets, set alone in verl.overrides: the two
    # dynamic-batch flags (verl's workers assert at start that they are equal), a log-prob pass's token budget (the
    # check had read arctl's key, which that pass no longer followed)
    ("verl.overrides=['actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true']",
     "actor_rollout_ref.actor.use_dynamic_bsz=False and actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True differ"),
    ("verl.use_dynamic_bsz=true verl.overrides=['actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=1024']",
     "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=1024 tokens (verl.max_token_len_per_gpu) is below the longest "
     "row"),
    ("verl.use_dynamic_bsz=true verl.max_token_len_per_gpu=4096", "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096 "
                                                                  "tokens (verl.max_token_len_per_gpu) is below the longest row"),
    ("verl.overrides=['actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=2']",
     "ulysses_sequence_parallel_size=2: Ulysses sequence parallelism needs verl's remove-padding path"),
    # from a hunt: verl builds the rollout's typed config only in RolloutReplica.__init__, on the GPUs
    ("verl.overrides=['actor_rollout_ref.rollout.pipeline_model_parallel_size=2']",
     "verl's rollout config (actor_rollout_ref.rollout) refuses it: Current rollout self.name='vllm' not implemented "
     "pipeline_model_parallel_size > 1 yet."),
], ids=["nodes", "gpus", "unknown-verl-key", "tensor-parallel", "micro-batch", "dynamic-flags-differ",
        "ref-token-budget", "token-budget", "ulysses", "rollout-pipeline"])
def test_what_verl_refuses_only_on_the_gpus_is_refused_before_the_job_queues(data, tmp_path, override, says):
    problem = launch_problem(_config(*override.split(" ")), tmp_path / "run")
    assert problem is not None and says in problem and "\n" not in problem, problem


def test_a_mini_batch_the_data_parallel_ranks_cannot_split_is_refused(data, tmp_path):
    problem = launch_problem(_config("data.ppo_mini_batch_size=1", "data.train_batch_size=2", "rollout.n=4"),
                             tmp_path / "run")
    assert problem is not None and "mini-batch of 4 rows" in problem and "8 data-parallel ranks" in problem, problem


def test_a_training_set_that_cannot_feed_the_steps_is_refused(data, tmp_path):
    """verl's epoch is rows // train_batch_size steps and its loop ends after trainer.total_epochs epochs whatever
    trainer.total_steps says: fewer rows than a batch divided by zero after the first validation; too few epochs
    ended the run early, without its last checkpoint and final evaluation, reported completed."""
    from arctl.backends.verl.data import to_verl_rows, write_parquet

    def rows(n: int) -> None:  # verl rows, as `arctl data prepare` writes them (the launch reads their schema too)
        records = [{"problem": f"q{i}", "answer": str(i)} for i in range(n)]
        write_parquet(to_verl_rows(records, "deepscaler", "train"), data / "deepscaler" / "train.parquet")

    rows(10)  # the paper's batch is 64 prompts
    problem = launch_problem(_config(), tmp_path / "run")
    assert problem is not None and problem.startswith("data.train_files hold 10 rows, fewer than one batch "
                                                      "(data.train_batch_size=64)"), problem
    rows(200)  # 3 steps an epoch
    assert launch_problem(_config(), tmp_path / "run") is None  # total_steps null: the epochs decide
    assert launch_problem(_config("trainer.total_steps=6", "trainer.total_epochs=2"), tmp_path / "run") is None
    problem = launch_problem(_config("trainer.total_steps=10"), tmp_path / "run")
    assert problem is not None and "trainer.total_steps=10 needs 4 epochs of the 3 steps" in problem, problem
    assert "give trainer.total_epochs=4" in problem


def test_a_model_whose_heads_or_context_do_not_fit_the_layout_is_refused(data, tmp_path):
    """Read from the model's config where it is here (a folder, or Hugging Face's cache; nothing downloaded): vLLM
    refuses heads it cannot split over the tensor-parallel ranks as its server starts, and a context shorter than
    the longest row cuts the thinking below its budget and leaves no room for a summary."""
    from transformers import Qwen2Config

    model = tmp_path / "model"
    Qwen2Config(num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=4096).save_pretrained(model)
    problem = launch_problem(_config(f"model.path={model}", "verl.tensor_model_parallel_size=8"), tmp_path / "run")
    assert problem is not None and "verl.tensor_model_parallel_size=8 does not divide the model's 12 attention " \
        "heads" in problem, problem
    problem = launch_problem(_config(f"model.path={model}", "verl.tensor_model_parallel_size=4"), tmp_path / "run")
    assert problem is not None and problem.startswith("the longest row, 9280 tokens") and "context of 4096" in problem
    Qwen2Config(num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=131072).save_pretrained(model)
    assert launch_problem(_config(f"model.path={model}", "verl.tensor_model_parallel_size=4"), tmp_path / "run") is None


def test_a_resume_on_another_number_of_gpus_than_its_checkpoint_is_refused(data, tmp_path):
    """verl saves a model shard per rank and loads the current world's: cluster.* is launch-only (the same run id),
    so a resume with other nodes or GPUs per node failed at load, after Ray and the workers had started."""
    from arctl.backends.verl import checkpoints

    run_dir = tmp_path / "run"
    actor = checkpoints.folder(run_dir / "checkpoints", 40) / "actor"
    actor.mkdir(parents=True)
    for rank in range(8):
        (actor / f"model_world_size_8_rank_{rank}.pt").write_bytes(b"x")
    checkpoints.mark_complete(run_dir / "checkpoints", 40)
    (run_dir / "verl_metrics.jsonl").write_text("".join(  # the rows it covers: a resume from it works (else refused)
        json.dumps({"step": s, "data": {"trainer/global_step": s}}) + "\n" for s in range(1, 41)))
    assert launch_problem(_config(), run_dir) is None  # the paper's 8 GPUs, as saved
    problem = launch_problem(_config("cluster.nodes=2"), run_dir)
    assert problem is not None and "step 40) holds the model in 8 shards" in problem and "current 16 GPUs" in problem


def test_an_eval_only_run_of_a_checkpoint_saved_on_another_number_of_gpus_is_refused(data, tmp_path):
    """From a hunt: the shard check asked resumes only, so evaluating an 8-GPU checkpoint on 4 GPUs (a natural
    smaller allocation) passed, and verl failed to load `model_world_size_4_rank_*.pt` once its workers held the GPUs."""
    from arctl.backends.verl import checkpoints

    ckpt_dir = tmp_path / "trained" / "checkpoints"
    actor = checkpoints.folder(ckpt_dir, 40) / "actor"
    actor.mkdir(parents=True)
    for rank in range(8):
        (actor / f"model_world_size_8_rank_{rank}.pt").write_bytes(b"x")
    checkpoints.mark_complete(ckpt_dir, 40)
    ckpt = checkpoints.folder(ckpt_dir, 40)
    evaluate = ("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}")
    assert launch_problem(_config(*evaluate), tmp_path / "run") is None  # the 8 GPUs it was trained on
    problem = launch_problem(_config(*evaluate, "cluster.gpus_per_node=4"), tmp_path / "run")
    assert problem is not None and problem.startswith(
        f"verl.eval_checkpoint={ckpt} holds the model in 8 shards, one per GPU it was trained on, and verl loads the "
        "shards of the current 4 GPUs: evaluate it on 8 GPUs"), problem
    assert launch_problem(_config(*evaluate, "cluster.gpus_per_node=4", "cluster.nodes=2"), tmp_path / "run") is None


@pytest.mark.parametrize("overrides, need, says", [
    (["cluster=local", "cluster.gpus_per_node=8"], 33, "cluster.cpus_per_task=2 gives each node's Ray 2 CPUs"),
    (["cluster.cpus_per_task=32"], 33, "(3 with each of its 8 GPUs, 8 for TransferQueue's 8 storage units and 1 for "
                                       "their controller)"),
    (["cluster.nodes=2", "cluster.cpus_per_task=28"], 29, "4 for TransferQueue's 8 storage units over the nodes"),
    (["cluster.gpus_per_node=4", "cluster.cpus_per_task=16",
      "verl.overrides=['transfer_queue.backend.SimpleStorage.num_data_storage_units=4']"], 17, "4 storage units"),
    (["verl.ray_start_args=['--num-cpus=4']"], 33, "verl.ray_start_args' --num-cpus=4 gives each node's Ray 4 CPUs"),
])
def test_a_gpu_job_whose_ray_has_fewer_cpus_than_verl_reserves_is_refused(overrides, need, says):
    """From a hunt: `cluster.gpus_per_node=8` alone (what the refusal of a GPU-less request suggests) kept the
    2-CPU default; the job body starts Ray with `--num-cpus=$SLURM_CPUS_PER_TASK`, and verl waits with no time
    limit for TransferQueue's actors (8 + 1 CPUs) and a placement group of 3 CPUs per GPU: the job would hold 8
    GPUs doing nothing until its time limit. The boundary was checked on Ray with verl's and TransferQueue's own
    placement calls: 33 CPUs hold 8 GPUs' bundles after TransferQueue's, 32 do not."""
    from arctl.backends.verl.run_config import ray_cpus_problem

    problem = ray_cpus_problem(_config(*overrides))
    assert problem is not None and says in problem and f"verl reserves {need} there before its first step" in problem
    assert problem.endswith(f">={need}") and "\n" not in problem, problem
    # at the boundary it passes; a GPU-less run (the CPU loop sizes its own logical Ray) is not asked
    enough = [o for o in overrides if not o.startswith(("cluster.cpus_per_task", "verl.ray_start_args"))]
    assert ray_cpus_problem(_config(*enough, f"cluster.cpus_per_task={need}")) is None
    assert ray_cpus_problem(_config("verl.smoke=true", "cluster.cpus_per_task=1")) is None


def test_missing_inputs_are_refused_and_a_smoke_or_rehearsal_run_is_not_checked_for_them(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "nodata"))
    problem = launch_problem(_config(), tmp_path / "run")
    assert problem is not None and problem.startswith(f"dataset file {tmp_path / 'nodata'}") and "arctl data prepare" in problem
    assert launch_problem(_config("verl.smoke=true"), tmp_path / "run") is None
    assert launch_problem(_config("verl.rehearsal_steps=3"), tmp_path / "run") is None


def test_an_eval_only_run_of_a_checkpoint_that_is_not_there_is_refused(data, tmp_path):
    ckpt = tmp_path / "other" / "checkpoints" / "global_step_40"
    problem = launch_problem(_config("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}"), tmp_path / "run")
    assert problem.startswith(f"verl.eval_checkpoint={ckpt} does not exist — give a run's checkpoints/global_step_N "
                              "folder (seen from here; where only the compute nodes see it, ARCTL_VERL_LAUNCH_CHECK=0")
    ckpt.mkdir(parents=True)
    assert launch_problem(_config("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}"), tmp_path / "run") is None


@pytest.mark.parametrize("override, says", [
    ("verl.tensor_model_parallel_size=3", "the rollout's parallel size 3"),
    # the job's setup raises too: the dry run's sbatch preview was a traceback, exit 1 (from an audit of the README)
    ("verl.overrides=['trainer.save_freq=10']", "verl.overrides entry 'trainer.save_freq=10' replaces trainer.save_freq")])
def test_the_launch_and_its_dry_run_refuse_in_one_line_and_submit_nothing(data, tmp_path, monkeypatch, override, says):
    import slurm_shims  # tests/support/slurm_shims.py

    calls = tmp_path / "calls.log"
    shims = slurm_shims.install(tmp_path / "shims", **{
        name: f'echo "{name} $*" >> "{calls}"\nexit 1\n' for name in slurm_shims.CLIENT_PROGRAMS})
    monkeypatch.setenv("PATH", f"{shims}:/usr/bin:/bin")
    ws = tmp_path / "ws"
    args = ["run", "main-grpo", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "cluster=slurm", override]
    res = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert res.exit_code == 2 and f"a launch would be refused: main-grpo/grpo: {says}" in res.stderr, res.output
    assert "its job would fail as it starts" in res.stderr and json.loads(res.stdout)["refused"]
    res = CliRunner().invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 2, res.output  # (an exception escaping is exit 1)
    assert f"a launch would be refused: main-grpo/grpo: {says}" in res.stdout
    res = CliRunner().invoke(app, args)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and says in lines[0], res.output
    assert not ws.exists() and "sbatch" not in (calls.read_text() if calls.exists() else "")


def test_what_verl_would_accept_is_not_refused(data, tmp_path, monkeypatch):
    """From a review: an eval-only run makes no update (the mini-batch rule is asserted only there); the
    FSDP config's Ulysses size divides the data-parallel ranks; data only the compute nodes see is the
    user's to vouch for (ARCTL_VERL_LAUNCH_CHECK=0)."""
    small = ("data.ppo_mini_batch_size=1", "data.train_batch_size=2", "rollout.n=4")
    ckpt = tmp_path / "other" / "checkpoints" / "global_step_40"
    ckpt.mkdir(parents=True)
    assert launch_problem(_config(*small, "verl.eval_only=true", f"verl.eval_checkpoint={ckpt}"), tmp_path / "r") is None
    ulysses = "verl.overrides=['actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=2']"
    problem = launch_problem(_config("data.ppo_mini_batch_size=1", "data.train_batch_size=4", "rollout.n=6", ulysses),
                             tmp_path / "r")
    assert problem is not None and "mini-batch of 6 rows" in problem and "4 data-parallel ranks" in problem, problem
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "only-on-the-nodes"))
    assert launch_problem(_config(), tmp_path / "r") is not None
    monkeypatch.setenv("ARCTL_VERL_LAUNCH_CHECK", "0")
    assert launch_problem(_config(), tmp_path / "r") is None


def test_a_completed_run_the_launch_skips_is_not_checked(data, tmp_path, monkeypatch):
    """From a review: the check asked every run of the launch, so a sweep whose completed run's inputs had
    gone since (a pruned checkpoint, moved data) was refused where it skipped that run before."""
    import slurm_shims  # tests/support/slurm_shims.py

    from arctl.compose import resolve_experiment
    from arctl.launch import states
    from arctl.launch.launcher import items_from_resolved, launch
    from arctl.launch.registry import Registry
    from arctl.launch.workspace import Workspace

    count = tmp_path / "n"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=f'echo x >> {count}\necho "Submitted batch job $((300 + $(wc -l < {count})))"\n',
                    scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                    squeue="exit 0\n", sacct="exit 0\n", srun="exit 0\n")
    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm"]))
    launch(items, ws, executor="slurm")
    with Registry(ws.registry_path) as reg:
        reg.update_many([(items[0].run_id, {"state": states.COMPLETED})])
    (data / "deepscaler" / "train.parquet").unlink()
    items = items_from_resolved(resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm"]))
    result = launch(items, ws, executor="slurm")
    assert [reason for _, reason in result.skipped] == ["completed (use --force to rerun)"] and not result.submitted
    with pytest.raises(Exception, match="dataset file"):  # --force reruns it: then it is checked
        launch(items_from_resolved(resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm"])), ws,
               executor="slurm", force=True)


@pytest.mark.parametrize("override, says", [
    ("verl.overrides='[trainer.save_freq=10]'", "verl.overrides entry '[trainer.save_freq=10]' is not KEY=VALUE"),
    ("verl.overrides=5", "verl.overrides=5 is not a list of KEY=VALUE entries"),
    ("verl.overrides=[5]", "verl.overrides entry 5 is not KEY=VALUE"),
    ("verl.overrides=[nokey]", "verl.overrides entry 'nokey' is not KEY=VALUE")])
def test_verl_overrides_that_are_not_key_value_entries_are_refused_where_they_are_written(override, says):
    """From an audit of the README, which wrote `verl.overrides='[KEY=VALUE]'`: one text reached the job, where
    verl's message named another entry; `verl.overrides=5` was a traceback at validation."""
    from arctl.compose import SpecError

    with pytest.raises(SpecError) as info:
        _config(override)
    assert says in str(info.value) and "verl.overrides=['trainer.save_freq=5']" in str(info.value)
    assert _config("verl.overrides=['trainer.log_val_generations=10']")["verl"]["overrides"] == [
        "trainer.log_val_generations=10"]
