"""What the tree rollout inside verl trains on, checked where the fake-server tests of test_agent_loop.py
left a change silent (a mutation hunt of arctl/backends/verl/agent_loop.py): each leaf scored on its own cut
of the thinking, L1's training target drawn up to the largest budget, and the rows' rewards those of their
own leaves. A defect here shows only in a GPU run's numbers, so each test states the number a user gets."""

from __future__ import annotations

import asyncio

from arctl.algo.prompts import InsertedTokens
from arctl.algo.settings import BudgetControl
from arctl.backends.verl.agent_loop import (
    LeafGroup,
    TreeRollout,
    leaf_scorer,
    output_rows,
    rollout_question,
    rollout_tree,
)


def test_a_budget_below_a_finished_thinking_scores_its_own_cut(tokenizer):
    """A thinking that ended with ``</think>`` after 13 tokens, budgets (4, 40): the leaf at budget 4 reads
    thinking[:4] + ``...</think>`` + its summary, one ``</think>`` in all, and a right answer scores 1 (the
    authors' format rule counts ``</think>`` in the *cut* thinking and the branch). Scored against the whole
    thinking, its own ``</think>`` plus the inserted one would make every cut leaf of every finished thinking 0:
    the smaller budgets' rewards, and the anytime objective, silently gone."""
    end = tokenizer.convert_tokens_to_ids("</think>")
    eos = tokenizer.eos_token_id
    think = tokenizer.encode("Let me think. 1 + 2 = 3.", add_special_tokens=False) + [end]
    answer = tokenizer.encode("\\boxed{3}", add_special_tokens=False) + [eos]
    inserted = InsertedTokens.from_tokenizer(tokenizer)

    async def generate(prompt, params):
        return list(think) if "stop_token_ids" in params else list(answer)

    score = leaf_scorer(tokenizer, end, eos, "3", "deepscaler")
    tree = asyncio.run(rollout_tree(generate, [1, 2, 3], [4, 40], 2, 32, inserted, eos, {}, score))
    assert tree.finished and [g.cut for g in tree.groups] == [4, len(think)]
    assert tree.budget_rewards() == [[1.0, 1.0], [1.0, 1.0]]
    assert tree.scores() == [1.0, 1.0]


def test_l1_trains_with_a_target_drawn_up_to_the_largest_budget():
    """L1 without ``l1_targets`` draws each training question's target uniformly from 100..4000 (the
    released data script), capped at the largest thinking budget b_m. With budgets (4, 9, 3000) the target
    written into the prompt lies in 100..3000; a cap at the smallest budget would write 4 into every prompt
    (the model trained to stop after 4 tokens)."""
    control = BudgetControl(method="l1", l1_mode="max")
    built: list[int | None] = []

    async def build_prompt(target):
        built.append(target)
        return [0]

    async def sample_tree(prompt, budgets, per_budget, forcing):
        groups = [LeafGroup(min(b, 5), [j], [], [], [[1]], [1.0]) for j, b in enumerate(budgets)]
        return TreeRollout(prompt, [7] * 5, list(budgets), groups, False, False, 1, per_budget)

    for q in range(5):
        _, _, target = asyncio.run(rollout_question(sample_tree, build_prompt, [4, 9, 3000], False, control,
                                                    f"verl:0:question {q}", think_end=5))
        assert target == built[-1] and 100 <= target <= 3000, target


def _tree(rewards_per_cut: list[list[float]], per_budget: bool = True) -> TreeRollout:
    """Thinking of 10 tokens, budgets (2, 5, 10), A = 2: one group per cut with its scripted rewards."""
    groups = [LeafGroup(cut, [j], list(range(cut)), [90], [[50 + j, 60 + k] for k in range(2)], list(r))
              for j, (cut, r) in enumerate(zip((2, 5, 10), rewards_per_cut))]
    return TreeRollout([1, 2], list(range(10, 20)), [2, 5, 10], groups, True, False, 2, per_budget)


