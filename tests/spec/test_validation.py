"""Every validation rule with a bad input; random bad specs never pass and only raise SpecError."""

import copy
import re
import textwrap

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from resolved import arm_config  # tests/support/resolved.py

from arctl.compose import SpecError, resolve_experiment
from arctl.compose.experiment import load_experiment
from arctl.compose.sweep import load_sweep
from arctl.compose.validate import validate_config


def base() -> dict:
    """The paper's AR-uniform config (composed at the first test that needs it, not at collection)."""
    return arm_config("main-ar-uniform", "ar-uniform", scale="paper")


def bad(path: str, value, match: str):
    cfg = base()
    node = cfg
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    with pytest.raises(SpecError, match=match):
        validate_config(cfg)


def test_the_base_config_is_valid():
    validate_config(base())


def test_decoupled_single_summaries_need_a_thinking_group():
    # A = 1, decoupled: the summary baseline is the mean over the question's G thinking samples, so
    # G = 1 would train the summaries with zero advantage (V1 baseline lets rollout.n=1 pass otherwise)
    cfg = base()
    cfg["thinking"]["baseline"], cfg["summary"]["group_size"], cfg["rollout"]["n"] = "v1", 1, 1
    with pytest.raises(SpecError, match="zero advantage"):
        validate_config(cfg)
    cfg["summary"]["group_size"] = 2
    validate_config(cfg)


