"""Checkpoints of a tiny run: model, optimizer, every RNG stream, step and W&B run id.

``run_dir/checkpoints/step_{step:06d}.pt`` written atomically (temp file + rename); the newest
``keep`` are kept. Restoring one continues the run exactly: same weights, same optimizer moments,
same sampling generator and the same python / numpy / torch global RNG states.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import torch

from arctl.config.files import replacing

_NAME = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint with the highest step, or None."""
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return None
    found = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)))
    return found[-1][1] if found else None


def save_checkpoint(
    run_dir: Path, step: int, model, optimizer, generator: torch.Generator, wandb_id: str | None, keep: int = 2
) -> Path:
    d = checkpoint_dir(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    state = {
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "torch_rng": torch.random.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "wandb_id": wandb_id,
    }
    path = d / f"step_{step:06d}.pt"
    with replacing(path) as tmp:
        torch.save(state, tmp)
    old = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)))
    for _, p in old[: max(0, len(old) - max(1, keep))]:
        p.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path, model, optimizer, generator: torch.Generator) -> dict:
    """Restore everything saved by :func:`save_checkpoint`; returns ``{"step", "wandb_id"}``."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    torch.random.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return {"step": int(state["step"]), "wandb_id": state.get("wandb_id")}
