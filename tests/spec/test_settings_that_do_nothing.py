"""Settings that validation let through although the run could not use them: each changed the run id and not
one number (summaries trained with advantage 0, a summary prior nothing reads, a ThinkPrune limit that never
cuts), or failed the tiny job as it started (eval budgets short of the thinking budgets), or gave derived values
two different largest budgets (an unsorted scale.budgets). Each is now one error line naming the key, exit 2,
before anything is written or submitted (from a hunt of the algorithm's settings)."""

from __future__ import annotations

import itertools

import pytest
from bad_input import launch_args  # tests/support/bad_input.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.compose import SpecError, resolve_experiment
from arctl.compose.validate import validate_config


def _refused(name: str, overrides: list[str], scale: str = "tiny", arm: str | None = None) -> str:
    with pytest.raises(SpecError) as info:
        resolve_experiment(name, overrides, scale=scale, arms=[arm] if arm else None)
    text = str(info.value)
    assert "\n" not in text
    return text


# --- 1. one summary per budget and one sample per question: every summary's advantage is 0 -------------------
COUPLED_G1 = [  # (experiment, arm, overrides): coupled arms (summary.decoupled=false, summary.group_size=1)
    ("main-grpo", "grpo", ["rollout.n=1", "thinking.baseline=v1"]),
    ("main-grpo", "grpo", ["rollout.n=1", "thinking.baseline=none"]),
    ("ablation-vr", "grpo-vr", ["rollout.n=1", "thinking.baseline=v1"]),
    ("baselines-l1", "l1-exact", ["rollout.n=1", "thinking.baseline=v1"]),
]


@pytest.mark.parametrize("name, arm, overrides", COUPLED_G1)
def test_a_coupled_arm_with_one_summary_and_one_sample_is_refused(name, arm, overrides):
    """The rule's ground (arctl.algo.tree_loss.tree_advantages): with A = 1 and one tree per question, a summary's
    baseline (the mean over the question's summaries at its budget) is its own reward, coupled or decoupled."""
    from arctl.algo.settings import Objective, Summary, Thinking
    from arctl.algo.tree_loss import Tree, tree_advantages

    text = _refused(name, overrides, arm=arm)
    assert text.startswith(f"{name}/{arm}: summary.group_size: summary.group_size=1 with rollout.n=1 trains the "
                           "summaries with zero advantage")
    assert "use rollout.n>=2 or summary.group_size>=2" in text
    for fix in (["rollout.n=2"], ["summary.group_size=2"]):  # either way the summaries have a baseline to beat
        assert resolve_experiment(name, [*overrides[1:], *fix], scale="tiny", arms=[arm])
    baseline = overrides[1].split("=")[1]
    for decoupled in (False, True):
        s = Objective(Thinking(budgets=(48, 96, 144, 192), prior="base", baseline=baseline),
                      Summary(decoupled=decoupled, group_size=1))
        for think_len, rewards in itertools.product((5, 100, 192), itertools.product((0.0, 1.0), repeat=4)):
            trees = [Tree(think_len, tuple((r,) for r in rewards)), Tree(7, ((1.0,), (0.0,), (1.0,), (0.0,)))]
            for adv in tree_advantages(trees, ["q0", "q1"], s):
                assert float(adv.summaries.abs().max()) == 0.0


# --- 2. tiny: eval budgets short of the thinking budgets (the job refused them as it started) ------------------
def test_tiny_eval_budgets_below_the_thinking_budgets_are_refused_at_submission():
    text = _refused("main-ar-uniform", ["eval.budgets=[48]"])
    assert text.startswith("main-ar-uniform/ar-uniform: eval.budgets: eval.budgets go up to 48 but thinking.budgets "
                           "to 192")
    assert "eval.budgets=[48,192]" in text
    # the same rule as the job's own check (arctl.backends.tiny.trainer.check_config), which stays as a second guard
    from arctl.backends.tiny.trainer import check_config

    cfg = arm_config("main-ar-uniform", "ar-uniform", scale="tiny")
    cfg["eval"]["budgets"] = [48]
    with pytest.raises(ValueError, match="thinking.budgets exceed the largest eval budget"):
        check_config(cfg)
    with pytest.raises(SpecError, match="eval.budgets go up to 48"):
        validate_config(cfg)
    assert resolve_experiment("main-ar-uniform", ["eval.budgets=[48,192]"], scale="tiny")


