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
    user_overrides: list[str] = field(default_factory=list)  # the command line's
    sweep_overrides: list[str] = field(default_factory=list)  # the sweep's and its grid point's
    # the sweep's overrides and grid point the run reads nothing of, left out of sweep_overrides: it was resolved
    # without them (arctl.compose.resolve._as_read), its config and id those of a launch without them
    sweep_not_read: list[str] = field(default_factory=list)

    @property
    def overrides(self) -> list[str]:
        """The sweep's then the user's overrides (what was given beside the spec)."""
        return [*self.sweep_overrides, *self.user_overrides]

    @property
    def init_from(self) -> str | None:
        """``trainer.init_from``: the arm (``ARM`` or ``EXPERIMENT/ARM``) whose final weights this run
        starts from; None: the run starts from the warm-up / the model checkpoint."""
        value = (self.config.get("trainer") or {}).get("init_from")
        return str(value) if value else None

    @property
    def scale(self) -> str:
        return self.config["scale"]["name"]

    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.arm}/s{self.seed}"
