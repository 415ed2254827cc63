"""A sweep spec (``sweeps/<name>.yaml``): experiments x seeds x an optional grid of overrides.

Format::

    description: GRPO, AR-base, AR-linear, AR-uniform x 3 seeds
    experiments: [main-grpo, main-ar-base, main-ar-linear, main-ar-uniform]
    seeds: [0, 1, 2]               # replaces each experiment's own seeds
    overrides: []                  # applied to every cell
    grid: {thinking.lam: [0.25, 0.5]}   # optional cartesian product over these values
    share_arms: false              # true: cells whose resolved configs are equal up to the names of
                                   # the run (experiment, arm, W&B group/name) are one run, trained
                                   # once, serving every cell; a run the workspace already has of that
                                   # config (another experiment's) is that run (arctl.launch.shared)
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from arctl.compose.errors import SpecError
from arctl.compose.experiment import _str_list, parse_seeds, read_spec_file, yaml_kind
from arctl.compose.paths import spec_files
from arctl.config.hydra_text import override_value

SWEEP_KEYS = {"description", "experiments", "seeds", "overrides", "grid", "share_arms"}


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    experiments: list[str]
    description: str = ""
    seeds: list[int] | None = None
    overrides: list[str] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    share_arms: bool = False

    def grid_points(self) -> list[list[str]]:
        """Each point of the grid as a list of ``key=value`` overrides ([[]] without a grid)."""
        if not self.grid:
            return [[]]
        keys = list(self.grid)
        return [
            [f"{k}={_grid_text(v)}" for k, v in zip(keys, values)]
            for values in itertools.product(*(self.grid[k] for k in keys))
        ]


# a number YAML 1.1 reads as text (1e-3: no dot), which Hydra reads as the number it is
_NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _grid_text(value) -> str:
    """A grid value as an override's text (Hydra's grammar, :func:`arctl.config.hydra_text.override_value`);
    a number PyYAML left as text (``1e-3``) is written as the number it is, as a YAML 1.2 reader reads it."""
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
        return value
    return override_value(value)


def load_sweep(name: str) -> Sweep:
    path, data = read_spec_file("sweep", name, "sweeps", SWEEP_KEYS)
    experiments = data.get("experiments")
    if isinstance(experiments, list) and (read := [e for e in experiments if e is None or isinstance(e, (bool, int, float))]):
        raise SpecError(f"experiment name {read[0]!r} is read by YAML as {yaml_kind(read[0])}",
                        f"{path}: experiments", "write the name in quotes, e.g. [\"true\"]")
    if not isinstance(experiments, list) or not experiments or not all(isinstance(e, str) for e in experiments):
        raise SpecError("a sweep needs 'experiments: [name, ...]'", str(path))
    twice = sorted({e for e in experiments if experiments.count(e) > 1})
    if twice:  # its cells would be one run each, launched once: a name meant to be another's, most likely
        raise SpecError(f"experiment {twice[0]!r} is listed {experiments.count(twice[0])} times", f"{path}: experiments",
                        "list each experiment once")
    grid = data.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise SpecError("'grid' must map override keys to non-empty lists of values", str(path))
    for key, values in grid.items():
        for v in values:
            try:
                override_value(v)
            except ValueError as err:
                raise SpecError(f"grid value {err}", f"{path}: grid.{key}", "give a finite number") from None
    share_arms = data.get("share_arms", False)
    if not isinstance(share_arms, bool):
        shown = repr(share_arms)
        raise SpecError(f"share_arms must be true or false, not {shown if len(shown) <= 40 else shown[:37] + '...'}",
                        f"{path}: share_arms")
    seeds = data.get("seeds")
    return Sweep(
        name=name,
        path=path,
        experiments=list(experiments),
        description=str(data.get("description") or ""),
        seeds=None if seeds is None else parse_seeds(seeds, f"{path}: seeds"),
        overrides=_str_list(data.get("overrides"), f"{path}: overrides"),
        grid={str(k): list(v) for k, v in grid.items()},
        share_arms=share_arms,
    )


def list_sweeps() -> list[str]:
    return list(spec_files("sweeps"))