# --- 3. ThinkPrune: a limit above the largest thinking budget never cuts --------------------------------------
def test_thinkprune_limits_above_the_thinking_budget_are_refused():
    text = _refused("baselines-thinkprune", ["budget_control.thinkprune_limits=[4000,3000,2000]"])
    assert text.startswith("baselines-thinkprune/thinkprune-r1: budget_control.thinkprune_limits: "
                           "budget_control.thinkprune_limits=[4000,3000,2000] holds limits above the largest "
                           "thinking budget (192)")
    assert "round 1's 4000" in text
    # a limit equal to b_m still binds (a thinking cut there unfinished is over it): allowed
    assert resolve_experiment("baselines-thinkprune", ["budget_control.thinkprune_limits=[192,150,100]"], scale="tiny")


def test_thinkprune_refuses_only_the_limits_in_force():
    """A round's run (thinkprune_round=k) holds round k's limit alone; a schedule holds every round's in turn."""
    from arctl.algo.methods.registry import method_of
    from arctl.algo.settings import BudgetControl

    def problem(limits, round_k=None):
        control = BudgetControl(method="thinkprune", thinkprune_limits=limits, thinkprune_round=round_k)
        return method_of(control).new_run_problem(control, 192, 100)

    assert problem((400, 150, 100), 1)[1] == "budget_control.thinkprune_limits"
    assert problem((400, 150, 100), 2) is None and problem((400, 150, 100), 3) is None
    scheduled = problem((400, 300, 100))
    assert scheduled[1] == "budget_control.thinkprune_limits" and "round 1's 400, round 2's 300" in scheduled[0]
    assert problem((192, 150, 100)) is None and problem((192,), 1) is None
    # the rule's ground: the thinking never passes b_m, so a limit above it never zeroes a reward; one at it does
    from arctl.algo.methods import control as bc

    c, b_m = BudgetControl(method="thinkprune"), 192

    def shaped(limit):
        return [bc.shape_rewards(c, [[1.0, 0.0]], [min(b_m, t)], [[3, 3]], t, done, limit=limit)
                for t, done in itertools.product(range(b_m + 1), (True, False))]

    assert shaped(b_m + 1) == shaped(4000) == [((1.0, 0.0),)] * (2 * (b_m + 1))
    assert shaped(b_m) != shaped(b_m + 1)


# --- 4. a summary prior that nothing reads --------------------------------------------------------------------
@pytest.mark.parametrize("name, overrides, key, says", [
    ("main-ar-uniform", ["summary.prior=base"], "summary.prior",
     "summary.prior=base is read only with summary.weighting=paper"),
    ("main-ar-uniform", ["summary.prior=linear"], "summary.prior",
     "add summary.weighting=paper, or drop summary.prior"),
    ("main-ar-uniform", ["summary.prior=custom", "summary.probs=[0.1,0.2,0.3,0.4]"], "summary.prior",
     "summary.prior=custom is read only with summary.weighting=paper"),
    ("main-ar-uniform", ["summary.probs=[0.1,0.2,0.3,0.4]"], "summary.probs",
     "summary.probs=[0.1,0.2,0.3,0.4] is read only with summary.weighting=paper"),
    ("main-grpo", ["summary.weighting=paper"], "summary.weighting",
     "summary.weighting=paper weighs decoupled summaries only"),
    ("main-grpo", ["summary.weighting=paper", "summary.prior=base"], "summary.weighting",
     "drop summary.weighting=paper, or set summary.decoupled=true"),
    ("main-grpo", ["summary.prior=linear"], "summary.prior", "this arm's are coupled (summary.decoupled=false)"),
])
def test_a_summary_prior_nothing_reads_is_refused(name, overrides, key, says):
    text = _refused(name, overrides)
    assert text.startswith(f"{name}/") and f": {key}: " in text and says in text


