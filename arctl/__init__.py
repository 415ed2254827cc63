"""arctl: experiment orchestration for AnytimeReasoner (anytime reasoning with BRPO)."""

__version__ = "0.1.0"
