"""The limits a machine could ever meet, and the ranges of numeric config values.

:class:`~arctl.algo.ranges.Range` (with ``I``, ``F``, ``PROB``, ``TOKENS``) lives in
:mod:`arctl.algo.ranges`, where the algorithm's settings carry theirs; the typed keys carry their
range in their section's dataclass, the open sections' keys in :mod:`arctl.compose.limits`. The
CLI's seed parsing takes its limits from here.
"""

from __future__ import annotations

from arctl.algo.ranges import BUDGET_MAX, PROB, TOKENS, F, I, Range

SEED_MAX = 2**31 - 1  # torch/numpy seeds, and SQLite's integer column, with room to spare
MAX_SEEDS = 1000  # seeds of one launch (`--seeds 0-100000000` is a typo, not a plan)


def seeds_text(seeds) -> str:
    """Seeds as ``--seeds`` takes them (:func:`arctl.cli.common.parse_seeds` reads it back): sorted,
    runs of three or more consecutive seeds as ``lo-hi``, e.g. [0, 1, 2, 3, 5] -> ``"0-3,5"``."""
    out, run = [], []
    for s in sorted(set(int(x) for x in seeds)):
        if run and s != run[-1] + 1:
            out.append(run)
            run = []
        run.append(s)
    if run:
        out.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else ",".join(map(str, r)) for r in out)


COUNT = I(1, 10**7)
CORES = I(1, 4096)
MEM_GB = F(0.125, 10**5)  # a run's memory: at least 128 MB (SLURM reads --mem=0 as the whole node)

__all__ = ["BUDGET_MAX", "CORES", "COUNT", "MAX_SEEDS", "MEM_GB", "PROB", "SEED_MAX", "TOKENS", "F", "I", "Range", "seeds_text"]