def test_the_summary_prior_applies_only_with_the_papers_weighting_on_decoupled_summaries():
    """The rule's ground (arctl.algo.tree_loss.tree_advantages): the prior weighs decoupled summaries under the
    paper's weighting only."""
    import torch

    from arctl.algo.settings import Objective, Summary, Thinking
    from arctl.algo.tree_loss import Tree, tree_advantages

    (run,) = resolve_experiment("main-ar-uniform", ["summary.weighting=paper", "summary.prior=linear"], scale="tiny")
    cfg = run.config
    assert (cfg["summary"]["prior"], cfg["summary"]["weighting"]) == ("linear", "paper")
    validate_config(cfg)
    cfg["summary"]["weighting"] = "authors"
    with pytest.raises(SpecError, match="summary.prior=linear is read only with summary.weighting=paper"):
        validate_config(cfg)
    cfg["summary"].update(weighting="paper", decoupled=False)
    with pytest.raises(SpecError, match="summary.weighting=paper weighs decoupled summaries only"):
        validate_config(cfg)

    trees = [Tree(8, ((0., 1.), (1., 0.), (1., 1.), (1., 0.))), Tree(3, ((1., 0.), (0., 1.), (1., 1.), (0., 0.)))]

    def summaries(**kw):
        s = Objective(Thinking(budgets=(2, 4, 6, 8)), Summary(group_size=2, **kw))
        return torch.stack([a.summaries for a in tree_advantages(trees, [0, 0], s)])

    assert torch.equal(summaries(), summaries(prior="base"))
    assert torch.equal(summaries(decoupled=False), summaries(decoupled=False, weighting="paper", prior="base"))
    assert not torch.equal(summaries(), summaries(weighting="paper", prior="base"))


# --- 5. an unsorted scale.budgets ------------------------------------------------------------------------------
def test_an_unsorted_scale_is_refused_where_a_resolver_reads_it():
    """main-grpo's thinking budget ${arctl.last:${scale.budgets}} took the last entry (6000) while the values
    derived from the sorted budgets took 8000."""
    text = _refused("main-grpo", ["scale.budgets=[2000,8000,4000,6000]"], scale="paper")
    assert text.startswith("main-grpo/grpo: thinking.budgets: arctl.last reads the budgets [2000, 8000, 4000, 6000], "
                           "which are not strictly increasing")
    assert "scale.budgets=[2000,4000,6000,8000]" in text
    from arctl.compose.resolvers import RESOLVERS

    for name, args in (("arctl.last", ()), ("arctl.part", (0.5,)), ("arctl.grid", (4,))):
        for budgets in ([2000, 8000, 4000], [2000, 2000]):
            with pytest.raises(SpecError, match=f"{name} reads the budgets .* not strictly increasing"):
                RESOLVERS[name](budgets, *args)
    assert RESOLVERS["arctl.last"]([2000, 8000]) == [8000]


@pytest.mark.parametrize("budgets", ["[2000,8000,4000,6000]", "[2000,4000,4000,8000]"])
def test_an_unsorted_scale_is_refused_by_validation(budgets):
    text = _refused("main-ar-uniform", [f"scale.budgets={budgets}"], scale="paper")
    assert text.startswith("main-ar-uniform/ar-uniform: scale.budgets: scale.budgets=")
    assert "is not strictly increasing" in text
    cfg = arm_config("main-grpo", "grpo", scale="paper")  # a frozen config edited by hand: validation's own rule
    cfg["scale"]["budgets"] = [2000, 8000, 4000, 6000]
    with pytest.raises(SpecError, match=r"scale.budgets=\[2000, 8000, 4000, 6000\] is not strictly increasing"):
        validate_config(cfg)


# --- the command line: one error line, exit 2, nothing written or submitted -----------------------------------
@pytest.mark.parametrize("args, says", [
    (["main-grpo", "rollout.n=1", "thinking.baseline=v1"], "summary.group_size"),
    (["main-ar-uniform", "eval.budgets=[48]"], "eval.budgets"),
    (["baselines-thinkprune", "budget_control.thinkprune_limits=[4000,3000,2000]"], "budget_control.thinkprune_limits"),
    (["main-ar-uniform", "summary.prior=base"], "summary.prior"),
    (["main-grpo", "summary.weighting=paper"], "summary.weighting"),
    (["main-grpo", "--scale", "paper", "scale.budgets=[2000,8000,4000,6000]"], "scale.budgets"),
])
def test_the_command_line_refuses_them(sandbox, args, says):
    err = sandbox.check_refused("run", *args, *launch_args(sandbox)).err
    assert says in err


