"""One W&B run as read from a .wandb file or the W&B API: metadata plus a dense history table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RunData:
    """Everything a report needs from one W&B run (or one fragment of a resumed run).

    ``values[i, j]`` is the value of ``keys[j]`` in history row ``i`` (NaN where the row did not log
    that key, the value was not a number, or the row logged NaN); ``nan[i, j]`` is True exactly where
    the row logged NaN (a loss that diverged), None when no row did. Rows are in logging order.
    """

    wandb_id: str
    source: str
    project: str = ""
    entity: str = ""
    group: str = ""
    name: str = ""
    start_time: float = 0.0  # of its run record (epoch seconds); 0.0: no run record read (lost to damage)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    state: str = "incomplete"  # finished | failed | incomplete (no exit record: crashed/killed/running)
    exit_code: int | None = None
    runtime_s: float | None = None
    keys: list[str] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    warnings: list[str] = field(default_factory=list)
    rewind_step: int | None = None  # this fragment rewound its own run to this _step (W&B resume_from)
    nan: np.ndarray | None = None  # bool, values' shape: the cells that logged NaN (None: none did)

    @property
    def n_rows(self) -> int:
        return int(self.values.shape[0])

    def logged(self) -> np.ndarray:
        """bool, ``values``' shape: the cells that logged a number (NaN included)."""
        present = ~np.isnan(self.values)
        return present if self.nan is None else present | self.nan

    def column(self, key: str) -> np.ndarray:
        """History of ``key`` (all rows; NaN where absent or a logged NaN, :attr:`nan` tells which); all-NaN
        if the key was never logged."""
        try:
            return self.values[:, self.keys.index(key)]
        except ValueError:
            return np.full(self.n_rows, np.nan)
