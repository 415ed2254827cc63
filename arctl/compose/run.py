"""``ResolvedRun``: one run of an experiment, resolved: the one record of a run that spec produces and
launch consumes (a :class:`arctl.launch.launcher.LaunchItem` holds one)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResolvedRun:
    """One run to launch: the fully resolved config and where it came from."""

    experiment: str
    arm: str
    seed: int
    config: dict
    sweep: str | None = None
    overrides: list[str] = field(default_factory=list)

    @property
    def scale(self) -> str:
        return self.config["scale"]["name"]

    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.arm}/s{self.seed}"