# --- 6. settings the user wrote that the run never reads (the run id changed, not one number) ------------------
UNREAD = [  # (experiment, scale, overrides, arm, the key refused, what the line says)
    # the verl section, and the data files and epochs of a verl run, at the tiny backend
    ("main-ar-uniform", "tiny", ["verl.gpu_memory_utilization=0.9"], "ar-uniform", "verl.gpu_memory_utilization",
     "verl.gpu_memory_utilization is read by the verl backend only, and this run's backend is tiny — leave it out "
     "(--scale paper runs verl)"),
    ("main-ar-uniform", "tiny", ["verl.val_before_train=false"], "ar-uniform", "verl.val_before_train",
     "read by the verl backend only, and this run's backend is tiny"),
    ("main-ar-uniform", "tiny", ["verl.overrides=['trainer.test_freq=1']"], "ar-uniform", "verl.overrides",
     "read by the verl backend only, and this run's backend is tiny"),
    ("main-ar-uniform", "tiny", ["trainer.total_epochs=3"], "ar-uniform", "trainer.total_epochs",
     "set trainer.total_steps=N instead"),
    ("main-ar-uniform", "tiny", ["data.max_prompt_length=100"], "ar-uniform", "data.max_prompt_length",
     "data.max_prompt_length=100 is read by the verl backend only"),
    ("main-ar-uniform", "tiny", ["data.train_files=/x/train.parquet"], "ar-uniform", "data.train_files",
     "data.train_files=/x/train.parquet is read by the verl backend only"),
    ("main-ar-uniform", "tiny", ["data.val_files=[/x/test.parquet]"], "ar-uniform", "data.val_files",
     "is read by the verl backend only"),
    ("main-ar-uniform", "tiny", ["tiny.task.running_sum.max_terms=5"], "ar-uniform", "tiny.task.running_sum.max_terms",
     "a knob of the running_sum task, and this run's task is tiny.task.name=search"),
    # the shared objective: a length penalty's alpha without a penalty, a KL type without a KL loss
    ("main-ar-uniform", "tiny", ["reward.alpha=0.3"], "ar-uniform", "reward.alpha",
     "reward.alpha=0.3 is read only by a length penalty, and reward.length_penalty=none — add "
     "reward.length_penalty=v1|v2, or drop reward.alpha"),
    ("main-ar-uniform", "paper", ["reward.alpha=0.3"], "ar-uniform", "reward.alpha", "reward.length_penalty=none"),
    ("main-ar-uniform", "tiny", ["optim.kl_type=mse"], "ar-uniform", "optim.kl_type",
     "optim.kl_type=mse is read only with a KL loss, and optim.kl_coef=0 — add optim.kl_coef=C (> 0), or drop "
     "optim.kl_type"),
    # a thinking prior over one budget (GRPO's arms): every prior gives it probability 1
    ("main-grpo", "tiny", ["prior=linear"], "grpo", "thinking.prior",
     "thinking.prior=linear weighs the thinking budgets, and this arm has one (thinking.budgets=[192]): every prior "
     "gives it probability 1"),
    ("main-grpo", "paper", ["thinking.prior=uniform"], "grpo", "thinking.prior", "thinking.budgets=[8000]"),
    ("baselines-elastic", "tiny", ["prior=custom", "thinking.probs=[1.0]"], "elastic", "thinking.prior",
     "every prior gives it probability 1"),
    # a derived grid's size beside a grid written out
    ("main-ar-uniform", "tiny", ["eval.grid=[48,96,192]", "eval.grid_size=8"], "ar-uniform", "eval.grid_size",
     "eval.grid_size=8 sizes a derived grid, and eval.grid is a list written out ([48,96,192])"),
    # a budget-control method's keys when another method (or none) is chosen; a cue without forcing
    ("main-ar-uniform", "tiny", ["budget_control.l1_alpha=0.1"], "ar-uniform", "budget_control.l1_alpha",
     "read only by budget_control.method=l1, and this run's is budget_control.method=none"),
    ("baselines-thinkprune", "tiny", ["budget_control.l1_targets=[24,48]"], "thinkprune-r1",
     "budget_control.l1_targets", "this run's is budget_control.method=thinkprune"),
    ("baselines-l1", "tiny", ["budget_control.thinkprune_limits=[96]"], "l1-exact", "budget_control.thinkprune_limits",
     "read only by budget_control.method=thinkprune"),
    ("main-ar-uniform", "tiny", ["budget_control.forcing_cue=chk"], "ar-uniform", "budget_control.forcing_cue",
     "budget_control.forcing_extensions=0"),
    # verl knobs that another knob turns off
    ("main-ar-uniform", "paper", ["verl.eval_checkpoint=model"], "ar-uniform", "verl.eval_checkpoint",
     "verl.eval_checkpoint=model is read only by an eval-only run, and verl.eval_only=false — add verl.eval_only=true"),
    ("main-ar-uniform", "paper", ["verl.max_token_len_per_gpu=20000"], "ar-uniform", "verl.max_token_len_per_gpu",
     "the token budget of dynamic batches, and verl.use_dynamic_bsz=false"),
    ("main-ar-uniform", "paper", ["verl.use_dynamic_bsz=true", "verl.micro_batch_size_per_gpu=2"], "ar-uniform",
     "verl.micro_batch_size_per_gpu", "read only without dynamic batches, and verl.use_dynamic_bsz=true"),
    ("main-ar-uniform", "paper", ["cluster=slurm", "verl.n_gpus_per_node=2"], "ar-uniform", "verl.n_gpus_per_node",
     "verl.n_gpus_per_node=2 is read only when cluster.gpus_per_node is 0, and cluster.gpus_per_node=8"),
    ("main-ar-uniform", "paper", ["verl.rehearsal_step_s=5"], "ar-uniform", "verl.rehearsal_step_s",
     "verl.rehearsal_steps=0"),
    ("main-ar-uniform", "paper", ["data.train_files=/x/train.parquet", "data.train_dataset=other"], "ar-uniform",
     "data.train_dataset", "data.train_dataset=other is read only when data.train_files is unset"),
    ("main-ar-uniform", "paper", ["verl.eval_only=true", "verl.eval_checkpoint=model", "data.val_files=[/x/t.parquet]"],
     "ar-uniform", "data.val_files", "name the datasets with eval.final_datasets=[...] and drop data.val_files"),
]


