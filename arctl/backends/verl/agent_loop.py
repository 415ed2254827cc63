"""Tree rollout as a verl agent loop (``arctl_tree``): thinking once, then one summary group per cut.

For one thinking sample (verl runs ``rollout.n`` of these per question):

1. generate the thinking from the question (stop at ``</think>``, at most ``b_m`` tokens);
2. for every *distinct* cut ``min(b_j, |z|)`` (budgets past a finished thinking share the full
   thinking: one prefix) build the summary prompt with :func:`arctl.algo.prompts.summary_prompt`
   and send it as a token prefix, ``summary.group_size`` times *per budget it serves* (the authors'
   sampling: a prefix that ``|J|`` budgets share gets ``|J| x A`` summaries; verl's server returns
   one sequence per request; vLLM's prefix cache, ``rollout.enable_prefix_caching``, reuses the
   prefix's KV, so the thinking is computed once);
3. score every summary with the authors' rule (:func:`leaf_scorer`: the format rule and the decoding on
   the event loop's thread, the grader on one grading thread per process, so that a grade, whose
   sympy stage may run for up to 10 s, holds no other tree's generation);
4. return the tree in the output's ``extra_fields["arctl"]`` (:class:`~arctl.backends.verl.advantage.TreeRecord`),
   as one packed row (layouts ``flex``/``dense``) or as a thinking row plus one row per summary
   (``duplicate``). Per-summary rewards live in the record: verl's multi-output default copies the
   last output's score onto the others, so the trainer never reads ``rm_scores`` for trees.

Validation (``validate``) uses the eval budgets (in eval-only mode the 32-budget grid and the eval
budgets: the variance diagnostics are defined over ``eval.budgets``) with one summary per distinct cut and
reports ``score@{b}`` and ``think_len`` through ``reward_extra_info`` (and ``diag_score@{b}``,
``diag_think_len`` for a method with one prompt target per budget: :func:`rollout_question`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from arctl.algo.methods import control as bc
from arctl.algo.methods.budget_forcing import BudgetForcing, extends
from arctl.algo.prompts import (
    InsertedTokens,
    distinct_cuts,
    opens_thinking_problem,
    summary_cap,
    summary_prompt,
)
from arctl.algo.settings import BudgetControl
from arctl.algo.tree_loss import summary_trained
from arctl.algo.verify import FINAL_ANSWER, answer_at, eos_ids, round_trip_problem, stop_eos_ids
from arctl.backends.verl import rollout_failures
from arctl.backends.verl.advantage import (
    FORCED_PREFIX,
    RECORD_KEY,
    VALIDATE_KEY,
    TreeRecord,
    control_of,
    objective_of,
)

Generate = Callable[[list[int], dict[str, Any]], Awaitable[list[int]]]
ABORTED = ("aborted", "abort")  # stop reasons of a request the server gave up (verl.workers.rollout.llm_server)
Score = Callable[[list[int], list[int], list[int]], Awaitable[float]]
DIAG_PREFIX = "diag_"
"""Prefix of the validation infos ``diag_score@{b}`` and ``diag_think_len``: one thinking's scores at every
eval budget and its length, which the trainer's variance diagnostics read (``trainer_v1.eval_metrics``) where
a method's evaluation samples one thinking per prompt target (L1), so that its ``score@{b}`` come from
different thinkings."""

_GRADING: ThreadPoolExecutor | None = None
_GRADING_LOCK = threading.Lock()


def grading_executor() -> ThreadPoolExecutor:
    """The process's grading thread (one: the sympy stage's child serves one request at a time, and
    more threads would only contend for the GIL with the event loop)."""
    global _GRADING
    with _GRADING_LOCK:
        if _GRADING is None:
            _GRADING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arctl-grade")
    return _GRADING


def leaf_scorer(tokenizer: Any, think_end: int, eos_id: int | Collection[int] | None, ground_truth: Any, grader: str,
                at: str = FINAL_ANSWER) -> Score:
    """``async (thinking[:cut], inserted, summary) -> reward``: the authors' rule of
    :func:`arctl.backends.verl.reward.leaf_reward`, its two halves on two threads. The format rule and
    the decoding run on the calling (event-loop) thread, where they ran before (the tokenizer is not
    handed to another thread); the grader runs on
    :func:`grading_executor`'s thread, so a grade that waits for the sympy stage (up to 10 s on an answer
    sympy cannot simplify) leaves the event loop free to serve every other tree's requests."""
    from arctl.algo.verify import check_grader
    from arctl.backends.verl.reward import grade_leaf, leaf_text

    check_grader(grader)

    async def score(prefix: list[int], inserted: list[int], summary: list[int]) -> float:
        text = leaf_text(prefix, inserted, summary, tokenizer, think_end, eos_id)
        if text is None:
            return 0.0
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(grading_executor(), lambda: grade_leaf(text, ground_truth, grader=grader,
                                                                                  at=at))

    return score


