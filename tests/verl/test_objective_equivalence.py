"""One objective, two backends: the same hand-built batch of trees, for every arm of every paper
experiment (and the named settings beside them), goes through the tiny trainer's path (rollout
records -> ``objective_trees`` -> ``tree_advantages`` -> ``pack_trees`` -> ``tree_batch`` ->
``update.policy_loss``) and through verl's (agent-loop rows in the packed and the duplicated layout
-> ``compute_row_advantages``, the advantage step without TransferQueue -> verl's own ``ppo_loss``
with the registered arctl policy loss). Every trained token gets the same advantage (1e-12) and
the loss is the same number (1e-9)."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from method_registry import isolate_methods  # tests/support/method_registry.py
from resolved import arm_config, experiment_arms  # tests/support/resolved.py

from arctl.algo.methods import control as bc
from arctl.algo.prompts import distinct_cuts
from arctl.algo.settings import BudgetControl, Objective

LAYOUTS = ("flex", "duplicate")
THINK_END, PAD = 5, 0
TRUNCATED, FINISHED = [90, 91, THINK_END, 93], [93]  # inserted tokens after a cut / after </think>


def _paper_arms():
    """Every experiment's arms at paper scale, named at collection and composed in the test."""
    return [pytest.param((name, arm, None), id=f"{name}/{arm}") for name, arm in experiment_arms()]


VARIANTS = [  # named settings no paper arm uses, on the AR and GRPO+vr arms
    ("main-ar-linear", "ar-linear", {"summary.weighting": "paper", "summary.prior": "linear"}, "weighting=paper"),
    ("main-ar-linear", "ar-linear", {"optim.dual_clip": 1.5}, "dual_clip"),
    ("main-ar-linear", "ar-linear", {"summary.group_size": 1}, "decoupled-A1"),
    ("main-ar-linear", "ar-linear", {"reward.length_penalty": "v2"}, "decoupled+lp-v2"),
    ("ablation-vr", "grpo-vr", {"summary.group_size": 3}, "coupled-A3"),
    ("main-ar-linear", "ar-linear", {"optim.clip_ratio_high": 0.28}, "clip-higher"),
    # the KL term (L1's arms have it at its released setting) with the other estimators, on trees
    ("main-ar-linear", "ar-linear", {"optim.kl_coef": 0.01, "optim.kl_type": "mse"}, "kl-mse"),
    ("main-ar-uniform", "ar-uniform", {"optim.kl_coef": 0.5, "optim.kl_type": "kl"}, "kl-k1"),
    ("main-grpo", "grpo", {"optim.kl_coef": 0.1, "optim.kl_type": "abs"}, "kl-abs"),
    ("ablation-vr", "grpo-vr", {"optim.kl_coef": 0.1}, "coupled-kl"),  # low_var_kl: a coupled arm's KL tokens
    # a compared method from outside arctl (tests/plugins/fake_method), registered in-process
    ("ablation-vr", "grpo", {"budget_control.method": "halve"}, "plugin-method"),
    ("main-ar-linear", "ar-linear", {"budget_control.method": "halve"}, "plugin-method"),
    # one that reads across a tree's budgets (from a hunt: tiny gave a method one budget's row at a time)
    ("main-ar-linear", "ar-linear", {"budget_control.method": "earliest"}, "plugin-method-tree"),
]