def test_the_preemption_warning_defaults_to_the_scale_within_the_time_limit():
    # paper: 1800 s (well above a step), but at most a quarter of the job's time limit
    assert base()["cluster"]["preempt_warning_s"] == min(1800, base()["cluster"]["time_min"] * 60 // 4)
    long = resolve_experiment("main-ar-uniform", scale="paper", overrides=["cluster=slurm-a100"])[0].config
    assert long["cluster"]["preempt_warning_s"] == 1800
    short = resolve_experiment("main-ar-uniform", scale="paper", overrides=["cluster.time_min=20"])[0].config
    assert short["cluster"]["preempt_warning_s"] == 300
    assert resolve_experiment("ablation-vr", scale="tiny")[0].config["cluster"]["preempt_warning_s"] == 60
    with pytest.raises(SpecError, match="below the time limit"):
        resolve_experiment("main-ar-uniform", scale="paper", overrides=["cluster.time_min=20",
                                                                        "cluster.preempt_warning_s=1800"])


def test_loss_constant_is_filled_in_from_the_authors_rule():
    assert base()["optim"]["loss_norm_len"] == 10176
    ctx = resolve_experiment("ctx-16k", scale="paper")
    assert {r.config["optim"]["loss_norm_len"] for r in ctx} == {18176}  # every arm, one constant
    tiny = resolve_experiment("ablation-vr", scale="tiny")
    assert {r.config["optim"]["loss_norm_len"] for r in tiny} == {192}
    # an arm trained below the scale's b_m with its own summary cap (Elastic's E1 t = s = 1024) shares
    # the constant of the arms it is compared with, not the rule at its own t and s (1024 + 16 x 1024 + 128)
    elastic = resolve_experiment("baselines-elastic", scale="paper")[0].config
    assert (elastic["thinking"]["budgets"], elastic["summary"]["max_tokens"]) == ([1024], 1024)
    assert elastic["optim"]["loss_norm_len"] == 10176
    tiny_elastic = resolve_experiment("baselines-elastic", scale="tiny")[0].config
    assert (tiny_elastic["thinking"]["budgets"], tiny_elastic["summary"]["max_tokens"]) == ([24], 24)  # b_m / 8
    assert tiny_elastic["optim"]["loss_norm_len"] == 192
    # E1's inserted tokens (`</think>` alone) at both scales; the tiny warm-up trains that layout
    assert elastic["summary"]["inserted"] == tiny_elastic["summary"]["inserted"] == "think_end"
    longer = resolve_experiment("main-ar-uniform", scale="paper", overrides=["summary.max_tokens=256"])
    assert longer[0].config["optim"]["loss_norm_len"] == 10176  # the scale's cap: one constant per scale
    own = resolve_experiment("main-ar-uniform", scale="paper", overrides=["optim.loss_norm_len=4096"])
    assert own[0].config["optim"]["loss_norm_len"] == 4096


@pytest.mark.parametrize(
    "path, value, match",
    [
        ("thinking.budgets", [2000, 2000, 4000], "not strictly increasing"),
        ("thinking.budgets", [4000, 2000], "not strictly increasing"),
        ("thinking.budgets", [0, 2000], "holds 0: each entry must be an integer >= 1"),
        ("thinking.budgets", [-5], "holds -5"),
        ("thinking.budgets", [], "non-empty"),
        ("thinking.budgets", [1.5, 3], "holds 1.5: each entry must be an integer"),
        ("thinking.budgets", "8000", "expected a list of numbers"),
        ("thinking.prior", "gaussian", "not allowed"),
        ("thinking.probs", [0.5, 0.5, 0, 0], "prior=uniform"),
        ("thinking.baseline", "critic", "not allowed"),
        ("thinking.lam", 0, "a number > 0 and <= 1"),
        ("thinking.lam", 1.5, "a number > 0 and <= 1"),
        ("summary.group_size", 0, ">= 1"),
        ("summary.max_tokens", -1, ">= 1"),
        ("summary.decoupled", "yes", "true or false"),
        ("summary.prior", "zipf", "not allowed"),
        ("summary.weighting", "equal", "not allowed"),
        ("optim.dual_clip", 1.0, "null or a number > 1"),
        ("optim.dual_clip", "yes", "a number > 1"),
        ("optim.loss_norm_len", 0, "null or an integer >= 1"),
        ("cluster.preempt_warning_s", 0, "an integer >= 1"),
        ("verl.rehearsal_steps", -1, ">= 0"),
        ("optim.loss_norm_len", 10176.5, "an integer >= 1"),
        ("optim.loss_norm_len", None, "tokens per tree"),
        ("reward.length_penalty", "v3", "not allowed"),
        ("reward.alpha", 2.0, "a number >= 0 and <= 1"),
        ("rollout.n", 0, ">= 1"),
        ("rollout.n", 1, "nothing to average"),
        ("optim.lr", 0, "a number > 0"),
        ("optim.clip_ratio", 1.2, "a number > 0 and < 1"),
        ("optim.clip_ratio_high", 0.1, ">= optim.clip_ratio"),
        ("optim.betas", [0.9], r"\[beta1, beta2\]"),
        ("optim.kl_coef", -0.001, "a number >= 0"),
        ("optim.kl_type", "k3", "not allowed"),
        ("data.ppo_mini_batch_size", 48, "not a multiple"),
        ("eval.budgets", [2000, 9000], "thinking stops at 8000"),
        ("eval.grid", [250, 500, 8250], "thinking stops at 8000"),
        ("eval.n_samples", 0, ">= 1"),
        ("eval.datasets", [], "non-empty list"),
        ("cluster.executor", "k8s", "not allowed"),
        ("cluster.nodes", 0, ">= 1"),
        ("wandb.mode", "shared", "not allowed"),
        # what wandb.init refuses (found by a black-box pass: accepted, the job would fail at its start)
        ("wandb.project", "team/proj", "contains /: .*wandb.entity"),
        ("wandb.project", "a#b?c%d:e", r"contains # % : \?"),
        ("wandb.project", "back\\slash", r"contains \\"),
        ("wandb.project", "", "is empty"),
        ("wandb.project", "p" * 129, "129 characters long: W&B takes at most 128"),
        ("wandb.tags", ["ok", ""], "the tag ''"),
        ("wandb.tags", ["t" * 65], "1 to 64 characters"),
        ("wandb.tags", ["x,"], "a comma would split it"),
        ("seed", -1, ">= 0"),
        ("model.path", None, "needs model.path"),
    ],
)
def test_each_rule(path, value, match):
    bad(path, value, match)


def test_wandb_names_at_the_limits_pass():
    cfg = base()
    cfg["wandb"].update(project="p" * 128, tags=["t" * 64, "x"])
    validate_config(cfg)


@pytest.mark.parametrize(
    "probs, match",
    [
        ([0.5, 0.5], "2 probabilities but there are 4 budgets"),
        ([0.5, 0.5, 0.5, -0.5], "holds -0.5: each entry must be a number >= 0"),
        ([0.25, 0.25, 0.25, 0.2], "sums to 0.95"),
        (None, "needs thinking.probs"),
        (["a", 1, 0, 0], "holds 'a'"),
    ],
)
def test_custom_prior_rules(probs, match):
    cfg = base()
    cfg["thinking"]["prior"] = "custom"
    cfg["thinking"]["probs"] = probs
    with pytest.raises(SpecError, match=match):
        validate_config(cfg)


def test_custom_prior_within_tolerance_passes():
    cfg = base()
    cfg["summary"]["prior"] = "custom"  # read under the paper's weighting (AR-uniform's summaries are decoupled)
    cfg["summary"]["probs"] = [0.1, 0.2, 0.3, 0.4 + 5e-7]
    cfg["summary"]["weighting"] = "paper"
    validate_config(cfg)


def test_a_kl_term_is_allowed_on_every_arm():
    """A coupled arm with several budgets takes a KL term too: verl's rows mask its untrained summaries
    out as the tiny backend leaves them unpacked, so both penalise the same tokens (the equivalence test's
    coupled-kl case); it used to be refused."""
    for arm in ("grpo", "grpo-vr", "grpo-vr-decouple"):
        (run,) = resolve_experiment("ablation-vr", ["optim.kl_coef=0.001"], arms=[arm])
        assert run.config["optim"]["kl_coef"] == 0.001


def test_errors_through_overrides_name_the_arm_and_key():
    with pytest.raises(SpecError) as info:
        resolve_experiment("ablation-vr", ["summary.group_size=0"], arms=["grpo-vr-decouple"])
    assert str(info.value).startswith("ablation-vr/grpo-vr-decouple: summary.group_size:")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("override, says", [
    ("=1", "override '=1' has no key before '='"),
    ("+=1", "override '+=1' has no key before '='"),
    ("thinking.lam=${oops}", "Interpolation key 'oops' not found — an interpolation ${KEY} names a config key"),
])
def test_an_override_without_a_key_or_with_an_unknown_interpolation_says_what_to_write(override, says):
    """Found by a black-box pass: '=1' said "unknown config key '?'"; '${oops}' gave Hydra's line alone."""
    with pytest.raises(SpecError) as info:
        resolve_experiment("main-grpo", [override])
    assert says in str(info.value) and "\n" not in str(info.value)


def test_unknown_experiment_suggests_the_closest():
    with pytest.raises(SpecError, match="did you mean 'ablation-vr'"):
        resolve_experiment("ablation-rv")


# --- spec files -------------------------------------------------------------------------------


@pytest.fixture
def specs(tmp_path, monkeypatch):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "sweeps").mkdir()
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path))

    def write(kind, name, text):
        (tmp_path / kind / f"{name}.yaml").write_text(textwrap.dedent(text))

    return write


