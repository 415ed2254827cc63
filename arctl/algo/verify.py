"""Rule-based reward of a summary (paper Sec. 3, reward ``r(x, y)``; the authors' formatting rule).

A response scores 1 iff
- exactly one ``</think>`` occurs in thinking + inserted text + summary, and the thinking did not
  end with EOS (:func:`format_ok`, :func:`format_ok_ids`), and
- the first paragraph starting with ``**Final Answer**`` holds a ``\\boxed{}`` (the last one wins)
  whose content equals the ground truth (or any of a list of acceptable answers) under math-verify
  (:func:`answers_equivalent`), percent signs removed as the authors' grader does, under the
  ``math-verify`` grader; under ``deepscaler`` (the authors' grader, the verl backend's default:
  ``verl.grader``) the authors' own extraction and comparison (:mod:`arctl.algo.deepscaler_grader`).
  Where the two differ: docs/algorithm.md, "The verifier".
Malformed input scores 0; only an unknown grader or a grader that cannot run on the machine raises.

Timeouts: math-verify bounds its work with ``signal.alarm``, which only works in the main thread,
and only between Python steps: answers nested deeper than 12 brackets are compared as strings only
in every thread (64 levels kept the parser 120 s in calls the alarm did not cut; a test timed out on
it in CI). In the main thread we use it (restoring any outer alarm). In any other thread math-verify runs in
its no-signal mode, so the input is bounded instead: answers longer than 200 characters, nested
deeper than 12 brackets or with more than 10 ``^`` are compared as strings only, and parsed
expressions whose evaluation can explode (integer powers above 10^4, numeric power towers,
factorials above 1000) count as not equal.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from arctl.algo.prompts import ELLIPSIS_TEXT, FINAL_ANSWER_TEXT, THINK_END

FINAL_ANSWER_HEADER = "**Final Answer**"
DEFAULT_TIMEOUT_S = 5
MAX_PARAGRAPH_CHARS = 20_000
MAX_ANSWER_CHARS = 1_000
_BOX_COMMANDS = ("\\boxed", "\\fbox")
DEEPSCALER, MATH_VERIFY = "deepscaler", "math-verify"
GRADERS = (DEEPSCALER, MATH_VERIFY)
"""``verl.grader``: how a summary's answer is compared with the gold one. ``deepscaler``: the authors'
(DeepScaleR's grader as their ``brpo.py`` calls it); ``math-verify``: arctl's earlier grader."""
DEFAULT_GRADER = DEEPSCALER
"""The authors' grader: what produced the paper's numbers."""
FINAL_ANSWER, SOLUTION = "final_answer", "solution"
ANSWER_AT = (FINAL_ANSWER, SOLUTION)
"""Where a graded text's answer is: ``final_answer`` the last ``\\boxed{}`` of its first ``**Final Answer**``
paragraph (the authors' reward, after their inserted header); ``solution`` the last ``\\boxed{}`` anywhere in
it (DeepScaleR's reward on the text after ``</think>``, which Elastic Reasoning trains with: no header is
inserted, the model writes its own solution)."""


def check_answer_at(at: str) -> None:
    """ValueError for a place of the answer that is not one of :data:`ANSWER_AT`."""
    if at not in ANSWER_AT:
        raise ValueError(f"answer place {at!r} is not one of {', '.join(ANSWER_AT)}")


def answer_at(inserted: str | None) -> str:
    """Where the answer is for ``summary.inserted`` (:data:`arctl.algo.prompts.INSERTED_STYLES`): ``think_end``
    (E1's ``</think>`` alone) -> :data:`SOLUTION`, else :data:`FINAL_ANSWER`."""
    return SOLUTION if inserted == "think_end" else FINAL_ANSWER


GRADER_BEFORE_THE_KEY = MATH_VERIFY
"""The grader of a run whose config has no ``verl.grader`` (written before the key existed, 2026-11-29):
what such runs were trained and evaluated with; their run ids stay (:mod:`arctl.launch.run_id`)."""


# ------------------------------------------------------------------------------ extraction
def final_answer_paragraph(text: str) -> str | None:
    """Text of the first paragraph (paragraphs are separated by a blank line) that starts with
    ``**Final Answer**``, without the header; None if there is none."""
    if not isinstance(text, str):
        return None
    for paragraph in text.split("\n\n"):
        stripped = paragraph.strip()
        if stripped.startswith(FINAL_ANSWER_HEADER):
            return stripped[len(FINAL_ANSWER_HEADER) :][:MAX_PARAGRAPH_CHARS]
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed x``) in ``text``, with
    balanced braces; None if there is none or its braces never close."""
    if not isinstance(text, str):
        return None
    start = max(text.rfind(cmd) for cmd in _BOX_COMMANDS)
    if start < 0:
        return None
    cmd = next(c for c in _BOX_COMMANDS if text.startswith(c, start))
    i = start + len(cmd)
    if i < len(text) and text[i] == " " and (i + 1 >= len(text) or text[i + 1] != "{"):  # "\boxed 3"
        rest = text[i + 1 :].split("$")[0].split()
        return rest[0] if rest else None
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    end = closing_brace(text, i)
    return None if end is None else text[i + 1 : end].strip()


def closing_brace(text: str, start: int) -> int | None:
    """Index of the first ``}`` after ``start`` at which the braces counted from ``start`` balance
    (a ``}`` that closes nothing counts too, as in the authors' ``last_boxed_only_string``); None if none."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return None


def extract_answer(summary_text: str, at: str = FINAL_ANSWER) -> str | None:
    """The answer of a summary: last ``\\boxed{}`` in its first ``**Final Answer**`` paragraph (``at``
    :data:`SOLUTION`: in the whole text, at most its last :data:`MAX_PARAGRAPH_CHARS`)."""
    if at == SOLUTION:
        return last_boxed(summary_text[-MAX_PARAGRAPH_CHARS:]) if isinstance(summary_text, str) else None
    paragraph = final_answer_paragraph(summary_text)
    return None if paragraph is None else last_boxed(paragraph)


def ground_truth_answer(ground_truth: Any) -> str | None:
    """The ground truth as an answer string (a ``\\boxed{}`` in it is unwrapped)."""
    if ground_truth is None or isinstance(ground_truth, bool):
        return None
    text = str(ground_truth).strip()
    if any(cmd in text for cmd in _BOX_COMMANDS):
        text = last_boxed(text) or ""
    text = text.strip().strip("$").strip()
    return text or None


def _plain(s: str) -> str:
    return "".join(s.split())


def _without_percent(s: str) -> str:
    """``10\\%`` -> ``10``: a percent sign is not part of the answer (the authors' grader, the
    Hendrycks MATH normaliser, removes every ``\\%`` and ``%``; math-verify reads ``10\\%`` as 0.1, so
    MATH500's "by what percent" problems, gold ``10``, would score a ``\\boxed{10\\%}`` 0)."""
    return s.replace("\\%", "").replace("%", "").strip() if "%" in s else s


# ------------------------------------------------------------------------------ equivalence
def _equivalent_main_thread(pred: str, gold: str, timeout_s: float) -> bool:
    """math-verify with its signal-based timeouts (main thread only)."""
    from math_verify import parse, verify

    seconds = max(1, math.ceil(timeout_s))
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)  # e.g. pytest-timeout's alarm
    started = time.monotonic()
    try:
        gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=seconds)
        pred_parsed = parse("\\boxed{" + pred + "}", parsing_timeout=seconds)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=seconds))
    finally:
        if outer_delay > 0:
            remaining = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, outer_interval)


