"""Spec -> verl overrides: every paper experiment composes in verl's own config; bad keys fail clearly."""

from __future__ import annotations

import copy

import pytest

from arctl.algo.settings import Objective
from arctl.backends.verl.advantage import objective_of
from arctl.backends.verl.overrides import (
    VerlConfigError,
    build_verl_config,
    check_overrides,
    max_response_length,
    verl_overrides,
)


def _paper_runs():
    from arctl.compose import resolve_experiment
    from arctl.compose.experiment import list_experiments

    runs = []
    for name in list_experiments():
        runs += resolve_experiment(name, scale="paper")
    return runs


def test_every_paper_experiment_composes_in_verl_config(tmp_path):
    from omegaconf import OmegaConf

    runs = _paper_runs()
    assert len(runs) >= 9
    constants: dict[str, set] = {}
    for run in runs:
        cfg = run.config
        overrides, composed = build_verl_config(cfg, tmp_path / run.config["arm"])
        # the values verl will run with are the spec's
        a = composed.actor_rollout_ref
        assert a.rollout.n == cfg["rollout"]["n"]
        assert a.actor.optim.lr == pytest.approx(cfg["optim"]["lr"])
        assert a.actor.clip_ratio_high == pytest.approx(cfg["optim"]["clip_ratio_high"])
        assert composed.data.train_batch_size == cfg["data"]["train_batch_size"]
        assert composed.data.max_response_length == max_response_length(cfg)
        # the objective reaches verl's processes whole, and is the spec's
        objective = objective_of(composed.arctl)
        assert objective == Objective.from_config(cfg)
        assert list(objective.budgets) == list(cfg["thinking"]["budgets"])
        assert objective.thinking.baseline == cfg["thinking"]["baseline"]
        assert composed.trainer.v1.trainer_mode == "arctl"
        assert a.rollout.agent.default_agent_loop == "arctl_tree"
        assert a.actor.policy_loss.loss_mode == "arctl_drgrpo"  # no dual clip unless the spec asks
        # the Dr. GRPO constant: trees per mini-batch x the experiment's loss_norm_len
        trees = cfg["data"]["ppo_mini_batch_size"] * cfg["rollout"]["n"]
        assert a.actor.loss_scale_factor == trees * cfg["optim"]["loss_norm_len"]
        constants.setdefault(run.experiment, set()).add(cfg["optim"]["loss_norm_len"])
        assert composed.trainer.default_local_dir == str(tmp_path / run.config["arm"] / "checkpoints")
        assert OmegaConf.select(composed, "algorithm.norm_adv_by_std_in_grpo") is False
        # the run's grader reaches the agent loop and verl's own reward path
        assert composed.arctl.grader == composed.reward.custom_reward_function.reward_kwargs.grader == "deepscaler"
    # one constant per experiment, whatever the arm: the authors' 10,176 at 8k and 18,176 at 16k
    assert all(len(c) == 1 for c in constants.values()), constants
    assert constants["ablation-vr"] == {10176} and constants["ctx-16k"] == {18176}


