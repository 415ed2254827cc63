"""Ranges of numeric config values, and the limits a machine could ever meet.

The typed keys carry their range in the schema (:mod:`arctl.config.schema`), the open sections' keys in
:mod:`arctl.compose.limits`; both are built from :class:`Range`. The CLI's seed parsing takes its limits
from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SEED_MAX = 2**31 - 1  # torch/numpy seeds, and SQLite's integer column, with room to spare
MAX_SEEDS = 1000  # seeds of one launch (`--seeds 0-100000000` is a typo, not a plan)
BUDGET_MAX = 10**6  # thinking tokens: far above any context window


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    integer: bool = True
    lo_open: bool = False
    hi_open: bool = False
    nullable: bool = False

    def contains(self, v: Any) -> bool:
        if v is None:
            return self.nullable
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if not math.isfinite(v):
            return False
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"
        num = lambda x: str(int(x)) if float(x).is_integer() else f"{x:g}"  # noqa: E731
        lo = f"> {num(self.lo)}" if self.lo_open else f">= {num(self.lo)}"
        hi = f"< {num(self.hi)}" if self.hi_open else f"<= {num(self.hi)}"
        return f"{'null or ' if self.nullable else ''}{what} {lo} and {hi}"


def I(lo: float, hi: float, **kw) -> Range:  # noqa: E743 - short names keep the table readable
    return Range(lo, hi, integer=True, **kw)


def F(lo: float, hi: float, **kw) -> Range:
    return Range(lo, hi, integer=False, **kw)


COUNT = I(1, 10**7)
TOKENS = I(1, BUDGET_MAX)
PROB = F(0, 1)
CORES = I(1, 4096)
