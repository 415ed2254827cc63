"""Budget priors p_B over the budget support {b_1 < ... < b_m} (paper Eq. 3), registered by name.

`P_j = p_B(b = b_j)`: the probability that thinking is cut at budget ``b_j``. The thinking policy
and (decoupled) summary policy may use different priors (paper Sec. 3.3, ``P'``).

Each named prior is a rule ``budgets -> [P_1..P_m]`` registered with :func:`register_prior` beside
its formula; ``custom`` takes the probabilities from the config. The config's choice list
(``thinking.prior``, ``summary.prior``) is :func:`prior_names`. A prior is chosen in a spec by a
``prior`` config-group option (``arctl/conf/prior/<name>.yaml``). This module imports torch only
when a prior is built as a tensor (:func:`budget_prior`): composing a config reads the names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

CUSTOM = "custom"
"""The prior whose probabilities the config gives (``thinking.probs``)."""
_RULES: dict[str, Callable[[list[int]], list[float]]] = {}


def register_prior(name: str) -> Callable:
    """Decorator: register ``rule(budgets) -> probabilities`` (floats summing to 1) as prior ``name``."""

    def add(rule: Callable[[list[int]], list[float]]) -> Callable[[list[int]], list[float]]:
        if name in _RULES or name == CUSTOM:
            raise ValueError(f"a budget prior named {name!r} is already registered")
        _RULES[name] = rule
        return rule

    return add


@register_prior("base")
def _base(budgets: list[int]) -> list[float]:
    """All mass on the largest budget, ``[0, ..., 0, 1]`` (standard reasoning, J_anytime = J)."""
    return [0.0] * (len(budgets) - 1) + [1.0]


@register_prior("uniform")
def _uniform(budgets: list[int]) -> list[float]:
    """``1/m``."""
    return [1.0 / len(budgets)] * len(budgets)


@register_prior("linear")
def _linear(budgets: list[int]) -> list[float]:
    """``P_j = b_j / sum_i b_i``."""
    total = float(sum(budgets))
    return [b / total for b in budgets]


def prior_names() -> tuple[str, ...]:
    """Every prior a config may choose: the registered rules, then ``custom``."""
    return (*_RULES, CUSTOM)


def _check_budgets(budgets: Sequence[int]) -> list[int]:
    values = list(budgets)
    if not values:
        raise ValueError("budgets is empty: give at least one thinking budget, e.g. [2000, 4000, 6000, 8000]")
    for b in values:
        if isinstance(b, bool) or not float(b).is_integer() or b <= 0:
            raise ValueError(f"budgets must be positive integers, got {values}")
    values = [int(b) for b in values]
    if any(b2 <= b1 for b1, b2 in zip(values, values[1:])):
        raise ValueError(f"budgets must be strictly increasing, got {values}")
    return values


def _checked(what: str, p_list: list[float], values: list[int], renormalise: bool = True):
    """``p_list`` as a float64 tensor [m] (renormalised exactly, or as given), after checking it is a distribution
    over the m budgets ``values``: length m, finite, >= 0, summing to 1 within 1e-6 (``what`` starts
    the error: who gave it)."""
    import torch

    m = len(values)
    if len(p_list) != m:
        raise ValueError(f"{what} {len(p_list)} entries but there are {m} budgets {values}")
    if any(not math.isfinite(x) or x < 0 for x in p_list):
        raise ValueError(f"{what} {p_list}: probabilities must be finite and >= 0")
    total = sum(p_list)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{what} {p_list}: probabilities must sum to 1, got sum {total:.6g}")
    p = torch.tensor(p_list, dtype=torch.float64)
    return p / p.sum() if renormalise else p


def budget_prior(name: str, budgets: Sequence[int], probs: Sequence[float] | None = None):
    """Return the prior ``P`` over ``budgets`` as a float64 tensor of shape [m]: a registered rule
    (``base``, ``uniform``, ``linear``, ...), or ``custom``: ``probs`` (non-negative, length m,
    summing to 1 within 1e-6; renormalised exactly). A registered rule's output is checked the same way."""
    values = _check_budgets(budgets)
    if name != CUSTOM and probs is not None:
        raise ValueError(f"prior {name!r} takes no probs (got {list(probs)}); use prior 'custom' to give probs")
    if name in _RULES:  # a registered rule's output is checked as a custom prior's is (a plugin's too)
        return _checked(f"prior {name!r} (a registered rule) gave", [float(x) for x in _RULES[name](values)], values,
                        renormalise=False)
    if name == CUSTOM:
        if probs is None:
            raise ValueError("prior 'custom' needs probs: a list of m probabilities, one per budget")
        return _checked("prior 'custom': probs has", [float(x) for x in probs], values)
    raise ValueError(f"unknown budget prior {name!r}; choose one of {', '.join(prior_names())}")