@pytest.mark.parametrize("grader", ["deepscaler", "math-verify"])
def test_verls_reward_function_loads_with_the_runs_grader(paper_config, tmp_path, grader):
    """verl loads compute_score from the composed config with reward_kwargs bound: the grader is the
    run's (an unreduced fraction is wrong only under the authors' grader)."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = {**paper_config, "verl": {**paper_config["verl"], "grader": grader}}
    _, composed = build_verl_config(cfg, tmp_path)
    fn = get_custom_reward_fn(composed)
    text = "t</think>\n\n**Final Answer**\n\\boxed{\\frac{2}{4}}"
    assert fn("aime24", text, "\\frac{1}{2}", None) == (0.0 if grader == "deepscaler" else 1.0)
    assert fn("aime24", text, "\\frac{2}{4}", None) == 1.0


def test_a_config_from_before_the_grader_key_keeps_grading_with_math_verify(paper_config):
    from arctl.backends.verl.overrides import arctl_settings

    old = {**paper_config, "verl": {k: v for k, v in paper_config["verl"].items() if k != "grader"}}
    assert arctl_settings(old)["grader"] == "math-verify" and arctl_settings(paper_config)["grader"] == "deepscaler"


def test_loss_constant_is_independent_of_the_tree_layout_and_dual_clip_is_opt_in(paper_config):
    dup = copy.deepcopy(paper_config)
    dup["verl"]["tree_attention"] = "duplicate"
    factors = {build_verl_config(c)[1].actor_rollout_ref.actor.loss_scale_factor for c in (paper_config, dup)}
    assert factors == {32 * 8 * 10176}
    dual = copy.deepcopy(paper_config)
    dual["optim"]["dual_clip"] = 3.0
    actor = build_verl_config(dual)[1].actor_rollout_ref.actor
    assert actor.policy_loss.loss_mode == "arctl_drgrpo_dual" and actor.clip_ratio_c == 3.0


def test_paper_response_length_is_the_authors():
    from arctl.compose import resolve_experiment

    cfg = resolve_experiment("main-ar-uniform", scale="paper")[0].config
    assert max_response_length(cfg) == 10176  # 8000 + 4 budgets x 4 summaries x 128 + 128
    dup = copy.deepcopy(cfg)
    dup["verl"]["tree_attention"] = "duplicate"
    assert max_response_length(dup) == 8128
    ov = verl_overrides(dup)
    # duplicated layout: 1 thinking row + 16 branch rows per tree; the trainer scales the mini-batch by 17
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=32" in ov and "+arctl.rows_per_tree=17" in ov
    # a coupled arm trains the largest budget's summaries only and sends no row for the others' (grpo-vr:
    # 4 budgets x 1 summary, 1 trained): 2 rows per tree, not 5 (the mini-batch would hold 2.5 x the trees)
    vr = next(r.config for r in resolve_experiment("ablation-vr", scale="paper") if r.arm == "grpo-vr")
    vr["verl"]["tree_attention"] = "duplicate"
    assert "+arctl.rows_per_tree=2" in verl_overrides(vr)
    _, composed = build_verl_config(dup)  # verl accepts the duplicated-branch layout too
    # it loads without flash-attn (not in verl[vllm]==0.9.1): SDPA on padded rows, never verl's
    # default flash_attention_2 or its remove-padding path
    model = composed.actor_rollout_ref.model
    assert model.override_config.attn_implementation == "sdpa" and model.use_remove_padding is False


@pytest.mark.parametrize("layout, impl", [("flex", "flex_attention"), ("dense", "sdpa"), ("duplicate", "sdpa")])
def test_every_layout_names_an_attention_implementation_verl_can_load(paper_config, layout, impl):
    from verl.workers.config.model import HFModelConfig  # noqa: F401 - the class whose default is flash_attention_2

    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["tree_attention"] = layout
    model = build_verl_config(cfg)[1].actor_rollout_ref.model
    assert model.override_config.get("attn_implementation", "flash_attention_2") == impl


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("trainer.nosuchkey=1", "trainer.nosuchkey"),
        ("actor_rollout_ref.actor.optim.lrr=1e-6", "lrr"),
        ("trainer.save_freq=often", "trainer.save_freq"),
        ("actor_rollout_ref.rollout.n=1.5", "rollout.n"),
        ("trainer.val_before_train=maybe", "val_before_train"),
        ("actor_rollout_ref.actor.clip_ratio_high=high", "clip_ratio_high"),
    ],
)
def test_wrong_key_or_type_fails_with_one_clear_line(paper_config, bad, fragment):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["overrides"] = [bad]
    with pytest.raises(VerlConfigError) as info:
        build_verl_config(cfg)
    msg = str(info.value)
    assert "\n" not in msg and fragment in msg
    assert isinstance(info.value, ValueError)


def test_extra_override_is_applied_and_malformed_one_rejected(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["overrides"] = ["trainer.log_val_generations=7"]
    _, composed = build_verl_config(cfg)
    assert composed.trainer.log_val_generations == 7
    cfg["verl"]["overrides"] = ["trainer.log_val_generations"]
    with pytest.raises(VerlConfigError, match="KEY=VALUE"):
        verl_overrides(cfg)
    # from a review: a raw override of a value arctl sets won silently, while what arctl computed from its own
    # config stayed (rollout.n=16 with the loss constant of n=8: each update twice as large; a response length
    # shorter than a packed tree); now refused, as is arctl's own node
    for item in ("actor_rollout_ref.rollout.n=16", "data.max_response_length=4096", "+arctl.seed=3",
                 "trainer.save_freq=7"):
        cfg["verl"]["overrides"] = [item]
        with pytest.raises(VerlConfigError, match=f"replaces {item.split('=')[0].lstrip('+')}, which arctl sets"):
            verl_overrides(cfg)


def test_strings_with_grammar_characters_are_quoted(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["model"]["path"] = "/models/a b,c=[d]'e"
    cfg["wandb"]["name"] = "x=1,y"
    composed = check_overrides(verl_overrides(cfg))
    assert composed.actor_rollout_ref.model.path == "/models/a b,c=[d]'e"
    assert composed.trainer.experiment_name == "x=1,y"


def test_unknown_tree_layout_is_a_user_error(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["tree_attention"] = "sparse"
    with pytest.raises(VerlConfigError, match="tree_attention"):
        verl_overrides(cfg)


def test_checking_keeps_callers_hydra_state_and_stdout_clean(paper_config, capsys):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        build_verl_config(paper_config)
        assert GlobalHydra.instance().is_initialized()
        assert compose(config_name="ppo_trainer", overrides=["trainer.save_freq=3"]).trainer.save_freq == 3
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("item", ["actor_rollout_ref.actor.strategy=megatron", "+critic.strategy=megatron",
                                  "actor_rollout_ref.ref.strategy=veomni"])
def test_a_strategy_without_the_tree_mask_is_refused_at_validation(item):
    from arctl.compose import SpecError, resolve_experiment

    with pytest.raises(SpecError, match="FSDP engine only") as info:
        resolve_experiment("main-ar-uniform", scale="paper", overrides=[f"verl.overrides=['{item}']"])
    assert "\n" not in str(info.value) and "tree_attention=duplicate" in str(info.value)
    # one row per branch needs no tree mask: any engine may train it
    runs = resolve_experiment("main-ar-uniform", scale="paper",
                              overrides=[f"verl.overrides=['{item}']", "verl.tree_attention=duplicate"])
    assert runs and resolve_experiment("main-ar-uniform", scale="paper",
                                       overrides=["verl.overrides=['actor_rollout_ref.actor.strategy=fsdp2']"])


def test_the_composed_strategy_is_checked_too(paper_config, monkeypatch):
    from arctl.backends.verl import overrides as ov

    real = ov.check_overrides

    def megatron(items):  # a strategy that reached verl's config some other way (e.g. a site default)
        cfg = real(items)
        cfg.actor_rollout_ref.actor.strategy = "megatron"
        return cfg

    monkeypatch.setattr(ov, "check_overrides", megatron)
    with pytest.raises(VerlConfigError, match="strategy=megatron"):
        build_verl_config(paper_config)


def test_validation_goes_in_batches_the_routers_sticky_ids_cover(paper_config, tmp_path):
    """Eval-only at paper scale: 5 eval sets x 32 samples ~ 50k trees. verl's default submits them at
    once, while its router keeps 10,000 sticky ids: summaries of an evicted tree miss the replica
    holding its thinking's KV. Batches of 156 questions keep <= 4,992 trees in flight."""
    import copy

    from verl.workers.rollout.router import DEFAULT_ROUTING_CACHE_SIZE

    from arctl.backends.verl.overrides import ROUTER_STICKY_IDS
    from arctl.backends.verl.run_config import verl_run_config

    assert ROUTER_STICKY_IDS == DEFAULT_ROUTING_CACHE_SIZE
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["eval_only"] = True
    composed = verl_run_config(cfg, tmp_path)[1]
    n = composed.actor_rollout_ref.rollout.val_kwargs.n
    assert n == 32 and composed.data.val_batch_size == 156
    assert composed.data.val_batch_size * n <= DEFAULT_ROUTING_CACHE_SIZE // 2