@pytest.mark.parametrize("name, scale, overrides, arm, key, says", UNREAD, ids=[f"{u[1]}-{u[4]}" for u in UNREAD])
def test_a_setting_the_run_never_reads_is_refused(name, scale, overrides, arm, key, says):
    text = _refused(name, overrides, scale=scale, arm=arm)
    assert text.startswith(f"{name}/{arm}: {key}: ") and says in text


FIXED = {  # (experiment, the key refused): overrides where the run reads the same setting, accepted
    ("main-ar-uniform", "tiny.task.running_sum.max_terms"): ["tiny.task.search.max_items=30"],
    ("main-ar-uniform", "reward.alpha"): ["reward.length_penalty=v1", "reward.alpha=0.3"],
    ("main-ar-uniform", "optim.kl_type"): ["optim.kl_coef=0.001", "optim.kl_type=mse"],
    ("main-grpo", "thinking.prior"): ["prior=base"],  # what the arm sets itself: the same run
    ("baselines-elastic", "thinking.prior"): ["prior=base"],
    ("main-ar-uniform", "budget_control.forcing_cue"): ["budget_control.forcing_extensions=1",
                                                        "budget_control.forcing_cue=chk"],
    ("main-ar-uniform", "budget_control.l1_alpha"): ["budget_control.method=l1", "budget_control.l1_alpha=0.02"],
    ("main-ar-uniform", "eval.grid_size"): ["eval.grid_size=8"],
    ("main-ar-uniform", "verl.max_token_len_per_gpu"): ["verl.use_dynamic_bsz=true", "verl.max_token_len_per_gpu=40000"],
    ("main-ar-uniform", "verl.eval_checkpoint"): ["verl.eval_only=true", "verl.eval_checkpoint=model"],
    ("main-ar-uniform", "verl.rehearsal_step_s"): ["verl.rehearsal_steps=3", "verl.rehearsal_step_s=5"],
    ("main-ar-uniform", "verl.n_gpus_per_node"): ["cluster=slurm", "verl.n_gpus_per_node=8"],  # the same GPUs
    ("main-ar-uniform", "verl.micro_batch_size_per_gpu"): ["verl.micro_batch_size_per_gpu=2"],
}


@pytest.mark.parametrize("name, scale, overrides, arm, key, says", [u for u in UNREAD if (u[0], u[4]) in FIXED],
                         ids=[f"{u[1]}-{u[4]}" for u in UNREAD if (u[0], u[4]) in FIXED])
def test_the_same_setting_where_the_run_reads_it_is_accepted(name, scale, overrides, arm, key, says):
    assert key in _refused(name, overrides, scale=scale, arm=arm)
    assert resolve_experiment(name, FIXED[name, key], scale=scale, arms=[arm])


