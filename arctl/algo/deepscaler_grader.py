"""The authors' answer grader (``verl.grader=deepscaler``): DeepScaleR's grader as their ``brpo.py`` calls it.

AnytimeReasoner's reward (``match_answer_with_ground_truth`` in the authors' ``brpo.py``) takes the
first paragraph of the summary that starts with ``"**Final Answer**\\n"`` (paragraphs split at blank
lines, not stripped), the content of its last ``\\boxed{...}`` (exactly ``\\boxed{``: ``\\fbox{}`` and
``\\boxed 5`` give no answer), and compares it with each acceptable answer in two stages:

1. **Hendrycks' MATH normaliser** (:func:`hendrycks_normal_form`) on both sides, then string equality;
2. **sympy** (:func:`sympy_equal`, PRM800K's grader as DeepScaleR ships it): a second normaliser
   (units, ``\\text{}``, LaTeX to text, case), tuples split element-wise, integers and fractions
   compared as strings, anything else as ``simplify(gold - given) == 0`` when the expression is safe to
   evaluate (at most 2 letters, no ``^{``/``^(``, no multi-digit or chained powers, no integer
   argument above 100 digits). The authors run this stage in a worker process and count it wrong
   after 10 s (:data:`SYMPY_TIMEOUT_S`); so does the verl backend (:mod:`arctl.backends.verl.sympy_worker`).

This module re-implements that behaviour (it imports none of their code); every rule above, with its
quirks, is pinned by hand-worked cases in ``tests/algo/test_deepscaler_grader.py`` whose expected
verdicts were read off the authors' code. The formatting rule (one ``</think>``, no EOS-ended thinking)
is :mod:`arctl.algo.verify`'s, shared by both graders. Needs ``sympy`` and ``pylatexenc`` (arctl's
dependencies).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from arctl.algo.verify import FINAL_ANSWER_HEADER, closing_brace

FINAL_ANSWER_PREFIX = FINAL_ANSWER_HEADER + "\n"  # the authors' FINAL_ANSWER_DELIMITER: the header and its newline
SYMPY_TIMEOUT_S = 10.0  # the authors' run_grade_answer_sympy_with_timeout
_BOXED_OPEN = "\\boxed{"


# ------------------------------------------------------------------------------ extraction
def final_answer_step(summary_text: str) -> str | None:
    """The text after ``"**Final Answer**\\n"`` of the first blank-line-separated paragraph that starts
    with it (no stripping: ``" **Final Answer**\\n"`` and ``"**Final Answer**: "`` do not count)."""
    if not isinstance(summary_text, str):
        return None
    for paragraph in summary_text.split("\n\n"):
        if paragraph.startswith(FINAL_ANSWER_PREFIX):
            return paragraph[len(FINAL_ANSWER_PREFIX):]
    return None


def boxed_content(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text``. The braces are counted from the last
    ``\\boxed`` on, so ``\\boxed 5 \\frac{1}{2}`` or an unclosed box gives None, as does ``\\fbox{}``
    (looked for only without any ``\\boxed``, then never accepted)."""
    if not isinstance(text, str) or "\\boxed" not in text:
        return None
    start = text.rfind("\\boxed")
    end = closing_brace(text, start)
    if end is None:
        return None
    box = text[start:end + 1]
    return box[len(_BOXED_OPEN):-1] if box.startswith(_BOXED_OPEN) else None


def acceptable_answers(ground_truth: Any) -> list[str]:
    """The gold answers as the authors read them: a string, int or float is one answer, a list or tuple
    several; each is ``str()``-ed, a boxed one unboxed (dropped when its box gives nothing), others
    kept as they are (no stripping)."""
    if ground_truth is None:
        return []
    items = [ground_truth] if isinstance(ground_truth, (str, int, float)) else list(ground_truth)
    out = []
    for item in items:
        text = str(item)
        if "\\boxed" in text:
            text = boxed_content(text)
            if text is None:
                continue
        out.append(text)
    return out


# ------------------------------------------------------------------------------ stage 1: Hendrycks
_TEXT_WRAPPED = re.compile(r"^\\text\{(?P<text>.+?)\}$")


def _braced_fracs(s: str) -> str:
    r"""``\frac12`` -> ``\frac{1}{2}``, ``\frac1{72}`` -> ``\frac{1}{72}``; IndexError on a bare ``\frac``
    at the end (the caller then gives up on the whole normalisation, as Hendrycks' code does)."""
    head, *tails = s.split("\\frac")
    out = [head]
    for tail in tails:
        out.append("\\frac")
        if tail[0] == "{":
            out.append(tail)
        elif len(tail) < 2:
            return s
        elif tail[1] != "{":
            out.append("{" + tail[0] + "}{" + tail[1] + "}" + tail[2:])
        else:
            out.append("{" + tail[0] + "}" + tail[1:])
    return "".join(out)