def _register_plugin_method(monkeypatch) -> None:
    """``halve`` (tests/plugins/fake_method) and ``earliest`` in the method registry, for this test only."""
    from plugin_site import PLUGINS

    from arctl.algo.methods import registry

    monkeypatch.syspath_prepend(str(PLUGINS / "fake_method"))
    isolate_methods(monkeypatch)
    import arctl_fake_method

    registry.register_method(arctl_fake_method.METHOD)

    class Earliest(registry.ControlMethod):
        """Only the smallest budget with a correct summary keeps its rewards: a rule over the whole tree."""
        name = "earliest"
        shapes_rewards = True

        def shape_rewards(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
            first = next((j for j, row in enumerate(rows) if any(row)), len(rows))
            return [list(row) if j == first else [0.0] * len(row) for j, row in enumerate(rows)]

    registry.register_method(Earliest())


def _variants():
    return [pytest.param((name, arm, changes), id=f"{name}/{arm}+{label}") for name, arm, changes, label in VARIANTS]


def _config(case) -> dict:
    """The paper-scale config of a (experiment, arm, changes) case, composed when the test runs."""
    name, arm, changes = case
    cfg = arm_config(name, arm, scale="paper")
    for key, value in (changes or {}).items():
        section, field = key.split(".")
        cfg[section][field] = value
    return cfg


def _small(config: dict) -> dict:
    """The arm at a small shape: budgets / 1000 (same m, ratios and arm settings), 2 questions per
    mini-batch; the loss constant stays the paper's."""
    cfg = copy.deepcopy(config)
    cfg["thinking"]["budgets"] = [b // 1000 for b in cfg["thinking"]["budgets"]]
    cfg["eval"]["budgets"] = [b for b in sorted({b // 1000 for b in cfg["eval"]["budgets"]}) if b > 0]
    cfg["eval"]["grid"] = cfg["eval"]["budgets"]
    cfg["data"]["train_batch_size"] = cfg["data"]["ppo_mini_batch_size"] = 2
    control = cfg["budget_control"]
    control["thinkprune_limits"] = [max(1, b // 1000) for b in control["thinkprune_limits"]]
    return cfg


def _batch(cfg: dict, seed: int):
    """2 questions x G thinking samples: random lengths (often exactly at a budget, often finished
    before one: merged prefixes), random 0/1 rewards and summary lengths, A summaries per budget."""
    rng = random.Random(seed)
    budgets = cfg["thinking"]["budgets"]
    a, g = cfg["summary"]["group_size"], cfg["rollout"]["n"]
    samples = []
    for q in range(2):
        for _ in range(g):
            t = rng.choice([rng.randint(1, budgets[-1]), rng.choice(budgets), 1])
            finished = t < budgets[-1] and rng.random() < 0.6
            thinking = [rng.randint(10, 60) for _ in range(t - 1)] + [THINK_END if finished else rng.randint(10, 60)]
            groups = []
            for cut, js in distinct_cuts(t, budgets):
                inserted = FINISHED if finished and cut >= t else TRUNCATED
                summ = [[rng.randint(61, 89) for _ in range(rng.randint(1, 3))] for _ in range(a * len(js))]
                rewards = [float(rng.random() < 0.5) for _ in summ]
                groups.append((cut, js, inserted, summ, rewards))
            samples.append(dict(question=q, prompt=[1, 2 + q, 3], thinking=thinking, finished=finished, groups=groups))
    return samples


# ------------------------------------------------------------------------------ the tiny path
def _tiny(cfg, samples, logps, monkeypatch, control=None, limit=None, targets=None, ents=None):
    from arctl.backends.tiny import trainer, update
    from arctl.backends.tiny.rollout import Branch, Rollout, Thinking, budget_scores

    budgets, a = cfg["thinking"]["budgets"], cfg["summary"]["group_size"]
    m, n = len(budgets), len(samples)
    width_p, width_t = 3, max(len(s["thinking"]) for s in samples)
    think_ids = torch.full((n, width_t), PAD, dtype=torch.long)
    for r, s in enumerate(samples):
        think_ids[r, : len(s["thinking"])] = torch.tensor(s["thinking"])
    thinking = Thinking(
        prompt_ids=torch.tensor([s["prompt"] for s in samples]), prompt_valid=torch.ones(n, width_p, dtype=torch.bool),
        think_ids=think_ids, think_len=torch.tensor([len(s["thinking"]) for s in samples]),
        finished=torch.tensor([s["finished"] for s in samples]), cache=None,
    )
    branches = []
    for r, s in enumerate(samples):
        for cut, js, inserted, summ, rewards in s["groups"]:
            for k, j in enumerate(js):  # the training rollout: one branch per budget
                branches.append(Branch(r, cut, s["finished"] and cut >= len(s["thinking"]), [j], list(inserted),
                                       summ[k * a:(k + 1) * a], rewards[k * a:(k + 1) * a]))
    g = n // 2
    ro = Rollout(thinking, branches, budget_scores(branches, n, m).view(2, g, m), [])
    if control is not None:  # the compared method's rewards (ThinkPrune, L1), as the trainer applies them
        trainer.shape_rewards(ro, control, limit, targets)
    objective = Objective.from_config(cfg)
    trees, questions = trainer.objective_trees(ro, m), trainer.question_labels(ro)
    advs = trainer.tree_advantages(trees, questions, objective)
    packed = trainer.pack_trees(ro, advs)

    tokens = {}  # canonical token -> advantage
    logp = torch.zeros(n, max(t.length for t in packed), dtype=torch.float64)
    old, ref, ent = torch.zeros_like(logp), torch.zeros_like(logp), torch.full_like(logp, 99.0)
    for r, (tree, adv) in enumerate(zip(packed, advs)):
        p, t = tree.prompt_len, tree.thinking_len
        keys = {p + i: ("think", r, i) for i in range(t)}
        trained = [(j, x) for j in range(m) if bool(adv.trained[j]) for x in range(a)]
        for (j, x), span in zip(trained, tree.branches):
            keys.update({span.summary_start + i: ("sum", r, j, x, i) for i in range(span.end - span.summary_start)})
        assert set(keys) == set(tree.loss_mask.nonzero().flatten().tolist())  # trained tokens, each once
        for pos, key in keys.items():
            tokens[key] = float(tree.advantages[pos])
            logp[r, pos], old[r, pos], ref[r, pos] = logps[key]
            ent[r, pos] = (ents or {}).get(key, 0.0)
    batch = update.tree_batch(packed, PAD)
    batch.old_logp, batch.ref_logp = old, ref
    monkeypatch.setattr(update, "token_logprobs", lambda model, b, temperature=1.0: (logp, ent))
    loss, entropy, kl = update.policy_loss(None, batch, objective, n_trees=n)
    assert (float(kl) > 0) == (objective.loss.kl_coef > 0)
    from arctl.algo.tree_loss import batch_stats
    from arctl.track import metrics_schema as ms

    metrics = ms.train_metrics(batch_stats(trees, questions, advs, objective, ms.ADV_VAR_KINDS))
    metrics[ms.TRAIN_ENTROPY] = float(entropy)
    return tokens, float(loss), metrics


# ------------------------------------------------------------------------------ the verl path
def _verl_rows(cfg, samples, layout, targets=None):
    from arctl.algo.tree_loss import summary_trained
    from arctl.backends.verl.agent_loop import LeafGroup, TreeRollout, output_rows

    trained = summary_trained(Objective.from_config(cfg))  # what the agent loop passes for a training tree

    a = cfg["summary"]["group_size"]
    rows = []
    for r, s in enumerate(samples):
        groups = [LeafGroup(cut, list(js), [], list(ins), [list(x) for x in summ], list(rew))
                  for cut, js, ins, summ, rew in s["groups"]]
        tree = TreeRollout(s["prompt"], s["thinking"], list(cfg["thinking"]["budgets"]), groups, s["finished"], False,
                           group_size=a)
        target = targets[s["question"]] if targets else None
        for i, row in enumerate(output_rows(tree, layout, target, trained)):
            rows.append((f"q{s['question']}_{r}_{i}", f"q{s['question']}", r, row))
    return rows


def _compose(cfg, layout):
    """verl's composed config of the arm in ``layout``: the objective its processes read back and
    the actor config its loss gets."""
    from verl.utils.config import omega_conf_to_dataclass

    from arctl.backends.verl import plugin  # noqa: F401 - registers the arctl policy losses
    from arctl.backends.verl.advantage import control_of, objective_of
    from arctl.backends.verl.overrides import build_verl_config

    cfg = copy.deepcopy(cfg)
    cfg["verl"]["tree_attention"] = layout
    _, composed = build_verl_config(cfg)
    return objective_of(composed.arctl), omega_conf_to_dataclass(composed.actor_rollout_ref.actor), control_of(composed.arctl)


def _verl(cfg, samples, layout, logps, objective, actor, control=None, limit=None, targets=None, ents=None):
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import ppo_loss

    from arctl.algo.tree_loss import summary_trained
    from arctl.backends.verl.advantage import trained_token_mean
    from arctl.backends.verl.trainer_v1 import compute_row_advantages, row_records
    from arctl.track import metrics_schema as ms

    rows = _verl_rows(cfg, samples, layout, targets)
    lens = [len(row["response_ids"]) for *_, row in rows]
    adv, step_metrics = compute_row_advantages([k for k, *_ in rows], [u for _, u, *_ in rows],
                                    [{"arctl": row["record"].to_dict()} for *_, row in rows], lens, objective,
                                    None, control, limit)
    assert adv.dtype == torch.float64
    a = cfg["summary"]["group_size"]
    trained = summary_trained(objective)
    tokens, new_lp, old_lp, ref_lp, ent = {}, [], [], [], []
    for (_, _, r, row), n_resp, row_adv in zip(rows, lens, adv):
        rec, mask = row["record"], row["response_mask"]
        keys = {}
        if rec.row in ("tree", "thinking"):
            keys.update({i: ("think", r, i) for i in range(rec.think_len)})
        if rec.row == "tree":
            for k, (start, sstart, end) in enumerate(rec.spans):
                j, x = divmod(k, a)
                if trained[j]:  # a coupled arm's other summaries: in the row, out of its mask
                    keys.update({sstart + i: ("sum", r, j, x, i) for i in range(end - sstart)})
                assert row_adv[start:sstart].abs().max() == 0  # inserted tokens are never trained
        if rec.row == "branch":
            j, x = rec.leaf
            assert trained[j]  # no row for a summary the loss does not train
            start, sstart, end = rec.spans[j * a + x]
            keys.update({n_resp - (end - sstart) + i: ("sum", r, j, x, i) for i in range(end - sstart)})
        assert {i for i in range(n_resp) if mask[i]} == set(keys)  # the rows' loss masks cover these tokens
        assert all(row_adv[i] == 0 for i in range(n_resp) if i not in keys)
        full_new = torch.zeros(len(row["prompt_ids"]) + n_resp, dtype=torch.float64)
        resp_old, resp_ref = torch.zeros(n_resp, dtype=torch.float64), torch.zeros(n_resp, dtype=torch.float64)
        for i, key in keys.items():
            assert key not in tokens  # every token trained in exactly one row
            tokens[key] = float(row_adv[i])
            # log_probs[t] of the full sequence is read at t - 1 (verl's no_padding_2_padding shift)
            full_new[len(row["prompt_ids"]) + i - 1], resp_old[i], resp_ref[i] = logps[key]
        new_lp.append(full_new)
        old_lp.append(resp_old)
        ref_lp.append(resp_ref)
        # the entropy of every response token (99 on inserted and prefix tokens: outside the mask)
        ent.append(torch.tensor([(ents or {}).get(keys[i], 0.0) if i in keys else 99.0 for i in range(n_resp)],
                                dtype=torch.float64))

    nested = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    data = TensorDict({
        "prompts": nested([torch.tensor(row["prompt_ids"]) for *_, row in rows]),
        "responses": nested([torch.tensor(row["response_ids"]) for *_, row in rows]),
        "response_mask": nested([torch.tensor(row["response_mask"]) for *_, row in rows]),
        "old_log_probs": nested(old_lp),
        "advantages": nested([adv[i, : lens[i]] for i in range(len(rows))]),
        "ref_log_prob": nested(ref_lp),
    }, batch_size=len(rows))
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(sum(sum(row["response_mask"]) for *_, row in rows)),
                         global_batch_size=len(rows))
    loss, metrics = ppo_loss(actor, {"log_probs": nested(new_lp)}, data)
    step_metrics[ms.TRAIN_ENTROPY] = trained_token_mean(
        ent, row_records([{"arctl": row["record"].to_dict()} for *_, row in rows]), objective)
    return tokens, float(loss), {k: v for k, v in step_metrics.items() if k.startswith("train/")}


def _logps(samples, cfg, seed):
    """Per canonical token (new, old, reference) log-probs, ratios around 1 +- 0.5 (so the clip acts)."""
    rng = random.Random(seed + 1)
    a = cfg["summary"]["group_size"]
    keys = []
    for r, s in enumerate(samples):
        keys += [("think", r, i) for i in range(len(s["thinking"]))]
        for _cut, js, _ins, summ, _rew in s["groups"]:
            for k, sm in enumerate(summ):
                keys += [("sum", r, js[k // a], k % a, i) for i in range(len(sm))]
    out = {}
    for key in keys:
        old = rng.uniform(-3.0, -0.05)
        out[key] = (old + rng.uniform(-0.5, 0.5), old, old + rng.uniform(-1.0, 1.0))
    return out


@pytest.mark.parametrize("case", _paper_arms() + _variants())
def test_both_backends_train_the_same_tokens_with_the_same_loss(case, monkeypatch):
    if (case[2] or {}).get("budget_control.method") in ("halve", "earliest"):
        _register_plugin_method(monkeypatch)
    cfg = _small(_config(case))
    composed = {layout: _compose(cfg, layout) for layout in LAYOUTS}
    control = BudgetControl.from_config(cfg)
    limit = bc.step_limit(control, 2, 3)  # the second of three ThinkPrune rounds
    for objective, actor, verl_control in composed.values():
        assert objective == Objective.from_config(cfg)  # the settings reach verl's processes whole
        assert verl_control == control
        assert actor.loss_scale_factor == 2 * cfg["rollout"]["n"] * cfg["optim"]["loss_norm_len"]
        # the KL term: verl's, on its token sum, at kl_coef / C (arctl.backends.verl.overrides.kl_overrides)
        assert actor.use_kl_loss == (cfg["optim"]["kl_coef"] > 0)
        if actor.use_kl_loss:
            assert actor.kl_loss_coef * actor.loss_scale_factor == pytest.approx(cfg["optim"]["kl_coef"], rel=1e-12)
            assert actor.kl_loss_type == cfg["optim"]["kl_type"]
        dual = cfg["optim"]["dual_clip"] is not None
        assert actor.policy_loss.loss_mode == ("arctl_drgrpo_dual" if dual else "arctl_drgrpo")
    for seed in (0, 1):
        samples = _batch(cfg, seed)
        logps = _logps(samples, cfg, seed)
        rng = random.Random(seed + 2)
        ents = {key: rng.uniform(0.1, 3.0) for key in sorted(logps)}  # the entropy of each canonical token
        targets = [random.Random(seed + 7).randint(1, cfg["thinking"]["budgets"][-1]) for _ in range(2)]
        tiny_tokens, tiny_loss, tiny_metrics = _tiny(cfg, samples, logps, monkeypatch, control, limit, targets, ents)
        assert any(v != 0 for v in tiny_tokens.values())
        if bc.shapes_rewards(control):  # the method's rewards changed what is trained, not the verifier's scores
            plain_tokens, _, plain_metrics = _tiny(cfg, samples, logps, monkeypatch)
            assert tiny_tokens != plain_tokens
            scores = [k for k in plain_metrics if k.startswith("train/score@") or k.endswith("_score")]
            assert {k: tiny_metrics[k] for k in scores} == {k: plain_metrics[k] for k in scores}
            assert len([k for k in tiny_metrics if k.startswith("train/method/")]) == len(scores)
        else:
            assert not any(k.startswith("train/method/") for k in tiny_metrics)
        for layout in LAYOUTS:
            verl_tokens, verl_loss, verl_metrics = _verl(cfg, samples, layout, logps, *composed[layout], limit=limit,
                                                         targets=targets, ents=ents)
            assert set(verl_metrics) >= set(tiny_metrics)  # the same train/ keys, the same values
            for key, value in tiny_metrics.items():
                assert verl_metrics[key] == pytest.approx(value, abs=1e-12, nan_ok=True), (layout, key)
            # the same tokens in the loss: a coupled arm's untrained summaries are in neither
            assert set(verl_tokens) == set(tiny_tokens), layout
            for key, value in tiny_tokens.items():
                assert abs(verl_tokens[key] - value) <= 1e-12, (layout, key, verl_tokens[key], value)
            assert verl_loss == pytest.approx(tiny_loss, abs=1e-9, rel=0), layout


def test_a_padding_row_and_inserted_tokens_are_never_trained_tokens():
    """train/entropy and train/kl average over :func:`trained_mask`: verl's padding rows (no record) and a
    row's inserted tokens are out, as a coupled arm's summaries of other budgets than the largest."""
    from arctl.backends.verl.advantage import TreeRecord, trained_mask

    cfg = _small(_config(("ablation-vr", "grpo-vr", None)))
    objective = Objective.from_config(cfg)
    assert not objective.summary.decoupled and len(objective.budgets) > 1
    a, m = objective.summary.group_size, len(objective.budgets)
    spans, at = [], 5
    for _ in range(m * a):  # inserted 2, summary 3 per summary
        spans.append((at, at + 2, at + 5))
        at += 5
    rec = TreeRecord(budgets=tuple(objective.budgets), think_len=5, rewards=tuple((0.0,) * a for _ in range(m)),
                     finished=False, eos=False, spans=tuple(spans), row="tree", leaf=None, layout="flex")
    mask = trained_mask([None, rec], [4, at], objective).tolist()
    assert mask[:4] == [False] * 4  # the padding row
    tree = mask[4:]
    last = [i for k, (_, s, e) in enumerate(spans) if k // a == m - 1 for i in range(s, e)]
    assert [i for i, x in enumerate(tree) if x] == list(range(5)) + last