@pytest.mark.parametrize(
    "text, match",
    [
        ("arms: {a: [algo=grpo]\n", "invalid YAML"),
        ("- 1\n- 2\n", "mapping at the top level"),
        ("arms: {}\n", "non-empty mapping 'arms"),
        ("armz: {a: []}\n", "unknown key 'armz'.*did you mean 'arms'"),
        ("arms: {Bad Arm: []}\n", "bad arm name"),
        ("arms: {a: algo=grpo}\n", "list of Hydra overrides"),
        ("seeds: [0, 0]\narms: {a: []}\n", "seeds repeat"),
        ("seeds: [-1]\narms: {a: []}\n", "non-negative"),
        ("groups: [model]\narms: {a: []}\n", "'groups' must map"),
    ],
)
def test_bad_experiment_files(specs, text, match):
    specs("experiments", "x", text)
    with pytest.raises(SpecError, match=match):
        load_experiment("x")


def test_bad_overrides_inside_an_experiment_name_the_file(specs):
    specs("experiments", "x", "arms: {a: [algo=grpoo]}\n")
    with pytest.raises(SpecError, match=r"x\.yaml: arms\.a.*unknown algo option 'grpoo'.*did you mean 'grpo'"):
        resolve_experiment("x")


@pytest.mark.parametrize(
    "text, match",
    [
        ("experiments: []\n", "needs 'experiments"),
        ("experiments: [nope]\n", "unknown experiment 'nope'"),
        ("experiments: [x]\ngrid: {thinking.lam: []}\n", "non-empty lists"),
        ("experiments: [x]\nextra: 1\n", "unknown key 'extra'"),
    ],
)
def test_bad_sweep_files(specs, text, match):
    from arctl.compose import resolve_sweep

    specs("experiments", "x", "arms: {a: [algo=grpo, prior=base]}\n")
    specs("sweeps", "s", text)
    with pytest.raises(SpecError, match=match):
        load_sweep("s")
        resolve_sweep("s")


# --- random bad specs -------------------------------------------------------------------------

ints = st.integers(min_value=-10_000, max_value=20_000)
not_increasing = st.lists(ints, min_size=1, max_size=8).filter(
    lambda b: any(x <= 0 for x in b) or any(y <= x for x, y in zip(b, b[1:]))
)
garbage = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=True), st.text(max_size=5),
                    st.lists(st.one_of(ints, st.text(max_size=3)), max_size=4))
KEYS = [
    "thinking.budgets", "thinking.prior", "thinking.probs", "thinking.baseline", "thinking.lam",
    "summary.group_size", "summary.max_tokens", "summary.prior", "summary.probs", "summary.decoupled",
    "reward.length_penalty", "reward.alpha", "rollout.n", "optim.lr", "optim.clip_ratio", "optim.betas",
    "data.train_batch_size", "eval.budgets", "eval.grid", "cluster.executor", "seed", "wandb.mode",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budgets=not_increasing)
def test_random_bad_budgets_never_pass(budgets):
    cfg = base()
    cfg["thinking"]["budgets"] = budgets
    with pytest.raises(SpecError):
        validate_config(cfg)


@settings(max_examples=150, deadline=None)
@given(probs=st.lists(st.floats(min_value=-1, max_value=2, allow_nan=False), min_size=4, max_size=4).filter(
    lambda p: any(x < 0 for x in p) or abs(sum(p) - 1) > 1e-6))