def _slash_to_frac(s: str) -> str:
    """``3/4`` -> ``\\frac{3}{4}`` when both sides are integers written plainly."""
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        num, den = int(parts[0]), int(parts[1])
    except ValueError:
        return s
    return "\\frac{" + str(num) + "}{" + str(den) + "}" if s == f"{num}/{den}" else s


def _braced_sqrts(s: str) -> str:
    """``\\sqrt3`` -> ``\\sqrt{3}``; IndexError on a bare ``\\sqrt`` at the end (see :func:`_braced_fracs`)."""
    if "\\sqrt" not in s:
        return s
    head, *tails = s.split("\\sqrt")
    return head + "".join("\\sqrt" + t if t[0] == "{" else "\\sqrt{" + t[0] + "}" + t[1:] for t in tails)


def _hendrycks_steps(s: str) -> str:
    for old, new in (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"),
                     ("\\left", ""), ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", "")):
        s = s.replace(old, new)
    if "\\text{ " in s:  # units on the right; more than one such unit is an error (normalisation abandoned)
        parts = s.split("\\text{ ")
        if len(parts) != 2:
            raise ValueError("two \\text{ } units")
        s = parts[0]
    # only the escaped percent sign (a bare % stays), twice as Hendrycks' code does: one pass can leave a new one
    s = s.replace("\\%", "").replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:  # "k = 3" -> "3", "x=2" -> "2"
        s = sides[1]
    s = _braced_sqrts(s).replace(" ", "")
    s = _braced_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_to_frac(s)


def hendrycks_normal_form(answer: str | None) -> str | None:
    """Hendrycks' MATH normaliser (``mathd_normalize_answer``): strip, unwrap a whole ``\\text{}``, then
    :func:`_hendrycks_steps`; if a step fails, the stripped and unwrapped answer as it is."""
    if answer is None:
        return None
    answer = answer.strip()
    try:
        m = _TEXT_WRAPPED.search(answer)
        if m is not None:
            answer = m.group("text").strip()
        return _hendrycks_steps(answer)
    except Exception:
        return answer


def equal_after_hendrycks(given: str, gold: str) -> bool:
    return hendrycks_normal_form(gold) == hendrycks_normal_form(given)


# ------------------------------------------------------------------------------ stage 2: sympy
_UNITS = ("degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day", "week", "month",
          "year", "foot", "feet", "inch", "yard")
_UNIT_PATTERNS = [re.compile(unit + r"(es)?(s)? *(\^[0-9]+)?") for unit in _UNITS]
_CIRC = re.compile(r"\^ *\\circ")
_THIN_SPACE_COMMA = re.compile(r",\\! *")
_THOUSANDS = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
_MIXED_NUMBER = re.compile(r"([0-9]) +([0-9])")
_FRACTION = re.compile(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$")
_UNSAFE_POWERS = (re.compile(r"\^[0-9]+\^"), re.compile(r"\^[0-9][0-9]+"))
_TUPLE_CHARS = "()[]"
_MAX_INTEGER_DIGITS = 100


def _as_float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _close_to_int(x: float) -> bool:
    try:
        return abs(x - int(round(x))) <= 1e-7
    except (OverflowError, ValueError):
        return False


def _without_thousands_commas(s: str) -> str:
    """``1,234,567`` -> ``1234567``; a tuple's ``(1,2)`` keeps its comma."""
    while True:
        nxt = _THOUSANDS.sub(r"\1\3\4", s)
        if nxt == s:
            return s
        s = nxt


def _is_integer_text(s: str) -> bool:
    value = _as_float(_without_thousands_commas(s))
    return value is not None and _close_to_int(value)


def _latex_to_text(expr: str) -> str:
    from pylatexenc import latex2text

    expr = expr.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    expr = latex2text.LatexNodes2Text().latex_to_text(expr)
    for old, new in (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*")):
        expr = expr.replace(old, new)
    return expr.strip()


def sympy_normal_form(expr: str | None) -> str | None:
    """PRM800K's second normaliser (``_normalize``): units, ``\\text{}``, ``$``, ``%`` and words out,
    LaTeX to plain text, spaces and braces out, lower case, integers canonical."""
    if expr is None:
        return None
    m = _TEXT_WRAPPED.search(expr)
    if m is not None:
        expr = m.group("text")
    for old, new in (("\\%", "%"), ("\\$", "$"), ("$", ""), ("%", ""), (" or ", " , "), (" and ", " , "),
                     ("million", "*10^6"), ("billion", "*10^9"), ("trillion", "*10^12")):
        expr = expr.replace(old, new)
    for pattern in _UNIT_PATTERNS:
        expr = pattern.sub("", expr)
    expr = _CIRC.sub("", expr)
    if expr and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = _THIN_SPACE_COMMA.sub("", expr)
    value = _as_float(expr)
    if value is not None and _close_to_int(value):
        expr = str(int(round(value)))
    if "\\" in expr:
        try:
            expr = _latex_to_text(expr)
        except Exception:
            pass
    expr = re.sub("- *", "-", expr)
    expr = _MIXED_NUMBER.sub(r"\1+\2", expr)  # "7 3/4" -> "7+3/4"
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _is_integer_text(expr):
        expr = str(int(float(expr.replace(",", ""))))
    return expr


def _safe_to_evaluate(expr: str) -> bool:
    letters = {ch for ch in expr.replace("sqrt", "").replace("frac", "") if ch.isalpha()}
    if len(letters) > 2 or "^{" in expr or "^(" in expr:
        return False
    return not any(p.search(expr) for p in _UNSAFE_POWERS)


def _simplifies_to_zero(gold: str, given: str) -> bool:
    """``simplify((gold) - (given)) == 0`` under sympy's parser with implicit multiplication."""
    try:
        import sympy
        from sympy.parsing import sympy_parser

        expr = f"({gold})-({given})"
        if not _safe_to_evaluate(expr):
            return False
        transformations = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
        diff = sympy_parser.parse_expr(expr.replace("^", "**"), transformations=transformations)
        if any(isinstance(a, sympy.Integer) and len(str(a.p)) > _MAX_INTEGER_DIGITS for a in diff.args):
            return False
        return bool(sympy.simplify(diff) == 0)
    except Exception:
        return False


def _elements(expr: str) -> list[str]:
    """A tuple or interval's elements (``(1,2]`` -> ``1``, ``2``); anything else is one element."""
    expr = _without_thousands_commas(expr)
    if not expr:
        return []
    inner = expr[1:-1]
    if (len(expr) > 2 and expr[0] in _TUPLE_CHARS and expr[-1] in _TUPLE_CHARS
            and not any(ch in inner for ch in _TUPLE_CHARS)):
        return [e.strip() for e in inner.split(",")]
    return [expr]


def sympy_equal(given: str, gold: str) -> bool:
    """Stage 2 (``grade_answer_sympy``), in this process and unbounded in time (see :func:`grade`)."""
    gold_n, given_n = sympy_normal_form(gold), sympy_normal_form(given)
    if gold_n is None:
        return False
    if gold_n == given_n:
        return True
    if not given_n:
        return False
    gold_elems, given_elems = _elements(gold_n), _elements(given_n)
    if len(gold_elems) > 1 and (gold_n[0] != given_n[0] or gold_n[-1] != given_n[-1]):
        return False  # (1,2) is not [1,2]
    if len(gold_elems) != len(given_elems):
        return False
    for g, x in zip(gold_elems, given_elems, strict=True):
        if _FRACTION.search(g) and _FRACTION.search(x):
            ok = g == x  # an unreduced fraction is wrong: no simplify
        elif _is_integer_text(g) != _is_integer_text(x):
            ok = False  # an integer answer must match as one
        else:
            ok = _simplifies_to_zero(g, x)
        if not ok:
            return False
    return True


# ------------------------------------------------------------------------------ the whole grader
class StageUnavailable(RuntimeError):
    """Stage 2 cannot run at all (its worker process does not start): an error of the machine, raised
    through :func:`grade`, never scored as a wrong answer."""


def grade(summary_text: str, ground_truth: Any, sympy_stage: Callable[[str, str], bool] = sympy_equal,
          whole: bool = False) -> int:
    """1 iff the summary's answer equals an acceptable answer under the authors' two stages, else 0;
    ``whole``: the answer is the last ``\\boxed{}`` of the whole text (DeepScaleR's reward on the text after
    ``</think>``: ``extract_answer``), not of its ``**Final Answer**`` paragraph.
    ``sympy_stage(given, gold)`` runs stage 2: :func:`sympy_equal` in this process by default; the verl
    backend passes its time-bounded worker (:mod:`arctl.backends.verl.sympy_worker`). No formatting
    rule here (:func:`arctl.algo.verify.score_response` applies it). A stage that raises
    :class:`StageUnavailable` (it cannot run on this machine) fails the call; any other error of a
    stage, or in the answer, scores 0 (as the authors' bare ``except`` does)."""
    try:
        given = boxed_content(summary_text if whole else final_answer_step(summary_text) or "")
        if given is None:
            return 0
        for gold in acceptable_answers(ground_truth):
            if equal_after_hendrycks(given, gold) or sympy_stage(given, gold):
                return 1
        return 0
    except StageUnavailable:
        raise
    except Exception:
        return 0