@pytest.mark.parametrize("overrides,fragment", [
    (["verl.eval_only=true", "verl.eval_checkpoint=/runs/x/checkpoints"], "not a checkpoint folder"),
    # its own run dir has no checkpoint: verl would evaluate model.path and log it as the arm's final evaluation
    (["verl.eval_only=true"], "needs verl.eval_checkpoint"),
    (["eval.num_problems=100"], "evaluates every problem"),  # read by the tiny backend only
    (["verl.device=cpu", "verl.tree_attention=dense", "cluster.gpus_per_node=2"], "would request GPUs from SLURM"),
    (["verl.device=cpu"], "no backward pass on a CPU"),
    (["verl.device=cpu", "verl.tree_attention=dense", "verl.rollout_name=sglang"], "arctl_cpu server"),
])
def test_what_verl_cannot_run_is_refused_at_validation(overrides, fragment):
    from arctl.compose import SpecError, resolve_experiment

    with pytest.raises(SpecError, match=fragment) as info:
        resolve_experiment("main-ar-uniform", scale="paper", overrides=overrides)
    assert "\n" not in str(info.value)


def test_a_cpu_run_takes_logical_ray_resources_and_fp32(paper_config):
    """verl.device=cpu: FSDP ranks on logical Ray GPUs (verl.n_gpus_per_node), fp32 through verl's
    mixed_precision (the key its FSDP engine reads), and a job body that starts Ray with them."""
    import copy

    from arctl.backends.verl.ray_job import job_script

    cfg = copy.deepcopy(paper_config)
    cfg["verl"].update(device="cpu", tree_attention="dense", n_gpus_per_node=2)
    composed = build_verl_config(cfg)[1]
    assert composed.trainer.n_gpus_per_node == 2 and composed.ray_kwargs.ray_init.num_gpus == 2
    assert dict(composed.actor_rollout_ref.actor.fsdp_config.mixed_precision) == {
        "param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert composed.actor_rollout_ref.rollout.name == "arctl_cpu" and composed.trainer.device == "cpu"
    script = job_script(cfg, "/runs/r")
    assert script.count("--num-gpus=2") == 2 and "unset CUDA_VISIBLE_DEVICES" in script
    assert "cpus=$(( cpus > 8 ? cpus : 8 ))" in script
    assert "--num-gpus" not in job_script(paper_config, "/runs/r")  # a GPU run without GPUs requested: Ray counts


def test_joining_the_jobs_ray_drops_the_node_resources(paper_config):
    import copy

    from arctl.backends.verl.ray_connect import joining_kwargs

    cfg = copy.deepcopy(paper_config)
    cfg["verl"].update(device="cpu", tree_attention="dense", n_gpus_per_node=1)
    composed = joining_kwargs(build_verl_config(cfg)[1])
    assert composed.ray_kwargs.ray_init.num_cpus is None and composed.ray_kwargs.ray_init.num_gpus is None


def test_a_micro_batch_holds_one_packed_tree_in_both_passes(paper_config):
    """The padded path pays for rows x the longest row (full-vocabulary logits included) and verl's
    token budget counts real tokens, so the paper default bounds a micro-batch by rows: one tree of at
    most max_prompt_length + 10,176 tokens in the old-log-prob pass and in the update (docs/gpu.md)."""
    composed = build_verl_config(paper_config)[1]
    actor, rollout = composed.actor_rollout_ref.actor, composed.actor_rollout_ref.rollout
    assert actor.use_dynamic_bsz is False and actor.ppo_micro_batch_size_per_gpu == 1
    assert rollout.log_prob_use_dynamic_bsz is False and rollout.log_prob_micro_batch_size_per_gpu == 1
    assert composed.data.max_response_length == 10176


@pytest.mark.parametrize("extra", [
    [],  # the run's own overrides
    ["+trainer.arctl_note=1", "~trainer.val_only"],  # a new key, a deleted one
    ["model_engine=dp", "actor@actor_rollout_ref.actor=dp_actor"],  # group choices: Hydra composes them
    ["hydra/job_logging=disabled", "~hydra/launcher"], ["++hydra/job_logging=disabled"],  # Hydra's own groups
    ["hydra/job_logging=null"], ["++trainer.total_epochs=2.0", "trainer.val_before_train=1"],
    ["trainer.nosuchkey=1"], ["trainer.save_freq=often"], ["trainer.save_freq=1,2"], ["trainer.save_freq=[1"],
])
def test_verls_config_composed_once_with_the_overrides_applied_is_hydras_compose(extra, tmp_path):
    """overrides._compose applies a run's overrides with Hydra's own applier to verl's config composed
    once; Hydra's compose of the same overrides, every time from verl's files, is the reference: the same
    config (values, interpolations, struct flag) or the same error, on a paper run of each set of override keys."""
    from omegaconf import OmegaConf

    from arctl.backends.verl import overrides as ov

    shapes, runs = {}, []  # a run of each set of override keys (the applier's work), two more for their values
    for run in _paper_runs():
        items = verl_overrides(run.config, tmp_path / run.config["arm"])
        if shapes.setdefault(tuple(sorted(i.partition("=")[0] for i in items)), run) is run or (
                f"{run.experiment}/{run.arm}" in ("ctx-16k/ar-uniform", "r1-7b/ar-linear")):
            runs.append((run, items))
    assert len(runs) >= 4, [f"{r.experiment}/{r.arm}" for r, _ in runs]
    for run, items in runs if not extra else runs[:1]:
        items = items + extra
        outcomes = []
        for compose in (ov._compose, ov._compose_with_hydra):
            try:
                cfg = compose(items)
                outcomes.append((OmegaConf.to_yaml(cfg), OmegaConf.is_struct(cfg)))  # types shown: 1, 1.0, true
            except Exception as err:  # noqa: BLE001 - the same error, whatever it is
                outcomes.append((type(err), str(err), str(err.__cause__)))
        assert outcomes[0] == outcomes[1], (run.experiment, run.arm, extra)
    assert ov._compose([]) is not ov._base_config()  # a copy: a caller's change stays its own


def test_the_rollout_names_and_resume_modes_arctl_accepts_are_verls():
    """verl.rollout_name and verl.resume_mode are refused at validation outside these lists: they must be
    what the installed verl knows (its rollout registry; the modes its trainer reads)."""
    import inspect

    from verl.trainer.ppo.v1 import trainer_base
    from verl.workers.rollout import base

    from arctl.backends.verl.settings import CPU_ROLLOUT, RESUME_MODES, ROLLOUT_NAMES

    assert set(ROLLOUT_NAMES) - {CPU_ROLLOUT} == {n for n, mode in base._ROLLOUT_REGISTRY if mode == "async"} - {CPU_ROLLOUT}
    source = inspect.getsource(trainer_base)
    assert all(f'resume_mode == "{m}"' in source for m in RESUME_MODES)


def test_paths_under_home_reach_verl_expanded(paper_config, tmp_path, monkeypatch):
    """From a review: ``data.val_files=[~/data/val.parquet]`` passed arctl's launch check (which expands
    ``~``) and reached verl as written, where ``datasets`` looked for ``<cwd>/~/data/val.parquet`` once the
    GPU job had started. Every path the user names reaches verl expanded; an HF model id is unchanged."""
    import copy

    from arctl.backends.verl.run_config import run_overrides

    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = copy.deepcopy(paper_config)
    cfg["data"]["train_files"] = "~/data/train.parquet"
    cfg["data"]["val_files"] = ["~/data/val.parquet", "/abs/other.parquet"]
    cfg["model"]["path"] = "~/models/r1"
    composed = check_overrides(verl_overrides(cfg))
    assert composed.data.train_files == str(tmp_path / "data/train.parquet")
    assert list(composed.data.val_files) == [str(tmp_path / "data/val.parquet"), "/abs/other.parquet"]
    assert composed.actor_rollout_ref.model.path == str(tmp_path / "models/r1")
    cfg["model"]["path"] = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    assert check_overrides(verl_overrides(cfg)).actor_rollout_ref.model.path == cfg["model"]["path"]
    cfg["verl"].update(eval_only=True, eval_checkpoint="~/runs/r/checkpoints/global_step_5")
    composed = check_overrides(run_overrides(cfg, tmp_path / "run"))
    assert composed.trainer.resume_from_path == str(tmp_path / "runs/r/checkpoints/global_step_5")


def test_each_seed_samples_its_own_stream_and_vllm_sizes_its_cache_for_the_longest_request(paper_config, tmp_path):
    """From an audit of the mapping: verl's rollout seed (vLLM's engine seed, + the replica's rank) stayed 42 for
    every seed, so replicates of an arm differed by their data order alone; max_model_len stayed null, so vLLM
    sized its KV cache for R1-Distill's 131,072-token context. The seed follows the run's; the longest request
    is the prompt (with a method's added instruction) and the whole response."""
    import copy

    from arctl.backends.verl.overrides import max_response_length
    from arctl.backends.verl.run_config import verl_run_config

    seeds = {}
    for seed in (0, 3):
        cfg = copy.deepcopy(paper_config)
        cfg["seed"] = seed
        rollout = verl_run_config(cfg, tmp_path / str(seed))[1].actor_rollout_ref.rollout
        seeds[seed] = rollout.seed
        assert rollout.max_model_len == rollout.prompt_length + max_response_length(cfg) == 1024 + 10176
    assert seeds == {0: 0, 3: 3}