@dataclass
class LeafGroup:
    """The summaries sampled from one distinct cut: for training ``A`` per budget it serves, in
    budget order (``summaries[k*A:(k+1)*A]`` belong to ``budget_indices[k]``); for validation ``A``
    in all."""

    cut: int
    budget_indices: list[int]
    prefix: list[int]  # question + thinking[:cut] + inserted
    inserted: list[int]
    summaries: list[list[int]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


@dataclass
class TreeRollout:
    prompt_ids: list[int]
    thinking: list[int]
    budgets: list[int]
    groups: list[LeafGroup]
    finished: bool
    eos: bool
    group_size: int = 1
    per_budget: bool = True  # A summaries per budget (training) or per distinct cut (validation)

    def budget_rewards(self) -> list[list[float]]:
        """Rewards of each budget's summaries: [m][A] (validation: a shared prefix's A for each budget)."""
        out: list[list[float]] = [[] for _ in self.budgets]
        a = self.group_size
        for grp in self.groups:
            for k, j in enumerate(grp.budget_indices):
                out[j] = list(grp.rewards[k * a : (k + 1) * a] if self.per_budget else grp.rewards)
        return out

    def scores(self) -> list[float]:
        """Per-budget score r_j: mean reward of budget j's summaries."""
        return [sum(r) / len(r) if r else 0.0 for r in self.budget_rewards()]


async def rollout_tree(
    generate: Generate,
    prompt_ids: Sequence[int],
    budgets: Sequence[int],
    group_size: int,
    summary_max_tokens: int,
    inserted: InsertedTokens,
    eos_id: int | Collection[int] | None,
    sampling_params: dict[str, Any],
    score: Score | None = None,
    per_budget: bool = True,
    forcing: BudgetForcing | None = None,
    think_max: int | None = None,
) -> TreeRollout:
    """Generate one thinking and its summary tree through ``generate(prompt_ids, params) -> ids``;
    ``group_size`` summaries per budget (``per_budget``) or per distinct cut, each scored by ``score``
    (``async (thinking[:cut], inserted, summary) -> reward``: :func:`leaf_scorer`) as soon as its group is sampled. ``forcing``: s1 budget
    forcing of the thinking (:func:`generate_thinking`); ``think_max``: stop generating the thinking
    there, below the largest budget (a compared method's generation limit: ThinkPrune's round)."""
    prompt = [int(t) for t in prompt_ids]
    budgets = [int(b) for b in budgets]
    length = max(budgets) if think_max is None else min(max(budgets), int(think_max))
    thinking = await generate_thinking(generate, prompt, length, inserted.think_end, sampling_params, forcing)
    finished = bool(thinking) and thinking[-1] == inserted.think_end
    eos = bool(thinking) and thinking[-1] in eos_ids(eos_id)  # the model's every EOS id (stop_eos_ids)
    groups: list[LeafGroup] = []
    for cut, idx in distinct_cuts(len(thinking), budgets):
        sp = summary_prompt(prompt, thinking, cut, inserted)
        ins = list(sp.inserted)
        groups.append(LeafGroup(cut=cut, budget_indices=idx, prefix=list(sp.input_ids), inserted=ins))

    def count(group: LeafGroup) -> int:
        return group_size * (len(group.budget_indices) if per_budget else 1)

    async def one(group: LeafGroup) -> None:
        params = dict(sampling_params)
        params["max_tokens"] = summary_cap(summary_max_tokens, len(group.inserted))  # the branch cap includes inserted
        params.pop("stop_token_ids", None)
        outs = await asyncio.gather(*[generate(group.prefix, params) for _ in range(count(group))])
        group.summaries = [[int(t) for t in o][: params["max_tokens"]] for o in outs]
        if score is not None:
            rewards = await asyncio.gather(*[score(thinking[: group.cut], group.inserted, s) for s in group.summaries])
            group.rewards = [float(r) for r in rewards]
        else:
            group.rewards = [0.0] * len(group.summaries)

    await asyncio.gather(*[one(g) for g in groups])
    return TreeRollout(prompt, thinking, budgets, groups, finished, eos, group_size, per_budget)


async def generate_thinking(
    generate: Generate,
    prompt: list[int],
    max_tokens: int,
    think_end: int,
    sampling_params: dict[str, Any],
    forcing: BudgetForcing | None = None,
) -> list[int]:
    """One thinking of at most ``max_tokens`` tokens, stopped at ``</think>``. With ``forcing`` (s1,
    its budget = ``max_tokens``): while :func:`arctl.algo.methods.budget_forcing.extends` allows,
    an early ``</think>`` is replaced by the cue and the thinking continues from there (one more
    request on ``prompt + thinking``); the cut at ``max_tokens`` is the forced end."""
    params = dict(sampling_params)
    params["max_tokens"] = int(max_tokens)
    params["stop_token_ids"] = [int(think_end)]
    thinking = [int(t) for t in await generate(prompt, params)][: int(max_tokens)]
    used = 0
    while forcing is not None and thinking and thinking[-1] == think_end and extends(len(thinking) - 1, used, forcing):
        thinking = thinking[:-1] + list(forcing.cue_ids)
        used += 1
        more = dict(params)
        more["max_tokens"] = int(max_tokens) - len(thinking)
        thinking += [int(t) for t in await generate(list(prompt) + thinking, more)][: more["max_tokens"]]
    return thinking


def target_messages(messages: list[Any], control: BudgetControl, target: int | None) -> list[Any]:
    """The chat messages with the method's instruction for ``target`` (L1's:
    :func:`arctl.algo.methods.control.instruction`) appended to the last message's text (unchanged
    without a target)."""
    if target is None or not messages:
        return list(messages)
    out = [dict(m) if isinstance(m, dict) else m for m in messages]
    last = out[-1]
    if not (isinstance(last, dict) and isinstance(last.get("content"), str)):
        raise ValueError(f"budget_control.method={control.method} writes a target into the prompt: it needs the "
                         "question's last chat message to hold its text in 'content'")
    last["content"] = f"{last['content']} {bc.instruction(control, target)}"
    return out


def generation_limit(control: BudgetControl, kwargs: dict[str, Any], arctl: Any) -> int | None:
    """The thinking tokens a training rollout may generate (:func:`arctl.algo.methods.control.generation_limit`)
    at the step verl dispatched this sample for (its batch's ``global_steps``), of the run's
    ``arctl.total_steps`` (set by the trainer once verl knows it); None: up to the largest budget."""
    step, total = kwargs.get("global_steps"), arctl.get("total_steps") if hasattr(arctl, "get") else None
    if step is None or total is None:
        if not bc.limits_generation(control):
            return None  # the method never limits the generation: it needs no step
        raise ValueError(f"budget_control.method={control.method} limits the thinking per training step, but the "
                         f"rollout got global_steps={step!r} and arctl.total_steps={total!r}")
    return bc.generation_limit(control, int(step), int(total))


def question_key(kwargs: dict[str, Any], seed: int) -> str:
    """What names a question for its L1 target: the run's seed and the question's chat messages (the
    same for its ``rollout.n`` samples; a fixed target per question, as L1's data preparation writes)."""
    import json

    return f"verl:{int(seed)}:{json.dumps(kwargs.get('raw_prompt'), sort_keys=True, default=str)}"


SampleTree = Callable[[list[int], list[int], bool, "BudgetForcing | None"], Awaitable[TreeRollout]]
"""``(prompt_ids, budgets, per_budget, forcing) -> tree``: :func:`rollout_tree` with the loop's server,
summary settings and scorer bound."""


async def rollout_question(
    sample_tree: SampleTree,
    build_prompt: Callable[[int | None], Awaitable[list[int]]],
    budgets: Sequence[int],
    validate: bool,
    control: BudgetControl,
    key: str,
    think_end: int,
    cue_ids: Sequence[int] = (),
    diag_budgets: Sequence[int] | None = None,
) -> tuple[TreeRollout, dict[str, float], int | None]:
    """One question's rollout as the compared method asks (``budget_control``); returns the tree
    that becomes the output rows, the validation infos and the L1 target of that tree.

    Training: one tree on ``budgets`` (L1: the question's target, :func:`bc.question_target` of
    ``key``, in its prompt, ``build_prompt(target) -> prompt ids``). Validation: one tree per L1
    target group (:func:`bc.eval_target_groups`; one group without L1), ``score@{b}`` merged, and
    ``think_len`` of the largest group; with budget forcing the same again with s1's rule
    (``cue_ids``), infos prefixed ``forced_``. The output rows come from the unforced last tree.

    With several target groups the unforced tree of the diagnostics' target (the last target group of
    ``diag_budgets``, the eval budgets; default ``budgets``) is cut at every one of ``diag_budgets`` too,
    its scores and length reported as ``diag_score@{b}`` and ``diag_think_len`` (:data:`DIAG_PREFIX`; its
    own budgets' ``score@{b}`` are the same cuts): the variance diagnostics (docs/metrics.md) are defined
    on one thinking's return at every eval budget, and merged ``score@{b}`` of different thinkings would
    give other numbers than the tiny backend's rule (one rollout with the last eval-budget group's target,
    cut at every eval budget). Only the extra cuts' summaries cost. An eval-only run validates on the grid
    and the eval budgets, and its diagnostics stay at the eval budgets (from a hunt: they were cut at the
    32 grid budgets, another estimator under the same keys)."""
    budgets = [int(b) for b in budgets]
    diag_at = budgets if diag_budgets is None else sorted({int(b) for b in diag_budgets})
    if not set(diag_at) <= set(budgets):
        raise ValueError(f"the diagnostics' budgets {diag_at} are not all among the validated budgets {budgets}")
    if not validate:
        target = bc.question_target(control, key, max(budgets))
        tree = await sample_tree(await build_prompt(target), budgets, True, None)
        info = {f"score@{b}": float(v) for b, v in zip(budgets, tree.scores())}
        info["think_len"] = float(len(tree.thinking))
        return tree, info, target
    info: dict[str, float] = {}
    last: tuple[TreeRollout, int | None] | None = None
    groups = bc.eval_target_groups(control, budgets)
    diag_target = bc.eval_target_groups(control, diag_at)[-1][0]
    diag_n = max((n for n, (target, _) in enumerate(groups) if target == diag_target), default=None)
    if diag_n is None:
        raise ValueError(f"budget_control.method={control.method}: the diagnostics' target {diag_target} (of the eval "
                         f"budgets {diag_at}) is none of the evaluation targets of the budgets {budgets}")
    for prefix in ("", FORCED_PREFIX) if control.forcing_extensions > 0 else ("",):
        for n, (target, group) in enumerate(groups):
            forcing = bc.forcing_config(control, max(group), think_end, cue_ids) if prefix else None
            diag = not prefix and len(groups) > 1 and n == diag_n
            cut_at = sorted(set(group) | set(diag_at)) if diag else group
            tree = await sample_tree(await build_prompt(target), cut_at, False, forcing)
            if diag:
                cuts = dict(zip(cut_at, tree.scores()))
                info.update({f"score@{b}": float(cuts[b]) for b in group})
                info.update({f"{DIAG_PREFIX}score@{b}": float(cuts[b]) for b in diag_at})
                info[f"{DIAG_PREFIX}think_len"] = float(len(tree.thinking))
            else:
                info.update({f"{prefix}score@{b}": float(v) for b, v in zip(group, tree.scores())})
            info[f"{prefix}think_len"] = float(len(tree.thinking))
            if not prefix:
                last = (tree, target)
    assert last is not None
    return last[0], info, last[1]


def summary_budget(tree: TreeRollout, grp: LeafGroup, k: int) -> int:
    """The budget index ``j`` of summary ``k`` of ``grp`` (per-budget trees hold A summaries of each of
    the group's budgets, in order; a validation tree's one group of summaries is its first budget's)."""
    return grp.budget_indices[k // tree.group_size] if tree.per_budget else grp.budget_indices[0]


def packed_response(tree: TreeRollout, trained: Sequence[bool] | None = None,
                    ) -> tuple[list[int], list[int], list[tuple[int, int, int]]]:
    """Response of the packed layout: thinking, then every summary ``inserted + summary`` (groups in
    increasing cut: budget-major for a training tree).

    Returns ``(response_ids, response_mask, spans)``: the mask is 1 on thinking tokens and on the
    summary tokens of the budgets whose summaries are ``trained`` ([m],
    :func:`arctl.algo.tree_loss.summary_trained`; all when None), 0 on inserted tokens and on a coupled
    arm's other summaries (kept for their spans, which a compared method's rewards read); spans are
    ``(start, summary_start, end)`` in response coordinates.
    """
    ids = list(tree.thinking)
    mask = [1] * len(ids)
    spans = []
    for grp in tree.groups:
        for k, s in enumerate(grp.summaries):
            start = len(ids)
            ids += grp.inserted + s
            on = 1 if trained is None or trained[summary_budget(tree, grp, k)] else 0
            mask += [0] * len(grp.inserted) + [on] * len(s)
            spans.append((start, start + len(grp.inserted), len(ids)))
    return ids, mask, spans


def tree_record(tree: TreeRollout, layout: str, spans=(), row: str = "tree", leaf=None, target: int | None = None) -> TreeRecord:
    return TreeRecord(
        budgets=tuple(tree.budgets),
        think_len=len(tree.thinking),
        rewards=tuple(tuple(r) for r in tree.budget_rewards()),
        finished=tree.finished,
        eos=tree.eos,
        spans=tuple(spans) if tree.per_budget else (),
        row=row,
        leaf=leaf,
        layout=layout,
        target=target,
    )


def output_rows(tree: TreeRollout, layout: str, target: int | None = None,
                trained: Sequence[bool] | None = None) -> list[dict[str, Any]]:
    """The rollout rows of one tree: ``prompt_ids, response_ids, response_mask, reward, record``
    (``target``: the L1 target in the prompt, kept in every record). ``trained`` [m]: which budgets'
    summaries the loss trains (:func:`arctl.algo.tree_loss.summary_trained`; all when None): a packed
    row masks the others' tokens out, the duplicated layout sends no row for them (their rewards and
    lengths stay in the records)."""
    ids, mask, spans = packed_response(tree, trained)
    scores = tree.scores()
    final = scores[-1] if scores else 0.0
    if layout in ("flex", "dense"):
        rec = tree_record(tree, layout, spans, "tree", target=target)
        return [dict(prompt_ids=tree.prompt_ids, response_ids=ids, response_mask=mask, reward=final, record=rec)]
    rows = [
        dict(
            prompt_ids=tree.prompt_ids,
            response_ids=list(tree.thinking),
            response_mask=[1] * len(tree.thinking),
            reward=final,
            record=tree_record(tree, layout, spans, "thinking", target=target),
        )
    ]
    a = tree.group_size
    for grp in tree.groups:
        for k, s in enumerate(grp.summaries):
            j = summary_budget(tree, grp, k)
            if trained is not None and not trained[j]:
                continue
            prefix = tree.thinking[: grp.cut]
            rows.append(
                dict(
                    prompt_ids=tree.prompt_ids,
                    response_ids=prefix + grp.inserted + s,
                    response_mask=[0] * (len(prefix) + len(grp.inserted)) + [1] * len(s),
                    reward=grp.rewards[k],
                    record=tree_record(tree, layout, spans, "branch", (j, k % a), target=target),
                )
            )
    return rows


def _budgets_for(arctl: Any, validate: bool) -> tuple[list[int], int]:
    if not validate:
        objective = objective_of(arctl)
        return list(objective.budgets), int(objective.summary.group_size)
    if bool(arctl.get("eval_only", False)):  # the grid (Tables 1-2) and the eval budgets (the diagnostics'), as
        # the tiny backend's final evaluation
        return sorted({int(b) for b in arctl.eval_grid} | {int(b) for b in arctl.eval_budgets}), 1
    return [int(b) for b in arctl.eval_budgets], 1


def is_validation(kwargs: dict[str, Any], arctl: Any) -> bool:
    """Whether this rollout belongs to verl's validation pass.

    verl 0.9.1 does not pass its ``validate`` flag to ``AgentLoopBase.run`` (it only reaches the
    post-processing), so arctl's trainer marks every row it sends (:data:`VALIDATE_KEY`: its
    validation pass, or a training batch), whatever the file's rows say. Without the mark (a caller
    other than arctl's trainer): eval-only mode is validation throughout, else the row tells
    (``arctl data prepare`` writes ``extra_info.split = "test"`` for eval sets and ``"train"`` for
    DeepScaleR), which a file used for the other role gets wrong.
    """
    if "validate" in kwargs:
        return bool(kwargs["validate"])
    if kwargs.get(VALIDATE_KEY) is not None:
        return bool(kwargs[VALIDATE_KEY])
    if bool(arctl.get("eval_only", False)):
        return True
    extra = kwargs.get("extra_info")
    split = extra.get("split") if isinstance(extra, dict) else None
    if split is not None:
        return str(split).lower() in ("test", "val", "validation", "eval")
    return str(kwargs.get("data_source", "")) in {str(d) for d in (arctl.get("eval_datasets") or [])}


_PROMPT_CHECKED: list[bool] = []
_ROUND_TRIPS: dict[tuple[int, str, str], tuple[Any, str | None]] = {}


def tokenizer_round_trip_problem(tokenizer: Any, grader: str, at: str = FINAL_ANSWER) -> str | None:
    """:func:`arctl.algo.verify.round_trip_problem` of the worker's tokenizer under the run's ``grader`` and ``at``
    (:data:`arctl.algo.verify.ANSWER_AT`), prefixed with the tokenizer's model; checked once per tokenizer (verl
    builds a loop per sample with the worker's one tokenizer)."""
    key = (id(tokenizer), grader, at)
    kept = _ROUND_TRIPS.get(key)
    if kept is None or kept[0] is not tokenizer:
        found = round_trip_problem(tokenizer, grader, at)
        where = str(getattr(tokenizer, "name_or_path", "") or "")
        kept = _ROUND_TRIPS[key] = (tokenizer, f"model.path={where}: {found}" if found and where else found)
    return kept[1]


def warn_once_if_thinking_is_not_opened(tokenizer: Any, prompt_ids: Sequence[int]) -> str | None:
    """The first prompt a worker builds: a warning in the job's log where the chat template does not open the
    thinking (:func:`arctl.algo.prompts.opens_thinking_problem`; also in the smoke run's report), once per process.
    Returns the problem the first time, else None."""
    if _PROMPT_CHECKED:
        return None
    _PROMPT_CHECKED.append(True)
    problem = opens_thinking_problem(tokenizer, prompt_ids)
    if problem:
        print(f"arctl: WARNING {problem}", flush=True)
    return problem


def tree_request_ids(full_determinism: bool = False, sample: str | None = None) -> Callable[[], str]:
    """The ``request_id`` of each request of one tree (call it once per request).

    verl's router (``GlobalRequestLoadBalancer``) keeps requests with the same id on the same vLLM
    replica, and verl gives vLLM a fresh id per call: one id for the whole tree sends every summary
    request to the replica that just generated the thinking, whose prefix cache holds its KV
    (a fresh id per request would land on the thinking's replica about 1 time in #replicas and
    re-prefill up to 8k tokens). Under ``rollout.full_determinism`` verl passes the id to vLLM
    unchanged (and routes by its hash), and vLLM refuses two requests in flight with one id, so each
    request gets its own id ``det-{sample}-{k}``, where ``sample`` names the thinking sample (its
    question's uid and its session, :func:`sample_name`): distinct across trees, so they spread over
    the replicas instead of all landing on one.
    """
    if full_determinism:
        if not sample:
            raise ValueError("deterministic request ids need the sample's name (its uid and session)")
        counter = itertools.count()
        return lambda: f"det-{sample}-{next(counter)}"
    tree = f"arctl-tree-{uuid.uuid4().hex}"
    return lambda: tree


def request_seed(base: int, request_id: str) -> int:
    """The vLLM sampling seed of one request under ``rollout.full_determinism``: its own, derived from
    ``base`` (verl's ``rollout.seed``) and the request's id (:func:`tree_request_ids`: built from the
    question's ``uid``: under full determinism arctl's trainer draws it from the run's seed and the step,
    ``trainer_v1.ArctlPPOTrainer._reproducible_uids``, so a rerun or a resume draws the same seeds). verl otherwise gives every request of a replica
    the same seed (``replica_rank + rollout.seed``), and a tree's requests all run on one replica
    with one prefix: every summary of a group came back token-identical (each summary's advantage
    exactly 0) and the thinking samples of a question that share a replica were duplicates. The CPU
    rollout server (:mod:`arctl.backends.verl.cpu_rollout`) seeds a request without one the same way."""
    import hashlib

    return int(hashlib.sha256(f"{int(base)}:{request_id}".encode()).hexdigest()[:12], 16)


def sample_name(kwargs: dict[str, Any]) -> str | None:
    """``{uid}-{session}`` of the thinking sample an agent loop runs: verl's v1 worker passes the
    question's ``uid`` and the sample's ``session_id`` (0 .. rollout.n - 1)."""
    uid = kwargs.get("uid")
    if uid is None:
        return None
    return f"{uid}-{kwargs.get('session_id', 0)}"


DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"


def continuous_token_model_type(tokenizer: Any, hf_model_type: str | None) -> str | None:
    """The ``model_type`` to give verl's Continuous Token builder for this tokenizer.

    verl chooses the builder (how chat turns join) from config.json's ``model_type`` alone.
    DeepSeek-R1-Distill-Qwen says ``qwen2`` while its tokenizer speaks DeepSeek's chat format (no
    ``<|im_end|>``), so verl's Qwen builder refuses it (``ValueError`` in every rollout worker). The
    tokenizer decides: a Qwen type without ``<|im_end|>`` gets verl's DeepSeek builder when the
    tokenizer has DeepSeek's end-of-sentence token, else the generic builder (None); any other type
    is kept."""
    from verl.utils.tokenizer.continuous_token_wiring import _MODEL_TYPE_TO_FAMILY

    family = _MODEL_TYPE_TO_FAMILY.get(str(hf_model_type or "").strip().lower())
    if family is None or not str(family.value).startswith("qwen"):
        return hf_model_type
    kept = _CHAT_TOKENS.get(id(tokenizer))
    if kept is None or kept[0] is not tokenizer:  # verl builds a loop per sample with the worker's one tokenizer:
        vocab = tokenizer.get_vocab()  # a 151k-entry dict each time, ~110 ms a sample (from a review): once
        kept = _CHAT_TOKENS[id(tokenizer)] = (tokenizer, "<|im_end|>" in vocab, DEEPSEEK_EOS in vocab)
    _, im_end, deepseek_eos = kept
    if im_end:
        return hf_model_type
    return "deepseek_v3" if deepseek_eos else None


_CHAT_TOKENS: dict[int, tuple[Any, bool, bool]] = {}
"""id(tokenizer) -> (the tokenizer, has ``<|im_end|>``, has DeepSeek's end of sentence): the tokenizer is kept,
so its id is not reused while cached."""


def summary_cache_fields(extra: Sequence[dict[str, Any]], prompt_lens: Sequence[int]) -> dict[str, Any]:
    """Prefix-cache accounting of a tree's summary requests, for the output's extra fields:
    ``arctl_summary_requests``, ``arctl_summary_prompt_tokens`` and ``arctl_summary_cached_tokens``
    (the server's ``num_cached_tokens`` summed; None when the server does not report it)."""
    cached = [e.get("num_cached_tokens") for e in extra]
    return {
        "arctl_summary_requests": len(prompt_lens),
        "arctl_summary_prompt_tokens": int(sum(prompt_lens)),
        "arctl_summary_cached_tokens": int(sum(c for c in cached if c is not None))
        if cached and all(c is not None for c in cached) else None,
    }


@functools.lru_cache(maxsize=8)
def generation_eos(model: str) -> tuple[int, ...]:
    """The EOS ids of the generation config of the model at ``model`` (the folder verl loaded the tokenizer
    from: the model's local copy), as verl and vLLM read it (:func:`verl.utils.model.get_generation_config`:
    ``generation_config.json``, else the model's ``config.json``); () where it has neither. Read once per
    process (verl builds a loop per sample)."""
    from verl.utils.model import get_generation_config

    try:
        config = get_generation_config(model)
    except (OSError, ValueError):  # a folder with neither file (a tokenizer's own)
        return ()
    return tuple(sorted(eos_ids(getattr(config, "eos_token_id", None)))) if config is not None else ()


def _make_loop_class():
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
    from verl.utils.profiler import simple_timer

    class TreeAgentLoop(AgentLoopBase):
        """verl agent loop of the AnytimeReasoner tree rollout (registered as ``arctl_tree``)."""

        _seed_base: int | None = None  # under full determinism: each request's seed derives from it

        def __init__(self, *args, hf_model_type: str | None = None, **kwargs):
            # verl builds the loop before it calls run(): an error here (a tokenizer without </think>, a config
            # without arctl's node, verl's chat-format refusal) is kept for run() to record, so the step fails
            # with its line (rollout_failures) rather than "see the agent-loop worker's log" (from a review)
            self._init_error: Exception | None = None
            try:
                tokenizer = kwargs["tokenizer"] if "tokenizer" in kwargs else args[2]
                super().__init__(*args, hf_model_type=continuous_token_model_type(tokenizer, hf_model_type), **kwargs)
                self.arctl = self.config.arctl
                objective = objective_of(self.arctl)
                summary = objective.summary
                self.trained = summary_trained(objective)  # which budgets' summaries a training row trains
                self.inserted = InsertedTokens.from_tokenizer(self.tokenizer, summary.inserted)
                # every id the server ends a generation at (vLLM: the tokenizer's EOS and the generation config's)
                self.eos_id = stop_eos_ids(generation_eos(str(getattr(self.tokenizer, "name_or_path", "") or "")),
                                           self.tokenizer.eos_token_id)
                self.layout = str(self.arctl.get("tree_attention", "flex"))
                self.summary_max_tokens = int(summary.max_tokens)
                self.answer_at = str(self.arctl.get("answer_at") or answer_at(summary.inserted))
                garbled = tokenizer_round_trip_problem(self.tokenizer, str(self.arctl["grader"]), self.answer_at)
                if garbled:  # every reward would be 0, the whole run (from a hunt): the first step fails saying so
                    raise ValueError(garbled)
            except Exception as err:  # noqa: BLE001 - re-raised by run(), after it is recorded
                self._init_error = err

        async def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> list[int]:
            request_id = self._request_id()
            if self._seed_base is not None:  # full determinism: a seed of its own (request_seed)
                params = {**params, "seed": request_seed(self._seed_base, request_id)}
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=params
            )
            if getattr(out, "stop_reason", None) in ABORTED:
                # verl returns an aborted request as it stands only where it does not resume it (async training
                # without partial rollout): a thinking cut there would be graded as cut by the budget
                raise RuntimeError(f"the rollout server aborted request {request_id} after {len(out.token_ids)} tokens "
                                   "(verl's async training without partial rollout drops such samples): a tree needs "
                                   "every request whole; turn on async_training.partial_rollout or train synchronously")
            self._server_extra.append(dict(getattr(out, "extra_fields", None) or {}))
            self._prompt_lens.append(len(prompt_ids))
            return list(out.token_ids)

        def _weight_versions(self) -> dict[str, Any]:
            """Model-weight versions the tree was generated with (verl's staleness tags and metrics
            read ``min_global_steps`` / ``max_global_steps`` from the output's extra fields), and
            the summary requests' prefix-cache hits (:func:`summary_cache_fields`)."""
            lo = [e.get("min_global_steps") for e in self._server_extra if e.get("min_global_steps") is not None]
            hi = [e.get("max_global_steps") for e in self._server_extra if e.get("max_global_steps") is not None]
            return {
                "min_global_steps": min(lo) if lo else None,
                "max_global_steps": max(hi) if hi else None,
                **summary_cache_fields(self._server_extra[1:], self._prompt_lens[1:]),
            }

        async def run(self, sampling_params: dict[str, Any], **kwargs) -> list[AgentLoopOutput]:
            if self._init_error is not None:
                arctl = getattr(self, "arctl", None)
                validate = is_validation(kwargs, arctl) if arctl is not None else bool(kwargs.get(VALIDATE_KEY))
                await rollout_failures.record(kwargs.get("uid"), validate, self._init_error)
                raise self._init_error
            validate = is_validation(kwargs, self.arctl)
            try:
                return await self._run_tree(sampling_params, validate, kwargs)
            except Exception as err:  # the trainer fails the step with this line (rollout_failures)
                await rollout_failures.record(kwargs.get("uid"), validate, err)
                raise

        async def _run_tree(self, sampling_params: dict[str, Any], validate: bool,
                            kwargs: dict[str, Any]) -> list[AgentLoopOutput]:
            messages = list(kwargs["raw_prompt"])
            control = control_of(self.arctl)
            from arctl.backends.verl.reward import row_ground_truth

            gt = row_ground_truth(kwargs)  # alternatives (Minerva) included; a row without one raises
            budgets, group_size = _budgets_for(self.arctl, validate)
            # logprobs from the server are not used (old log-probs are recomputed on the tree)
            params = {k: v for k, v in sampling_params.items() if k != "logprobs"}

            score = leaf_scorer(self.tokenizer, self.inserted.think_end, self.eos_id, gt, self.arctl["grader"],
                                self.answer_at)

            async def build_prompt(target):
                prompt = await self.ct_build_initial_tokens(target_messages(messages, control, target))
                warn_once_if_thinking_is_not_opened(self.tokenizer, prompt)
                return prompt

            # a compared method's generation limit at this training step (ThinkPrune's round): the step
            # from verl's batch, the run's length from the trainer (ArctlPPOTrainer.on_init_end)
            think_max = None if validate else generation_limit(control, kwargs, self.arctl)

            def sample_tree(prompt, group, per_budget, forcing):
                return rollout_tree(self._generate, prompt, group, group_size, self.summary_max_tokens, self.inserted,
                                    self.eos_id, params, score, per_budget=per_budget, forcing=forcing,
                                    think_max=think_max)

            cue = (list(self.tokenizer.encode(control.forcing_cue, add_special_tokens=False))
                   if validate and control.forcing_extensions > 0 else [])
            metrics: dict[str, Any] = {}
            self._server_extra: list[dict[str, Any]] = []
            self._prompt_lens: list[int] = []
            full_determinism = bool(getattr(self.rollout_config, "full_determinism", False))
            self._request_id = tree_request_ids(full_determinism, sample_name(kwargs))
            self._seed_base = int(getattr(self.rollout_config, "seed", 0) or 0) if full_determinism else None
            with simple_timer("generate_sequences", metrics):
                tree, info, target = await rollout_question(
                    sample_tree, build_prompt, budgets, validate, control,
                    question_key(kwargs, int(self.arctl.get("seed", 0))), self.inserted.think_end, cue,
                    diag_budgets=[int(b) for b in self.arctl.eval_budgets] if validate else None,
                )
            versions = self._weight_versions()
            rows = output_rows(tree, "duplicate" if validate else self.layout, target,
                               None if validate else self.trained)
            if validate:  # validation never trains: the thinking row carries the scores
                rows = rows[:1]
            outputs = []
            for row in rows:
                outputs.append(
                    AgentLoopOutput(
                        prompt_ids=row["prompt_ids"],
                        response_ids=row["response_ids"],
                        response_mask=row["response_mask"],
                        reward_score=float(row["reward"]),
                        num_turns=2,
                        metrics=AgentLoopMetrics(**metrics),
                        extra_fields={
                            **versions,
                            RECORD_KEY: row["record"].to_dict(),
                            "reward_extra_info": dict(info),
                            "turn_scores": [],
                            "tool_rewards": [],
                        },
                    )
                )
            return outputs

    return TreeAgentLoop


def __getattr__(name: str):
    # the verl class is built on first use so that importing this module stays cheap
    if name == "TreeAgentLoop":
        cls = _make_loop_class()
        cls.__module__ = __name__
        cls.__qualname__ = "TreeAgentLoop"
        globals()["TreeAgentLoop"] = cls
        return cls
    raise AttributeError(name)
