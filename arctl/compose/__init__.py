"""Declarative specs: Hydra composition of config groups, experiments with arms, sweeps, validation.

Public entry points::

    resolve_experiment("ablation-vr", overrides=["thinking.lam=0.7"], scale="tiny") -> list[ResolvedRun]
    resolve_sweep("priors", overrides=[], scale="tiny") -> list[ResolvedRun]
"""

from arctl.compose.errors import SpecError
from arctl.compose.resolve import ResolvedRun, resolve_experiment, resolve_sweep

__all__ = ["SpecError", "ResolvedRun", "resolve_experiment", "resolve_sweep"]
