"""Rule reward with the authors' formatting rule, through :mod:`arctl.algo.verify`.

A leaf (summary branch) scores 1 iff ``</think>`` occurs exactly once in ``thinking[:cut] +
inserted + summary``, the cut thinking does not end with EOS, and the summary's answer equals the
ground truth under the run's grader (``verl.grader``: the authors' DeepScaleR grader by default, its
sympy stage bounded at 10 s in a child process, :mod:`arctl.backends.verl.sympy_worker`; or
math-verify); otherwise 0.

:func:`leaf_reward` works on token ids (what the agent loop has), in two parts: :func:`leaf_text` (the
format rule and the decoding, on the caller's thread: the tokenizer is not handed to another thread) and
:func:`grade_leaf` (the grader, which the agent loop runs on its grading thread); :func:`compute_score`
is the same rule on text with verl's ``custom_reward_function`` signature, for verl's own reward path.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from arctl.algo.verify import FINAL_ANSWER


def ground_truth_of(reward_model: Any) -> Any:
    """What a verl row's answer is checked against: ``reward_model["alternatives"]`` (a list, any of
    which is right) when it holds several, else ``reward_model["ground_truth"]``; None without a dict."""
    if not isinstance(reward_model, dict):
        return None
    alternatives = reward_model.get("alternatives")
    if hasattr(alternatives, "tolist"):  # a numpy array from the parquet reader
        alternatives = alternatives.tolist()
    if isinstance(alternatives, (list, tuple)) and len(alternatives) > 1:
        return [str(a) for a in alternatives]
    return reward_model.get("ground_truth")


def row_ground_truth(row: dict[str, Any]) -> Any:
    """:func:`ground_truth_of` a verl row's ``reward_model`` (the agent loop's keyword arguments); a row without one
    raises ValueError, one line naming its ``data_source`` and ``extra_info.index`` (from a hunt: a training file
    without ground truths trained to COMPLETED with every reward 0)."""
    truth = ground_truth_of(row.get("reward_model"))
    if truth is None or (isinstance(truth, str) and not truth.strip()):
        extra = row.get("extra_info")
        index = extra.get("index") if isinstance(extra, dict) else None
        raise ValueError(f"the row of data_source {row.get('data_source')!r}, extra_info.index {index!r} has no "
                         "reward_model.ground_truth (a dict with the answer): every leaf would score 0; prepare its "
                         "file with `arctl data prepare`")
    return truth


def leaf_text(
    thinking_prefix: Sequence[int],
    inserted: Sequence[int],
    summary: Sequence[int],
    tokenizer: Any,
    think_end_id: int,
    eos_id: int | Collection[int] | None,
) -> str | None:
    """The text a leaf's grade reads (its inserted tokens and summary, EOS dropped), or None where the
    authors' format rule already scores it 0 (``</think>`` not exactly once, a thinking cut on EOS) or its
    ids are not token ids (not integers, or out of the tokenizer's integer range). Any other error of the
    tokenizer is raised: it fails the tree in one line (the step with it), where scoring the leaf 0 would
    train on a wrong reward without a trace."""
    from arctl.algo.verify import eos_ids, format_ok_ids

    try:
        branch = [int(t) for t in inserted] + [int(t) for t in summary]
        if not format_ok_ids(thinking_prefix, branch, think_end_id, eos_id):
            return None
        eos = eos_ids(eos_id)
        return tokenizer.decode([t for t in branch if t not in eos], skip_special_tokens=False)
    except (TypeError, ValueError, OverflowError):  # what an id that is not a token id raises
        return None


def grade_leaf(text: str | None, ground_truth: Any, *, grader: str, at: str = FINAL_ANSWER) -> float:
    """A leaf's reward from :func:`leaf_text` (None scores 0; an answer the grader cannot read scores 0;
    raises only for an unknown grader or a grader that cannot run on this machine). ``at``: where the
    answer is (:data:`arctl.algo.verify.ANSWER_AT`, from ``summary.inserted``: :func:`arctl.algo.verify.answer_at`)."""
    from arctl.algo.deepscaler_grader import StageUnavailable
    from arctl.algo.verify import check_answer_at, check_grader, grade
    from arctl.backends.verl.sympy_worker import bounded_math_verify, bounded_sympy_equal

    check_grader(grader)
    check_answer_at(at)
    if text is None:
        return 0.0
    try:
        return float(grade(text, ground_truth, grader, bounded_sympy_equal, at, bounded_math_verify))
    except StageUnavailable:
        raise  # the machine, not the leaf: the step fails with this line
    except Exception:
        return 0.0


def leaf_reward(
    thinking_prefix: Sequence[int],
    inserted: Sequence[int],
    summary: Sequence[int],
    ground_truth: Any,
    tokenizer: Any,
    think_end_id: int,
    eos_id: int | Collection[int] | None,
    *,
    grader: str,
    at: str = FINAL_ANSWER,
) -> float:
    """Reward of one leaf from token ids: :func:`grade_leaf` of :func:`leaf_text` (malformed input
    scores 0; raises only for an unknown grader or a grader that cannot run on this machine)."""
    return grade_leaf(leaf_text(thinking_prefix, inserted, summary, tokenizer, think_end_id, eos_id), ground_truth,
                      grader=grader, at=at)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, *,
                  grader: str, answer_at: str = FINAL_ANSWER, **kwargs) -> float:
    """verl ``custom_reward_function``: the authors' rule on the decoded response text (``grader`` comes
    from ``reward.custom_reward_function.reward_kwargs``, set by :func:`arctl.backends.verl.overrides.verl_overrides`)."""
    from arctl.algo.verify import score_response
    from arctl.backends.verl.sympy_worker import bounded_math_verify, bounded_sympy_equal

    return float(score_response(solution_str, ground_truth, grader=grader, sympy_stage=bounded_sympy_equal,
                                at=answer_at, equivalent=bounded_math_verify))