def test_random_bad_custom_priors_never_pass(probs):
    cfg = base()
    cfg["thinking"].update(prior="custom", probs=probs)
    with pytest.raises(SpecError):
        validate_config(cfg)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(KEYS), value=garbage)
def test_garbage_values_raise_only_spec_errors(key, value):
    cfg = base()
    node = cfg
    *parents, leaf = key.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    try:
        validate_config(cfg)
    except SpecError as err:
        assert "\n" not in str(err)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_random_overrides_raise_only_spec_errors(key, value):
    try:
        resolve_experiment("main-grpo", [f"{key}={value}"], scale="tiny")
    except SpecError as err:
        assert "\n" not in str(err)


def test_a_length_penalty_on_a_method_that_shapes_its_rewards_is_refused():
    """Found by a review: reward.length_penalty scores each summary from correctness read off the
    method's rewards (raw > 0) and overwrites them, so L1's own penalty vanished and a correct L1 reward
    <= 0 counted as wrong. The two do not compose: refused at validation."""
    cfg = arm_config("baselines-l1", "l1-exact", scale="paper")
    validate_config(cfg)
    cfg["reward"]["length_penalty"], cfg["reward"]["alpha"] = "v1", 0.2
    with pytest.raises(SpecError, match=r"^reward.length_penalty: reward.length_penalty=v1 would replace the rewards "
                                        r"budget_control.method=l1 shapes .* — set reward.length_penalty=none"):
        validate_config(cfg)
    validate_config(arm_config("ablation-dense", "grpo-lp-v1", scale="paper"))  # GRPO's verifier rewards: fine


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab ,'\\\"$:{}[]=*()é\t~/.-_"), max_size=12))
@example("x~y").via("a review: ~ was written unquoted, which Hydra cannot read")
@example("a/~b").via("a review")
def test_a_value_written_in_hydras_grammar_reads_back_as_itself(text):
    """override_value (sweep grids, verl's overrides): Hydra reads the text back as the same string, backslashes
    and quotes included (a review: every backslash was doubled, D:\\runs became D:\\\\runs)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from arctl.config.hydra_text import override_value

    (parsed,) = OverridesParser.create().parse_overrides([f"k={override_value(text)}"])
    assert parsed.value() == text


def test_a_grid_number_yaml_reads_as_text_is_the_number(specs):
    """PyYAML reads 1e-3 (no dot) as text; the grid wrote it unquoted and Hydra read a number. Quoting it
    (a review) refused a typed key and made a string of an untyped one."""
    from arctl.compose import resolve_sweep

    specs("sweeps", "n", """
        experiments: [main-grpo]
        grid: {tiny.warmup.lr: [3e-3], optim.lr: [1e-6]}
    """)
    (run,) = resolve_sweep("n", [], "tiny", [0])
    assert run.config["tiny"]["warmup"]["lr"] == 0.003 and run.config["optim"]["lr"] == 1e-6


def test_a_grid_holds_null_and_strings_with_commas_as_themselves(specs):
    """From a review: a grid value was written with str(): null became the text 'None' (an sbatch
    `--partition=None`, failing only at submission; a null dual clip refused as 'not a number') and a string
    holding a comma became Hydra's sweep syntax, stored as 'ChoiceSweep(...)'. Now Hydra's own grammar."""
    from arctl.compose import resolve_sweep

    specs("sweeps", "g", """
        experiments: [main-grpo]
        grid:
          optim.dual_clip: [null, 3.0]
          wandb.name: ["a,b", "x y*"]
    """)
    runs = resolve_sweep("g", [], "tiny", [0])
    assert sorted((r.config["optim"]["dual_clip"] is None, r.config["wandb"]["name"]) for r in runs) == [
        (False, "a,b"), (False, "x y*"), (True, "a,b"), (True, "x y*")]
    specs("sweeps", "h", """
        experiments: [main-grpo]
        grid: {optim.lr: [.nan]}
    """)
    with pytest.raises(SpecError, match="grid value override value nan is not a finite number"):
        resolve_sweep("h", [], "tiny", [0])


@pytest.mark.parametrize("override", ["wandb.project=arctl,ablation", "data.train_dataset=glob(*)",
                                      "thinking.lam=0.5,0.7", "seed_offset=range(3)"])
def test_a_sweep_on_the_command_line_is_one_line_not_a_stored_text(override):
    """From a review: `wandb.project=arctl,ablation` was stored as the text "ChoiceSweep(...)", `thinking.lam=
    0.5,0.7` refused as "ChoiceSweep(...) ... expected a number"."""
    with pytest.raises(SpecError, match="is a sweep over several values, not one value"):
        resolve_experiment("main-grpo", [override])


@pytest.mark.parametrize("override, match", [
    ("model=r1-distill-qwen-1.5b", "model.hidden_size=None: the tiny backend builds its model from its sizes"),
    ("model.num_kv_heads=3", "model.num_kv_heads=3 does not divide model.num_heads"),
    ("model.hidden_size=7", "model.hidden_size=7 is not a multiple of model.num_heads"),
    ("model.hidden_size=100", "is an odd head size"),
])
def test_a_tiny_model_that_cannot_be_built_is_refused_before_the_job(override, match):
    """From a review: a paper-scale model choice at tiny scale (every size null) and heads that do not divide
    passed validation; the job then failed building the model (TypeError) or in its first forward pass."""
    with pytest.raises(SpecError, match=match):
        resolve_experiment("main-grpo", [override])


@pytest.mark.parametrize("scale, overrides, match", [
    ("tiny", ["model.path=/models/m"], r"model.path='/models/m': the tiny backend builds its model from the model.\* "
                                       "sizes and does not load a checkpoint"),
    ("paper", ["model.num_layers=8"], "model.num_layers=8 would be ignored: the verl backend loads model.path"),
    ("paper", ["model.tie_embeddings=false"], "model.tie_embeddings=False would be ignored"),
    ("paper", ["model=tiny", "model.path=/models/m"], r"model.hidden_size=128 would be ignored.*\(/models/m\).*"
                                                      "leave model.hidden_size/num_layers/.*/tie_embeddings out"),
])
def test_the_half_of_the_model_section_a_backend_would_ignore_is_refused(scale, overrides, match):
    """From a review: the verl backend loads model.path and silently ignored the model.* sizes beside it (a user
    who set model.num_layers=8 trained the checkpoint's 28 layers); the tiny backend builds from the sizes and
    silently ignored model.path."""
    with pytest.raises(SpecError, match=match):
        resolve_experiment("main-grpo", overrides, scale=scale)


def test_trainer_init_from_on_the_command_line_starts_from_that_run_as_launched_alone():
    """From a review: `arctl run main-ar-uniform trainer.init_from=main-grpo/grpo` was refused ("is the run
    itself"): the override was carried to the run it names, which then started from itself. The run started
    from is resolved without it: the same config as `arctl run main-grpo`'s grpo arm."""
    from arctl.compose.resolve import resolve_init_from

    (run,) = resolve_experiment("main-ar-uniform", ["trainer.init_from=main-grpo/grpo", "thinking.lam=0.7"], seeds=[0])
    start = resolve_init_from(run)
    (alone,) = resolve_experiment("main-grpo", ["thinking.lam=0.7"], arms=["grpo"], seeds=[0])
    assert (start.experiment, start.arm) == ("main-grpo", "grpo") and start.config == alone.config


def test_a_spec_naming_a_scale_that_does_not_exist_or_choosing_one_in_groups_is_refused(specs):
    """From a review: `scales: {tiyn: [...]}` applied to no scale, silently; `groups: {scale: paper}` was
    overruled by --scale, silently (the same choice in `overrides:` is refused)."""
    specs("experiments", "typo", """
        arms: {a: []}
        scales: {tiyn: [thinking.lam=0.9]}
    """)
    with pytest.raises(SpecError, match="scales.tiyn: no such scale.*tiny"):
        resolve_experiment("typo")
    specs("experiments", "port", """
        arms: {a: []}
        scales: {fake: [thinking.lam=0.9]}
    """)  # a plugin's scale, not installed here: far from every scale, not a typo (a review)
    (run,) = resolve_experiment("port", seeds=[0])
    assert run.config["thinking"]["lam"] != 0.9
    specs("experiments", "grp", """
        arms: {a: []}
        groups: {scale: paper}
    """)
    with pytest.raises(SpecError, match="the scale is chosen with --scale"):
        resolve_experiment("grp")


@pytest.mark.parametrize("value", ["2", "1", "0", "yes", "on", "'true'", "null"])
def test_a_true_or_false_key_takes_true_or_false_only(value):
    """From a review: OmegaConf turns 2 (any nonzero number), 1, 'yes', 'on' and the text 'true' into
    true, so `summary.decoupled=2` trained the decoupled arm without a word."""
    with pytest.raises(SpecError, match="summary.decoupled is true or false"):
        resolve_experiment("main-grpo", [f"summary.decoupled={value}"], scale="tiny", seeds=[0])
    (run,) = resolve_experiment("main-grpo", ["summary.decoupled=false", "trainer.deterministic=True"], scale="tiny",
                                seeds=[0])
    assert run.config["summary"]["decoupled"] is False and run.config["trainer"]["deterministic"] is True


def test_l1_targets_past_the_arms_own_thinking_budget_are_refused():
    """From a review: the targets were checked against the scale's b_m, so an L1 arm trained at a smaller
    thinking budget took a prompt target its rollout (capped at that budget) could never reach."""
    ok = arm_config("baselines-l1", "l1-exact")
    validate_config(ok)
    top = ok["thinking"]["budgets"][-1]
    with pytest.raises(SpecError, match=rf"l1_targets go up to \d+ but thinking stops at {top // 4}"):
        arm_config("baselines-l1", "l1-exact", overrides=[f"thinking.budgets=[{top // 4}]"])


@pytest.mark.parametrize("value", ["2", "yes", "on", "0"])
def test_a_true_false_or_null_key_takes_those_only(value):
    """From a review: `model.tie_embeddings` (bool | None) was left out of the true-or-false rule, and 2, yes
    and on were taken for true; a frozen config holding 2 passed validation too."""
    with pytest.raises(SpecError, match="model.tie_embeddings is true, false or null"):
        resolve_experiment("main-grpo", [f"model.tie_embeddings={value}"], scale="tiny", seeds=[0])
    (run,) = resolve_experiment("main-grpo", ["model.tie_embeddings=null"], scale="tiny", seeds=[0])
    cfg = copy.deepcopy(run.config)
    cfg["model"]["tie_embeddings"] = 2
    with pytest.raises(SpecError, match=r"model.tie_embeddings=2 is invalid"):
        validate_config(cfg)


@pytest.mark.parametrize("override", ["cluster.setup=[{a:b},[c]]", "wandb.tags=[[a],{b:c}]",
                                      "cluster.sbatch_extra=[[--exclusive]]"])
def test_every_entry_of_a_list_of_texts_is_a_text(override):
    """From a review: only eval.datasets was checked entry by entry; `cluster.setup=[{a:b}]` went into the job
    script as the shell line "{'a': 'b'}"."""
    key = override.split("=", 1)[0]
    with pytest.raises(SpecError, match=rf"{re.escape(key)}=.* is invalid: expected a list of texts"):
        resolve_experiment("main-grpo", [override], scale="tiny", seeds=[0])


@pytest.mark.parametrize("override", ["scale.name=paper", "scale.model=r1-distill-qwen-1.5b", "+scale.name=x"])
def test_what_the_scale_chooses_is_not_an_override(override):
    """From a review: `scale.name=paper` on a tiny run labelled it paper (reports filter by scale.name) and
    resolved the run it starts from (trainer.init_from) at the paper scale, on verl; `scale.model=` was ignored
    but renamed the run."""
    with pytest.raises(SpecError, match="sets what --scale chooses"):
        resolve_experiment("main-grpo", [override], scale="tiny", seeds=[0])


def test_a_mistake_in_a_spec_or_a_sweep_says_which_file_and_part_wrote_it(specs):
    """From a review: every composition error said "overrides", so a sweep over seven experiments did not say
    which file to fix, and a spec's mistake read like the command line's."""
    specs("experiments", "typo", """
        overrides: [thinking.lam=0.5]
        arms:
          a: [thinking.lamm=0.3]
          b: [thinking.lam=abc]
    """)
    with pytest.raises(SpecError, match=r"typo\.yaml: arms\.a \(typo/a\): unknown config key 'thinking\.lamm'"):
        resolve_experiment("typo", arms=["a"], seeds=[0])
    with pytest.raises(SpecError, match=r"typo\.yaml: arms\.b \(typo/b\): thinking\.lam: thinking\.lam=abc is invalid"):
        resolve_experiment("typo", arms=["b"], seeds=[0])
    with pytest.raises(SpecError, match=r"^command line \(main-grpo/grpo\): tiny\.task\.name: \+tiny\.task\.name= adds a "
                                        r"key the config already has — drop the \+"):
        resolve_experiment("main-grpo", ["+tiny.task.name=x"], seeds=[0])
    # Hydra's group@package: the package was dropped, `prior@thinking=linear` taken for prior=linear
    with pytest.raises(SpecError, match=r"override 'prior@summary=linear' names a package \(@summary\)"):
        resolve_experiment("main-grpo", ["prior@summary=linear"], seeds=[0])
    with pytest.raises(SpecError, match=r"thinking\.budgets: arctl\.last reads the budgets \[\], which are not"):
        resolve_experiment("main-grpo", ["scale.budgets=[]"], seeds=[0])


@pytest.mark.parametrize("override", ["data.train_dataset=nope", "eval.datasets=[nope]", "eval.final_datasets=[a,b]"])
def test_a_dataset_the_tiny_backend_would_not_read_is_refused(override):
    """From a review: the tiny backend trains and evaluates its generated task; a dataset key naming another was
    accepted, ignored, and renamed the run."""
    key = override.split("=", 1)[0]
    with pytest.raises(SpecError, match=rf"{re.escape(key)}=.*the tiny backend trains and evaluates its generated task"):
        resolve_experiment("main-grpo", [override], scale="tiny", seeds=[0])
    resolve_experiment("main-grpo", ["eval.final_datasets=[]"], scale="tiny", seeds=[0])  # [] means eval.datasets


@pytest.mark.parametrize("override", ["tiny.eval_seed=1234", "tiny.warmup.seed=777"])
def test_held_out_problems_drawn_from_the_warm_ups_stream_are_refused(override):
    """From a hunt: the held-out problems come from ``default_rng([tiny.eval_seed, 0])``, which NumPy reads as
    ``default_rng(tiny.eval_seed)``, the warm-up's training stream where the two seeds are equal (the warm-up's
    first batch was 32 of the 1,024 evaluation problems). Equal seeds are refused; the defaults differ."""
    import numpy as np

    from arctl.backends.tiny.evaluate import eval_problems
    from arctl.backends.tiny.settings import TinyRun

    with pytest.raises(SpecError, match=r"tiny\.eval_seed=\d+ is also tiny\.warmup\.seed: the held-out evaluation"):
        resolve_experiment("main-grpo", [override], scale="tiny", seeds=[0])
    config = resolve_experiment("main-grpo", [], scale="tiny", seeds=[0])[0].config
    run = TinyRun.from_config(config)
    warm = {repr(p) for p in run.task.make_problems(np.random.default_rng(run.eval_seed), 32)}
    assert warm <= {repr(p) for p in eval_problems(config, 64)}  # why: the same stream at equal seeds


def test_a_mistake_is_placed_where_hydra_stopped_not_where_the_key_is_written_last(specs):
    """A review of the placement above: it named the last part writing the key; Hydra stops at the first
    override that fails (the spec's bad value, with a good one on the command line; the spec's unknown key,
    with an arm's key below it)."""
    specs("experiments", "rx", """
        overrides: [thinking.lam=abc]
        arms: {a: []}
    """)
    with pytest.raises(SpecError, match=r"rx\.yaml: overrides \(rx/a\): thinking\.lam: thinking\.lam=abc is invalid"):
        resolve_experiment("rx", ["thinking.lam=0.7"], seeds=[0])
    specs("experiments", "ry", """
        overrides: [thinking.nosuch=1]
        arms: {a: [thinking.nosuch.deeper=2]}
    """)
    with pytest.raises(SpecError, match=r"ry\.yaml: overrides \(ry/a\): unknown config key 'thinking\.nosuch'"):
        resolve_experiment("ry", seeds=[0])


def test_block_sizes_flexattention_may_not_divide_are_refused():
    with pytest.raises(SpecError, match="verl.block_size=100: the tree mask's FlexAttention block must be a multiple of 128"):
        resolve_experiment("main-grpo", ["verl.block_size=100"], scale="paper", seeds=[0])
    resolve_experiment("main-grpo", ["verl.block_size=256"], scale="paper", seeds=[0])


def test_a_range_or_rule_broken_in_a_spec_or_a_sweep_names_the_file_and_part(specs):
    """From a hunt: the range and validation errors said only "rng/a: thinking.lam: ...", as for the command
    line, where the compose errors named the file and part ("errors name the file, arm and key", README)."""
    def refused(*args, **kw) -> str:
        with pytest.raises(SpecError) as info:
            resolve_experiment(*args, seeds=[0], **kw)
        assert "\n" not in str(info.value)
        return str(info.value)

    specs("experiments", "rng", """
        arms:
          lam: [algo=anytime, thinking.lam=1.5]
          probs: [algo=anytime, prior=custom, "thinking.probs=[0.5,0.6,0.1,0.1]"]
          custom: [algo=anytime, prior=custom]
          steps: [algo=anytime, trainer.total_steps=null]
          ref: [algo=anytime, "thinking.budgets=${eval.budgets}"]
          batch: [algo=anytime, data.train_batch_size=6]
          plain: [algo=anytime]
    """)
    file = r".*rng\.yaml"
    assert re.match(file + r": arms\.lam \(rng/lam\): thinking\.lam: thinking\.lam=1\.5 is invalid",
                    refused("rng", arms=["lam"]))
    assert re.match(file + r": arms\.probs \(rng/probs\): thinking\.probs: .* sums to 1\.3", refused("rng", arms=["probs"]))
    assert re.match(file + r": arms\.custom \(rng/custom\): thinking\.probs: thinking\.prior=custom needs thinking\.probs",
                    refused("rng", arms=["custom"]))
    assert re.match(file + r": arms\.steps \(rng/steps\): trainer\.total_steps: trainer\.total_steps is null",
                    refused("rng", arms=["steps"], scale="tiny"))
    assert re.match(file + r": arms\.ref \(rng/ref\): thinking\.budgets: thinking\.budgets=None is invalid",
                    refused("rng", arms=["ref"]))
    specs("experiments", "last", """
        overrides: ["thinking.budgets=[16,8]"]
        arms: {plain: [algo=anytime], budgets: [algo=anytime, "thinking.budgets=[32,8]"]}
    """)
    # the composed value is the last part's that writes the key (the arm's, after the spec's overrides)
    assert re.match(r".*last\.yaml: arms\.budgets \(last/budgets\): thinking\.budgets: thinking\.budgets=\[32, 8\] "
                    "is not strictly increasing", refused("last", arms=["budgets"]))
    assert re.match(r".*last\.yaml: overrides \(last/plain\): thinking\.budgets: thinking\.budgets=\[16, 8\]",
                    refused("last", arms=["plain"]))
    # a rule across keys on a key no part writes: the part that wrote the other value it quotes
    assert re.match(file + r": arms\.batch \(rng/batch\): data\.train_batch_size: data\.train_batch_size=6 is not a "
                    r"multiple of data\.ppo_mini_batch_size=", refused("rng", arms=["batch"]))
    # the command line's, as a setting of it that the run never reads: EXPERIMENT/ARM: KEY
    assert refused("rng", ["thinking.lam=1.5"], arms=["plain"]).startswith(
        "rng/plain: thinking.lam: thinking.lam=1.5 is invalid")
    # a key no override writes: said so (the paper scale's verl needs a model this spec never chose)
    assert refused("rng", arms=["plain"], scale="paper").startswith(
        "rng/plain: model.path (no override writes it: a default, a config group's or derived): ")
    specs("experiments", "x", "arms: {a: [algo=grpo, prior=base]}\n")
    specs("sweeps", "s", "experiments: [x]\ngrid: {summary.group_size: [2, 0]}\n")
    from arctl.compose import resolve_sweep

    with pytest.raises(SpecError, match=r"^.*sweeps/s\.yaml \(x/a\): summary\.group_size: summary\.group_size=0 is "
                                        "invalid"):
        resolve_sweep("s", seeds=[0])


def test_a_wrong_type_says_the_type_the_key_takes():
    """From a hunt: a text key given a list was said to expect a list (OmegaConf names the value's type)."""
    with pytest.raises(SpecError, match=r"wandb\.notes=\[\d+(, \d+)*\] is invalid: expected text —"):
        resolve_experiment("main-grpo", ["wandb.notes=${thinking.budgets}"], scale="tiny", seeds=[0])
    with pytest.raises(SpecError, match=r"wandb\.notes=\[1, 2\] is invalid: expected text —"):
        resolve_experiment("main-grpo", ["wandb.notes=[1,2]"], scale="tiny", seeds=[0])
    with pytest.raises(SpecError, match=r"thinking\.budgets\[0\]=a is invalid: expected an integer —"):
        resolve_experiment("main-grpo", ["thinking.budgets=[a]"], scale="tiny", seeds=[0])
    with pytest.raises(SpecError, match=r"thinking\.lam=abc is invalid: expected a number —"):
        resolve_experiment("main-grpo", ["thinking.lam=abc"], scale="tiny", seeds=[0])


@pytest.mark.parametrize("section, match", [
    ("paper: [thinking.lamm=0.3]", r"scales\.paper: unknown config key 'thinking\.lamm' — did you mean 'thinking\.lam'"),
    ("paper: [prior=linearr]", r"scales\.paper: unknown prior option 'linearr' in 'prior=linearr' — did you mean 'linear'"),
    ("paper: [tiny.threads=2]", r"scales\.paper: override tiny\.threads: tiny\.threads is read by the tiny backend only"),
    ("paper: [+tiny.task.name=x]", r"scales\.paper: override \+tiny\.task\.name: tiny\.task\.name is read by the tiny"),
    ("paper: [\"+verl.overrides=[a]\"]", r"scales\.paper: \+verl\.overrides= adds a key the config already has"),
    ("paper: [scale=tiny]", r"scales\.paper: scale=tiny in a spec"),
    ("tiny: [thinking.lamm=0.3]", r"scales\.tiny: unknown config key 'thinking\.lamm'"),
])
def test_another_scales_section_is_checked_at_every_scale(specs, section, match):
    """From a hunt: `scales: {paper: [thinking.lamm=0.3]}` ran at --scale tiny without a word; only a paper run
    found it. The keys and config-group options of every scale's section are checked, one line naming the file
    and the section."""
    specs("experiments", "sc", f"arms: {{a: [algo=grpo, prior=base]}}\nscales: {{{section}}}\n")
    other = "tiny" if section.startswith("paper") else "paper"
    with pytest.raises(SpecError, match=r"^.*sc\.yaml: " + match):
        resolve_experiment("sc", scale=other, seeds=[0])


def test_another_scales_own_keys_pass_at_every_scale(specs):
    specs("experiments", "ok", """
        groups: {model: r1-distill-qwen-1.5b}
        arms: {a: [algo=grpo, prior=base]}
        scales:
          paper: [verl.use_dynamic_bsz=true, thinking.lam=0.3, prior=linear]
          tiny: [tiny.threads=1, "++tiny.task.name=search"]
    """)
    (run,) = resolve_experiment("ok", scale="tiny", seeds=[0])
    assert run.config["thinking"]["lam"] != 0.3 and run.config["tiny"]["threads"] == 1
    (run,) = resolve_experiment("ok", scale="paper", seeds=[0])
    assert run.config["thinking"]["lam"] == 0.3 and run.config["verl"]["use_dynamic_bsz"] is True