def test_what_the_scales_and_arms_set_themselves_is_not_the_users():
    """The tiny scale sets budget_control.l1_alpha, l1_targets, thinkprune_limits and forcing_cue for every run, and
    GRPO's arms set prior=base over their one budget: only what the command line writes is refused."""
    (run,) = resolve_experiment("main-grpo", [], scale="tiny")
    assert run.config["thinking"]["budgets"] == [192] and run.config["thinking"]["prior"] == "base"
    assert run.config["budget_control"]["forcing_cue"] == "chk" and run.config["budget_control"]["method"] == "none"
    assert resolve_experiment("baselines-elastic", [], scale="tiny")  # eval.grid set by the arm, with grid_size
    assert resolve_experiment("baselines-elastic", ["eval.grid_size=8"], scale="tiny")  # which reads grid_size
    assert "thinking.prior" in _refused("main-grpo", ["prior=uniform"])  # the user's prior over the same budget
    # verl.n_gpus_per_node is read where cluster.gpus_per_node is 0 (verl on a CPU, docs/verl-backend.md)
    assert resolve_experiment("main-ar-uniform", ["verl.device=cpu", "verl.tree_attention=dense",
                                                  "verl.n_gpus_per_node=1"], scale="paper")


def test_a_setting_one_arm_reads_is_kept_for_the_others():
    """A command line's overrides apply to every arm: reward.alpha for ablation-dense's length-penalty arms is
    refused only where no arm of the experiment reads it (one chosen with --arm included: the whole launch made
    that run)."""
    runs = resolve_experiment("ablation-dense", ["reward.alpha=0.3"], scale="tiny")
    alphas = {r.arm: (r.config["reward"]["length_penalty"], r.config["reward"]["alpha"]) for r in runs}
    assert alphas["grpo-lp-v1"] == ("v1", 0.3) and alphas["grpo-lp-v2"] == ("v2", 0.3)
    assert resolve_experiment("ablation-dense", ["reward.alpha=0.3"], scale="tiny", arms=["grpo"])


@pytest.mark.parametrize("args, says", [
    (["main-ar-uniform", "verl.gpu_memory_utilization=0.9"], "verl.gpu_memory_utilization"),
    (["main-ar-uniform", "trainer.total_epochs=3"], "trainer.total_epochs"),
    (["main-ar-uniform", "reward.alpha=0.3"], "reward.alpha"),
    (["main-grpo", "prior=linear"], "thinking.prior"),
])
def test_the_command_line_refuses_a_setting_nothing_reads(sandbox, args, says):
    err = sandbox.check_refused("run", *args, *launch_args(sandbox)).err
    assert says in err


@pytest.mark.parametrize("name, arm, change", [
    ("main-ar-uniform", None, {"summary": {"prior": "linear"}}),
    ("main-grpo", None, {"rollout": {"n": 1}, "thinking": {"baseline": "none"}, "summary": {"group_size": 1}}),
    ("main-grpo", None, {"scale": {"budgets": [48, 192, 96, 144]}}),
    ("baselines-thinkprune", "thinkprune-r1", {"budget_control": {"thinkprune_limits": [4000, 3000, 2000]}}),
])
def test_a_run_launched_before_the_refusals_still_resumes_from_its_frozen_config(name, arm, change):
    """From a review: these rules refuse new runs, but `arctl resume` reads a run's frozen config.yaml through
    validate_resolved, and a half-trained run launched before them was stranded (its config cannot be edited: the
    run id check). A frozen config goes on as it began; composing the same config is refused."""
    import copy

    from arctl.compose.validate import validate_resolved

    runs = resolve_experiment(name, scale="tiny", arms=[arm] if arm else None)
    frozen = copy.deepcopy(runs[0].config)
    for section, values in change.items():
        frozen[section].update(values)
    validate_resolved(frozen)  # a resume goes on
    with pytest.raises(SpecError):
        validate_config(frozen)  # a new run is refused


def test_a_section_given_as_a_dict_writes_its_leaves_not_every_key_of_the_section():
    """From a review: `optim={lr:2e-6}` was refused over optim.kl_type (a default it holds, never written)."""
    for ok in ("optim={lr:2e-6}", "budget_control={forcing_extensions:0}", "data.train_files=null"):  # (null: unset)
        assert resolve_experiment("main-grpo", scale="tiny", overrides=[ok])
    with pytest.raises(SpecError, match="optim.kl_type=mse is read only with a KL loss"):
        resolve_experiment("main-grpo", scale="tiny", overrides=["optim={kl_type:mse}"])


