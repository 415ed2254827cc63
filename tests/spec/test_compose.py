"""Composition of every experiment and sweep, and the paper's arms encoded as the run table says."""

import pytest

from arctl.compose import SpecError, resolve_experiment, resolve_sweep
from arctl.compose.experiment import list_experiments, load_experiment
from arctl.compose.resolvers import RESOLVERS, budget_grid
from arctl.compose.sweep import list_sweeps, load_sweep
from arctl.compose.validate import largest_budget

PAPER_EXPERIMENTS = {
    "main-grpo", "main-ar-base", "main-ar-linear", "main-ar-uniform", "ablation-dense",
    "ablation-decouple", "ablation-vr", "r1-7b", "ctx-16k",
}


def test_every_paper_experiment_has_a_spec():
    assert PAPER_EXPERIMENTS <= set(list_experiments())
    assert {"priors", "ablations"} <= set(list_sweeps())


def test_the_experiments_composed_are_arctls_listing_with_a_users_file(tmp_path):
    """The composition test above is parametrized by arctl's listing, run in a fresh process from a project that
    holds a new experiment file: it composes that file too."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "zz-mine.yaml").write_text("arms: {a: [algo=grpo, prior=base]}\n")
    here = Path(__file__).resolve()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--co",
                           f"--rootdir={here.parents[2]}", str(here)], cwd=tmp_path, capture_output=True, text=True)
    listed = {line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line}
    assert {f"test_every_experiment_composes_at_both_scales[{n}-{s}]"
            for n in ("zz-mine", "baselines-l1") for s in ("tiny", "paper")} <= listed, done.stdout + done.stderr


@pytest.mark.parametrize("scale", ["tiny", "paper"])
@pytest.mark.parametrize("name", list_experiments())  # arctl's own listing: a file added to experiments/ as well
def test_every_experiment_composes_at_both_scales(name, scale):
    """Every experiment on the spec search path, as `arctl ls` lists it (from a hunt: a fixed set of the paper's
    left out the baselines and any file a user adds, which the README says these tests compose)."""
    runs = resolve_experiment(name, scale=scale)
    exp = load_experiment(name)
    assert [r.arm for r in runs] == [a for a in exp.arms for _ in exp.seeds]
    for run in runs:
        cfg = run.config
        assert cfg["experiment"] == name and cfg["arm"] == run.arm and cfg["scale"]["name"] == scale
        assert cfg["backend"] == ("tiny" if scale == "tiny" else "verl")
        if scale == "tiny" or "model" in exp.groups:  # the tiny scale fixes the model; else the spec's choice
            assert cfg["model"]["name"] == ("tiny-qwen2" if scale == "tiny" else exp.groups["model"])
        assert cfg["wandb"]["group"] == name and cfg["wandb"]["name"] == f"{run.arm}-s{run.seed}"
        # up to the largest thinking budget, or the scale's b_m for an arm trained below it (Elastic's)
        assert cfg["eval"]["grid"][-1] <= largest_budget(cfg, cfg["thinking"]["budgets"])


def _arm(name, arm, scale="paper", overrides=()):
    return resolve_experiment(name, list(overrides), scale=scale, arms=[arm])[0].config


def test_run_table_of_the_reference_implementation():
    # arm: (summaries per budget, decoupled, number of budgets, prior, baseline)
    table = {
        ("main-grpo", "grpo"): (1, False, 1, "base", "v2"),
        ("main-ar-base", "ar-base"): (4, True, 4, "base", "brpo"),
        ("main-ar-linear", "ar-linear"): (4, True, 4, "linear", "brpo"),
        ("main-ar-uniform", "ar-uniform"): (4, True, 4, "uniform", "brpo"),
        ("ablation-dense", "grpo-dense"): (1, False, 4, "linear", "v2"),
        ("ablation-decouple", "grpo-decouple"): (4, True, 4, "base", "v2"),
        ("ablation-vr", "grpo-vr"): (1, False, 4, "base", "brpo"),
        ("ablation-vr", "grpo-vr-decouple"): (4, True, 4, "base", "brpo"),
    }
    for (exp, arm), (group, decoupled, m, prior, baseline) in table.items():
        cfg = _arm(exp, arm)
        assert cfg["summary"]["group_size"] == group, (exp, arm)
        assert cfg["summary"]["decoupled"] is decoupled, (exp, arm)
        assert len(cfg["thinking"]["budgets"]) == m, (exp, arm)
        assert cfg["thinking"]["prior"] == prior and cfg["thinking"]["baseline"] == baseline, (exp, arm)
        assert cfg["summary"]["prior"] == "uniform"


def test_paper_hyperparameters():
    cfg = _arm("main-ar-uniform", "ar-uniform")
    assert cfg["thinking"]["budgets"] == [2000, 4000, 6000, 8000]
    assert cfg["thinking"]["lam"] == 0.5 and cfg["summary"]["max_tokens"] == 128
    assert cfg["rollout"]["n"] == 8 and cfg["optim"]["lr"] == 1e-6 and cfg["optim"]["clip_ratio"] == 0.2
    assert cfg["data"]["train_batch_size"] == 64 and cfg["data"]["ppo_mini_batch_size"] == 32
    assert cfg["trainer"]["test_freq"] == 20 and cfg["trainer"]["save_freq"] == 40
    assert cfg["eval"]["grid"] == list(range(250, 8001, 250))
    assert _arm("main-grpo", "grpo")["thinking"]["budgets"] == [8000]
    lp = _arm("ablation-dense", "grpo-lp-v2")
    assert lp["reward"] == {"length_penalty": "v2", "alpha": 0.2} and lp["thinking"]["budgets"] == [8000]


def test_r1_7b_and_ctx_16k_scale_overrides():
    big = _arm("r1-7b", "ar-uniform")
    assert big["model"]["path"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
    assert big["trainer"]["total_epochs"] == 2 and big["data"]["train_batch_size"] == 128
    assert big["optim"]["clip_ratio_high"] > big["optim"]["clip_ratio"]
    ctx = _arm("ctx-16k", "ar-uniform")
    assert ctx["thinking"]["budgets"] == list(range(2000, 16001, 2000))
    assert ctx["rollout"]["n"] == 16 and ctx["trainer"]["total_epochs"] == 3
    # the anytime accuracy over the authors' 4 validation budgets at 16k (brpo.py: VAL_SPLIT_POINTS), not all 8
    assert ctx["eval"]["budgets"] == [4000, 8000, 12000, 16000] and ctx["eval"]["grid"][-1] == 16000
    assert _arm("ctx-16k", "grpo")["thinking"]["budgets"] == [16000]
    tiny = _arm("ctx-16k", "ar-uniform", scale="tiny")  # b_m x 2, as 8k -> 16k, and its loss constant
    assert tiny["thinking"]["budgets"] == list(range(48, 385, 48)) and tiny["optim"]["loss_norm_len"] == 384
    assert tiny["eval"]["budgets"] == [96, 192, 288, 384]
    first = _arm("ctx-16k", "ar-uniform", scale="tiny-running-sum")  # the first toy keeps its budgets
    assert first["thinking"]["budgets"] == list(range(8, 65, 8)) and first["tiny"]["task"]["name"] == "running_sum"


def test_override_grammar():
    cfg = _arm("main-ar-uniform", "ar-uniform", overrides=["prior=linear", "thinking.budgets=[1000,2000]"])
    assert cfg["thinking"]["prior"] == "linear" and cfg["thinking"]["budgets"] == [1000, 2000]
    assert cfg["eval"]["grid"][-1] == 2000
    cfg = _arm("main-ar-uniform", "ar-uniform", overrides=["prior=custom", "thinking.probs=[0.1,0.2,0.3,0.4]"])
    assert cfg["thinking"]["probs"] == [0.1, 0.2, 0.3, 0.4]
    # user overrides come last: they beat the arm's group choices
    assert _arm("main-grpo", "grpo", overrides=["algo=anytime"])["thinking"]["baseline"] == "brpo"
    # a new key only where a backend reads it (a toy task's knobs); else it would change nothing: refused
    with pytest.raises(SpecError, match=r"verl.extra is no key of the verl section: nothing would read it"):
        _arm("main-grpo", "grpo", overrides=["+verl.extra=3"])
    with pytest.raises(SpecError, match=r"verl.extra is read by the verl backend only.*backend is tiny"):
        _arm("main-grpo", "grpo", scale="tiny", overrides=["+verl.extra=3"])
    assert _arm("main-grpo", "grpo", scale="tiny", overrides=["++tiny.threads=1"])["tiny"]["threads"] == 1  # a key it has
    with pytest.raises(SpecError, match="adds a new key"):
        _arm("main-grpo", "grpo", overrides=["+new.key=1"])
    with pytest.raises(SpecError, match="unknown config key 'thinking.lamb'.*thinking.lam"):
        _arm("main-grpo", "grpo", overrides=["thinking.lamb=1"])
    with pytest.raises(SpecError, match="deletes"):
        _arm("main-grpo", "grpo", overrides=["~thinking.lam"])
    # a mapping written whole names its unknown key, not the mapping (from a hunt: "unknown config key 'optim'
    # - did you mean 'optim'")
    with pytest.raises(SpecError, match=r"unknown config key 'optim.lrr' .*did you mean 'optim.lr'"):
        _arm("main-grpo", "grpo", overrides=["optim={lr:2e-6,lrr:1}"])


def test_tiny_scale_uses_the_tiny_model_unless_the_user_picks_one():
    assert _arm("main-grpo", "grpo", scale="tiny")["model"]["name"] == "tiny-qwen2"
    # the user's choice wins the composition; the tiny backend then refuses a model it cannot build (a review)
    with pytest.raises(SpecError, match="model.hidden_size=None: the tiny backend builds its model from its sizes"):
        _arm("main-grpo", "grpo", scale="tiny", overrides=["model=r1-distill-qwen-1.5b"])
    assert _arm("main-grpo", "grpo", overrides=["scale=paper"])["backend"] == "verl"
    # the scale's own declaration (scale.model), not its name, fixes the model: every scale that
    # inherits the tiny one, and none other
    from arctl.compose.paths import group_options
    from arctl.compose.resolve import scale_model

    for scale in group_options("scale"):
        model = _arm("main-grpo", "grpo", scale=scale)["model"]["name"]
        assert (model == "tiny-qwen2") == (scale_model(scale) == "tiny"), scale
    assert scale_model("tiny-running-sum") == "tiny" and scale_model("paper") is None
    with pytest.raises(SpecError, match="--scale tiny and scale=paper disagree"):  # never silently paper
        _arm("main-grpo", "grpo", scale="tiny", overrides=["scale=paper"])


def test_sweeps_expand_experiments_arms_seeds_and_grid():
    runs = resolve_sweep("priors")
    sweep = load_sweep("priors")
    assert len(runs) == 4 * len(sweep.seeds)
    assert {(r.experiment, r.seed) for r in runs} == {(e, s) for e in sweep.experiments for s in sweep.seeds}
    assert all(r.config["wandb"]["group"] == "priors" and r.sweep == "priors" for r in runs)
    lam = resolve_sweep("lambda", seeds=[0])
    assert sorted(r.config["thinking"]["lam"] for r in lam) == [0.25, 0.5, 0.75, 1.0]
    abl = resolve_sweep("ablations", seeds=[3])
    assert len(abl) == 4 + 2 + 3 and {r.seed for r in abl} == {3}


def test_budget_grid():
    assert budget_grid(8000, 32) == list(range(250, 8001, 250))
    assert budget_grid(64, 32) == list(range(2, 65, 2))
    assert budget_grid(10, 32) == list(range(1, 11))  # fewer distinct budgets than asked: no repeats


def test_part_of_the_largest_budget_by_hand():
    part = RESOLVERS["arctl.part"]
    assert part([48, 96, 144, 192], [0.5, 0.375, 0.25]) == [96, 72, 48]  # ThinkPrune's 4k/3k/2k of 8k
    assert part([48, 96, 144, 192], 0.125) == 24 and part([8, 16, 24, 32], 0.125) == 4  # Elastic's t = s = b_m/8
    assert part([2000, 8000], 1) == 8000 and part([5], 0.01) == 1  # at least one token
    for bad in (0, 1.5, -0.5, "abc", True, [0.5, 2]):
        with pytest.raises(SpecError, match="arctl.part: fraction .* is invalid"):
            part([48, 96], bad)


# the tiny scale's settings that are parts of its largest budget, and what they were as written numbers
# (their run ids must not change): ThinkPrune's limits, L1's targets, Elastic's t and s, the loss constant
PARTS = [("baselines-thinkprune", "thinkprune", "budget_control.thinkprune_limits", [96, 72, 48], [16, 12, 8]),
         ("baselines-l1", "l1-exact", "budget_control.l1_targets", [24, 48, 72, 96], [4, 8, 12, 16]),
         ("baselines-elastic", "elastic", "thinking.budgets", [24], [4]),
         ("baselines-elastic", "elastic", "summary.max_tokens", 24, 4),
         ("main-grpo", "grpo", "optim.loss_norm_len", 192, 32)]


@pytest.mark.parametrize("name,arm,key,at_tiny,at_a_sixth", PARTS, ids=[f"{p[0]}:{p[2]}" for p in PARTS])
def test_settings_in_proportion_to_the_largest_budget_follow_the_scale_budgets(name, arm, key, at_tiny, at_a_sixth):
    def get(cfg):
        for part in key.split("."):
            cfg = cfg[part]
        return cfg

    assert get(_arm(name, arm, scale="tiny")) == at_tiny
    assert get(_arm(name, arm, scale="tiny", overrides=["scale.budgets=[8,16,24,32]"])) == at_a_sixth


def test_ctx16k_doubles_the_tiny_loss_constant_with_its_budgets():
    assert _arm("ctx-16k", "grpo", scale="tiny")["optim"]["loss_norm_len"] == 384


def test_a_bad_part_is_one_error_naming_the_key_that_called_it():
    with pytest.raises(SpecError) as err:
        _arm("main-grpo", "grpo", scale="tiny",
             overrides=["budget_control.thinkprune_limits='${arctl.part:${scale.budgets},[0.5,2]}'"])
    # where it was written (the command line; a spec's file and arm, from a review), then the key
    assert str(err.value).startswith("command line (main-grpo/grpo): budget_control.thinkprune_limits: arctl.part: "
                                     "fraction 2 is invalid")
    assert "\n" not in str(err.value) and "raised while resolving" not in str(err.value)


def test_eval_budgets_default_to_the_scale_support_up_to_the_max_thinking_budget():
    assert _arm("main-grpo", "grpo")["eval"]["budgets"] == [2000, 4000, 6000, 8000]
    assert _arm("main-ar-uniform", "ar-uniform", overrides=["eval.budgets=[4000,8000]"])["eval"]["budgets"] == [
        4000, 8000]


def test_the_base_config_declares_every_verl_backend_default():
    from arctl.backends.verl.overrides import VERL_DEFAULTS

    cfg = _arm("main-ar-uniform", "ar-uniform")
    assert {k: cfg["verl"][k] for k in VERL_DEFAULTS} == VERL_DEFAULTS
    assert _arm("main-ar-uniform", "ar-uniform", overrides=["verl.tree_attention=duplicate"])["verl"][
        "tree_attention"] == "duplicate"