NOSIGNAL_MAX_ANSWER_CHARS = 200
NOSIGNAL_MAX_DEPTH = 12
NOSIGNAL_MAX_POWERS = 10
_MAX_INT_EXPONENT = 10_000
_MAX_FACTORIAL = 1_000


def bracket_depth(s: str) -> int:
    """How deep ``()[]{}`` nest in ``s`` (unmatched closers ignored)."""
    depth = best = 0
    for ch in s:
        if ch in "([{":
            depth += 1
            best = max(best, depth)
        elif ch in ")]}":
            depth = max(depth - 1, 0)
    return best


def _safe_without_signals(s: str) -> bool:
    """Inputs whose parsing stays fast without a timeout (the depth bound, NOSIGNAL_MAX_DEPTH, holds
    for every thread and is checked before: :func:`answers_equivalent`)."""
    return len(s) <= NOSIGNAL_MAX_ANSWER_CHARS and s.count("^") <= NOSIGNAL_MAX_POWERS


def _explosive(obj: Any) -> bool:
    """Whether comparing the parsed ``obj`` may evaluate a huge number (9^{9^9}, 10^{20}!, ...)."""
    from sympy import Basic, Pow, factorial, factorial2, preorder_traversal, subfactorial

    if not isinstance(obj, Basic):
        return False
    facts = (factorial, factorial2, subfactorial)
    for node in preorder_traversal(obj):
        if isinstance(node, Pow) and node.base.is_number:
            exp = node.exp
            if exp.is_Integer and abs(int(exp)) > _MAX_INT_EXPONENT:
                return True
            if exp.is_number and not exp.is_Atom and exp.has(Pow, *facts):
                return True
        elif isinstance(node, facts):
            arg = node.args[0]
            if arg.is_Integer and int(arg) > _MAX_FACTORIAL:
                return True
            if arg.is_number and not arg.is_Atom and arg.has(Pow, *facts):
                return True
    return False