def test_one_arm_chosen_with_arm_keeps_a_setting_another_arm_of_the_experiment_reads():
    """From a review: `--arm grpo-dense reward.alpha=0.3` was refused, where the experiment's whole launch (whose
    penalty arms read it) had made that very run: its id could no longer be named."""
    from arctl.launch.run_id import make_run_id

    whole = {r.arm: make_run_id(r.config)
             for r in resolve_experiment("ablation-dense", scale="tiny", overrides=["reward.alpha=0.3"])}
    (one,) = resolve_experiment("ablation-dense", scale="tiny", arms=["grpo-dense"], overrides=["reward.alpha=0.3"])
    assert make_run_id(one.config) == whole["grpo-dense"]
    with pytest.raises(SpecError, match="reward.alpha=0.3 is read only by a length penalty"):
        resolve_experiment("main-grpo", scale="tiny", overrides=["reward.alpha=0.3"])  # no arm of it reads it


# --- 7. a user's sweep file: its overrides and its grid are the user's writing too -------------------------------
@pytest.mark.parametrize("body, key, says", [
    # a grid over a key no cell reads: four cells that differ in their run ids only
    ("grid:\n  reward.alpha: [0.1, 0.2]\n", "reward.alpha", "read only by a length penalty"),
    ("overrides: [optim.kl_type=mse]\n", "optim.kl_type", "read only with a KL loss"),
    ("overrides: [budget_control.forcing_cue=Wait]\n", "budget_control.forcing_cue", "read only by budget forcing"),
])
def test_a_users_sweep_writing_a_setting_no_cell_reads_is_refused(sandbox, body, key, says):
    from arctl.compose import resolve_sweep

    path = sandbox.specs / "sweeps" / "mine.yaml"
    path.write_text("description: x\nexperiments: [main-grpo]\nseeds: [0, 1]\n" + body)
    with pytest.raises(SpecError) as info:
        resolve_sweep("mine", scale="tiny")
    text = str(info.value)
    assert "\n" not in text and says in text
    assert text.startswith(f"{path} (main-grpo/grpo): {key}:"), text  # the file to fix, not the command line
    out = sandbox.check_refused("sweep", "mine", *launch_args(sandbox))
    assert says in out.err and str(path) in out.err
    # where a cell reads it, the sweep is kept: a length-penalty arm reads reward.alpha
    path.write_text("description: x\nexperiments: [ablation-dense]\nseeds: [0]\ngrid:\n  reward.alpha: [0.1, 0.2]\n")
    assert len(resolve_sweep("mine", scale="tiny")) == 2 * 4  # four arms x two grid points


@pytest.mark.parametrize("scale", ["tiny", "paper"])
def test_the_shipped_sweeps_write_nothing_their_cells_do_not_read(scale):
    from arctl.compose import resolve_sweep
    from arctl.compose.paths import spec_files

    for name in spec_files("sweeps"):
        assert resolve_sweep(name, scale=scale)


def test_a_sweep_may_write_what_only_another_scales_backend_reads(sandbox):
    """A sweep file runs at every scale (it has no per-scale sections): a verl knob it writes is the paper
    scale's, kept at the tiny scale. The command line's is refused there (above), and a knob that verl turns off
    is refused at the paper scale."""
    from arctl.compose import resolve_sweep

    path = sandbox.specs / "sweeps" / "mine.yaml"
    head = "description: x\nexperiments: [main-grpo]\nseeds: [0]\n"
    path.write_text(head + "overrides: [verl.gpu_memory_utilization=0.5, trainer.total_epochs=3]\n")
    for scale in ("tiny", "paper"):
        assert len(resolve_sweep("mine", scale=scale)) == 1
    path.write_text(head + "overrides: [verl.rehearsal_step_s=5]\n")
    assert len(resolve_sweep("mine", scale="tiny")) == 1
    with pytest.raises(SpecError, match=r"mine.yaml \(main-grpo/grpo\): verl.rehearsal_step_s: .*read only by a "
                       "rehearsal"):
        resolve_sweep("mine", scale="paper")


