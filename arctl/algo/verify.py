"""Rule-based reward of a summary (paper Sec. 3, reward ``r(x, y)``; the authors' formatting rule).

A response scores 1 iff
- exactly one ``</think>`` occurs in thinking + inserted text + summary, and the thinking did not
  end with EOS (:func:`format_ok`, :func:`format_ok_ids`), and
- the first paragraph starting with ``**Final Answer**`` holds a ``\\boxed{}`` (the last one wins)
  whose content equals the ground truth under math-verify (:func:`answers_equivalent`).
Malformed input scores 0 and never raises.

Timeouts: math-verify bounds its work with ``signal.alarm``, which only works in the main thread.
In the main thread we use it (restoring any outer alarm). In any other thread the comparison runs
in a helper process (``python -m arctl.algo.verify_worker``, started once, killed and restarted if a
comparison overruns its deadline); if no helper can be started, only exact string equality is used.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

THINK_END = "</think>"
FINAL_ANSWER_HEADER = "**Final Answer**"
DEFAULT_TIMEOUT_S = 5
MAX_PARAGRAPH_CHARS = 20_000
MAX_ANSWER_CHARS = 1_000
WORKER_START_TIMEOUT_S = 60.0
_BOX_COMMANDS = ("\\boxed", "\\fbox")


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
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def extract_answer(summary_text: str) -> str | None:
    """The answer of a summary: last ``\\boxed{}`` in its first ``**Final Answer**`` paragraph."""
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


# ------------------------------------------------------------------------------ equivalence
def _equivalent_here(pred: str, gold: str, timeout_s: int | None) -> bool:
    """math-verify comparison in this thread (``timeout_s=None``: no signal-based timeout)."""
    from math_verify import parse, verify

    gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=timeout_s)
    pred_parsed = parse("\\boxed{" + pred + "}", parsing_timeout=timeout_s)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout_s))


def _equivalent_main_thread(pred: str, gold: str, timeout_s: float) -> bool:
    seconds = max(1, math.ceil(timeout_s))
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)  # e.g. pytest-timeout's alarm
    started = time.monotonic()
    try:
        return _equivalent_here(pred, gold, seconds)
    finally:
        if outer_delay > 0:
            remaining = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, outer_interval)


class _WorkerProcess:
    """One helper process doing comparisons in its main thread (so math-verify's alarms work)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.disabled = False
        atexit.register(self.stop)

    def _start(self) -> bool:
        # make this very arctl importable in the helper, however the parent found it
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "arctl.algo.verify_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=env,
            )
        except OSError:
            self.disabled = True
            return False
        if self._readline(WORKER_START_TIMEOUT_S) != "ready":
            self.stop()
            self.disabled = True
            return False
        return True

    def _readline(self, timeout_s: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return line.strip() if line else None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def equivalent(self, pred: str, gold: str, timeout_s: float) -> bool | None:
        """True/False, or None when no helper process is available."""
        with self.lock:
            if self.disabled:
                return None
            if (self.proc is None or self.proc.poll() is not None) and not self._start():
                return None
            assert self.proc is not None and self.proc.stdin is not None
            seconds = max(1, math.ceil(timeout_s))
            try:
                self.proc.stdin.write(json.dumps([pred, gold, seconds]) + "\n")
                self.proc.stdin.flush()
            except OSError:
                self.stop()
                return False
            # two parses and the pairwise comparisons are each bounded by `seconds` inside the helper
            reply = self._readline(6 * seconds + 5)
            if reply not in ("0", "1"):
                self.stop()  # overran or died: kill it, the next call starts a fresh one
                return False
            return reply == "1"


_WORKER = _WorkerProcess()


def answers_equivalent(pred: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether answer ``pred`` equals ``gold`` (math-verify: numbers, fractions, sets, intervals,
    symbolic equality, ...). Bounded in time; never raises."""
    try:
        if not isinstance(pred, str) or not isinstance(gold, str):
            return False
        pred, gold = pred.strip(), gold.strip()
        if not pred or not gold:
            return False
        if _plain(pred) == _plain(gold):
            return True
        if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return False
        if threading.current_thread() is threading.main_thread():
            return _equivalent_main_thread(pred, gold, timeout_s)
        result = _WORKER.equivalent(pred, gold, timeout_s)
        return bool(result)  # no helper process: only the exact match above counts
    except Exception:
        return False
    except BaseException as exc:  # math-verify's TimeoutException derives from BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def verify_answer(summary_text: str, ground_truth: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """1 if the summary's final answer equals ``ground_truth``, else 0 (no format check)."""
    pred = extract_answer(summary_text)
    gold = ground_truth_answer(ground_truth)
    if pred is None or gold is None:
        return 0
    return int(answers_equivalent(pred, gold, timeout_s))


# ------------------------------------------------------------------------------ formatting rule
def format_ok(response_text: str, think_end: str = THINK_END, eos: str | None = None) -> bool:
    """The authors' formatting rule on text: exactly one ``think_end`` in thinking + inserted text +
    summary, and (if ``eos`` is given) no EOS inside the thinking (before ``think_end``)."""
    if not isinstance(response_text, str) or response_text.count(think_end) != 1:
        return False
    return not (eos and eos in response_text.split(think_end, 1)[0])


def format_ok_ids(
    thinking_ids: Sequence[int], branch_ids: Sequence[int], think_end_id: int, eos_id: int | None = None
) -> bool:
    """The authors' formatting rule on token ids: the (possibly cut) thinking must not end with EOS,
    and ``</think>`` must occur exactly once in thinking + branch (inserted tokens + summary)."""
    thinking = [int(t) for t in thinking_ids]
    if eos_id is not None and thinking and thinking[-1] == eos_id:
        return False
    branch = [int(t) for t in branch_ids]
    return thinking.count(think_end_id) + branch.count(think_end_id) == 1


def score_response(
    response_text: str,
    ground_truth: Any,
    think_end: str = THINK_END,
    eos: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> int:
    """Reward of a whole response ``thinking + inserted text + summary``: 1 iff :func:`format_ok` and
    the answer after ``think_end`` is correct, else 0. Never raises."""
    try:
        if not format_ok(response_text, think_end, eos):
            return 0
        return verify_answer(response_text.split(think_end, 1)[1], ground_truth, timeout_s)
    except Exception:
        return 0