def test_the_rows_rewards_are_their_own_leaves():
    """verl logs a row's ``reward_score`` (its ``critic/score`` metrics, validation's ``reward``): a packed
    tree's row carries the score at the largest budget (the anytime reasoner's final answer), a duplicated
    branch row its own leaf's reward, the thinking row the final score."""
    tree = _tree([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    (packed,) = output_rows(tree, "flex")
    assert packed["reward"] == 0.5  # budget 10: (0 + 1) / 2, not budget 2's 0
    rows = output_rows(tree, "duplicate")
    assert rows[0]["reward"] == 0.5
    by_leaf = {row["record"].leaf: row["reward"] for row in rows[1:]}
    assert by_leaf == {(0, 0): 0.0, (0, 1): 0.0, (1, 0): 1.0, (1, 1): 0.0, (2, 0): 0.0, (2, 1): 1.0}


def test_validation_rows_come_from_the_unforced_thinking():
    """With s1 budget forcing the evaluation samples each question twice, unforced then forced: the scores of
    both travel in the infos (``score@{b}``, ``forced_score@{b}``), and the row verl logs (its reward, its
    record) is the unforced tree's, so verl's own validation ``reward`` is the unforced model's final score."""
    control = BudgetControl(forcing_extensions=2)

    async def build_prompt(target):
        return [0]

    async def sample_tree(prompt, budgets, per_budget, forcing):
        n = 8 if forcing is None else 20  # forcing keeps thinking: a longer thinking, scored 0
        groups = [LeafGroup(min(b, n), [j], [], [], [[1]], [1.0 if forcing is None else 0.0])
                  for j, b in enumerate(budgets)]
        return TreeRollout(prompt, [7] * n, list(budgets), groups, False, False, 1, per_budget)

    tree, info, _ = asyncio.run(rollout_question(sample_tree, build_prompt, [4, 30], True, control, "q", 5, [6]))
    assert info["think_len"] == 8 and info["forced_think_len"] == 20
    assert len(tree.thinking) == 8 and tree.scores() == [1.0, 1.0]
    assert output_rows(tree, "duplicate")[0]["reward"] == 1.0


def test_a_rows_split_val_is_validation():
    """Rows without the trainer's mark (a caller other than arctl's trainer) are validation when their
    ``extra_info.split`` says so: "val" as well as "test", "validation" and "eval"."""
    from omegaconf import OmegaConf

    from arctl.backends.verl.agent_loop import is_validation

    arctl = OmegaConf.create({"eval_only": False, "eval_datasets": []})
    for split in ("val", "VAL", "test", "validation", "eval"):
        assert is_validation({"extra_info": {"split": split}}, arctl), split
    assert not is_validation({"extra_info": {"split": "train"}}, arctl)


def _loop(tokenizer, paper_config, control, server):
    """The tree loop as verl's worker builds it (budgets (4, 9, 30), A = 1, summaries capped at 32), on
    ``server`` (verl's ``generate(request_id, prompt_ids=, sampling_params=)``)."""
    import copy

    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.agent_loop import TreeAgentLoop
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    cfg = copy.deepcopy(paper_config)
    cfg["budget_control"].update(control)
    cfg["thinking"]["budgets"] = cfg["eval"]["budgets"] = [4, 9, 30]
    cfg["summary"].update(group_size=1, max_tokens=32)
    composed = check_overrides(verl_overrides(cfg))
    return TreeAgentLoop(trainer_config=DictConfigWrap(composed), server_manager=server, tokenizer=tokenizer,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(composed.data))


class _Server:
    """Thinks ``think`` (or up to the request's max_tokens, then ``</think>``), answers EOS; keeps each
    request's prompt and sampling parameters."""

    def __init__(self, tok, think=None):
        self.tok, self.think, self.requests = tok, think, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        from types import SimpleNamespace

        self.requests.append((list(prompt_ids), dict(sampling_params)))
        end = self.tok.convert_tokens_to_ids("</think>")
        if "stop_token_ids" in sampling_params:
            think = self.think or [7] * (int(sampling_params["max_tokens"]) - 1) + [end]
            return SimpleNamespace(token_ids=list(think))
        return SimpleNamespace(token_ids=[self.tok.eos_token_id])


def _chat(tokenizer):
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    return tok


def _run(loop, params=None, **kw):
    async def go():
        loop.loop = asyncio.get_running_loop()
        return await loop.run(params or {"temperature": 1.0}, raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}],
                              reward_model={"ground_truth": "3"}, **kw)

    return asyncio.run(go())