def test_a_users_experiment_file_writing_a_setting_its_runs_do_not_read_is_refused(sandbox):
    """An experiment's arm is checked on its own runs; its ``overrides`` (every arm's) on every arm, also those
    --arm leaves out; its ``scales.<scale>`` section like the command line (it is that scale's only)."""
    path = sandbox.specs / "experiments" / "mine.yaml"
    head = "description: x\nseeds: [0]\n"
    path.write_text(head + "arms:\n  a: [algo=grpo, reward.alpha=0.3]\n  b: [algo=grpo, reward.length_penalty=v1]\n")
    text = _refused("mine", [])
    assert text.startswith(f"{path}: arms.a (mine/a): reward.alpha: reward.alpha=0.3 is read only by a length "
                           "penalty"), text
    assert sandbox.check_refused("run", "mine", *launch_args(sandbox)).err.count("reward.alpha") >= 1
    # the same key in the experiment's overrides: arm b reads it, for every launch of the experiment
    path.write_text(head + "overrides: [reward.alpha=0.3]\n"
                    "arms:\n  a: [algo=grpo]\n  b: [algo=grpo, reward.length_penalty=v1]\n")
    assert len(resolve_experiment("mine", scale="tiny")) == 2
    assert len(resolve_experiment("mine", scale="tiny", arms=["a"])) == 1
    # what only another scale's backend reads: kept in the overrides, refused in that scale's own section
    path.write_text(head + "overrides: [verl.gpu_memory_utilization=0.5]\narms:\n  a: [algo=grpo]\n")
    assert len(resolve_experiment("mine", scale="tiny")) == 1
    path.write_text(head + "scales:\n  tiny: [verl.gpu_memory_utilization=0.5]\narms:\n  a: [algo=grpo]\n")
    assert _refused("mine", []).startswith(f"{path}: scales.tiny (mine/a): verl.gpu_memory_utilization: ")


def test_every_shipped_experiment_writes_only_what_its_runs_read():
    from arctl.compose.paths import spec_files

    for name in spec_files("experiments"):
        for scale in ("tiny", "paper"):
            assert resolve_experiment(name, scale=scale, seeds=[0])


def test_a_report_composes_an_arm_that_does_not_read_what_its_file_writes_for_another_arm(sandbox):
    """From a review: resolve_arm alone judged a spec file's key on one arm, so the report's cell composer got
    None for an arm that does not read the experiment's reward.alpha (its length-penalty arm does): a false
    "no longer composed" warning, and a cell with two runs refused. A spec's keys are judged over the launch."""
    from arctl.report.cells import cell_composer

    (sandbox.specs / "experiments" / "lp.yaml").write_text(
        "description: x\nseeds: [0]\noverrides: [reward.alpha=0.3]\n"
        "arms:\n  grpo: [algo=grpo, prior=base]\n  lp: [algo=grpo, prior=base, reward.length_penalty=v1]\n")
    assert len(resolve_experiment("lp", scale="tiny")) == 2
    cell = cell_composer(None)("lp", "grpo", 0, "tiny")
    assert cell is not None and cell["reward.alpha"] == 0.3 and cell["reward.length_penalty"] == "none"
    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    assert resolve_arm(load_experiment("lp"), "grpo", 0, "tiny").arm == "grpo"
    with pytest.raises(SpecError, match="reward.alpha"):  # the command line's own key, on this arm, still refused
        resolve_arm(load_experiment("lp"), "grpo", 0, "tiny", user_overrides=["reward.alpha=0.2"])


def test_another_tiny_tasks_knobs_in_a_spec_are_that_tasks_scale_s_to_read(sandbox):
    """From a review: an experiment setting the search task's knobs for every scale was refused at the
    running-sum scale; like verl's keys at tiny, they are the other scale's, but in that scale's own section."""
    path = sandbox.specs / "experiments" / "mysearch.yaml"
    head = "description: x\nseeds: [0]\n"
    path.write_text(head + "overrides: [tiny.task.search.max_items=20]\narms:\n  u: [algo=anytime, prior=uniform]\n")
    for scale in ("tiny", "tiny-running-sum"):
        assert len(resolve_experiment("mysearch", scale=scale)) == 1
    path.write_text(head + "scales:\n  tiny-running-sum: [tiny.task.search.max_items=20]\n"
                    "arms:\n  u: [algo=anytime, prior=uniform]\n")
    assert "is a knob of the search task" in _refused("mysearch", [], scale="tiny-running-sum")
