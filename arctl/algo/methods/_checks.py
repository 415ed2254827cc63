"""Argument checks shared by the baseline methods (private)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a tensor is made: choosing the method imports none
    import torch


def as_int(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools and non-integral numbers refused)."""
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__index__")):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    out = int(value)
    if out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return out


def as_correct(correct: Any) -> torch.Tensor:
    """Correctness flags as a bool tensor [N] (bool or 0/1 input)."""
    import torch

    c = torch.as_tensor(correct)
    if c.dim() != 1:
        raise ValueError(f"correct must be [N], got shape {tuple(c.shape)}")
    if c.dtype != torch.bool and c.numel() and not bool(((c == 0) | (c == 1)).all()):
        raise ValueError("correct must hold booleans or 0/1 values")
    return c.bool()


def as_lengths(values: Any, n: int, name: str) -> torch.Tensor:
    """Token counts as a float64 tensor [N] (a scalar is broadcast to [N]); must be >= 0."""
    import torch

    x = torch.as_tensor(values, dtype=torch.float64)
    if x.dim() == 0:
        x = x.expand(n)
    if x.shape != (n,):
        raise ValueError(f"{name} must be [N] = [{n}] or a scalar, got shape {tuple(x.shape)}")
    if x.numel() and bool((x < 0).any() | ~torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite token counts >= 0")
    return x


def reward_dtype(correct: Any) -> torch.dtype:
    """float64 for the maths here; float inputs keep their dtype, like ``arctl.algo.rewards``."""
    import torch

    c = torch.as_tensor(correct)
    return c.dtype if c.is_floating_point() else torch.float32