def test_every_request_samples_with_verls_sampling_parameters(tokenizer, paper_config):
    """verl hands the loop the run's sampling parameters (training's, or validation's ``val_kwargs``): the
    thinking and every summary are sampled with them, less ``logprobs`` (old log-probs are recomputed on the
    tree). Dropped, vLLM would sample every request at its own defaults (temperature 1, top-p 1)."""
    tok = _chat(tokenizer)
    server = _Server(tok)
    loop = _loop(tok, paper_config, {}, server)
    given = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "logprobs": True}
    for validate in (False, True):
        server.requests.clear()
        _run(loop, dict(given), validate=validate)
        assert len(server.requests) == 1 + 3
        for _, params in server.requests:
            assert {k: params.get(k) for k in ("temperature", "top_p", "top_k")} == {
                "temperature": 0.6, "top_p": 0.95, "top_k": 20}, validate
            assert "logprobs" not in params


def test_the_forcing_cue_is_its_words_alone(tokenizer, paper_config):
    """s1 budget forcing replaces an early ``</think>`` with the cue's tokens. A tokenizer that adds a BOS when
    asked for special tokens (DeepSeek-R1-Distill's does) must not put one inside the thinking: the cue is
    encoded without special tokens."""
    from tokenizers.processors import TemplateProcessing

    tok = _chat(tokenizer)
    unk = tok.convert_tokens_to_ids("<unk>")  # stands for a BOS here
    tok._tokenizer.post_processor = TemplateProcessing(single="<unk> $A", special_tokens=[("<unk>", unk)])
    assert tok.encode("Wait")[0] == unk
    end = tok.convert_tokens_to_ids("</think>")
    think = tok.encode("Let me think.", add_special_tokens=False) + [end]
    server = _Server(tok, think)
    loop = _loop(tok, paper_config, {"forcing_extensions": 1, "forcing_cue": "Wait"}, server)
    _run(loop, validate=True)
    thinking = [p for p, params in server.requests if "stop_token_ids" in params]
    assert len(thinking) == 3  # unforced; forced: the first thinking and one continuation after the cue
    cue = tok.encode("Wait", add_special_tokens=False)
    assert thinking[2] == thinking[1] + think[:-1] + cue


def test_a_thinkprune_arm_is_evaluated_up_to_the_largest_eval_budget(tokenizer, paper_config):
    """ThinkPrune limits the thinking of its *training* rollouts to the round's limit (9 at step 1 of 2
    here); its evaluation is cut at the eval budgets only, whatever step verl's batch carries: the
    thinking request asks for the largest eval budget (30), else acc@30 would be measured on 9 tokens."""
    from omegaconf import open_dict

    tok = _chat(tokenizer)
    server = _Server(tok)
    loop = _loop(tok, paper_config, {"method": "thinkprune", "thinkprune_limits": [9, 4]}, server)
    with open_dict(loop.arctl):
        loop.arctl.total_steps = 2
    _run(loop, validate=False, global_steps=1)
    _run(loop, validate=True, global_steps=1)
    thinking = [params["max_tokens"] for _, params in server.requests if "stop_token_ids" in params]
    assert thinking == [9, 30]  # training: the round's limit; evaluation: the largest eval budget