def _equivalent_without_signals(pred: str, gold: str) -> bool:
    """math-verify in no-signal mode (worker threads), on bounded input only: no time bound at all here,
    so the bounds on the input are what keeps a call short. Every verl grade runs here (a Ray actor's
    event loop is not the main thread, nor is the agent loop's grading thread)."""
    from math_verify import parse, verify

    if not (_safe_without_signals(pred) and _safe_without_signals(gold)):
        return False
    gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=None)
    pred_parsed = parse("\\boxed{" + pred + "}", parsing_timeout=None)
    if not gold_parsed or not pred_parsed or any(_explosive(x) for x in (*gold_parsed, *pred_parsed)):
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def answers_equivalent(pred: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether answer ``pred`` equals ``gold`` (math-verify: numbers, fractions, sets, intervals,
    symbolic equality, ...). Bounded in time; never raises."""
    try:
        if not isinstance(pred, str) or not isinstance(gold, str):
            return False
        pred, gold = _without_percent(pred.strip()), _without_percent(gold.strip())
        if not pred or not gold:
            return False
        if _plain(pred) == _plain(gold):
            return True
        if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return False
        # in both modes: a deep nest can keep math-verify's parser minutes inside one call that no alarm
        # interrupts (64 levels: 120 s here), so the alarm cannot bound it
        if bracket_depth(pred) > NOSIGNAL_MAX_DEPTH or bracket_depth(gold) > NOSIGNAL_MAX_DEPTH:
            return False
        if threading.current_thread() is threading.main_thread():
            return _equivalent_main_thread(pred, gold, timeout_s)
        return _equivalent_without_signals(pred, gold)
    except Exception:
        return False
    except BaseException as exc:  # math-verify's TimeoutException derives from BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def verify_answer(summary_text: str, ground_truth: Any, timeout_s: float = DEFAULT_TIMEOUT_S,
                  at: str = FINAL_ANSWER, equivalent: Callable[[str, str], bool] | None = None) -> int:
    """1 if the summary's final answer (:func:`extract_answer` ``at``) equals ``ground_truth``, else 0 (no
    format check). A list or tuple ``ground_truth`` is a set of acceptable answers (Minerva's): 1 if it
    equals any of them. ``equivalent(pred, gold)``: the comparison (default :func:`answers_equivalent` in
    this process; the verl backend's runs it in a child process, bounded in time)."""
    pred = extract_answer(summary_text, at)
    if pred is None:
        return 0
    golds = list(ground_truth) if isinstance(ground_truth, (list, tuple)) else [ground_truth]
    for item in golds:
        gold = ground_truth_answer(item)
        if gold is not None and (equivalent(pred, gold) if equivalent else answers_equivalent(pred, gold, timeout_s)):
            return 1
    return 0


# ------------------------------------------------------------------------------ formatting rule
def format_ok(response_text: str, think_end: str = THINK_END, eos: str | None = None) -> bool:
    """The authors' formatting rule on text: exactly one ``think_end`` in thinking + inserted text +
    summary, and (if ``eos`` is given) no EOS inside the thinking (before ``think_end``)."""
    if not isinstance(response_text, str) or response_text.count(think_end) != 1:
        return False
    return not (eos and eos in response_text.split(think_end, 1)[0])


def eos_ids(eos: int | Collection[int] | None) -> frozenset[int]:
    """``eos`` (one id, several, or None) as a set of ids."""
    if eos is None:
        return frozenset()
    return frozenset([int(eos)]) if isinstance(eos, int) else frozenset(int(t) for t in eos)


def stop_eos_ids(generation_eos: int | Collection[int] | None, tokenizer_eos: int | None) -> frozenset[int]:
    """The EOS ids generation ends at, as vLLM stops: the tokenizer's and every one of the model's
    generation config (``eos_token_id``: one id or a list; a chat model often lists its end-of-turn
    token beside the tokenizer's EOS)."""
    return eos_ids(generation_eos) | eos_ids(tokenizer_eos)


def format_ok_ids(
    thinking_ids: Sequence[int], branch_ids: Sequence[int], think_end_id: int,
    eos_id: int | Collection[int] | None = None,
) -> bool:
    """The authors' formatting rule on token ids: the (possibly cut) thinking must not end with EOS
    (``eos_id``: one id or the model's set, :func:`stop_eos_ids`), and ``</think>`` must occur exactly
    once in thinking + branch (inserted tokens + summary)."""
    thinking = [int(t) for t in thinking_ids]
    if thinking and thinking[-1] in eos_ids(eos_id):
        return False
    branch = [int(t) for t in branch_ids]
    return thinking.count(think_end_id) + branch.count(think_end_id) == 1


def check_grader(grader: str) -> None:
    """ValueError unless ``grader`` is one of :data:`GRADERS` (configs are checked before any of this runs)."""
    if grader not in GRADERS:
        raise ValueError(f"unknown grader {grader!r}; use one of {', '.join(GRADERS)}")


def grade(summary_text: str, ground_truth: Any, grader: str, sympy_stage: Callable[[str, str], bool] | None = None,
          at: str = FINAL_ANSWER, equivalent: Callable[[str, str], bool] | None = None) -> int:
    """1 if the summary's answer (found ``at``: :data:`ANSWER_AT`) is right under ``grader`` (one of
    :data:`GRADERS`), else 0 (no format check). ``sympy_stage``: the deepscaler grader's stage 2, in this
    process when None (:func:`arctl.algo.deepscaler_grader.grade`); ``equivalent``: math-verify's comparison,
    in this process when None (:func:`verify_answer`). Raises for an unknown grader or place, and
    :class:`arctl.algo.deepscaler_grader.StageUnavailable` when stage 2 (or ``equivalent``) cannot run."""
    check_grader(grader)
    check_answer_at(at)
    if grader == MATH_VERIFY:
        return verify_answer(summary_text, ground_truth, at=at, equivalent=equivalent)
    from arctl.algo import deepscaler_grader

    return deepscaler_grader.grade(summary_text, ground_truth, sympy_stage or deepscaler_grader.sympy_equal,
                                   whole=at == SOLUTION)


def score_response(
    response_text: str,
    ground_truth: Any,
    *,
    grader: str,
    think_end: str = THINK_END,
    eos: str | None = None,
    sympy_stage: Callable[[str, str], bool] | None = None,
    at: str = FINAL_ANSWER,
    equivalent: Callable[[str, str], bool] | None = None,
) -> int:
    """Reward of a whole response ``thinking + inserted text + summary``: 1 iff :func:`format_ok` and
    the answer after ``think_end`` is right under ``grader``, else 0 (``sympy_stage``, ``equivalent``: as
    :func:`grade`). Raises only for an unknown grader or a grader that cannot run
    (:class:`arctl.algo.deepscaler_grader.StageUnavailable`)."""
    from arctl.algo.deepscaler_grader import StageUnavailable

    check_grader(grader)
    check_answer_at(at)  # before the try: a wrong place is the caller's error, not a leaf scored 0
    try:
        if not format_ok(response_text, think_end, eos):
            return 0
        return grade(response_text.split(think_end, 1)[1], ground_truth, grader, sympy_stage, at, equivalent)
    except StageUnavailable:
        raise
    except Exception:
        return 0


# a thinking cut, the inserted text and a summary, as a leaf reads (no " ." or " ," that a tokenizer's clean-up of
# spaces may change); its answer is ROUND_TRIP_ANSWER wherever the verifier reads it
ROUND_TRIP_ANSWER = "2"
ROUND_TRIP_TEXT = f"Let me check: 1 + 1 = 2{ELLIPSIS_TEXT}{THINK_END}{FINAL_ANSWER_TEXT}\\boxed{{{ROUND_TRIP_ANSWER}}}"


def round_trip_problem(tokenizer: Any, grader: str = DEEPSCALER, at: str = FINAL_ANSWER) -> str | None:
    """Why ``grader`` would not read the answer of a summary (:data:`ROUND_TRIP_TEXT`, right as written) once
    ``tokenizer`` has encoded and decoded it (as a leaf is decoded: special tokens kept), or None. From a hunt: a
    tokenizer_config.json whose class transformers resolves to the slow ``LlamaTokenizer`` (R1-Distill's names
    ``LlamaTokenizerFast``; an R1-Distill-Llama model, a release that no longer maps ``qwen2`` to Qwen's class) drops
    every space and newline; a SentencePiece normaliser turns newlines into spaces: either way no ``**Final
    Answer**`` paragraph is found and every summary scores 0, for the whole run, without an error. None also where
    it cannot tell: a word-level vocabulary without the sample's words gives back its unknown token (the tiny
    backend's), or the grader cannot run here."""
    from arctl.algo.deepscaler_grader import StageUnavailable

    try:
        ids = tokenizer.encode(ROUND_TRIP_TEXT, add_special_tokens=False)
        back = tokenizer.decode(list(ids), skip_special_tokens=False)
    except Exception as err:  # noqa: BLE001 - a tokenizer that cannot do it is the problem said
        return f"the tokenizer ({type(tokenizer).__name__}) cannot encode and decode a summary: {type(err).__name__}: {err}"
    unknown = getattr(tokenizer, "unk_token", None)
    if isinstance(unknown, str) and unknown and unknown in back:
        return None
    try:
        if grade(back, ROUND_TRIP_ANSWER, grader, at=at) == 1:
            return None
    except (StageUnavailable, ImportError):  # (math-verify not installed where the check runs)
        return None
    return (f"the tokenizer ({type(tokenizer).__name__}) does not give back the text it encodes: {ROUND_TRIP_TEXT!r} "
            f"decodes as {back!r}, where the {grader} grader reads no answer ({at}), so every summary would score 0; "
            "use the model's own tokenizer files with a transformers release that loads them as a fast byte-level "
            "BPE (for R1-Distill-Qwen: AutoTokenizer gives Qwen2Tokenizer)")
